"""Whole-model equivalence: run both models on hypothesis-generated inputs and compare.

`check_equivalence` first runs the caller's own samples (`samples`), then drives a
`@given`-decorated property ("the rewritten model agrees with the original on this example")
with hypothesis settings built from scratch (the caller's active hypothesis profile does not
leak in), `@seed(seed)` for reproducibility and no example database. When the property fails,
hypothesis shrinks the example (smaller dims, no special values, simpler distributions, fewer
special elements) and replays the minimal one last; that replay's exception carries the
counterexample out.

Each example runs the original model, the rewritten model with onnxruntime's optimizations
off and, with `ort_enable_all`, the rewritten model again with all of them on (the way models
are deployed: onnxruntime's own fusions can miscompile a valid model); float outputs are
judged against the float64 oracle (`_judge`, `_compare`).

Invariants:

* Each distinct example runs the models at most once (results are cached by recipe), so
  replays during shrinking cost nothing and are never flaky.
* Examples the *original* model refuses (it raises) are rejected, not counted as failures:
  they lie outside the model's domain. The rewritten model raising on an input the original
  accepts is a mismatch, and so is a rewritten model onnxruntime cannot load where it loads
  the original (`_runner.open_rewritten`). When the original refuses plain values at the
  usual sizes, sizes are searched first (`_sizes`).
* After the drawn examples, each symbolic dim takes the sizes the models mention for it and
  twice the largest (`_model_sizes`, `_size_examples`); a size the original refuses is
  reported with them, not counted as a rejection.
* Shrinking is bounded (`_SHRINK_RUNS` runs or `_SHRINK_SECONDS` seconds); past the budget,
  new candidate examples count as passing without running, so hypothesis settles on the
  smallest failing example found so far.
"""

from __future__ import annotations

import dataclasses
import logging
import time
import types
from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

import ir
from rewriter.verification import _counterexample
from rewriter.verification._compare import Comparison, Criterion
from rewriter.verification._errors import InputsRejectedError, VerifyError
from rewriter.verification._inputs import (
    DIM_MAX,
    DIM_MIN,
    DimKey,
    Example,
    InputSpec,
    analyze_inputs,
    bound_dims,
    example_strategy,
    materialize,
    plain_example,
    split_samples,
    suggested_sizes,
)
from rewriter.verification._judge import Oracle, Reference, judge_outputs
from rewriter.verification._model_sizes import ModelSizes, model_sizes
from rewriter.verification._optimizer_diff import describe_optimizer_difference, loaded_difference
from rewriter.verification._options import (
    RuntimeOptions,
    VerifyOptions,
    VerifyProgress,
)
from rewriter.verification._result import OutputStats, VerifyResult
from rewriter.verification._runner import (
    DISABLED,
    ENABLED,
    ORT,
    RunError,
    Session,
    UnloadableSession,
    open_optimized,
    open_rewritten,
    open_session,
)
from rewriter.verification._size_examples import MIN_SECONDS, SizeReport, try_sizes
from rewriter.verification._sizes import FoundSizes, find_sizes
from rewriter.verification._source import LoadedModel, ModelSource, load_model

logger = logging.getLogger(__name__)

Array = npt.NDArray[np.generic]

# The examples at the models' sizes may take this share of the drawn examples' time.
SIZE_TIME_SHARE = 0.5
_SHRINK_RUNS = 300
_SHRINK_SECONDS = 60.0
_PROBE_SIZE = 3


# ---------------------------------------------------------------------------------------------
# Running both models on one input set


@dataclasses.dataclass(frozen=True, slots=True)
class LevelOutcome:
    """One run of the rewritten model (at one optimization level), judged output by output."""

    level: str
    comparisons: tuple[tuple[str, Comparison], ...]
    failure: str = ""

    @property
    def ok(self) -> bool:
        """True when the model ran and every output passed."""
        return not self.failure and all(c.ok for _, c in self.comparisons)

    def reason(self) -> str:
        """One line naming each output that disagreed, or the model's failure."""
        if self.failure:
            return self.failure
        return "; ".join(f"output `{name}`: {c.reason}" for name, c in self.comparisons if c.reason)


