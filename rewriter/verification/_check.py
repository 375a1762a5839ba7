"""Whole-model equivalence: run both models on hypothesis-generated inputs and compare.

`check_equivalence` drives a `@given`-decorated property ("the rewritten model agrees with
the original on this example") with hypothesis settings built from scratch (the caller's
active hypothesis profile does not leak in), `@seed(seed)` for reproducibility and no example
database. When the property fails, hypothesis shrinks the example (smaller dims, simpler
distributions, fewer special elements) and replays the minimal one last; that replay's
exception carries the counterexample out.

Invariants:

* Each distinct example runs the models at most once (results are cached by recipe), so
  replays during shrinking cost nothing and are never flaky.
* Examples the *original* model refuses (it raises) are rejected, not counted as failures:
  they lie outside the model's domain. The rewritten model raising on an input the original
  accepts is a mismatch.
* Shrinking is bounded (`_SHRINK_RUNS` runs or `_SHRINK_SECONDS` seconds); past the budget,
  new candidate examples count as passing without running, so hypothesis settles on the
  smallest failing example found so far.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import time
import types
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

import ir
from rewriter.verification import _counterexample
from rewriter.verification._compare import Comparison, Tolerance, compare_arrays, tolerance_for
from rewriter.verification._errors import VerifyError
from rewriter.verification._inputs import (
    Example,
    InputSpec,
    analyze_inputs,
    example_strategy,
    materialize,
)
from rewriter.verification._result import OutputStats, VerifyResult
from rewriter.verification._runner import ORT, RunError, Session, open_session
from rewriter.verification._source import LoadedModel, ModelSource, load_model

logger = logging.getLogger(__name__)

Array = npt.NDArray[np.generic]

_SHRINK_RUNS = 300
_SHRINK_SECONDS = 60.0


# ---------------------------------------------------------------------------------------------
# Running both models on one input set


@dataclasses.dataclass(frozen=True, slots=True)
class Outcome:
    """Both models on one input set: a comparison per output, or why the rewritten one failed."""

    comparisons: tuple[tuple[str, Comparison], ...]
    tolerances: tuple[tuple[str, Tolerance], ...]
    failure: str = ""

    @property
    def ok(self) -> bool:
        """True when the rewritten model ran and every output is within tolerance."""
        return not self.failure and all(c.ok for _, c in self.comparisons)

    def reason(self) -> str:
        """One line naming each output that disagreed, or the rewritten model's failure."""
        if self.failure:
            return self.failure
        return "; ".join(f"output `{name}`: {c.reason}" for name, c in self.comparisons if c.reason)


class OriginalFailedError(Exception):
    """The original model raised on an input set (the input is outside its domain)."""


def _graph_input_names(model: ir.Model) -> list[str]:
    return [v.name for v in model.graph.inputs if not v.is_initializer()]


def _check_signatures(original: LoadedModel, rewritten: LoadedModel) -> None:
    ins = (_graph_input_names(original.model), _graph_input_names(rewritten.model))
    if ins[0] != ins[1]:
        raise VerifyError(
            f"the models have different inputs: original {ins[0]}, rewritten {ins[1]}"
        )
    outs = (
        [v.name for v in original.model.graph.outputs],
        [v.name for v in rewritten.model.graph.outputs],
    )
    if outs[0] != outs[1]:
        raise VerifyError(
            f"the models have different outputs: original {outs[0]}, rewritten {outs[1]}"
        )


class Pair:
    """An original and a rewritten model with open sessions, compared on given inputs."""

    def __init__(
        self,
        original: LoadedModel,
        rewritten: LoadedModel,
        *,
        rtol: float | None,
        atol: float | None,
        providers: Sequence[str] | None,
    ) -> None:
        _check_signatures(original, rewritten)
        self.original = original
        self.rewritten = rewritten
        self.rtol = rtol
        self.atol = atol
        self.original_session: Session = open_session(original, providers)
        self.rewritten_session: Session = open_session(rewritten, providers)
        self.output_names = tuple(v.name for v in original.model.graph.outputs)
        self.output_dtypes = {
            v.name: v.dtype.onnx_name if v.dtype is not None else "?"
            for v in original.model.graph.outputs
        }

    def run_original(self, feeds: Mapping[str, Array]) -> dict[str, object]:
        """The original model's outputs; raises OriginalFailedError if it fails."""
        try:
            return self.original_session.run(feeds)
        except RunError as exc:
            raise OriginalFailedError(str(exc)) from exc

    def compare(self, feeds: Mapping[str, Array]) -> Outcome:
        """Run both models on `feeds` and compare every output."""
        expected = self.run_original(feeds)
        return compare_outputs(
            expected, self.rewritten_session, feeds, self.output_names, self.rtol, self.atol
        )


