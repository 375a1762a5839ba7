"""Judging a model's outputs on one input set against the original's (and the oracle's).

`Reference` holds the original model's outputs on one input set; the float64 oracle's outputs
on the same inputs are computed the first time an output needs them (`_compare`: a rewritten
output within a few ULPs of the original's needs no oracle) and then kept, so one input set
runs the oracle at most once however many candidate models are judged on it (bisection).

`Oracle` builds the float64 model and its session only when first asked: a run whose
rewrites changed no rounding never builds it. When it cannot be built or run, outputs are
compared directly with the original's, and the reason is kept for the result's notes.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

import ir
from rewriter.verification._compare import (
    Comparison,
    Criterion,
    compare_accuracy,
    compare_arrays,
    compare_close,
    is_inexact,
    tolerance_for,
)
from rewriter.verification._errors import VerifyError
from rewriter.verification._oracle import oracle_model, widen_feeds, widened_input_names
from rewriter.verification._runner import RunError, Session, first_line, open_session
from rewriter.verification._source import LoadedModel

logger = logging.getLogger(__name__)

Array = npt.NDArray[np.generic]


class Oracle:
    """The original model in float64, built and opened the first time it is needed."""

    def __init__(self, original: LoadedModel, providers: Sequence[str] | None) -> None:
        self._original = original
        self._providers = providers
        self._session: Session | None = None
        self._inputs: frozenset[str] = frozenset()
        self.unavailable = ""
        self.notes: tuple[str, ...] = ()
        self.runs = 0

    @property
    def built(self) -> bool:
        """True once the oracle's session is open."""
        return self._session is not None

    def _open(self) -> Session | None:
        if self._session is not None or self.unavailable:
            return self._session
        try:
            built = oracle_model(self._original.model)
            loaded = LoadedModel(built.model, "the original in float64", None)
            self._session = open_session(loaded, self._providers)
        except (VerifyError, ir.IRError, ValueError, TypeError, RuntimeError) as exc:
            self.unavailable = f"no float64 oracle ({first_line(exc)}); compared directly"
            logger.warning("%s", self.unavailable)
            return None
        self._inputs = widened_input_names(self._original.model)
        self.notes = built.notes
        logger.info("float64 oracle built on %s", self._session.runtime)
        return self._session

    def run(self, feeds: Mapping[str, object]) -> dict[str, object] | None:
        """The oracle's outputs on `feeds` (None when there is no oracle or it failed)."""
        session = self._open()
        if session is None:
            return None
        wide = widen_feeds({k: np.asarray(v) for k, v in feeds.items()}, self._inputs)
        try:
            outputs = session.run(wide)
        except RunError as exc:
            logger.info("the float64 oracle failed on an input set: %s", exc)
            return None
        self.runs += 1
        return outputs


class Reference:
    """The original's outputs on one input set, and the oracle's when first needed."""

    def __init__(
        self,
        feeds: Mapping[str, object],
        expected: Mapping[str, object],
        oracle: Oracle | None,
        *,
        shares: Reference | None = None,
    ) -> None:
        self.feeds = feeds
        self.expected = expected
        self._oracle = oracle
        self._oracle_outputs: dict[str, object] | None = None
        self._asked = False
        self._extreme: bool | None = None
        # Another reference on the same inputs whose oracle outputs this one reuses.
        self._shares = shares
        self._perturbed: dict[str, object] | None = None
        self._perturbed_asked = False

    def with_expected(self, expected: Mapping[str, object]) -> Reference:
        """The same inputs with other expected outputs (the oracle still runs at most once)."""
        return Reference(self.feeds, expected, self._oracle, shares=self)

    @property
    def extreme_inputs(self) -> bool:
        """True when a float input holds a value within 16x of its dtype's largest one.

        (What the extreme examples of `_inputs` draw; the caller's samples may too.)
        """
        if self._extreme is None:
            self._extreme = any(_near_overflow(np.asarray(v)) for v in self.feeds.values())
        return self._extreme

    def oracle_outputs(self) -> dict[str, object] | None:
        """The oracle's outputs on these inputs (run once), or None without an oracle."""
        if self._shares is not None:
            return self._shares.oracle_outputs()
        if not self._asked:
            self._asked = True
            if self._oracle is not None:
                self._oracle_outputs = self._oracle.run(self.feeds)
        return self._oracle_outputs

    def sensitivity(self, name: str) -> float:
        """How far the oracle's output `name` moves when the inputs are rounded once more.

        Measured like an error (`_compare`: per element over `|o| + rms(o)`, the largest);
        0.0 without an oracle. The perturbed oracle runs at most once per input set.
        """
        if self._shares is not None:
            return self._shares.sensitivity(name)
        outputs = self.oracle_outputs()
        if outputs is None or self._oracle is None:
            return 0.0
        if not self._perturbed_asked:
            self._perturbed_asked = True
            self._perturbed = self._oracle.run(_perturbed_feeds(self.feeds))
        moved = None if self._perturbed is None else self._perturbed.get(name)
        exact = outputs.get(name)
        if moved is None or exact is None or isinstance(exact, list) or isinstance(moved, list):
            return 0.0
        return _relative_change(np.asarray(exact), np.asarray(moved))