@dataclasses.dataclass(frozen=True, slots=True)
class Outcome:
    """Both models on one input set: one judged run per optimization level."""

    levels: tuple[LevelOutcome, ...]

    @property
    def ok(self) -> bool:
        """True when every level passed."""
        return all(level.ok for level in self.levels)

    @property
    def failing_level(self) -> str:
        """The first level that disagreed ("" when none did)."""
        return next((level.level for level in self.levels if not level.ok), "")

    def reason(self) -> str:
        """One line: what disagreed, naming the optimization level past the first."""
        parts = []
        for index, level in enumerate(self.levels):
            if level.ok:
                continue
            prefix = "" if index == 0 else f"with onnxruntime's {level.level}: "
            parts.append(prefix + level.reason())
        return "; ".join(parts)


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


def run_level(
    reference: Reference,
    session: Session,
    names: Sequence[str],
    criterion: Criterion,
    level: str = DISABLED,
) -> LevelOutcome:
    """Run `session` on the reference's inputs and judge its outputs."""
    try:
        actual = session.run(reference.feeds)
    except RunError as exc:
        return LevelOutcome(level, (), f"the rewritten model failed: {exc}")
    return LevelOutcome(level, judge_outputs(reference, actual, names, criterion))


class Pair:
    """An original and a rewritten model with open sessions, compared on given inputs."""

    def __init__(
        self,
        original: LoadedModel,
        rewritten: LoadedModel,
        *,
        criterion: Criterion,
        providers: Sequence[str] | None,
        ort_enable_all: bool = False,
    ) -> None:
        _check_signatures(original, rewritten)
        self.original = original
        self.rewritten = rewritten
        self.criterion = criterion
        self.original_session: Session = open_session(original, providers)
        self.rewritten_session: Session = open_rewritten(
            rewritten, self.original_session.runtime, providers
        )
        self.oracle = Oracle(original, providers)
        self.providers = providers
        self.output_names = tuple(v.name for v in original.model.graph.outputs)
        self.output_dtypes = {
            v.name: v.dtype.onnx_name if v.dtype is not None else "?"
            for v in original.model.graph.outputs
        }
        self.numpy_dtypes = {
            v.name: np.dtype(ir.numpy_dtype(v.dtype)) if v.dtype is not None else None
            for v in original.model.graph.outputs
        }
        self.optimized_session: Session | None = None
        self.optimized_failure = ""
        # The original with ORT_ENABLE_ALL, opened when the rewritten model fails at that level.
        self._original_optimized: Session | None = None
        self._original_optimized_failed = False
        self.ort_changes_original = False
        self.notes: list[str] = []
        if ort_enable_all:
            self._open_optimized(providers)

    def _open_optimized(self, providers: Sequence[str] | None) -> None:
        if isinstance(self.rewritten_session, UnloadableSession):
            return  # every run fails already
        if self.rewritten_session.runtime != ORT:
            self.notes.append(f"{ENABLED} not checked: the rewritten model runs on onnx.reference")
            return
        try:
            self.optimized_session = open_optimized(self.rewritten, providers)
        except VerifyError as exc:
            try:
                open_optimized(self.original, providers)
            except VerifyError:
                self.notes.append(
                    f"{ENABLED} not checked: onnxruntime cannot load the original with it either"
                )
                return
            self.optimized_failure = str(exc)

    @property
    def levels(self) -> tuple[str, ...]:
        """The optimization levels the rewritten model runs at."""
        if self.optimized_session is not None or self.optimized_failure:
            return (DISABLED, ENABLED)
        return (DISABLED,)

    def reference(self, feeds: Mapping[str, Array]) -> Reference:
        """The original model's outputs on `feeds`; raises OriginalFailedError if it fails."""
        try:
            expected = self.original_session.run(feeds)
        except RunError as exc:
            raise OriginalFailedError(str(exc)) from exc
        return Reference(feeds, expected, self.oracle)

    def compare(self, feeds: Mapping[str, Array]) -> Outcome:
        """Run both models on `feeds` (at each level) and judge every output."""
        reference = self.reference(feeds)
        names = self.output_names
        levels = [run_level(reference, self.rewritten_session, names, self.criterion)]
        if self.optimized_failure:
            levels.append(LevelOutcome(ENABLED, (), self.optimized_failure))
        elif self.optimized_session is not None:
            optimized = run_level(reference, self.optimized_session, names, self.criterion, ENABLED)
            if not optimized.ok and not optimized.failure:
                optimized = self._against_original_optimized(reference, optimized)
            levels.append(optimized)
        return Outcome(tuple(levels))

    def _against_original_optimized(
        self, reference: Reference, failed: LevelOutcome
    ) -> LevelOutcome:
        """`failed` judged again against the original run with ORT_ENABLE_ALL too.

        onnxruntime's optimizations may change the original's own result (on extreme inputs,
        fused Conv + Clip kernels treat overflow differently): the rewrite is not to blame for
        what they do to both models alike, so a rewritten model that is as accurate as the
        original at that level passes.
        """
        session = self._original_optimized_session()
        if session is None or self.optimized_session is None:
            return failed
        try:
            expected = session.run(reference.feeds)
        except RunError:
            return failed
        names = self.output_names
        again = run_level(
            reference.with_expected(expected),
            self.optimized_session,
            names,
            self.criterion,
            ENABLED,
        )
        if again.ok:
            self.ort_changes_original = True
            return again
        return failed

    def _original_optimized_session(self) -> Session | None:
        if self._original_optimized is None and not self._original_optimized_failed:
            try:
                self._original_optimized = open_optimized(self.original, self.providers)
            except VerifyError:
                self._original_optimized_failed = True
        return self._original_optimized

    def original_runs(self, feeds: Mapping[str, Array]) -> bool:
        """True when the original model runs on `feeds`."""
        try:
            self.original_session.run(feeds)
        except RunError:
            return False
        return True


