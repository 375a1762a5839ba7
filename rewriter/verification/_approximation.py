"""How far an approximate rewrite moved a model's outputs, by an accuracy metric.

`measure_approximation(original, rewritten, metric)` runs both models on examples of plain
values (normally distributed floats, in-range integers and indices: no NaN, infinities or
dtype extremes, which no quantization is meant to keep) and gives the worst value of the
metric over the examples, with that example's inputs. check-rules holds a rule's
`approximate` bound to it.

`find_new_specials(original, rewritten)` looks where plain values do not: on masking inputs
(a fully masked row of the dtype's lowest value, a `(1 - mask) * lowest` mask) a rule that
narrows floats must not give NaN or infinities where the original gives numbers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np

import ir
from rewriter.verification._check import run_model
from rewriter.verification._errors import VerifyError
from rewriter.verification._inputs import (
    DimKey,
    analyze_inputs,
    dim_keys,
    materialize,
    plain_example,
)
from rewriter.verification._metrics import METRICS, measure
from rewriter.verification._source import ModelSource, load_model

Array = np.ndarray

# The size a symbolic dim takes in the examples (big enough for a meaningful metric).
_SYMBOLIC_SIZE = 4


@dataclasses.dataclass(frozen=True)
class ApproximationResult:
    """The worst metric over the examples, and the inputs that gave it."""

    metric: str
    value: float
    examples: int
    worst_inputs: Mapping[str, Array]


def measure_approximation(
    original: ModelSource,
    rewritten: ModelSource,
    metric: str,
    *,
    examples: int = 4,
    seed: int = 0,
) -> ApproximationResult:
    """The worst `metric` of the rewritten model's outputs against the original's.

    Raises:
        VerifyError: a model cannot be run, or an input type cannot be generated.
        ValueError: an unknown metric.
    """
    if metric not in METRICS:
        raise ValueError(f"unknown accuracy metric {metric!r} (known: {', '.join(METRICS)})")
    first = load_model(original, "original")
    second = load_model(rewritten, "rewritten")
    worst: tuple[float, Mapping[str, Array]] | None = None
    better = METRICS[metric]
    for feeds in _plain_feeds(first.model, second.model, max(1, examples), seed):
        try:
            reference = _arrays(run_model(first.model, feeds))
        except VerifyError as exc:
            raise VerifyError(f"the original model cannot be run: {exc}") from exc
        actual = _arrays(run_model(second.model, feeds))
        value = measure(metric, reference, actual)
        is_worse = worst is None or (value < worst[0] if better == ">=" else value > worst[0])
        if is_worse:
            worst = (value, feeds)
    assert worst is not None
    return ApproximationResult(metric, worst[0], max(1, examples), worst[1])


@dataclasses.dataclass(frozen=True)
class NewSpecials:
    """NaN or infinities in the rewritten model's output where the original's is finite."""

    case: str
    output: str
    count: int
    inputs: Mapping[str, Array]

    def describe(self) -> str:
        """`NaN or infinity where the original is finite, on a fully masked row: ...`."""
        elements = f"{self.count} element{'s' * (self.count != 1)}"
        return (
            f"NaN or infinity where the original is finite, on {self.case}: {elements} of "
            f"output `{self.output}`"
        )


def _masking_cases(base: Mapping[str, Array], seed: int) -> list[tuple[str, dict[str, Array]]]:
    """Inputs that expose a narrowing that turns masking values into NaN.

    Attention masks hold the most negative finite value of the dtype (torch.finfo(dtype).min):
    as whole rows of scores (a fully masked row: every key masked) and as `(1 - mask) * lowest`
    (a 0/1 mask times that value). Each float input in turn takes those values, the others
    keep their plain ones.
    """
    rng = np.random.default_rng(seed)
    floats = [name for name, array in base.items() if array.dtype.kind == "f" and array.size]
    cases: list[tuple[str, dict[str, Array]]] = []
    for name in floats:
        array = base[name]
        lowest = np.finfo(array.dtype).min
        if array.ndim >= 1:
            rows = array.copy().reshape(-1, array.shape[-1])
            rows[::2] = lowest
            cases.append(("a fully masked row", {**base, name: rows.reshape(array.shape)}))
        masked = np.where(rng.random(array.shape) < 0.5, 0, lowest).astype(array.dtype)
        cases.append(("a mask of 0 and the lowest value", {**base, name: masked}))
    for mask in floats:
        for big in floats:
            if mask == big or base[mask].shape != base[big].shape:
                continue
            zero_one = (rng.random(base[mask].shape) < 0.5).astype(base[mask].dtype)
            lowest_big = np.full_like(base[big], np.finfo(base[big].dtype).min)
            feeds = {**base, mask: zero_one, big: lowest_big}
            cases.append(("a `(1 - mask) * lowest` mask", feeds))
    return cases


def find_new_specials(
    original: ModelSource, rewritten: ModelSource, *, seed: int = 0
) -> NewSpecials | None:
    """The first masking input on which the rewritten model loses numbers the original has.

    That is NaN or infinity where the original gives a finite number (None: on no input). For
    rules that narrow floats (float16): a value beyond the narrow type's range must not
    become an infinity that turns into NaN downstream (`_masking_cases`).

    Raises:
        VerifyError: an input type cannot be generated.
    """
    first = load_model(original, "original")
    second = load_model(rewritten, "rewritten")
    base = _plain_feeds(first.model, second.model, 1, seed)[0]
    for case, feeds in _masking_cases(base, seed):
        try:
            reference = run_model(first.model, feeds)
        except VerifyError:
            continue  # the original refuses these inputs: nothing to compare
        actual = run_model(second.model, feeds)
        for name, ref in reference.items():
            got = actual.get(name)
            if not isinstance(ref, np.ndarray) or not isinstance(got, np.ndarray):
                continue
            if ref.dtype.kind != "f" or ref.shape != got.shape:
                continue
            bad = int(np.count_nonzero(np.isfinite(ref) & ~np.isfinite(got)))
            if bad:
                return NewSpecials(case, name, bad, feeds)
    return None


def plain_samples(model: ModelSource, count: int, seed: int = 0) -> list[dict[str, Array]]:
    """`count` input sets of plain values for `model` (as measure_approximation draws them).

    What check-rules calibrates an instance of a rule that reads calibration statistics on.
    """
    loaded = load_model(model, "model").model
    return _plain_feeds(loaded, loaded, count, seed)


def _plain_feeds(
    original: ir.Model, rewritten: ir.Model, count: int, seed: int
) -> list[dict[str, Array]]:
    specs = analyze_inputs(original, rewritten, float_extremes=False)
    dims: dict[DimKey, int] = dict.fromkeys(dim_keys(specs), _SYMBOLIC_SIZE)
    base = plain_example(specs, dims)
    feeds = []
    for index in range(count):
        recipes = tuple(
            dataclasses.replace(recipe, seed=seed * 1000 + index) for recipe in base.recipes
        )
        feeds.append(materialize(dataclasses.replace(base, recipes=recipes), specs))
    return feeds


def _arrays(outputs: Mapping[str, object]) -> list[Array]:
    return [np.asarray(value) for value in outputs.values() if isinstance(value, np.ndarray)]


__all__ = [
    "ApproximationResult",
    "NewSpecials",
    "find_new_specials",
    "measure_approximation",
    "plain_samples",
]
