"""Checking one rule: find instances with hypothesis, rewrite each with the rule alone, verify.

Instances are searched by a hypothesis run (`st.data()` draws every choice, `@seed` makes
the search reproducible in one process, no example database; hypothesis now and then draws a
literal from the source of the imported project modules, so a process that imported other
modules may draw other instances of the same seed): an attempt that yields no instance is
rejected, up to a budget of attempts. Each instance is then rewritten by the engine with a
rule set holding only this rule (`max_rewrites=1`, no passes), and the original and the
rewritten model are compared by `rewriter.verification.check_equivalence` on generated inputs.

Outputs are judged as the whole-model verifier judges them: float32, float16 and bfloat16
outputs by accuracy against a float64 evaluation of the original (a rewrite that only changes
rounding passes; a wrong one is many times less accurate), integers and booleans exactly, and
special values (NaN, infinities, extremes) in a share of the examples, so that a rule wrong
only for NaN fails. Float64 outputs have no wider type to be judged against and are compared
with the original directly, at `rtol = atol = DOUBLE_TOLERANCE` (1e-6) rather than the
verifier's (1e-7, 1e-9): a rule may treat a constant as its literal when they agree within the
matcher's 1e-6 relative tolerance (0.7978846 for sqrt(2/pi)), and float attributes are float32
(HardSigmoid's alpha, Attention's scale), so a correct rule can move a float64 result by about
1e-7 of its magnitude.

A rule declared `assumes finite` is exact for finite inputs only: its instances are checked
without NaN, infinities and dtype extremes, and its report says so.

Instances are drawn with the rule's base dtypes; when none of them is an integer (or a bool)
although every match line's op admits one, a few more attempts are made with that dtype
forced, so that a rule wrong only for integers fails (`(x / 2) * 2 -> x`) wherever its
conditions let integers in.

Verdicts: *failed* when an instance disagrees, when a rewrite of an accepted instance is
rolled back (DESIGN: an ill-typed rewrite is the rule's fault), or when the rewritten model
cannot be run; *verified* when at least one instance was checked and all agreed; *not
instantiable* otherwise, with the reason of the furthest attempt.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import logging
import re
import time
from collections.abc import Callable
from typing import Any

import ir
from rewriter import rules
from rewriter._errors import RewriteError
from rewriter.checkrules._analysis import (
    INTEGER_DTYPES,
    NotInstantiableError,
    RulePlan,
    analyze,
)
from rewriter.checkrules._attempt import STAGE_WHERE, Accepted, Rejection, attempt
from rewriter.checkrules._choices import Choices
from rewriter.checkrules._instance import Instance
from rewriter.checkrules._line import SIZES
from rewriter.checkrules._result import Counterexample, RuleReport, Status
from rewriter.checkrules._sizes import rule_sizes, size_menu
from rewriter.quantize import instance_calibration

logger = logging.getLogger(__name__)


DOUBLE_TOLERANCE = 1e-6
_DOUBLE = 11  # onnx.TensorProto.DOUBLE
# Attempts at an instance of a dtype the first instances lack (an integer, a bool), or at
# an instance whose dims are the sizes the rule mentions.
FORCED_ATTEMPTS = 8
# Instances drawn at the sizes the rule mentions (`_sizes`), besides the others.
SIZED_INSTANCES = 2
# A rule with no instance yet whose attempts got as far as its `where` lines (its pattern
# builds; only its conditions rarely hold on random draws: shapes that must agree across
# several Reshapes) gets this many times the attempts before it is called not instantiable.
NEAR_MISS_FACTOR = 8


def _tolerances(proto: Any) -> tuple[float | None, float | None]:
    """(rtol, atol) for the outputs compared directly: see the module docstring."""
    types = {o.type.tensor_type.elem_type for o in proto.graph.output}
    if types == {_DOUBLE}:
        return DOUBLE_TOLERANCE, DOUBLE_TOLERANCE
    return None, None


@dataclasses.dataclass(frozen=True, slots=True)
class CheckOptions:
    """Budgets of one check (per rule), and the run's passes to check besides the rules.

    `pipeline`: the passes a run applies before those the rule files declare (the command
    line checks the default pipeline; the API checks only what the files declare).
    """

    instances: int = 4
    examples: int = 10
    seed: int = 0
    attempts: int = 60
    pipeline: tuple[rules.PassUse, ...] = ()


@dataclasses.dataclass(slots=True)
class _Search:
    """Accepted instances and the rejections of one rule's search."""

    accepted: list[Instance] = dataclasses.field(default_factory=list)
    attempts: int = 0
    rejections: collections.Counter[tuple[int, str]] = dataclasses.field(
        default_factory=collections.Counter
    )

    def reached(self, stage: int) -> bool:
        """Whether some rejected attempt got as far as `stage`."""
        return any(s >= stage for s, _ in self.rejections)

    def furthest(self) -> str:
        """The most frequent reason among the rejections that got furthest."""
        if not self.rejections:
            return "no attempt was made"
        stage = max(s for s, _ in self.rejections)
        reasons = [(n, r) for (s, r), n in self.rejections.items() if s == stage]
        reasons.sort(key=lambda item: (-item[0], item[1]))
        return reasons[0][1]


