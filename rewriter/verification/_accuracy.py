"""Accuracy against a budget: how far a rewritten model's outputs are from the original's.

Where `check_equivalence` asks "does the rewritten model compute the same function?", this
asks "how close does it come?", for rewrites that change numerics on purpose (quantization,
lower precision): `--accept snr>=35`. The original runs on onnxruntime (graph optimizations
off) as the float reference; the rewritten model runs on the same inputs (also with
`ORT_ENABLE_ALL`, the way it is deployed, unless told not to), and each metric
(`_metrics.measure`) is taken per output and over all outputs at once. The verdict is on the
latter ("all outputs"): every acceptance must hold at every optimization level.

Inputs are the caller's samples (`--inputs`), then `examples` generated ones: plain values
(N(0, 1) floats, integers inside their index or mask ranges, see `_inputs`), never NaN,
infinities or extremes: a budget describes typical inputs, and one infinity makes every
metric the worst. Symbolic dims take sizes drawn per example from 1 to 6 (or the sizes given
or found by the size search when the original refuses those).

`AccuracyData` (the inputs and the original's outputs on them) is computed once and is plain
arrays, so that many candidate models can be scored against it, in other processes too
(`score`).
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

import ir
from rewriter.verification._accuracy_result import (
    ALL_OUTPUTS,
    AccuracyResult,
    MetricRow,
    table_metrics,
)
from rewriter.verification._errors import VerifyError
from rewriter.verification._inputs import (
    DIM_MAX,
    DIM_MIN,
    DimKey,
    Example,
    InputSpec,
    analyze_inputs,
    bound_dims,
    dim_keys,
    materialize,
    plain_example,
    split_samples,
    suggested_sizes,
)
from rewriter.verification._metrics import (
    METRICS,
    Acceptance,
    measure,
    parse_acceptance,
    resampled,
)
from rewriter.verification._options import InputOptions, RuntimeOptions
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
from rewriter.verification._sizes import find_sizes
from rewriter.verification._source import LoadedModel, ModelSource, load_model

logger = logging.getLogger(__name__)

Array = npt.NDArray[np.generic]

_PLAIN_KINDS = ("normal", "uniform", "random", "words")
# Draws per requested example before giving up on inputs the original refuses.
_DRAWS_PER_EXAMPLE = 4


@dataclasses.dataclass(frozen=True)
class AccuracyData:
    """Inputs and the original model's outputs on them (plain arrays: picklable).

    `outputs` names the outputs that are measured (numeric tensors, in graph order);
    `reference[i]` holds their values on `feeds[i]`. `skipped` names outputs no metric
    applies to (strings, sequences).
    """

    feeds: tuple[Mapping[str, Array], ...]
    reference: tuple[Mapping[str, Array], ...]
    outputs: tuple[str, ...]
    inputs: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()
    original_runtime: str = ORT
    seed: int = 0
    rejected: int = 0

    def __len__(self) -> int:
        return len(self.feeds)


def acceptances(accept: Sequence[str | Acceptance]) -> tuple[Acceptance, ...]:
    """`["snr>=35", Acceptance(...)]` -> Acceptances (strings parsed, duplicates kept once).

    Raises:
        ValueError: a malformed acceptance (the message is meant for users), or none given.
    """
    parsed = [a if isinstance(a, Acceptance) else parse_acceptance(a) for a in accept]
    if not parsed:
        raise ValueError("an accuracy budget needs at least one METRIC>=VALUE")
    return tuple(dict.fromkeys(parsed))


def _plain_kind(spec: InputSpec) -> int:
    for kind in _PLAIN_KINDS:
        if kind in spec.kinds:
            return spec.kinds.index(kind)
    return 0


def _example(
    specs: Sequence[InputSpec], sizes: Mapping[DimKey, tuple[int, int]], rng: np.random.Generator
) -> Example:
    """A plain example (`plain_example`) at sizes drawn from `sizes`, values seeded by `rng`."""
    dims = {key: int(rng.integers(*sizes[key], endpoint=True)) for key in dim_keys(specs)}
    base = plain_example(specs, dims)
    recipes = tuple(
        dataclasses.replace(recipe, kind=_plain_kind(spec), seed=int(rng.integers(0, 2**32 - 1)))
        for recipe, spec in zip(base.recipes, specs, strict=True)
    )
    return dataclasses.replace(base, recipes=recipes)


def _runs(session: Session, feeds: Mapping[str, Array]) -> bool:
    try:
        session.run(feeds)
    except RunError:
        return False
    return True


def _size_ranges(
    loaded: LoadedModel,
    session: Session,
    specs: tuple[InputSpec, ...],
    fixed: Mapping[DimKey, int],
) -> dict[DimKey, tuple[int, int]]:
    """Sizes per dim key: given ones fixed, others 1 to 6 unless the original refuses those."""
    keys = dim_keys(specs)
    ranges = {key: (fixed[key], fixed[key]) if key in fixed else (DIM_MIN, DIM_MAX) for key in keys}
    probe = {key: fixed.get(key, 3) for key in keys}
    if not keys or _runs(session, materialize(plain_example(specs, probe), specs)):
        return ranges

    def runs(sizes: Mapping[DimKey, int]) -> bool:
        return _runs(session, materialize(plain_example(specs, sizes), specs))

    found = find_sizes(specs, fixed, suggested_sizes(loaded.model), runs)
    if found is not None:
        ranges.update(found.ranges)
    return ranges


def _measured_outputs(model: ir.Model) -> tuple[tuple[str, ...], tuple[str, ...]]:
    measured: list[str] = []
    skipped: list[str] = []
    for value in model.graph.outputs:
        dtype = value.dtype
        numeric = (
            isinstance(value.type, ir.TensorType)
            and dtype is not None
            and dtype != ir.DataType.STRING
        )
        (measured if numeric else skipped).append(value.name)
    return tuple(measured), tuple(skipped)


def accuracy_data(
    original: ModelSource,
    inputs: InputOptions | None = None,
    providers: Sequence[str] | None = None,
) -> AccuracyData:
    """The inputs (samples, then `examples` generated with `seed`) and the original's outputs.

    Generated inputs hold plain values (no NaN or infinities whatever `special_values`
    says): a measurement judges the typical error, not the edge cases.

    Raises:
        VerifyError: bad samples, ranges, shapes or dims; the original fails on a given
            sample, on every generated input, or cannot be run.
    """
    inputs = inputs or InputOptions()
    examples, seed, samples = inputs.examples, inputs.seed, inputs.samples
    loaded = load_model(original, "original")
    session = open_session(loaded, providers)
    specs = analyze_inputs(loaded.model, loaded.model, inputs.ranges, inputs.shapes)
    fixed = bound_dims(specs, inputs.shapes, inputs.dims)
    outputs, skipped = _measured_outputs(loaded.model)
    feeds: list[dict[str, Array]] = []
    reference: list[dict[str, Array]] = []

    def keep(sample: dict[str, Array], what: str | None) -> bool:
        try:
            result = session.run(sample)
        except RunError as exc:
            if what is not None:
                raise VerifyError(f"the original model fails on {what}: {exc}") from exc
            return False
        feeds.append(sample)
        reference.append({name: np.asarray(result[name]) for name in outputs})
        return True

    given = split_samples(samples, specs)
    for index, sample in enumerate(given):
        keep(sample, f"given sample {index + 1}")
    described = [f"{len(given)} given sample{'s' * (len(given) != 1)}"] if given else []
    rejected = 0
    if examples:
        rng = np.random.default_rng(seed)
        sizes = _size_ranges(loaded, session, specs, fixed)
        made = 0
        for _ in range(examples * _DRAWS_PER_EXAMPLE):
            if made == examples:
                break
            if keep(materialize(_example(specs, sizes, rng), specs), None):
                made += 1
            else:
                rejected += 1
        if not made:
            raise VerifyError(
                "the original model failed on every generated input; give real samples with "
                "--inputs FILE.npz (samples=) or fix sizes with --input-shape / --dim"
            )
        described += [f"{spec.name}: {_plain_description(spec)}" for spec in specs]
        described.append(f"{made} generated example{'s' * (made != 1)} (seed {seed})")
    return AccuracyData(
        tuple(feeds),
        tuple(reference),
        outputs,
        tuple(described),
        skipped,
        session.runtime,
        seed,
        rejected,
    )


def _plain_description(spec: InputSpec) -> str:
    kind = spec.kinds[_plain_kind(spec)]
    return spec.describe().split(";")[0] + f"; {kind} values"


def _level_rows(
    level: str,
    actual: Sequence[Mapping[str, object]],
    data: AccuracyData,
    metrics: Sequence[str],
    bounded: Sequence[str] = (),
    confidence: float | None = None,
) -> list[MetricRow]:
    rows = []
    total_nans = 0
    for name in data.outputs:
        ref = [r[name] for r in data.reference]
        act = [np.asarray(a[name]) for a in actual]
        nans = _new_nans(ref, act)
        total_nans += nans
        rows.append(MetricRow(name, level, _values(metrics, ref, act), _shape(ref), new_nans=nans))
    ref_all = [r[name] for r in data.reference for name in data.outputs]
    act_all = [np.asarray(a[name]) for a in actual for name in data.outputs]
    bounds: tuple[tuple[str, float], ...] = ()
    if confidence is not None:
        per_input = (
            [[r[name] for name in data.outputs] for r in data.reference],
            [[np.asarray(a[name]) for name in data.outputs] for a in actual],
        )
        bounds = tuple(
            (metric, pessimistic_bound(metric, *per_input, confidence=confidence))
            for metric in bounded
        )
    values = _values(metrics, ref_all, act_all)
    rows.append(MetricRow(ALL_OUTPUTS, level, values, bounds=bounds, new_nans=total_nans))
    return rows


def _new_nans(reference: Sequence[Array], actual: Sequence[Array]) -> int:
    """Elements NaN in `actual` where `reference` is not (floats of matching shapes)."""
    count = 0
    for ref, act in zip(reference, actual, strict=True):
        ref_array, act_array = np.asarray(ref), np.asarray(act)
        if act_array.dtype.kind != "f" or ref_array.shape != act_array.shape:
            continue
        reference_nan = np.isnan(ref_array) if ref_array.dtype.kind == "f" else False
        count += int(np.count_nonzero(np.isnan(act_array) & ~reference_nan))
    return count


_RESAMPLES = 200


def pessimistic_bound(
    metric: str,
    reference: Sequence[Sequence[Array]],
    actual: Sequence[Sequence[Array]],
    *,
    confidence: float = 0.9,
    resamples: int = _RESAMPLES,
    seed: int = 0,
) -> float:
    """How bad `metric` may be on other inputs like these: a bootstrap confidence bound.

    `reference[i]` / `actual[i]` are the outputs on input i. The inputs are resampled with
    replacement `resamples` times and the metric taken over each resample (`measure`); the
    result is the `confidence` quantile on the bad side (the lower bound of snr, cosine and
    top1, the upper bound of max_rel and max_abs). With one input it is the metric itself.

    Raises:
        ValueError: an unknown metric, or a confidence outside (0, 1).
    """
    return metric_with_bound(
        metric, reference, actual, confidence=confidence, resamples=resamples, seed=seed
    )[1]


def metric_with_bound(
    metric: str,
    reference: Sequence[Sequence[Array]],
    actual: Sequence[Sequence[Array]],
    *,
    confidence: float = 0.9,
    resamples: int = _RESAMPLES,
    seed: int = 0,
) -> tuple[float, float]:
    """The metric over all inputs and its `pessimistic_bound`, from one pass over the outputs.

    Raises:
        ValueError: an unknown metric, or a confidence outside (0, 1).
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence!r}")
    count = len(reference)
    rng = np.random.default_rng(seed)
    every = np.arange(count)[None, :]
    if count < 2:
        point = float(resampled(metric, reference, actual, every)[0])
        return point, point
    picks = np.stack([rng.integers(0, count, count) for _ in range(resamples)])
    values = resampled(metric, reference, actual, np.concatenate([every, picks]))
    point = float(values[0])
    good_high = METRICS[metric] == ">="
    # The quantile of the bad side: np.quantile handles +-inf (an exact resample is inf dB).
    quantile = 1.0 - confidence if good_high else confidence
    with np.errstate(invalid="ignore"):
        bound = float(np.quantile(values[1:], quantile, method="lower" if good_high else "higher"))
    return point, (min(bound, point) if good_high else max(bound, point))


