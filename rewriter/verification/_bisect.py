"""Finding the first rewrite that broke equivalence, by bisection over a replayed trace.

The caller supplies `build_model_for_prefix(k)`: the model after replaying the first `k`
rewrites of a run (`k = 0` is the untouched model, `k = n_steps` the final one). The original
model runs once on the counterexample; each candidate prefix runs once at most. A prefix is
*bad* when its model disagrees with the original on the counterexample, fails to run on it,
or cannot be loaded at all.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

import ir
from rewriter.verification._check import compare_outputs
from rewriter.verification._errors import VerifyError
from rewriter.verification._runner import RunError, open_session
from rewriter.verification._source import ModelSource, load_model

logger = logging.getLogger(__name__)

Array = npt.NDArray[np.generic]


class _Judge:
    """The original model's outputs on fixed inputs, and a verdict on any candidate model."""

    def __init__(
        self,
        original: ModelSource,
        inputs: Mapping[str, Array],
        rtol: float | None,
        atol: float | None,
        providers: Sequence[str] | None,
    ) -> None:
        loaded = load_model(original, "original")
        self.output_names = tuple(v.name for v in loaded.model.graph.outputs)
        self.inputs = dict(inputs)
        self.rtol = rtol
        self.atol = atol
        self.providers = providers
        try:
            self.expected = open_session(loaded, providers).run(self.inputs)
        except RunError as exc:
            raise VerifyError(f"the original model fails on the given inputs: {exc}") from exc

    def disagreement(self, candidate: ModelSource, step: int) -> str:
        """Why `candidate` disagrees with the original on the inputs; empty if it agrees."""
        try:
            loaded = load_model(candidate, f"model after {step} rewrites")
            names = tuple(v.name for v in loaded.model.graph.outputs)
            if names != self.output_names:
                return f"outputs {list(names)} instead of {list(self.output_names)}"
            session = open_session(loaded, self.providers)
        except (VerifyError, ir.IRError) as exc:
            return str(exc)
        outcome = compare_outputs(
            self.expected, session, self.inputs, self.output_names, self.rtol, self.atol
        )
        return "" if outcome.ok else outcome.reason()


def find_first_bad(
    n_steps: int,
    build_model_for_prefix: Callable[[int], ModelSource],
    original: ModelSource,
    inputs: Mapping[str, Array],
    *,
    rtol: float | None = None,
    atol: float | None = None,
    providers: Sequence[str] | None = None,
) -> int | None:
    """The smallest `k` such that the model after `k` rewrites disagrees with `original`.

    Binary search keeps the invariant "prefix `lo` agrees, prefix `hi` disagrees", so the
    answer `k` always comes with a checked good `k - 1`: rewrite number `k` (trace index
    `k - 1`) is the one that broke equivalence on `inputs`. If the answer is 0, the untouched
    model (prefix 0) already disagrees with `original`, so no rewrite is to blame. With a
    non-monotonic history (a later rewrite undoing the damage) the search still returns a
    prefix where agreement turns into disagreement, not necessarily the earliest such one.

    Returns:
        The first bad prefix length, or None when the final model (`n_steps`) agrees.

    Raises:
        ValueError: `n_steps` is negative.
        VerifyError: the original model fails on `inputs` or cannot be run.
    """
    if n_steps < 0:
        raise ValueError(f"n_steps must be >= 0, got {n_steps}")
    judge = _Judge(original, inputs, rtol, atol, providers)
    verdicts: dict[int, str] = {}

    def is_bad(step: int) -> bool:
        if step not in verdicts:
            verdicts[step] = judge.disagreement(build_model_for_prefix(step), step)
            logger.debug("prefix %d: %s", step, verdicts[step] or "agrees")
        return bool(verdicts[step])

    if not is_bad(n_steps):
        return None
    if n_steps == 0 or is_bad(0):
        return 0
    good, bad = 0, n_steps
    while bad - good > 1:
        middle = (good + bad) // 2
        if is_bad(middle):
            bad = middle
        else:
            good = middle
    assert verdicts.get(bad - 1) == "", "bisection lost its good neighbour"
    logger.info("rewrite %d broke equivalence: %s", bad, verdicts[bad])
    return bad