# ---------------------------------------------------------------------------------------------
# Worst figures per output and level


class _Figures:
    """Per output and level: the most telling comparison seen and the largest differences."""

    def __init__(self, names: Sequence[str], levels: Sequence[str]) -> None:
        self.best: dict[tuple[str, str], Comparison] = {}
        self.max_abs: dict[tuple[str, str], float | None] = {}
        self.max_rel: dict[tuple[str, str], float | None] = {}
        self.failures: dict[str, str] = {}
        for name in names:
            for level in levels:
                self.max_abs[(name, level)] = None
                self.max_rel[(name, level)] = None

    def record(self, outcome: Outcome) -> None:
        for level in outcome.levels:
            if level.failure:
                self.failures.setdefault(level.level, level.failure)
            for name, comparison in level.comparisons:
                key = (name, level.level)
                for table, value in (
                    (self.max_abs, comparison.max_abs_err),
                    (self.max_rel, comparison.max_rel_err),
                ):
                    if value is not None:
                        worst = table.get(key)
                        table[key] = value if worst is None else max(worst, value)
                best = self.best.get(key)
                if best is None or _weight(comparison) > _weight(best):
                    self.best[key] = comparison


def _weight(comparison: Comparison) -> tuple[int, float]:
    """How telling a comparison is: a failure, then the largest ratio, then the largest gap."""
    if not comparison.ok:
        return (3, float(comparison.mismatched))
    if comparison.basis == "oracle":
        return (2, comparison.ratio or 0.0)
    if comparison.basis == "close":
        return (1, comparison.rewritten_err or 0.0)
    return (0, comparison.max_rel_err or 0.0)


# ---------------------------------------------------------------------------------------------
# The hypothesis search


class _MismatchFoundError(Exception):
    """Raised inside the property to make hypothesis record (and shrink) a failing example."""

    def __init__(self, example: Example, outcome: Outcome) -> None:
        super().__init__(outcome.reason())
        self.example = example
        self.outcome = outcome


@dataclasses.dataclass(slots=True)
class _Found:
    """A disagreement: the inputs, the outcome, and the example when it was generated."""

    inputs: dict[str, Array]
    outcome: Outcome
    example: Example | None = None


