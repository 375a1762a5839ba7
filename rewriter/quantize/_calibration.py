"""Collecting calibration statistics: run the original model on samples, watch every value.

`collect_calibration(model, samples)` runs the model with onnxruntime (optimizations off, so
every value of the graph exists) with each float32 value of the main graph made an output,
on each sample, and summarizes what each value held (`rewriter.engine.ValueStatistics`):
its range, a histogram for the percentile and entropy methods, and for the activations of
MatMul and Gemm with constant weights the mean magnitude per input channel and a few rows
(for AWQ). Two passes over the samples: the histogram's range is the first pass's.

Samples are mappings of input name to array, as verification's `--inputs` takes them: one
sample, or several stacked along a new first axis.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np

import ir
from rewriter.engine import (
    CALIBRATION_METHODS,
    HISTOGRAM_BINS,
    KEPT_ROWS,
    Calibration,
    ValueStatistics,
    dtype_of,
    is_const,
)
from rewriter.verification import (
    ModelSource,
    RunError,
    VerifyError,
    analyze_inputs,
    load_model,
    open_session,
    split_samples,
)

Array = np.ndarray


@dataclasses.dataclass(frozen=True)
class CalibrationSamples:
    """Samples to gather calibration statistics from, on the model the approximate rules see.

    A staged run (`RewriteOptions.calibration_samples`) runs the float model it has made (the exact
    rules' fixed point) on them, so every value the approximate rules meet has statistics.

    Attributes:
        samples: input sets, `{input name: array}` (several stacked along a new first axis
            count as several).
        method: how ranges come from the statistics when a rule names no method ("minmax",
            "percentile" or "entropy"); None: the run's default (`calibration_method`), the
            99.99th percentile under the int8 preset, the smallest and largest value otherwise.
        percentile: the percentile of the "percentile" method; None: the default's (99.99
            for the int8 preset's default, else 99.999).
        bias_correction: under the int8 preset, correct each quantized Conv's bias so that
            its mean output per channel on the samples is the float model's
            (`rewriter.quantize.correct_biases`; `--no-bias-correction` turns it off).
        first_layers_float: under the int8 preset, keep float the layers that compute
            first on the model's inputs (`rewriter.quantize.first_layers`).
    """

    samples: tuple[Mapping[str, object], ...]
    method: str | None = None
    percentile: float | None = None
    bias_correction: bool = True
    first_layers_float: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "samples", tuple(self.samples))
        if not self.samples:
            raise ValueError("calibration needs at least one sample")
        if self.method is not None and self.method not in CALIBRATION_METHODS:
            known = ", ".join(CALIBRATION_METHODS)
            raise ValueError(f"unknown calibration method {self.method!r} (known: {known})")
        if self.percentile is not None and not 0.0 < self.percentile <= 100.0:
            raise ValueError(f"a percentile is in (0, 100], got {self.percentile}")
        for index, sample in enumerate(self.samples):
            for name, value in sample.items():
                array = np.asarray(value)
                if array.dtype.kind in "fc" and not np.all(np.isfinite(array)):
                    # Ranges from NaN or infinity say nothing; the layer would stay float.
                    raise ValueError(
                        f"calibration sample {index + 1}: input `{name}` holds NaN or "
                        "infinite values; calibration needs finite samples"
                    )

    def resolved(self, quantize: str | None) -> tuple[str, float]:
        """The method and percentile a run with preset `quantize` (or none) calibrates with."""
        return calibration_method(self.method, self.percentile, quantize)


# The int8 preset's activation ranges when the caller names no method: the 99.99th percentile
# of each value's elements, not their extremes. Trained CNNs' feature maps have long thin
# tails (a few pixels of a page's edge, one strong stroke) that stretch a min-max range, and
# every other element of the map is then rounded to fewer of the 256 levels. Measured on the
# PP-OCRv4 recognizer (rendered pages; benchmarks/RESULTS.md): CTC frames agreeing with float
# 97.5% with min-max, 98.7% at the 99.99th percentile, 97.1% at the 99.9th (clipping then
# costs more than the finer steps gain), 89% with the entropy method (its symmetric
# thresholds clip the one-sided tails of HardSwish outputs). Static int8 in the preset is
# for Conv only (MatMul and Gemm are dynamic: their ranges are measured at run time), so the
# outliers that make percentiles harmful on transformer activations do not meet it. The
# `--rules` route keeps min-max: its rules also quantize MatMul activations statically.
PRESET_METHOD = ("percentile", 99.99)
# The percentile of the "percentile" method when the caller names the method but no percentile.
DEFAULT_PERCENTILE = 99.999


def calibration_method(
    method: str | None, percentile: float | None, quantize: str | None
) -> tuple[str, float]:
    """The (method, percentile) of a run: the caller's, else the preset's or min-max default.

    `quantize` is the run's preset (`RewriteOptions.quantize`), None without one.
    """
    if method is None and quantize == "int8":
        chosen, default = PRESET_METHOD
        return chosen, default if percentile is None else percentile
    return method or "minmax", DEFAULT_PERCENTILE if percentile is None else percentile


def collect_calibration(
    model: ModelSource,
    samples: Sequence[Mapping[str, object]],
    *,
    method: str = "minmax",
    percentile: float = 99.999,
) -> Calibration:
    """Statistics of every float32 value of `model`'s main graph over `samples`.

    `method` and `percentile` are how rules that name no method turn them into ranges.

    Raises:
        VerifyError: no samples, samples that do not fit the model's inputs, or a model that
            onnxruntime cannot run on them.
    """
    if method not in CALIBRATION_METHODS:
        known = ", ".join(CALIBRATION_METHODS)
        raise VerifyError(f"unknown calibration method {method!r} (known: {known})")
    if not 0.0 < percentile <= 100.0:
        raise VerifyError(f"a percentile is in (0, 100], got {percentile}")
    loaded = load_model(model, "calibrated")
    watched = ir.from_onnx(ir.to_onnx(loaded.model))
    ir.infer_types(watched)
    specs = analyze_inputs(watched, watched)
    arrays = [{name: np.asarray(value) for name, value in sample.items()} for sample in samples]
    feeds = split_samples(arrays, specs)
    if not feeds:
        raise VerifyError("calibration needs at least one sample")
    names = _watch_float_values(watched)
    activations = _matmul_activations(watched)
    session = open_session(load_model(watched, "calibrated"))
    low: dict[str, float] = {}
    high: dict[str, float] = {}
    channel_sums: dict[str, Array] = {}
    channel_counts: dict[str, int] = {}
    rows: dict[str, list[Array]] = {}
    for feed in feeds:
        for name, array in _run(session, feed, names):
            low[name] = min(low.get(name, np.inf), float(array.min(initial=np.inf)))
            high[name] = max(high.get(name, -np.inf), float(array.max(initial=-np.inf)))
            if name in activations and array.ndim >= 1 and array.size:
                flat = array.reshape(-1, array.shape[-1]).astype(np.float64)
                sums = np.abs(flat).sum(axis=0)
                if name in channel_sums and channel_sums[name].shape != sums.shape:
                    continue
                channel_sums[name] = channel_sums.get(name, 0) + sums
                channel_counts[name] = channel_counts.get(name, 0) + flat.shape[0]
                kept = sum(r.shape[0] for r in rows.get(name, []))
                if kept < KEPT_ROWS:
                    rows.setdefault(name, []).append(flat[: KEPT_ROWS - kept])
    bounds = {name: max(abs(low[name]), abs(high[name])) for name in low}
    histograms = {name: np.zeros(HISTOGRAM_BINS, dtype=np.int64) for name in low}
    for feed in feeds:
        for name, array in _run(session, feed, names):
            if bounds[name] > 0 and np.isfinite(bounds[name]):
                # In float64: float32 bin arithmetic overflows near float32's largest values.
                counts, _ = np.histogram(
                    array.astype(np.float64),
                    bins=HISTOGRAM_BINS,
                    range=(-bounds[name], bounds[name]),
                )
                histograms[name] += counts
    values = {
        name: ValueStatistics(
            low=low[name],
            high=high[name],
            histogram=histograms[name],
            bound=bounds[name],
            channel_mean_abs=(
                channel_sums[name] / channel_counts[name] if name in channel_sums else None
            ),
            rows=np.concatenate(rows[name]).astype(np.float32) if name in rows else None,
        )
        for name in low
        if np.isfinite(low[name]) and np.isfinite(high[name])
    }
    return Calibration(values, len(feeds), method=method, percentile=percentile)


def _watch_float_values(model: ir.Model) -> list[str]:
    """Make every float32 value of the main graph an output; their names."""
    graph = model.graph
    present = {value.name for value in graph.outputs}
    names = [v.name for v in graph.outputs if _is_float32(v)]
    candidates = list(graph.inputs)
    for node in graph:
        candidates.extend(node.outputs)
    for value in candidates:
        if value.name and value.name not in present and _is_float32(value):
            graph.add_output(value)
            present.add(value.name)
            names.append(value.name)
    return names


def _is_float32(value: ir.Value) -> bool:
    """A float32 value; one known so only from inference gets that type, so it can be an output."""
    found = value.type
    if isinstance(found, ir.TensorType):
        return found.dtype == ir.DataType.FLOAT
    if dtype_of(value) != ir.DataType.FLOAT:
        return False
    value.type = ir.TensorType(ir.DataType.FLOAT)
    return True


def _matmul_activations(model: ir.Model) -> set[str]:
    """Values that MatMul or Gemm multiply by a constant weight (AWQ needs their rows)."""
    found = set()
    for node in model.graph:
        if node.op_type in ("MatMul", "Gemm") and node.domain in ("", "ai.onnx"):
            activation, weight = [*node.inputs, None, None][:2]
            if activation is not None and weight is not None and is_const(weight):
                found.add(activation.name)
    return found


def _run(session: object, feed: Mapping[str, Array], names: list[str]) -> list[tuple[str, Array]]:
    try:
        results = session.run(dict(feed))  # type: ignore[attr-defined]
    except RunError as exc:
        raise VerifyError(f"the model failed on a calibration sample: {exc}") from exc
    return [
        (name, np.asarray(results[name]))
        for name in names
        if isinstance(results.get(name), np.ndarray) and np.asarray(results[name]).size
    ]