_PERTURBATION_SEED = 0


def _perturbed_feeds(feeds: Mapping[str, object]) -> dict[str, object]:
    """Float inputs in float64, each element multiplied by `1 + r * eps` (r in [-1, 1]).

    `eps` is the input dtype's machine epsilon: one more rounding of every element.
    """
    import ml_dtypes

    rng = np.random.default_rng(_PERTURBATION_SEED)
    perturbed: dict[str, object] = {}
    for name, value in feeds.items():
        array = np.asarray(value)
        if not is_inexact(array.dtype) or array.dtype.kind == "c" or array.dtype == np.float64:
            perturbed[name] = value
            continue
        eps = float(ml_dtypes.finfo(array.dtype).eps)  # type: ignore[no-untyped-call]
        wide = array.astype(np.float64)
        perturbed[name] = wide * (1.0 + eps * rng.uniform(-1.0, 1.0, size=wide.shape))
    return perturbed


def _relative_change(exact: Array, moved: Array) -> float:
    if exact.shape != moved.shape or not exact.size:
        return 0.0
    with np.errstate(invalid="ignore", over="ignore"):
        o = exact.astype(np.float64)
        p = moved.astype(np.float64)
        finite = np.isfinite(o) & np.isfinite(p)
        if not np.any(finite):
            return 0.0
        scale = float(np.sqrt(np.mean(np.square(o[finite]))))
        if scale == 0.0:
            return 0.0
        change = np.abs(p[finite] - o[finite]) / (np.abs(o[finite]) + scale)
    return float(change.max())


def _near_overflow(array: Array) -> bool:
    if not is_inexact(array.dtype) or array.dtype.kind == "c" or not array.size:
        return False
    import ml_dtypes

    top = float(ml_dtypes.finfo(array.dtype).max)  # type: ignore[no-untyped-call]
    with np.errstate(invalid="ignore", over="ignore"):
        magnitude = np.abs(array.astype(np.float64))
    return bool(np.any(np.isfinite(magnitude) & (magnitude >= top / 16)))


def _direct(
    reference: Reference, expected: object, actual: object, criterion: Criterion
) -> Comparison:
    sample: Any = expected
    if isinstance(sample, list):
        sample = sample[0] if sample else np.zeros(0)
    tolerance = tolerance_for(np.asarray(sample).dtype, criterion.rtol, criterion.atol)
    extreme = not isinstance(expected, list) and reference.extreme_inputs
    return compare_arrays(expected, actual, tolerance, extreme_inputs=extreme)


def judge_output(
    reference: Reference, name: str, actual: object, criterion: Criterion
) -> Comparison:
    """How output `name` of a candidate compares (see `_compare`)."""
    expected = reference.expected[name]
    if isinstance(expected, list) or isinstance(actual, list):
        return _direct(reference, expected, actual, criterion)
    e = np.asarray(expected)
    if not criterion.uses_oracle(e.dtype):
        return _direct(reference, expected, actual, criterion)
    close = compare_close(expected, actual, criterion)
    if close is not None:
        return close
    outputs = reference.oracle_outputs()
    oracle = None if outputs is None else outputs.get(name)
    if oracle is None or isinstance(oracle, list) or np.asarray(oracle).shape != e.shape:
        return _direct(reference, expected, actual, criterion)
    verdict = compare_accuracy(
        oracle, expected, actual, criterion, extreme_inputs=reference.extreme_inputs
    )
    if verdict.ok or "less accurate" not in verdict.reason:
        return verdict
    sensitivity = reference.sensitivity(name)
    if sensitivity <= (verdict.floor or 0.0):
        return verdict
    return compare_accuracy(
        oracle,
        expected,
        actual,
        criterion,
        extreme_inputs=reference.extreme_inputs,
        sensitivity=sensitivity,
    )


def judge_outputs(
    reference: Reference,
    actual: Mapping[str, object],
    names: Sequence[str],
    criterion: Criterion,
) -> tuple[tuple[str, Comparison], ...]:
    """Every output of a candidate, judged."""
    return tuple((name, judge_output(reference, name, actual[name], criterion)) for name in names)