class _Search:
    """State of one hypothesis run: cached outcomes, counters and the worst errors seen."""

    def __init__(
        self,
        pair: Pair,
        specs: tuple[InputSpec, ...],
        *,
        special_values: bool,
        sizes: Mapping[DimKey, tuple[int, int]],
        progress: VerifyProgress | None = None,
    ) -> None:
        self.pair = pair
        self.progress = progress
        self.specs = specs
        self.special_values = special_values
        self.sizes = dict(sizes)
        self.cache: dict[Example, Outcome | None] = {}
        self.runs = 0
        self.rejected = 0
        self.shrink_runs = 0
        self.failing_since: float | None = None
        self.last: Outcome | None = None
        self.last_rejection = ""
        self.figures = _Figures(pair.output_names, pair.levels)
        self.size_report: SizeReport | None = None

    def _budget_left(self) -> bool:
        if self.failing_since is None:
            return True
        elapsed = time.monotonic() - self.failing_since
        return self.shrink_runs < _SHRINK_RUNS and elapsed < _SHRINK_SECONDS

    def _count(self, outcome: Outcome) -> None:
        self.runs += 1
        if self.failing_since is not None:
            self.shrink_runs += 1
        if self.progress is not None:
            self.progress(self.runs, self.shrink_runs)
        self.last = outcome
        self.figures.record(outcome)
        if not outcome.ok and self.failing_since is None:
            self.failing_since = time.monotonic()

    def run_sample(self, index: int, feeds: dict[str, Array]) -> _Found | None:
        """Run one of the caller's samples; a disagreement is returned as it is (no shrinking).

        Raises:
            VerifyError: the original model fails on the sample.
        """
        try:
            outcome = self.pair.compare(feeds)
        except OriginalFailedError as exc:
            raise VerifyError(
                f"the original model fails on given sample {index + 1}: {exc}"
            ) from exc
        self._count(outcome)
        return None if outcome.ok else _Found(feeds, outcome)

    def outcome(self, example: Example, *, drawn: bool = True) -> Outcome | None:
        """The cached or fresh outcome of `example`; None if the original model refused it.

        `drawn`: the example was drawn by hypothesis (a refusal counts as a rejection);
        examples at the model's sizes are not (a refused size is reported with them).
        """
        if example in self.cache:
            return self.cache[example]
        if not self._budget_left():
            return Outcome(())  # past the shrink budget: counts as passing, never run
        feeds = materialize(example, self.specs)
        try:
            outcome = self.pair.compare(feeds)
        except OriginalFailedError as exc:
            if drawn:
                self.rejected += 1
                self.last_rejection = str(exc)
            self.cache[example] = None
            return None
        self._count(outcome)
        self.cache[example] = outcome
        return outcome

    def check(self, example: Example) -> None:
        """The property: the models agree on `example` (hypothesis calls this)."""
        from hypothesis import reject

        outcome = self.outcome(example)
        if outcome is None:
            reject()
        if not outcome.ok:
            raise _MismatchFoundError(example, outcome)

    def run(self, examples: int, seed: int) -> _Found | None:
        """Run hypothesis; returns the shrunk mismatch, or None if the models always agreed.

        Raises:
            hypothesis.errors.Unsatisfiable: the original rejected every generated input.
        """
        from hypothesis import HealthCheck, Phase, Verbosity, given, settings
        from hypothesis import seed as seed_decorator

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
        strategy = example_strategy(
            self.specs, special_values=self.special_values, sizes=self.sizes
        )

        @config
        @seed_decorator(seed)
        @given(strategy)
        def models_agree(example: Example) -> None:
            self.check(example)

        try:
            models_agree()
        except _MismatchFoundError as found:
            return _Found(materialize(found.example, self.specs), found.outcome, found.example)
        return None

    def run_sizes(self, sizes: ModelSizes, drawn_seconds: float) -> _Found | None:
        """The examples at the sizes the model mentions (`_size_examples`), after the drawn ones.

        They may take half the drawn examples' time (`drawn_seconds`), at least
        `MIN_SECONDS`. Returns the smallest disagreement found, or None.
        """

        def judge(example: Example) -> bool | None:
            outcome = self.outcome(example, drawn=False)
            return None if outcome is None else outcome.ok

        budget = max(MIN_SECONDS, SIZE_TIME_SHARE * drawn_seconds)
        self.size_report = try_sizes(
            self.specs, sizes, self.sizes, (DIM_MIN, DIM_MAX), judge, budget
        )
        failing = self.size_report.failing
        if failing is None:
            return None
        outcome = self.cache.get(failing)
        assert outcome is not None, "a disagreeing size example ran and was cached"
        return _Found(materialize(failing, self.specs), outcome, failing)


# ---------------------------------------------------------------------------------------------
# Sizes


def _search_sizes(
    pair: Pair,
    specs: tuple[InputSpec, ...],
    fixed: Mapping[DimKey, int],
) -> FoundSizes | None:
    """Sizes the original runs with, when it fails on plain values at the usual sizes."""
    from rewriter.verification._inputs import dim_keys

    keys = dim_keys(specs)
    if not keys:
        return None
    probe = {key: fixed.get(key, _PROBE_SIZE) for key in keys}
    if pair.original_runs(materialize(plain_example(specs, probe), specs)):
        return None

    def runs(sizes: Mapping[DimKey, int]) -> bool:
        return pair.original_runs(materialize(plain_example(specs, sizes), specs))

    logger.info("the original model fails at size %d; searching sizes", _PROBE_SIZE)
    return find_sizes(specs, fixed, suggested_sizes(pair.original.model), runs)