def _tolerance(value: object, rtol: float | None, atol: float | None) -> Tolerance:
    if isinstance(value, list):
        value = value[0] if value else np.zeros(0)
    return tolerance_for(np.asarray(value).dtype, rtol, atol)


def compare_outputs(
    expected: Mapping[str, object],
    session: Session,
    feeds: Mapping[str, Array],
    names: Sequence[str],
    rtol: float | None,
    atol: float | None,
) -> Outcome:
    """Run `session` on `feeds` and compare its outputs `names` with `expected`."""
    tolerances = tuple((name, _tolerance(expected[name], rtol, atol)) for name in names)
    try:
        actual = session.run(feeds)
    except RunError as exc:
        return Outcome((), tolerances, f"the rewritten model failed: {exc}")
    comparisons = tuple(
        (name, compare_arrays(expected[name], actual[name], tol)) for name, tol in tolerances
    )
    return Outcome(comparisons, tolerances)


# ---------------------------------------------------------------------------------------------
# The hypothesis search


class _MismatchFoundError(Exception):
    """Raised inside the property to make hypothesis record (and shrink) a failing example."""

    def __init__(self, example: Example, outcome: Outcome) -> None:
        super().__init__(outcome.reason())
        self.example = example
        self.outcome = outcome


VerifyProgress = Callable[[int, int], None]
"""Called as `progress(examples run, shrinking runs among them)`."""


class _Search:
    """State of one hypothesis run: cached outcomes, counters and the worst errors seen."""

    def __init__(
        self,
        pair: Pair,
        specs: tuple[InputSpec, ...],
        *,
        special_values: bool,
        progress: VerifyProgress | None = None,
    ) -> None:
        self.pair = pair
        self.progress = progress
        self.specs = specs
        self.special_values = special_values
        self.cache: dict[Example, Outcome | None] = {}
        self.runs = 0
        self.rejected = 0
        self.shrink_runs = 0
        self.failing_since: float | None = None
        self.last: Outcome | None = None
        self.last_rejection = ""
        self.worst: dict[str, list[float | None]] = {n: [None, None] for n in pair.output_names}

    def _budget_left(self) -> bool:
        if self.failing_since is None:
            return True
        elapsed = time.monotonic() - self.failing_since
        return self.shrink_runs < _SHRINK_RUNS and elapsed < _SHRINK_SECONDS

    def _record(self, outcome: Outcome) -> None:
        self.last = outcome
        for name, comparison in outcome.comparisons:
            worst = self.worst[name]
            for slot, value in enumerate((comparison.max_abs_err, comparison.max_rel_err)):
                if value is None:
                    continue
                current = worst[slot]
                worst[slot] = value if current is None else max(current, value)

    def outcome(self, example: Example) -> Outcome | None:
        """The cached or fresh outcome of `example`; None if the original model refused it."""
        if example in self.cache:
            return self.cache[example]
        if not self._budget_left():
            return Outcome((), ())  # past the shrink budget: counts as passing, never run
        feeds = materialize(example, self.specs, special_values=self.special_values)
        try:
            outcome = self.pair.compare(feeds)
        except OriginalFailedError as exc:
            self.rejected += 1
            self.last_rejection = str(exc)
            self.cache[example] = None
            return None
        self.runs += 1
        if self.failing_since is not None:
            self.shrink_runs += 1
        if self.progress is not None:
            self.progress(self.runs, self.shrink_runs)
        self._record(outcome)
        self.cache[example] = outcome
        if not outcome.ok and self.failing_since is None:
            self.failing_since = time.monotonic()
        return outcome

    def check(self, example: Example) -> None:
        """The property: the models agree on `example` (hypothesis calls this)."""
        from hypothesis import reject

        outcome = self.outcome(example)
        if outcome is None:
            reject()
        if not outcome.ok:
            raise _MismatchFoundError(example, outcome)

    def run(self, examples: int, seed: int) -> _MismatchFoundError | None:
        """Run hypothesis; returns the shrunk mismatch, or None if the models always agreed."""
        from hypothesis import HealthCheck, Phase, Verbosity, given, settings
        from hypothesis import seed as seed_decorator
        from hypothesis.errors import Unsatisfiable

        config = settings(
            settings.get_profile("default"),
            max_examples=examples,
            deadline=None,
            database=None,
            derandomize=False,
            phases=(Phase.generate, Phase.shrink),
            suppress_health_check=list(HealthCheck),
            verbosity=Verbosity.quiet,
            print_blob=False,
            report_multiple_bugs=False,
        )
        strategy = example_strategy(self.specs, special_values=self.special_values)

        @config
        @seed_decorator(seed)
        @given(strategy)
        def models_agree(example: Example) -> None:
            self.check(example)

        try:
            models_agree()
        except _MismatchFoundError as found:
            return found
        except Unsatisfiable as exc:
            raise VerifyError(
                "the original model failed on every generated input "
                f"(last error: {self.last_rejection}); give valid ranges with input_ranges / "
                "--input NAME=LO:HI"
            ) from exc
        return None