def _flatten(per_input: Sequence[Sequence[Array]]) -> list[Array]:
    return [array for arrays in per_input for array in arrays]


def _shape(arrays: Sequence[Array]) -> tuple[int | None, ...]:
    """The outputs' common shape, None for a dim whose size differs between inputs."""
    shapes = {np.shape(a) for a in arrays}
    ranks = {len(shape) for shape in shapes}
    if len(ranks) != 1:
        return ()
    return tuple(
        dims.pop() if len(dims := {shape[axis] for shape in shapes}) == 1 else None
        for axis in range(ranks.pop())
    )


def _values(
    metrics: Sequence[str], reference: Sequence[Array], actual: Sequence[Array]
) -> tuple[tuple[str, float], ...]:
    values = []
    for metric in metrics:
        try:
            values.append((metric, measure(metric, reference, actual)))
        except ValueError:  # shapes differ: the worst value, explained by the failure note
            values.append((metric, _worst(metric)))
    return tuple(values)


def _worst(metric: str) -> float:
    return {"snr": -math.inf, "cosine": -1.0, "top1": 0.0}.get(metric, math.inf)


def _run_all(session: Session, data: AccuracyData) -> tuple[list[dict[str, object]], str]:
    """The rewritten model's outputs on every input, or the failure (one line)."""
    results = []
    for index, feeds in enumerate(data.feeds):
        try:
            results.append(session.run(feeds))
        except RunError as exc:
            return [], f"the rewritten model failed on input {index + 1}: {exc}"
    for name in data.outputs:
        for result, ref in zip(results, data.reference, strict=True):
            got = np.asarray(result[name]).shape
            if got != ref[name].shape:
                shapes = f"{got} instead of {ref[name].shape}"
                return [], f"output `{name}` has shape {shapes}"
    return results, ""