def _size_ranges(
    specs: tuple[InputSpec, ...], fixed: Mapping[DimKey, int], found: FoundSizes | None
) -> dict[DimKey, tuple[int, int]]:
    ranges: dict[DimKey, tuple[int, int]] = {key: (size, size) for key, size in fixed.items()}
    if found is not None:
        ranges.update(found.ranges)
    del specs
    return ranges


def _mentioned_sizes(pair: Pair, specs: tuple[InputSpec, ...]) -> ModelSizes:
    """The sizes both models mention (`_model_sizes`), related to the inputs' symbols.

    Shape facts are inferred on the models lifted here; a caller's `ir.Model` is read with
    the facts it carries.
    """
    from rewriter.verification._inputs import dim_keys

    keys = dim_keys(specs)
    if not keys:
        return ModelSizes({}, ())  # every dim is static: no size to try
    symbols = [key[1] for key in keys if key[0] == "sym"]
    models = []
    for loaded in (pair.original, pair.rewritten):
        if loaded.owned:
            ir.infer_types(loaded.model)
        models.append(loaded.model)
    return model_sizes(models, symbols)


def _dim_label(key: DimKey) -> str:
    return key[1] if key[0] == "sym" else f"axis {key[1]}"


def _unsatisfiable_message(
    search: _Search, specs: tuple[InputSpec, ...], found: FoundSizes | None, tried: bool
) -> str:
    from rewriter.verification._inputs import dim_keys

    symbols = [_dim_label(key) for key in dim_keys(specs)]
    sizes = ""
    if tried and found is None and symbols:
        sizes = f"; sizes up to 8192 were tried for {', '.join(symbols)}"
    elif found is not None:
        sizes = f"; sizes searched: {found.describe()}"
    return (
        f"the original model failed on every generated input (last error: "
        f"{search.last_rejection}){sizes}. Fix the input shapes or the sizes of symbolic dims, "
        "give value ranges, or give real samples"
    )


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
    pair: Pair, figures: _Figures, final: Outcome | None, failing: bool
) -> tuple[OutputStats, ...]:
    """One entry per output and level: the failing comparison, else the most telling one."""
    final_levels = {level.level: level for level in final.levels} if final is not None else {}
    stats = []
    for level in pair.levels:
        final_level = final_levels.get(level)
        final_comparisons = dict(final_level.comparisons) if final_level is not None else {}
        for name in pair.output_names:
            key = (name, level)
            comparison = final_comparisons.get(name) if failing else figures.best.get(key)
            if comparison is None:
                comparison = figures.best.get(key)
            failure = ""
            if failing and final_level is not None and final_level.failure:
                failure = final_level.failure
            elif not failing and level in figures.failures:
                failure = figures.failures[level]
            stats.append(_output_stats(pair, name, level, comparison, figures, failure, failing))
    return tuple(stats)


def _output_stats(
    pair: Pair,
    name: str,
    level: str,
    comparison: Comparison | None,
    figures: _Figures,
    failure: str,
    failing: bool,
) -> OutputStats:
    key = (name, level)
    dtype = pair.output_dtypes[name]
    numpy_dtype = pair.numpy_dtypes[name]
    criterion = "?" if numpy_dtype is None else pair.criterion.describe(numpy_dtype)
    if comparison is None:
        return OutputStats(
            name,
            dtype,
            (),
            figures.max_abs[key],
            figures.max_rel[key],
            0,
            criterion,
            level=level,
            note=failure,
        )
    return OutputStats(
        name=name,
        dtype=dtype,
        shape=comparison.shape,
        max_abs_err=figures.max_abs[key],
        max_rel_err=figures.max_rel[key],
        mismatched=comparison.mismatched if failing else 0,
        criterion=criterion,
        level=level,
        basis=comparison.basis,
        original_err=comparison.original_err,
        rewritten_err=comparison.rewritten_err,
        ratio=comparison.ratio,
        floor=comparison.floor,
        note=failure or (comparison.reason if failing else ""),
    )


