"""Accuracy metrics of an approximate output against its reference.

Used where a rewrite changes numerics on purpose (quantization, lower precision): a rule's
`approximate snr >= 30` bound in check-rules, and the `--accept METRIC>=VALUE` budget. All
metrics are computed in float64 over every output element at once, so one number describes a
model's outputs however many there are. NaN or infinity in either side where the other has a
different value makes the result the worst possible (a metric never hides a NaN).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np

from rewriter.rules import APPROXIMATION_METRICS

# Metric -> the comparison that means "at least this good". A rule's `approximate` clause
# takes the first four; `top1` (classifier agreement) is for whole models only.
METRICS: dict[str, str] = {**APPROXIMATION_METRICS, "top1": ">="}

_WORST = {"snr": -math.inf, "cosine": -1.0, "max_rel": math.inf, "max_abs": math.inf}


def _flat(arrays: Sequence[np.ndarray]) -> np.ndarray:
    if not arrays:
        return np.zeros(0)
    return np.concatenate([np.asarray(a, dtype=np.float64).ravel() for a in arrays])


def _special_mismatch(reference: np.ndarray, actual: np.ndarray) -> bool:
    """True when NaN or infinity appears on one side where the other differs."""
    ref_special = ~np.isfinite(reference)
    act_special = ~np.isfinite(actual)
    if not (ref_special.any() or act_special.any()):
        return False
    if (ref_special != act_special).any():
        return True
    both = ref_special & act_special
    same = (reference[both] == actual[both]) | (np.isnan(reference[both]) & np.isnan(actual[both]))
    return not bool(same.all())


def measure(metric: str, reference: Sequence[np.ndarray], actual: Sequence[np.ndarray]) -> float:
    """The metric of `actual` against `reference` (lists of arrays of matching shapes).

    snr: 10*log10(sum(ref^2) / sum((ref - act)^2)) in dB (inf when equal); cosine: cosine
    similarity of the flattened outputs (1.0 for two all-zero outputs); max_rel: the largest
    absolute error divided by the largest reference magnitude; max_abs: the largest absolute
    error; top1: the share of rows (last axis) whose argmax agrees, for classifier outputs.
    """
    if metric not in METRICS:
        raise ValueError(f"unknown accuracy metric {metric!r} (known: {', '.join(METRICS)})")
    for ref, act in zip(reference, actual, strict=True):
        if np.shape(ref) != np.shape(act):
            raise ValueError(f"shapes differ: {np.shape(ref)} and {np.shape(act)}")
    if metric == "top1":
        return _top1(reference, actual)
    ref, act = _flat(reference), _flat(actual)
    if _special_mismatch(ref, act):
        return _WORST[metric]
    finite = np.isfinite(ref)
    ref, act = ref[finite], act[finite]
    error = ref - act
    if metric == "max_abs":
        return float(np.max(np.abs(error), initial=0.0))
    if metric == "max_rel":
        scale = float(np.max(np.abs(ref), initial=0.0))
        largest = float(np.max(np.abs(error), initial=0.0))
        if largest == 0.0:
            return 0.0
        return largest / scale if scale > 0.0 else math.inf
    if metric == "snr":
        noise = float(np.dot(error, error))
        if noise == 0.0:
            return math.inf
        signal = float(np.dot(ref, ref))
        return 10.0 * math.log10(signal / noise) if signal > 0.0 else -math.inf
    norms = float(np.linalg.norm(ref)) * float(np.linalg.norm(act))
    if norms == 0.0:
        return 1.0 if not ref.any() and not act.any() else 0.0
    return float(np.dot(ref, act)) / norms


# Parts of one input that `resampled` adds up (or takes the largest of) over the inputs drawn:
# the metrics are functions of these sums, so a bootstrap resample costs no pass over the data.
_SUMMED = {
    "snr": ("signal", "noise"),
    "cosine": ("dot", "ref_norm", "act_norm", "nonzero"),
    "top1": ("agree", "rows"),
}
_LARGEST = {"max_abs": ("error",), "max_rel": ("error", "scale")}


def _parts(metric: str, reference: np.ndarray, actual: np.ndarray) -> list[float]:
    """The parts of one input (one pair of arrays) that `measure` combines, see `resampled`."""
    if metric == "top1":
        agree = _top1([reference], [actual])
        rows = (
            0
            if reference.ndim == 0 or reference.shape[-1] == 0
            else reference.size // reference.shape[-1]
        )
        return [agree * rows, float(rows)]
    ref = np.asarray(reference, dtype=np.float64).ravel()
    act = np.asarray(actual, dtype=np.float64).ravel()
    finite = np.isfinite(ref)
    ref, act = ref[finite], act[finite]
    error = ref - act
    if metric == "max_abs":
        return [float(np.max(np.abs(error), initial=0.0))]
    if metric == "max_rel":
        return [float(np.max(np.abs(error), initial=0.0)), float(np.max(np.abs(ref), initial=0.0))]
    if metric == "snr":
        return [float(np.dot(ref, ref)), float(np.dot(error, error))]
    nonzero = float(ref.any() or act.any())
    return [float(np.dot(ref, act)), float(np.dot(ref, ref)), float(np.dot(act, act)), nonzero]


def _from_parts(metric: str, parts: np.ndarray) -> np.ndarray:
    """The metric from combined parts (one row per resample)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        if metric == "snr":
            signal, noise = parts[:, 0], parts[:, 1]
            value = 10.0 * np.log10(signal / noise)
            value = np.where(signal > 0.0, value, -np.inf)
            return np.where(noise == 0.0, np.inf, value)
        if metric == "cosine":
            norms = np.sqrt(parts[:, 1]) * np.sqrt(parts[:, 2])
            zero = np.where(parts[:, 3] > 0, 0.0, 1.0)
            return np.where(norms == 0.0, zero, parts[:, 0] / norms)
        if metric == "top1":
            return np.where(parts[:, 1] > 0, parts[:, 0] / parts[:, 1], 1.0)
        if metric == "max_abs":
            return parts[:, 0]
        largest, scale = parts[:, 0], parts[:, 1]
        value = np.where(scale > 0.0, largest / scale, np.inf)
        return np.where(largest == 0.0, 0.0, value)