def score(
    rewritten: ModelSource,
    data: AccuracyData,
    accept: Sequence[str | Acceptance],
    *,
    ort_enable_all: bool = False,
    providers: Sequence[str] | None = None,
    confidence: float | None = None,
) -> AccuracyResult:
    """Measure `rewritten` against `data` (from `accuracy_data` of the original model).

    With `confidence`, the "all outputs" rows also hold each acceptance metric's
    `pessimistic_bound` at that confidence (`MetricRow.bounds`); the verdict stays on the
    measured values.

    Raises:
        VerifyError: neither runtime can load the rewritten model, or its signature differs.
        ValueError: a malformed acceptance.
    """
    wanted = acceptances(accept)
    loaded = load_model(rewritten, "rewritten")
    inputs = [v.name for v in loaded.model.graph.inputs if not v.is_initializer()]
    expected = list(data.feeds[0]) if data.feeds else inputs
    if sorted(inputs) != sorted(expected):
        raise VerifyError(
            f"the models have different inputs: original {expected}, rewritten {inputs}"
        )
    names = [v.name for v in loaded.model.graph.outputs]
    missing = [name for name in data.outputs if name not in names]
    if missing:
        raise VerifyError(f"the rewritten model has no output `{missing[0]}`")
    metrics = table_metrics(wanted)
    session = open_rewritten(loaded, data.original_runtime, providers)
    sessions: list[tuple[str, Session | None, str]] = [(DISABLED, session, "")]
    notes: list[str] = []
    # A rewritten model onnxruntime cannot load fails every run already.
    loads = not isinstance(session, UnloadableSession)
    if ort_enable_all and loads and session.runtime == ORT:
        try:
            sessions.append((ENABLED, open_optimized(loaded, providers), ""))
        except VerifyError as exc:
            sessions.append((ENABLED, None, str(exc)))
    elif ort_enable_all and loads:
        notes.append(f"{ENABLED} not checked: the rewritten model runs on {session.runtime}")
    rows: list[MetricRow] = []
    failures: dict[str, str] = {}
    for level, level_session, failure in sessions:
        actual: list[dict[str, object]] = []
        if level_session is not None:
            actual, failure = _run_all(level_session, data)
        if failure:
            failures[level] = failure
            worst = tuple((metric, _worst(metric)) for metric in metrics)
            rows.append(MetricRow(ALL_OUTPUTS, level, worst, note=failure))
            continue
        bounded = tuple(dict.fromkeys(a.metric for a in wanted))
        rows.extend(_level_rows(level, actual, data, metrics, bounded, confidence))
    if data.skipped:
        notes.append(f"not measured (no metric applies): {', '.join(data.skipped)}")
    return AccuracyResult.judged(
        wanted,
        tuple(rows),
        examples_run=len(data.feeds),
        seed=data.seed,
        original_runtime=data.original_runtime,
        rewritten_runtime=session.runtime,
        inputs=data.inputs,
        extra_notes=tuple(notes),
    )


def check_accuracy(
    original: ModelSource,
    rewritten: ModelSource,
    accept: Sequence[str | Acceptance],
    inputs: InputOptions | None = None,
    runtime: RuntimeOptions | None = None,
) -> AccuracyResult:
    """Measure `rewritten` against `original` and judge it by the budget `accept`.

    `accept` holds `"snr>=35"`-style strings or `Acceptance` values; the verdict (`ok`) is
    that every one holds over all outputs at every optimization level. Inputs: the
    samples, then `examples` plain generated ones (`seed`); see the module docstring.

    Raises:
        VerifyError: the models cannot be compared (signatures, unknown ops, inputs the
            original refuses).
        ValueError: a malformed acceptance.
    """
    wanted = acceptances(accept)
    runtime = runtime or RuntimeOptions()
    data = accuracy_data(original, inputs, runtime.providers)
    return score(
        rewritten, data, wanted, ort_enable_all=runtime.ort_enable_all, providers=runtime.providers
    )
