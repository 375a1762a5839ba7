"""`rewrite(model, rules, options)`: the whole job, from a model and rule files to a result.

Load the rules (default: the shipped library) and the model, convert the opset when asked
(up before the rules; down after rules that decompose ops the target lacks), run the pass
manager to a fixed point, then check the result with onnx's checker. Every rewrite was
validated when it was applied (and undone if it broke its region), so a result the checker
refuses while its input passes is a bug of this tool: it is reported as an internal error
with the last changes of the trace, never patched over silently.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

import ir
from rewriter._errors import RewriteError
from rewriter.api._conversion import convert_keeping_runnable
from rewriter.api._library import RulesLike, load_rules
from rewriter.api._models import (
    add_opsets,
    as_model,
    drop_unused_opsets,
    freeze_inputs_with_initializers,
    raise_ir_version_for_initializers,
    set_input_shapes,
)
from rewriter.api._options import RewriteOptions
from rewriter.api._stages import run_fixed_point, steps_left
from rewriter.engine import KernelAvailability, RunOptions, Trace, one_line, op_histogram
from rewriter.rules import RuleSet

if TYPE_CHECKING:
    import onnx

    from rewriter.quantize import BudgetResult, SpeedResult


class PhaseClock:
    """Wall time per phase of a run, in seconds, in the order the phases first ran.

    A phase entered more than once accumulates.
    """

    __slots__ = ("seconds",)

    def __init__(self) -> None:
        """An empty clock."""
        self.seconds: dict[str, float] = {}

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Add the time spent in the `with` block to phase `name`."""
        start = time.perf_counter()
        try:
            yield
        finally:
            elapsed = time.perf_counter() - start
            self.seconds[name] = self.seconds.get(name, 0.0) + elapsed


@dataclasses.dataclass(frozen=True)
class RewriteResult:
    """The outcome of `rewrite`: the rewritten model (IR and ONNX), the trace, statistics.

    `timings` holds seconds per phase: `load_rules` (only when `rewrite` loaded them),
    `load_model`, `convert` (when the opset was converted), `rewrite` (type inference,
    rules and passes), `check` (onnx's checker) and `budget` (with an accuracy budget: the
    measurements, the final rewrite and its check).
    """

    model: ir.Model
    trace: Trace
    ops_before: dict[str, int]
    ops_after: dict[str, int]
    timings: dict[str, float]
    ruleset: RuleSet
    # What the accuracy budget measured and decided (`RewriteOptions.budget`), else None.
    budget: BudgetResult | None = None
    # What the speed check measured (`RewriteOptions.quantize`, `speed_check`), else None.
    speed: SpeedResult | None = None
    # What the caller should know about a preset's choices (one line each).
    notes: tuple[str, ...] = ()

    @property
    def proto(self) -> onnx.ModelProto:
        """The rewritten model as an onnx.ModelProto."""
        return ir.to_onnx(self.model)

    @property
    def nodes_before(self) -> int:
        """Node count before (main graph and subgraphs)."""
        return sum(self.ops_before.values())

    @property
    def nodes_after(self) -> int:
        """Node count after."""
        return sum(self.ops_after.values())

    def to_json(self) -> dict[str, object]:
        """Trace, node counts by op type before/after, and timings, ready for json.dump."""
        payload: dict[str, object] = {
            "trace": self.trace.to_json(),
            "nodes_before": self.nodes_before,
            "nodes_after": self.nodes_after,
            "ops_before": self.ops_before,
            "ops_after": self.ops_after,
            "timings_seconds": {k: round(v, 6) for k, v in self.timings.items()},
        }
        if self.budget is not None:
            payload["budget"] = self.budget.to_json()
        if self.speed is not None:
            payload["speed"] = self.speed.to_json()
        if self.notes:
            payload["notes"] = list(self.notes)
        return payload


def rewrite(
    model: str | os.PathLike[str] | ir.Model | onnx.ModelProto,
    rules: RulesLike = None,
    options: RewriteOptions | None = None,
) -> RewriteResult:
    """Apply `rules` (default: the shipped library) to `model` until nothing changes.

    Args:
        model: a path, an onnx.ModelProto, or an ir.Model (copied unless `options.copy` is
            false).
        rules: rule files or folders, a loaded RuleSet, or None for the shipped library.
        options: how to run (see `RewriteOptions`); the defaults when None.

    Returns:
        The rewritten model, its trace and statistics.

    Raises:
        RewriteError: bad rules, a model that cannot be read, or (an internal error) a
            result that onnx's checker refuses although the input passes it.

    This is one run: `options.budget` is left to `rewriter.api.rewrite` (`_budgeted`),
    which calls this for each run it measures.
    """
    options = options or RewriteOptions()
    clock = PhaseClock()
    ruleset = _loaded(rules, options, clock)
    prepared = prepare(model, options, clock)
    ir_model, trace = _run(prepared.model, ruleset, options, clock)
    return finish(prepared, ir_model, trace, ruleset, options, clock)


def _loaded(rules: RulesLike, options: RewriteOptions, clock: PhaseClock) -> RuleSet:
    if isinstance(rules, RuleSet):
        return rules  # loaded by the caller, who can time that itself
    with clock.phase("load_rules"):
        return load_rules(rules, allow_python=options.allow_python, params=options.params)


@dataclasses.dataclass
class Prepared:
    """A model loaded and set up as the options ask, before any rule runs."""

    given: str | os.PathLike[str] | ir.Model | onnx.ModelProto
    model: ir.Model
    before: dict[str, int]
    added: list[str]
    start: float