def resampled(
    metric: str,
    reference: Sequence[Sequence[np.ndarray]],
    actual: Sequence[Sequence[np.ndarray]],
    picks: np.ndarray,
) -> np.ndarray:
    """`measure` over the inputs each row of `picks` draws (with repeats), for every row.

    `reference[i]` / `actual[i]` are the outputs on input i; `picks` is [resamples, n] of
    input indices. Equal to measuring each resample's concatenated outputs (sums and maxima
    over the drawn inputs), without passing over the arrays again.
    """
    if metric not in METRICS:
        raise ValueError(f"unknown accuracy metric {metric!r} (known: {', '.join(METRICS)})")
    count = len(reference)
    width = len(_SUMMED.get(metric, _LARGEST.get(metric, ())))
    parts = np.zeros((count, width))
    special = np.zeros(count, dtype=bool)
    for index, (refs, acts) in enumerate(zip(reference, actual, strict=True)):
        for ref, act in zip(refs, acts, strict=True):
            if np.shape(ref) != np.shape(act):
                raise ValueError(f"shapes differ: {np.shape(ref)} and {np.shape(act)}")
            found = np.asarray(_parts(metric, np.asarray(ref), np.asarray(act)))
            if metric in _LARGEST:
                parts[index] = np.maximum(parts[index], found)
            else:
                parts[index] += found
            if metric != "top1":
                special[index] |= _special_mismatch(
                    np.asarray(ref, dtype=np.float64).ravel(),
                    np.asarray(act, dtype=np.float64).ravel(),
                )
    # An input whose specials differ makes every resample that draws it the worst value;
    # its parts (NaN) must not reach the others' sums.
    parts[~np.isfinite(parts).all(axis=1) | special] = 0.0
    counts = np.stack([np.bincount(row, minlength=count) for row in picks])
    if metric in _LARGEST:
        drawn = counts[:, :, None] > 0
        combined = np.where(drawn, parts[None, :, :], -np.inf).max(axis=1)
        combined = np.maximum(combined, 0.0)
    else:
        combined = counts @ parts
    values = _from_parts(metric, combined)
    if metric != "top1":
        values = np.where(counts @ special.astype(np.int64) > 0, _WORST[metric], values)
    return values


def _top1(reference: Sequence[np.ndarray], actual: Sequence[np.ndarray]) -> float:
    agree = total = 0
    for ref, act in zip(reference, actual, strict=True):
        ref, act = np.asarray(ref), np.asarray(act)
        if ref.ndim == 0 or ref.shape[-1] == 0 or ref.size == 0:
            continue
        ref_rows = ref.reshape(-1, ref.shape[-1])
        act_rows = act.reshape(-1, act.shape[-1])
        agree += int(np.sum(np.argmax(ref_rows, axis=-1) == np.argmax(act_rows, axis=-1)))
        total += ref_rows.shape[0]
    return agree / total if total else 1.0


@dataclasses.dataclass(frozen=True)
class Acceptance:
    """`snr>=35`: a metric and the bound a result must meet."""

    metric: str
    bound: float

    @property
    def comparison(self) -> str:
        return METRICS[self.metric]

    def met_by(self, value: float) -> bool:
        if math.isnan(value):
            return False
        return value >= self.bound if self.comparison == ">=" else value <= self.bound

    def __str__(self) -> str:
        return f"{self.metric}{self.comparison}{self.bound:g}"


def parse_acceptance(text: str) -> Acceptance:
    """`snr>=35`, `cosine >= 0.999`, `max_rel<=0.01`, `top1>=0.99` -> Acceptance.

    Raises ValueError with a message meant for users on anything else.
    """
    compact = text.replace(" ", "")
    for comparison in (">=", "<="):
        metric, sep, number = compact.partition(comparison)
        if not sep:
            continue
        if metric not in METRICS:
            known = ", ".join(METRICS)
            raise ValueError(f"unknown accuracy metric {metric!r} in {text!r} (known: {known})")
        expected = METRICS[metric]
        if comparison != expected:
            raise ValueError(f"{metric} takes {expected} (a bound to meet), not {comparison}")
        try:
            bound = float(number)
        except ValueError:
            raise ValueError(f"expected a number after {comparison} in {text!r}") from None
        if math.isnan(bound):
            raise ValueError(f"the bound in {text!r} is not a number")
        return Acceptance(metric, bound)
    raise ValueError(f"expected METRIC>=VALUE or METRIC<=VALUE (e.g. snr>=35), got {text!r}")