def check_equivalence(
    original: ModelSource,
    rewritten: ModelSource,
    options: VerifyOptions | None = None,
) -> VerifyResult:
    """Check on generated inputs that `rewritten` computes what `original` computes.

    Both models run with onnxruntime (graph optimizations disabled; CPU unless the options'
    providers say otherwise), or with `onnx.reference` plus the project's kernels for ops
    onnxruntime does not know. Inputs follow `rewriter.verification._inputs`; float outputs
    are judged by accuracy against a float64 evaluation of the original
    (`rewriter.verification._compare`), or as `options.criterion` says.

    Args:
        original: the reference model (a path, an `onnx.ModelProto` or an `ir.Model`).
        rewritten: the model under test, with the same input and output names.
        options: the inputs, criterion, runtime and counterexample file (`VerifyOptions`;
            default: 20 generated examples, seed 0, accuracy within 8x the original's error).

    Returns:
        A `VerifyResult`; `ok` is False when the models disagree (that is not an error).

    Raises:
        VerifyError: the models cannot be compared (different signatures, an op neither
            runtime can run, inputs the original model always rejects, bad input ranges,
            shapes, dims or samples).
        ir.ModelLoadError: a model file cannot be read.
    """
    options = options or VerifyOptions()
    inputs = options.inputs
    loaded_original = load_model(original, "original")
    loaded_rewritten = load_model(rewritten, "rewritten")
    _check_signatures(loaded_original, loaded_rewritten)
    specs = analyze_inputs(
        loaded_original.model,
        loaded_rewritten.model,
        inputs.ranges,
        inputs.shapes,
        float_extremes=inputs.float_extremes,
    )
    fixed = bound_dims(specs, inputs.shapes, inputs.dims)
    given = split_samples(inputs.samples, specs)
    pair = Pair(
        loaded_original,
        loaded_rewritten,
        criterion=options.criterion,
        providers=options.runtime.providers,
        ort_enable_all=options.runtime.ort_enable_all,
    )
    examples, seed = inputs.examples, inputs.seed
    found_sizes = _search_sizes(pair, specs, fixed) if examples else None
    search = _Search(
        pair,
        specs,
        special_values=inputs.special_values,
        sizes=_size_ranges(specs, fixed, found_sizes),
        progress=options.progress,
    )
    found: _Found | None = None
    for index, sample in enumerate(given):
        found = search.run_sample(index, sample)
        if found is not None:
            break
    drawn_start = time.perf_counter()
    if found is None and examples:
        found = _generated(search, specs, examples, seed, found_sizes)
    if found is None and examples:
        drawn_seconds = time.perf_counter() - drawn_start
        found = search.run_sizes(_mentioned_sizes(pair, specs), drawn_seconds)
    return _result(pair, search, specs, found, options, found_sizes, fixed)


def _generated(
    search: _Search,
    specs: tuple[InputSpec, ...],
    examples: int,
    seed: int,
    found_sizes: FoundSizes | None,
) -> _Found | None:
    from hypothesis.errors import Unsatisfiable

    try:
        found = search.run(examples, seed)
    except Unsatisfiable as exc:
        tried = found_sizes is None and any(
            not isinstance(d, int) for spec in specs for d in spec.dims or ()
        )
        raise InputsRejectedError(
            _unsatisfiable_message(search, specs, found_sizes, tried),
            ("shapes", "dims", "ranges", "samples"),
        ) from exc
    if found is None and search.rejected and search.runs < examples:
        logger.warning(
            "only %d of %d examples ran: the original model rejected %d generated inputs "
            "(last error: %s); value ranges or fixed input shapes may help",
            search.runs,
            examples,
            search.rejected,
            search.last_rejection,
        )
    return found