# ---------------------------------------------------------------------------------------------
# Public entry points


def _frozen_inputs(inputs: Mapping[str, Array]) -> Mapping[str, Array]:
    frozen = {}
    for name, array in inputs.items():
        copy = np.array(array, copy=True)
        copy.setflags(write=False)
        frozen[name] = copy
    return types.MappingProxyType(frozen)


def _stats(
    pair: Pair,
    final: Outcome | None,
    worst: Mapping[str, list[float | None]],
    failing: bool,
) -> tuple[OutputStats, ...]:
    comparisons = dict(final.comparisons) if final is not None else {}
    tolerances = dict(final.tolerances) if final is not None else {}
    stats = []
    for name in pair.output_names:
        comparison = comparisons.get(name)
        note = ""
        if final is not None and final.failure:
            note = final.failure
        elif comparison is not None:
            note = comparison.reason
        stats.append(
            OutputStats(
                name=name,
                dtype=pair.output_dtypes[name],
                shape=comparison.shape if comparison is not None else (),
                max_abs_err=worst[name][0],
                max_rel_err=worst[name][1],
                mismatched=comparison.mismatched if (failing and comparison) else 0,
                tolerance=tolerances.get(name, Tolerance(math.nan, math.nan)),
                note=note,
            )
        )
    return tuple(stats)