def prepare(
    model: str | os.PathLike[str] | ir.Model | onnx.ModelProto,
    options: RewriteOptions,
    clock: PhaseClock,
) -> Prepared:
    """Load the model, fix input shapes, add opset imports, freeze initializer inputs.

    Raises:
        RewriteError: a model that cannot be read.
    """
    with clock.phase("load_model"):
        ir_model = as_model(model, copy=options.copy)
    start = time.perf_counter()
    before = op_histogram(ir_model)
    if options.input_shapes:
        set_input_shapes(ir_model, options.input_shapes)
    added = add_opsets(ir_model, options.add_opsets)
    if options.freeze_initializer_inputs or 0 < ir_model.ir_version < 4:
        freeze_inputs_with_initializers(ir_model)
    return Prepared(model, ir_model, before, added, start)


def finish(
    prepared: Prepared,
    ir_model: ir.Model,
    trace: Trace,
    ruleset: RuleSet,
    options: RewriteOptions,
    clock: PhaseClock,
) -> RewriteResult:
    """Check the rewritten model and make the result.

    Raises:
        RewriteError: (an internal error) onnx's checker refuses the result, not the input.
    """
    raise_ir_version_for_initializers(ir_model)
    with clock.phase("check"):
        problem = _checker_problem(ir_model)
    if problem is not None:
        _report_checker_failure(problem, prepared.given, options, trace)
    drop_unused_opsets(ir_model, prepared.added)
    after = op_histogram(ir_model)
    timings = _timings(clock, prepared.start)
    return RewriteResult(ir_model, trace, prepared.before, after, timings, ruleset)


_PHASES = ("load_rules", "load_model", "convert", "rewrite", "check")


def _timings(clock: PhaseClock, start: float) -> dict[str, float]:
    """The clock's phases and `rewrite`: the time since `start` spent in no other phase."""
    inner = clock.seconds.get("convert", 0.0) + clock.seconds.get("check", 0.0)
    timed = {**clock.seconds, "rewrite": time.perf_counter() - start - inner}
    return {phase: timed[phase] for phase in _PHASES if phase in timed}


def _run(
    ir_model: ir.Model, ruleset: RuleSet, options: RewriteOptions, clock: PhaseClock
) -> tuple[ir.Model, Trace]:
    """One run of the rules (staged when some approximate), with the opset conversions.

    Up to `target_opset` before the rules; down after rules that decompose what it lacks.
    """

    def rules(model: ir.Model, run: RunOptions = options) -> Trace:
        return run_fixed_point(model, ruleset, run, options.calibration_samples)

    target = options.target_opset
    current = ir_model.opset_imports.get("", ir_model.opset_imports.get("ai.onnx"))
    if target is None or current is None or target == current:
        return ir_model, rules(ir_model)
    kernels = KernelAvailability() if options.keep_runnable else None
    if target > current and not ir.runtime_ops_lost(ir_model, target):
        with clock.phase("convert"):
            ir_model = convert_keeping_runnable(ir_model, target, kernels)
        return ir_model, Trace.conversion(current, target).followed_by(rules(ir_model))
    # Rules that decompose ops the target lacks run first (down: ops newer than the target;
    # up: onnxruntime's old default-domain ops, patterns/decompose/legacy_ops.rw); then
    # convert and run again.
    trace = rules(ir_model)
    with clock.phase("convert"):
        ir_model = convert_keeping_runnable(ir_model, target, kernels)
    trace = trace.followed_by(Trace.conversion(current, target))
    return ir_model, trace.followed_by(rules(ir_model, steps_left(options, trace)))


def _checker_problem(model: ir.Model) -> str | None:
    """Run onnx's checker on the lowered model: its whole message on one line, or None."""
    import onnx

    # The weights' bytes are not what a rewrite can break (lifting checked them): the checker
    # sees them as typed inputs, and a model of gigabytes checks like a small one.
    proto = ir.to_onnx(model, weights=False)
    if proto.ByteSize() > 2**31 - 1:
        return None  # too big for the in-memory checker; every rewrite was validated
    try:
        ir.check_proto(proto)  # onnx's checker, onnxruntime's default-domain ops allowed
    except (onnx.checker.ValidationError, RuntimeError, ValueError) as exc:
        # onnx names the offending node on the lines after the first one.
        return one_line(str(exc)) or type(exc).__name__
    return None


def _report_checker_failure(
    problem: str,
    given: str | os.PathLike[str] | ir.Model | onnx.ModelProto,
    options: RewriteOptions,
    trace: Trace,
) -> None:
    """Raise the internal error for a result the checker refuses, unless the input does too.

    Raises:
        RewriteError: the input passes the checker (or cannot be read again to tell).
    """
    if not (isinstance(given, ir.Model) and not options.copy):
        # The input as given (a path, a proto or a copied model) is still there to check.
        source_problem = _checker_problem(as_model(given))
        if source_problem is not None:
            return  # the input already fails the checker: the result inherits that
    recent = [e for e in trace.entries if e.kind in ("rule", "pass")][-5:]
    changes = "; ".join(f"{e.rule} ({e.location}) on {', '.join(e.matched)}" for e in recent)
    raise RewriteError(
        f"internal error: the rewritten model fails onnx's checker ({problem}) although every "
        f"rewrite passed its own checks; the last changes were: {changes or 'none'}. "
        "Please report this with the model and the rules."
    )