def _result(
    pair: Pair,
    search: _Search,
    specs: tuple[InputSpec, ...],
    found: _Found | None,
    options: VerifyOptions,
    found_sizes: FoundSizes | None,
    fixed: Mapping[DimKey, int],
) -> VerifyResult:
    counterexample: Mapping[str, Array] | None = None
    path: str | None = None
    final = search.last
    if found is not None:
        final = found.outcome
        counterexample = _frozen_inputs(found.inputs)
        if options.save_counterexample:
            target = options.counterexample_path or _counterexample.default_counterexample_path(
                pair.rewritten.path
            )
            path = _counterexample.save_counterexample(target, found.inputs)
    notes = list(pair.notes)
    if pair.ort_changes_original:
        notes.append(
            f"onnxruntime's {ENABLED} changes the original's result too on some examples; there "
            f"the rewritten model was judged against the original run with {ENABLED}"
        )
    if pair.oracle.unavailable:
        notes.append(pair.oracle.unavailable)
    notes.extend(f"oracle: {note}" for note in pair.oracle.notes)
    if search.size_report is not None and search.size_report.trials:
        notes.append(f"at the sizes the models mention: {search.size_report.describe()}")
    if found is not None and found.outcome.failing_level == ENABLED:
        notes.extend(_optimizer_note(pair))
    inputs = [f"{spec.name}: {spec.describe()}" for spec in specs]
    if fixed:
        given = ", ".join(f"`{_dim_label(key)}` {size}" for key, size in fixed.items())
        inputs.append(f"sizes given: {given}")
    if found_sizes is not None:
        inputs.append(f"sizes found by search: {found_sizes.describe()}")
    result = VerifyResult(
        ok=found is None,
        examples_run=search.runs,
        outputs=_stats(pair, search.figures, final, found is not None),
        counterexample=counterexample,
        counterexample_path=path,
        original_runtime=pair.original_session.runtime,
        rewritten_runtime=pair.rewritten_session.runtime,
        seed=options.inputs.seed,
        examples_rejected=search.rejected,
        shrink_runs=search.shrink_runs,
        message="" if found is None else found.outcome.reason(),
        inputs=tuple(inputs),
        compare=pair.criterion.compare,
        factor=pair.criterion.factor,
        oracle_runs=pair.oracle.runs,
        failing_level="" if found is None else found.outcome.failing_level,
        extra_notes=tuple(notes),
    )
    logger.info("%s", result.summary())
    if path is not None:
        logger.info("counterexample saved to %s", path)
    return result


def _optimizer_note(pair: Pair) -> list[str]:
    """What onnxruntime's optimizer does to the rewritten model and not to the original.

    Said when the models agree with onnxruntime's optimizations off and disagree with
    `ORT_ENABLE_ALL` on: the reader learns which of its fusions the rewritten form lets fire
    (or keeps from firing). Nothing when onnxruntime cannot show its optimized graphs.
    """
    try:
        difference = loaded_difference(pair.original, pair.rewritten, pair.providers)
    except VerifyError as exc:
        logger.info("cannot compare onnxruntime's optimized graphs: %s", exc)
        return []
    if not difference:
        return [
            f"onnxruntime's {ENABLED} optimizer leaves the same op counts in both models: the "
            "difference is in how its kernels compute them, not in which fusions fire"
        ]
    described = describe_optimizer_difference(difference)
    return [
        f"onnxruntime's {ENABLED} optimizer treats the two models differently (op counts of "
        f"its optimized graphs, beyond what the rewrite changed): {described} in the "
        "rewritten model; its fusions need not round as the ops they replace do"
    ]


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
    criterion: Criterion | None = None,
    runtime: RuntimeOptions | None = None,
) -> VerifyResult:
    """Compare the two models on one given input set (e.g. a saved counterexample).

    `criterion` judges float outputs as in `check_equivalence`; `runtime` says how the
    models run (by default without the `ORT_ENABLE_ALL` run: one input set replays a
    disagreement, it does not search for one).

    Raises:
        VerifyError: as `check_equivalence`, or the original model fails on `inputs`.
    """
    criterion = criterion or Criterion()
    runtime = runtime or RuntimeOptions(ort_enable_all=False)
    pair = Pair(
        load_model(original, "original"),
        load_model(rewritten, "rewritten"),
        criterion=criterion,
        providers=runtime.providers,
        ort_enable_all=runtime.ort_enable_all,
    )
    feeds = dict(inputs)
    try:
        outcome = pair.compare(feeds)
    except OriginalFailedError as exc:
        raise VerifyError(f"the original model fails on the given inputs: {exc}") from exc
    figures = _Figures(pair.output_names, pair.levels)
    figures.record(outcome)
    return VerifyResult(
        ok=outcome.ok,
        examples_run=1,
        outputs=_stats(pair, figures, outcome, not outcome.ok),
        counterexample=None if outcome.ok else _frozen_inputs(feeds),
        counterexample_path=None,
        original_runtime=pair.original_session.runtime,
        rewritten_runtime=pair.rewritten_session.runtime,
        message=outcome.reason(),
        compare=criterion.compare,
        factor=criterion.factor,
        oracle_runs=pair.oracle.runs,
        failing_level=outcome.failing_level,
        extra_notes=tuple(_optimizer_note(pair)) if outcome.failing_level == ENABLED else (),
    )