def _validate(examples: int, seed: int, rtol: float | None, atol: float | None) -> None:
    if isinstance(examples, bool) or not isinstance(examples, int) or examples < 1:
        raise ValueError(f"examples must be a positive int, got {examples!r}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    for label, value in (("rtol", rtol), ("atol", atol)):
        if value is not None and not (math.isfinite(value) and value >= 0):
            raise ValueError(f"{label} must be a finite number >= 0, got {value!r}")


def check_equivalence(
    original: ModelSource,
    rewritten: ModelSource,
    *,
    examples: int = 20,
    seed: int = 0,
    rtol: float | None = None,
    atol: float | None = None,
    input_ranges: Mapping[str, tuple[float, float]] | None = None,
    special_values: bool = False,
    providers: Sequence[str] | None = None,
    counterexample_path: str | os.PathLike[str] | None = None,
    save_counterexample: bool = True,
    progress: VerifyProgress | None = None,
) -> VerifyResult:
    """Check on generated inputs that `rewritten` computes what `original` computes.

    Both models run with onnxruntime (graph optimizations disabled; CPU unless `providers`
    says otherwise), or with `onnx.reference` plus the project's kernels for ops onnxruntime
    does not know. Inputs follow `rewriter.verification._inputs`; outputs are compared with the
    tolerances of `rewriter.verification._compare`.

    Args:
        original: the reference model (a path, an `onnx.ModelProto` or an `ir.Model`).
        rewritten: the model under test, with the same input and output names.
        examples: how many examples hypothesis generates (shrinking runs come on top).
        seed: hypothesis seed; the same seed gives the same examples.
        rtol: relative tolerance for floating outputs (default: per dtype).
        atol: absolute tolerance for floating outputs (default: per dtype).
        input_ranges: `{input name: (lo, hi)}` closed ranges that override the generated
            values of those inputs.
        special_values: also generate NaN and +-inf elements.
        providers: onnxruntime execution providers (default: CPU).
        counterexample_path: where to save the counterexample (`.npz`); default
            `<rewritten stem>.counterexample.npz` beside the rewritten model, or a temporary
            folder for in-memory models.
        save_counterexample: False to keep the counterexample in memory only.
        progress: called as `progress(runs, shrink_runs)` after each example the two models
            ran (shrinking runs are counted apart: they follow a disagreement).

    Returns:
        A `VerifyResult`; `ok` is False when the models disagree (that is not an error).

    Raises:
        VerifyError: the models cannot be compared (different signatures, an op neither
            runtime can run, inputs the original model always rejects, bad input ranges).
        ir.ModelLoadError: a model file cannot be read.
    """
    _validate(examples, seed, rtol, atol)
    loaded_original = load_model(original, "original")
    loaded_rewritten = load_model(rewritten, "rewritten")
    _check_signatures(loaded_original, loaded_rewritten)
    specs = analyze_inputs(loaded_original.model, loaded_rewritten.model, input_ranges)
    pair = Pair(loaded_original, loaded_rewritten, rtol=rtol, atol=atol, providers=providers)
    if pair.original_session.runtime == ORT and pair.rewritten_session.runtime != ORT:
        logger.warning(
            "the rewritten model no longer runs on onnxruntime (%s); it was verified with %s",
            pair.rewritten_session.fallback_reason,
            pair.rewritten_session.runtime,
        )
    search = _Search(pair, specs, special_values=special_values, progress=progress)
    found = search.run(examples, seed)
    if found is None and search.rejected and search.runs < examples:
        logger.warning(
            "only %d of %d examples ran: the original model rejected %d generated inputs "
            "(last error: %s); consider input_ranges / --input NAME=LO:HI",
            search.runs,
            examples,
            search.rejected,
            search.last_rejection,
        )
    counterexample: Mapping[str, Array] | None = None
    path: str | None = None
    final = search.last
    if found is not None:
        final = found.outcome
        inputs = materialize(found.example, specs, special_values=special_values)
        counterexample = _frozen_inputs(inputs)
        if save_counterexample:
            target = counterexample_path or _counterexample.default_counterexample_path(
                loaded_rewritten.path
            )
            path = _counterexample.save_counterexample(target, inputs)
    result = VerifyResult(
        ok=found is None,
        examples_run=search.runs,
        outputs=_stats(pair, final, search.worst, found is not None),
        counterexample=counterexample,
        counterexample_path=path,
        original_runtime=pair.original_session.runtime,
        rewritten_runtime=pair.rewritten_session.runtime,
        seed=seed,
        examples_rejected=search.rejected,
        shrink_runs=search.shrink_runs,
        message="" if found is None else found.outcome.reason(),
        inputs=tuple(f"{spec.name}: {spec.describe()}" for spec in specs),
    )
    logger.info("%s", result.summary())
    if path is not None:
        logger.info("counterexample saved to %s", path)
    return result


def run_model(
    model: ModelSource,
    inputs: Mapping[str, Array],
    *,
    providers: Sequence[str] | None = None,
) -> dict[str, object]:
    """Run one model as the verifier would (onnxruntime, else `onnx.reference` + kernels).

    Returns:
        The outputs by name (arrays; lists for sequence outputs).

    Raises:
        VerifyError: the model cannot be loaded by either runtime, or fails on `inputs`.
    """
    loaded = load_model(model, "model")
    session = open_session(loaded, providers)
    try:
        return session.run(dict(inputs))
    except RunError as exc:
        raise VerifyError(f"{loaded.label} failed on the given inputs: {exc}") from exc


def check_on_inputs(
    original: ModelSource,
    rewritten: ModelSource,
    inputs: Mapping[str, Array],
    *,
    rtol: float | None = None,
    atol: float | None = None,
    providers: Sequence[str] | None = None,
) -> VerifyResult:
    """Compare the two models on one given input set (e.g. a saved counterexample).

    Raises:
        VerifyError: as `check_equivalence`, or the original model fails on `inputs`.
    """
    _validate(1, 0, rtol, atol)
    pair = Pair(
        load_model(original, "original"),
        load_model(rewritten, "rewritten"),
        rtol=rtol,
        atol=atol,
        providers=providers,
    )
    feeds = dict(inputs)
    try:
        outcome = pair.compare(feeds)
    except OriginalFailedError as exc:
        raise VerifyError(f"the original model fails on the given inputs: {exc}") from exc
    worst = {name: [c.max_abs_err, c.max_rel_err] for name, c in outcome.comparisons} or {
        name: [None, None] for name in pair.output_names
    }
    for name in pair.output_names:
        worst.setdefault(name, [None, None])
    return VerifyResult(
        ok=outcome.ok,
        examples_run=1,
        outputs=_stats(pair, outcome, worst, not outcome.ok),
        counterexample=None if outcome.ok else _frozen_inputs(feeds),
        counterexample_path=None,
        original_runtime=pair.original_session.runtime,
        rewritten_runtime=pair.rewritten_session.runtime,
        message=outcome.reason(),
    )