class _SearchDoneError(Exception):
    """Raised inside the hypothesis run once the budget is spent or enough were found."""


def _search(
    plan: RulePlan,
    options: CheckOptions,
    ruleset: rules.RuleSet,
    dtype: ir.DataType | None = None,
    sizes: tuple[int, ...] = (),
) -> _Search:
    """Instances of the rule.

    `dtype`: only of that base dtype, one at most; `sizes`: dims drawn from these sizes
    (`_line.draw_dim`), `SIZED_INSTANCES` at most.
    """
    from hypothesis import HealthCheck, Phase, Verbosity, given, reject, settings
    from hypothesis import seed as seed_decorator
    from hypothesis import strategies as st
    from hypothesis.errors import FlakyStrategyDefinition, Unsatisfiable

    state = _Search()
    forced = dtype is not None or bool(sizes)
    wanted = options.instances
    if forced:
        wanted = SIZED_INSTANCES if sizes else 1
    budget = min(FORCED_ATTEMPTS, options.attempts) if forced else options.attempts
    config = settings(
        settings.get_profile("default"),  # the caller's active profile must not leak in
        max_examples=wanted,
        deadline=None,
        database=None,
        derandomize=False,
        phases=(Phase.generate,),
        suppress_health_check=list(HealthCheck),
        verbosity=Verbosity.quiet,
        print_blob=False,
    )

    @config
    @seed_decorator(options.seed)
    @given(st.data())
    def search(data: Any) -> None:
        limit = budget
        if not forced and not state.accepted and state.reached(STAGE_WHERE):
            limit = budget * NEAR_MISS_FACTOR
        if state.attempts >= limit or len(state.accepted) >= wanted:
            # Stop the run: rejecting here without drawing would look flaky to hypothesis.
            raise _SearchDoneError
        state.attempts += 1
        choices = Choices(data)
        if dtype is not None:
            choices.override("dtype", dtype)
        if sizes:
            choices.override(SIZES, sizes)
        outcome = attempt(plan, choices, ruleset)
        if isinstance(outcome, Rejection):
            state.rejections[(outcome.stage, outcome.reason)] += 1
            reject()
        assert isinstance(outcome, Accepted), "attempt returns Accepted or Rejection"
        state.accepted.append(outcome.instance)

    # Hypothesis replays the example that stopped the run and, as that one draws nothing,
    # may call the run flaky; the instances found before are what counts.
    with contextlib.suppress(Unsatisfiable, _SearchDoneError, FlakyStrategyDefinition):
        search()
    return state


def _search_all(plan: RulePlan, options: CheckOptions, ruleset: rules.RuleSet) -> _Search:
    """The rule's instances, plus one of each admitted dtype class they lack (see above)."""
    state = _search(plan, options, ruleset)
    drawn = {instance.base_dtype for instance in state.accepted}
    for dtype in plan.extra_dtypes:
        if dtype in drawn or (dtype in INTEGER_DTYPES and drawn & set(INTEGER_DTYPES)):
            continue
        extra = _search(plan, options, ruleset, dtype)
        state.accepted.extend(extra.accepted)
        state.attempts += extra.attempts
        if not state.accepted:
            state.rejections.update(extra.rejections)
    menu = size_menu(rule_sizes(plan))
    if menu and state.accepted:
        sized = _search(plan, options, ruleset, sizes=menu)
        state.accepted.extend(sized.accepted)
        state.attempts += sized.attempts
    return state


@dataclasses.dataclass(frozen=True, slots=True)
class _Outcome:
    """One instance checked: examples run, and a counterexample or a skip reason."""

    examples: int = 0
    failure: Counterexample | None = None
    skipped: str = ""


def _text(proto: Any) -> str:
    import onnx.printer

    try:
        return str(onnx.printer.to_text(proto))
    except Exception:  # the printer refuses some models; the proto's text form always works
        return str(proto)


def _rewrite_alone(rule: rules.Rule, ruleset: rules.RuleSet, instance: Instance) -> Any:
    """The engine's rewrite of the instance with only `rule` (one rewrite at most)."""
    from rewriter.api import RewriteOptions, rewrite

    single = dataclasses.replace(ruleset, rules=(rule,), passes=())
    options = RewriteOptions(
        max_rewrites=1,
        passes=(),
        target_opset=instance.target,
        calibration=instance_calibration(rule, instance.proto),
    )
    return rewrite(instance.proto, single, options)


