"""How far an approximate rewrite moved a model's outputs, by an accuracy metric.

`measure_approximation(original, rewritten, metric)` runs both models on examples of plain
values (normally distributed floats, in-range integers and indices: no NaN, infinities or
dtype extremes, which no quantization is meant to keep) and gives the worst value of the
metric over the examples, with that example's inputs. check-rules holds a rule's
`approximate` bound to it.
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


__all__ = ["ApproximationResult", "measure_approximation", "plain_samples"]
