"""Calibration statistics: what a model's values held on sample inputs, by value name.

Quantizing an activation needs its range; the rules read it through the built-ins
`calibrated_range(x, method)` and `awq_scale(x, w, ...)`. The statistics are gathered by
running a model on the user's samples (`rewriter.quantize.collect_calibration`,
`--calibration FILE.npz`: the float model the approximate rules see, in a staged run) and
travel to the rules in `RunOptions.calibration`. The statistics' type lives here, beside the
built-ins that read it (the engine cannot import the quantize package, a client of it).
Loading rules never computes them, and without them a rule that asks gets `unknown` (its
`where` line fails, so it does not fire).

Rewrites rename the values they redefine `NAME/RULE` (the builder's naming), and an exact
rewrite computes the same value: `lookup` strips trailing `/RULE` segments naming loaded rules
to find the original's statistics. A value a rewrite creates (`NAME/RULE/part`) has none.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping

import numpy as np

# Bins of the value histogram (over [-m, m], m the largest magnitude seen; even, so 0 is an edge).
HISTOGRAM_BINS = 2048
# Rows of an activation kept for searches that need real data (AWQ's scale search).
KEPT_ROWS = 64
# Quantization levels the entropy method compares distributions at (as TensorRT's 8-bit).
_ENTROPY_LEVELS = 128

CALIBRATION_METHODS = ("minmax", "percentile", "entropy")
METHODS = CALIBRATION_METHODS


@dataclasses.dataclass(frozen=True)
class ValueStatistics:
    """What one float value held over all calibration samples.

    Attributes:
        low, high: the smallest and largest element seen.
        histogram: counts of elements in HISTOGRAM_BINS equal bins over [-bound, bound].
        bound: the largest magnitude seen (the histogram's half-width).
        channel_mean_abs: mean |x| per index of the last axis (rank >= 1), for AWQ.
        rows: up to KEPT_ROWS rows of the value flattened to [-1, last dim], or None when
            the collector did not keep any (only activations of constant-weight MatMul/Gemm).
    """

    low: float
    high: float
    histogram: np.ndarray
    bound: float
    channel_mean_abs: np.ndarray | None = None
    rows: np.ndarray | None = None

    def range(self, method: str, percentile: float = 99.999) -> tuple[float, float]:
        """The [low, high] range a quantizer should cover, by calibration method."""
        if method == "minmax":
            return self.low, self.high
        if method == "percentile":
            return self._percentile_range(percentile)
        if method == "entropy":
            threshold = self._entropy_threshold()
            return max(self.low, -threshold), min(self.high, threshold)
        raise ValueError(f"unknown calibration method {method!r} (known: {', '.join(METHODS)})")

    def _edges(self) -> np.ndarray:
        return np.linspace(-self.bound, self.bound, HISTOGRAM_BINS + 1)

    def _percentile_range(self, percentile: float) -> tuple[float, float]:
        if not 0.0 < percentile <= 100.0:
            raise ValueError(f"percentile must be in (0, 100], got {percentile}")
        total = float(self.histogram.sum())
        if total == 0.0 or self.bound == 0.0:
            return self.low, self.high
        cumulative = np.cumsum(self.histogram) / total
        tail = (100.0 - percentile) / 100.0
        edges = self._edges()
        low_index = int(np.searchsorted(cumulative, tail, side="right"))
        high_index = int(np.searchsorted(cumulative, 1.0 - tail, side="left"))
        low = float(edges[min(low_index, HISTOGRAM_BINS)])
        high = float(edges[min(high_index + 1, HISTOGRAM_BINS)])
        return max(self.low, min(low, 0.0)), min(self.high, max(high, 0.0))

    def _entropy_threshold(self) -> float:
        """The |x| threshold whose clipped 8-bit distribution is closest (KL) to the original."""
        half = HISTOGRAM_BINS // 2
        magnitudes = self.histogram[half:].astype(np.float64) + self.histogram[:half][::-1]
        if magnitudes.sum() == 0 or self.bound == 0.0:
            return self.bound
        best, best_divergence = half, math.inf
        for stop in range(_ENTROPY_LEVELS, half + 1, 8):
            divergence = _clipped_divergence(magnitudes, stop)
            if divergence < best_divergence:
                best, best_divergence = stop, divergence
        return self.bound * best / half


def _clipped_divergence(magnitudes: np.ndarray, stop: int) -> float:
    """KL(P || Q): P the histogram clipped at bin `stop`, Q its requantization to 128 levels."""
    reference = magnitudes[:stop].copy()
    reference[stop - 1] += magnitudes[stop:].sum()
    groups = np.array_split(np.arange(stop), _ENTROPY_LEVELS)
    expanded = np.zeros(stop)
    for group in groups:
        chunk = magnitudes[group]
        nonzero = chunk != 0
        if nonzero.any():
            expanded[group[nonzero]] = chunk.sum() / nonzero.sum()
    p = reference / reference.sum()
    q_total = expanded.sum()
    if q_total == 0:
        return math.inf
    q = expanded / q_total
    support = p > 0
    if (q[support] == 0).any():
        return math.inf
    return float(np.sum(p[support] * np.log(p[support] / q[support])))


@dataclasses.dataclass(frozen=True)
class Calibration:
    """Statistics by value name, from running the original model on calibration samples.

    Attributes:
        values: the statistics of each float value, by the name it has in the original.
        samples: how many samples were run.
        method: how `calibrated_range(x)` turns statistics into a range when the rule names
            no method: "minmax", "percentile" or "entropy" (`--calibration-method`).
        percentile: the percentile of the "percentile" method.
        renamed_by: the names of the rules whose rewrites may have renamed a value
            `NAME/RULE` (the pass manager fills it in with the rules it runs).
    """

    values: Mapping[str, ValueStatistics]
    samples: int
    method: str = "minmax"
    percentile: float = 99.999
    renamed_by: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        if self.method not in CALIBRATION_METHODS:
            known = ", ".join(CALIBRATION_METHODS)
            raise ValueError(f"unknown calibration method {self.method!r} (known: {known})")
        if not 0.0 < self.percentile <= 100.0:
            raise ValueError(f"a percentile is in (0, 100], got {self.percentile}")

    def lookup(self, name: str) -> ValueStatistics | None:
        """The statistics of the value named `name`, or of the value a rewrite renamed so."""
        rule_names = self.renamed_by
        found = self.values.get(name)
        while found is None and "/" in name:
            name, _, last = name.rpartition("/")
            # The builder names a redefined value NAME/RULE, NAME/RULE_2 when that is taken.
            if last not in rule_names and re.sub(r"_[0-9]+$", "", last) not in rule_names:
                return None
            found = self.values.get(name)
        return found