def _check_instance(
    rule: rules.Rule, ruleset: rules.RuleSet, instance: Instance, examples: int, seed: int
) -> _Outcome:
    from rewriter.verification import (
        Criterion,
        InputOptions,
        RuntimeOptions,
        VerifyError,
        VerifyOptions,
        check_equivalence,
    )

    model_text = _text(instance.proto)
    try:
        result = _rewrite_alone(rule, ruleset, instance)
    except ir.ConversionError as exc:
        return _Outcome(skipped=f"onnx's version converter failed: {exc}")
    except RewriteError as exc:
        return _Outcome(failure=Counterexample(model_text, {}, None, f"the rewrite failed: {exc}"))
    applied = [e for e in result.trace.entries if e.kind == "rule"]
    if not applied:
        rolled = [s.reason for s in result.trace.skips if s.rule == rule.name]
        declined = [r for r in rolled if r.endswith("nothing to do")]
        if declined:
            return _Outcome(skipped=f"the engine declined the rewrite: {declined[0]}")
        if any(reason.startswith("rolled back") for reason in rolled):
            message = f"the rewrite was rolled back: {rolled[0].removeprefix('rolled back: ')}"
            return _Outcome(failure=Counterexample(model_text, {}, None, message))
        return _Outcome(skipped="the engine did not apply the rule: " + "; ".join(rolled))
    rewritten = result.proto
    if rule.approximate is not None:
        narrows = _narrows_floats(result.model)
        return _check_bound(rule.approximate, model_text, instance.proto, rewritten, seed, narrows)
    rtol, atol = _tolerances(instance.proto)
    try:
        options = VerifyOptions(
            InputOptions(
                examples,
                seed,
                # A rule that `assumes finite` declares its result may differ at NaN and inf.
                special_values=not rule.assumes_finite,
                float_extremes=True,
            ),
            Criterion(rtol=rtol, atol=atol),
            RuntimeOptions(ort_enable_all=False),
            save_counterexample=False,
        )
        verdict = check_equivalence(instance.proto, rewritten, options)
    except VerifyError as exc:
        message = str(exc)
        if message.startswith(("original", "the original")):
            return _Outcome(skipped=f"the instance cannot be run: {message}")
        return _Outcome(failure=Counterexample(model_text, {}, None, message, _text(rewritten)))
    if verdict.ok:
        return _Outcome(examples=verdict.examples_run)
    errors = [o.max_abs_err for o in verdict.outputs if o.max_abs_err is not None]
    inputs = dict(verdict.counterexample or {})
    message = verdict.message or verdict.summary()
    failure = Counterexample(
        model_text, inputs, max(errors, default=None), message, _text(rewritten)
    )
    return _Outcome(examples=verdict.examples_run, failure=failure)


# Examples an approximate rule's instance is measured on (the worst one counts).
_APPROXIMATION_EXAMPLES = 4


def _check_bound(
    bound: rules.Approximation,
    model_text: str,
    original: Any,
    rewritten: Any,
    seed: int,
    narrows: bool = False,
) -> _Outcome:
    """An approximate rule's instance: the declared metric must meet the declared bound."""
    from rewriter.verification import Acceptance, VerifyError, measure_approximation

    try:
        measured = measure_approximation(
            original, rewritten, bound.metric, examples=_APPROXIMATION_EXAMPLES, seed=seed
        )
    except VerifyError as exc:
        message = str(exc)
        if message.startswith(("original", "the original")):
            return _Outcome(skipped=f"the instance cannot be run: {message}")
        return _Outcome(failure=Counterexample(model_text, {}, None, message, _text(rewritten)))
    if Acceptance(bound.metric, bound.bound).met_by(measured.value):
        return _narrowing_keeps_numbers(
            model_text, original, rewritten, seed, measured.examples, narrows
        )
    message = (
        f"the declared bound `approximate {bound}` does not hold: {bound.metric} is "
        f"{measured.value:.4g} on the worst of {measured.examples} examples"
    )
    failure = Counterexample(
        model_text, dict(measured.worst_inputs), None, message, _text(rewritten)
    )
    return _Outcome(examples=measured.examples, failure=failure)


def _narrows_floats(model: ir.Model) -> bool:
    """Whether a model casts to float16 or bfloat16 (a narrowing of floats)."""
    narrow = {int(ir.DataType.FLOAT16), int(ir.DataType.BFLOAT16)}
    return any(
        node.op_type == "Cast" and node.attribute("to") in narrow
        for graph in model.graphs()
        for node in graph
    )


def _narrowing_keeps_numbers(
    model_text: str, original: Any, rewritten: Any, seed: int, examples: int, narrows: bool
) -> _Outcome:
    """A rule that narrows floats must not turn masking values into NaN or infinities."""
    from rewriter.verification import VerifyError, find_new_specials

    if not narrows:
        return _Outcome(examples=examples)
    try:
        found = find_new_specials(original, rewritten, seed=seed)
    except VerifyError as exc:
        return _Outcome(failure=Counterexample(model_text, {}, None, str(exc), _text(rewritten)))
    if found is None:
        return _Outcome(examples=examples)
    failure = Counterexample(
        model_text, dict(found.inputs), None, found.describe(), _text(rewritten)
    )
    return _Outcome(examples=examples, failure=failure)


def find_instances(
    compiled_rule: Any, ruleset: rules.RuleSet, options: CheckOptions
) -> list[Instance]:
    """Small models the rule matches (none for a rule that cannot be instantiated).

    The instances check-rules verifies the rule on; the soundness fuzzer rewrites them with
    the whole library, inside subgraphs and functions, to reach every rule.
    """
    try:
        plan = analyze(compiled_rule)
    except NotInstantiableError:
        return []
    return list(_search_all(plan, options, ruleset).accepted)


def check_rule(
    compiled_rule: Any,
    ruleset: rules.RuleSet,
    options: CheckOptions,
) -> RuleReport:
    """Check one compiled rule (see the module docstring)."""
    return _check_rule(compiled_rule, ruleset, options)


def _check_rule(
    compiled_rule: Any,
    ruleset: rules.RuleSet,
    options: CheckOptions,
) -> RuleReport:
    start = time.perf_counter()
    rule: rules.Rule = compiled_rule.rule
    location = f"{rule.span.path}:{rule.span.line}"
    report = _reporter(rule.name, location, start)
    try:
        plan = analyze(compiled_rule)
    except NotInstantiableError as exc:
        return report(Status.NOT_INSTANTIABLE, detail=str(exc), by_tests=exc.by_tests)
    search = _search_all(plan, options, ruleset)
    if not search.accepted:
        detail = f"{search.furthest()} ({search.attempts} attempts)"
        return report(Status.NOT_INSTANTIABLE, detail=detail)
    examples = 0
    checked = 0
    skips: list[str] = []
    for index, instance in enumerate(search.accepted):
        outcome = _check_instance(rule, ruleset, instance, options.examples, options.seed + index)
        examples += outcome.examples
        if outcome.failure is not None:
            return report(
                Status.FAILED,
                instances=index + 1,
                examples=examples,
                detail=outcome.failure.message,
                counterexample=outcome.failure,
            )
        if outcome.skipped:
            skips.append(outcome.skipped)
            continue
        checked += 1
    if checked == 0:
        return report(Status.NOT_INSTANTIABLE, detail=skips[0] if skips else "no instance ran")
    opsets = sorted(
        {(i.opsets.get("", 0), i.target or 0): _opset_label(i) for i in search.accepted}.items()
    )
    detail = f"opset {', '.join(label for _, label in opsets)}"
    if rule.assumes_finite:
        detail += "; finite inputs only (the rule assumes finite)"
    if rule.approximate is not None:
        detail += f"; approximate: held to {rule.approximate} on plain inputs, not to equivalence"
    if rule.assumes_nonempty:
        detail += "; non-empty tensors only (the rule assumes nonempty)"
    kernels = _missing_kernels(skips)
    if kernels:
        detail += f"; not applied where onnxruntime has no kernel for {', '.join(kernels)}"
    return report(
        Status.VERIFIED,
        instances=checked,
        examples=examples,
        detail=detail,
        sample=search.accepted[0].proto,
    )


_NO_KERNEL = re.compile(r"onnxruntime has no kernel for (\S+\([^)]*\))")


def _missing_kernels(skips: list[str]) -> list[str]:
    """The op kinds (`Conv(double, double)`) some instances' rewrites were declined for.

    The engine keeps a model onnxruntime runs runnable: a rule that writes an op without a
    kernel for that dtype is not applied there, which the report says rather than hides.
    """
    found: dict[str, None] = {}
    for skip in skips:
        match = _NO_KERNEL.search(skip)
        if match is not None:
            found[match.group(1)] = None
    return list(found)


def _opset_label(instance: Instance) -> str:
    version = str(instance.opsets.get("", 0))
    return version if instance.target is None else f"{version}->{instance.target}"


def _reporter(name: str, location: str, start: float) -> Callable[..., RuleReport]:
    """A RuleReport constructor with the rule's name, location and timer filled in."""

    def make(status: Status, **fields: Any) -> RuleReport:
        return RuleReport(name, location, status, seconds=time.perf_counter() - start, **fields)

    return make
