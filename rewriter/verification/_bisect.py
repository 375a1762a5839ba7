"""Finding the first step that broke equivalence, by bisection over a replayed trace.

The caller supplies `build_model_for_prefix(k)`: the model after replaying the first `k`
steps of a run (a step is a rule's rewrite or a built-in pass's change, `TraceEntry.step`;
`k = 0` is the untouched model, `k = n_steps` the final one). The original
model runs once on the counterexample, and so does the float64 oracle when an output needs it;
each candidate prefix runs once at most. A prefix is *bad* when its model disagrees with the
original on the counterexample by the same criterion as the verification (accuracy against
the oracle, or direct), fails to run on it, or cannot be loaded at all. With `level`
"ORT_ENABLE_ALL" the candidates run with onnxruntime's optimizations on: the search then finds
the first step after which onnxruntime's own optimizations break the model.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

import ir
from rewriter.verification._check import run_level
from rewriter.verification._compare import Criterion
from rewriter.verification._errors import VerifyError
from rewriter.verification._judge import Oracle, Reference
from rewriter.verification._runner import (
    DISABLED,
    ENABLED,
    RunError,
    Session,
    open_optimized,
    open_rewritten,
    open_session,
)
from rewriter.verification._source import ModelSource, load_model

logger = logging.getLogger(__name__)

Array = npt.NDArray[np.generic]


class _Judge:
    """The original model's outputs on fixed inputs, and a verdict on any candidate model."""

    def __init__(
        self,
        original: ModelSource,
        inputs: Mapping[str, Array],
        criterion: Criterion,
        providers: Sequence[str] | None,
        level: str,
    ) -> None:
        loaded = load_model(original, "original")
        self.output_names = tuple(v.name for v in loaded.model.graph.outputs)
        self.criterion = criterion
        self.providers = providers
        self.level = level
        feeds = dict(inputs)
        session = open_session(loaded, providers)
        self.original_runtime = session.runtime
        try:
            expected = session.run(feeds)
        except RunError as exc:
            raise VerifyError(f"the original model fails on the given inputs: {exc}") from exc
        self.reference = Reference(feeds, expected, Oracle(loaded, providers))

    def _session(self, candidate: ModelSource, step: int) -> Session | str:
        try:
            loaded = load_model(candidate, f"model after {step} steps")
            names = tuple(v.name for v in loaded.model.graph.outputs)
            if names != self.output_names:
                return f"outputs {list(names)} instead of {list(self.output_names)}"
            if self.level == ENABLED:
                return open_optimized(loaded, self.providers)
            return open_rewritten(loaded, self.original_runtime, self.providers)
        except (VerifyError, ir.IRError) as exc:
            return str(exc)

    def disagreement(self, candidate: ModelSource, step: int) -> str:
        """Why `candidate` disagrees with the original on the inputs; empty if it agrees."""
        session = self._session(candidate, step)
        if isinstance(session, str):
            return session
        outcome = run_level(self.reference, session, self.output_names, self.criterion)
        return "" if outcome.ok else outcome.reason()


def find_first_bad(
    n_steps: int,
    build_model_for_prefix: Callable[[int], ModelSource],
    original: ModelSource,
    inputs: Mapping[str, Array],
    *,
    compare: str = "accuracy",
    factor: float = 8.0,
    rtol: float | None = None,
    atol: float | None = None,
    level: str = DISABLED,
    providers: Sequence[str] | None = None,
) -> int | None:
    """The smallest `k` such that the model after `k` steps disagrees with `original`.

    Binary search keeps the invariant "prefix `lo` agrees, prefix `hi` disagrees", so the
    answer `k` always comes with a checked good `k - 1`: step number `k`
    (`Trace.step_entries(k)`) is the one that broke equivalence on `inputs`. If the answer
    is 0, the untouched model (prefix 0) already disagrees with `original`, so no step is to
    blame. With a non-monotonic history (a later step undoing the damage) the search still
    returns a prefix where agreement turns into disagreement, not necessarily the earliest.

    Returns:
        The first bad prefix length, or None when the final model (`n_steps`) agrees.

    `compare`, `factor`, `rtol` and `atol` are the verification's criterion; `level` the
    optimization level that disagreed ("ORT_DISABLE_ALL" or "ORT_ENABLE_ALL").

    Raises:
        ValueError: `n_steps` is negative, or the criterion is out of range.
        VerifyError: the original model fails on `inputs` or cannot be run.
    """
    if n_steps < 0:
        raise ValueError(f"n_steps must be >= 0, got {n_steps}")
    criterion = Criterion(compare=compare, factor=factor, rtol=rtol, atol=atol)
    judge = _Judge(original, inputs, criterion, providers, level)
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
    logger.info("step %d broke equivalence: %s", bad, verdicts[bad])
    return bad


def load_failure(
    candidate: ModelSource, *, level: str = DISABLED, providers: Sequence[str] | None = None
) -> str | None:
    """Why onnxruntime cannot load `candidate` (its own error, on one line), or None.

    None also when the model loads, or when it holds an op onnxruntime does not know (the
    reference evaluator runs those: such a model is not refused for it). `level` as in
    `find_first_bad`.
    """
    try:
        loaded = load_model(candidate, "model")
        if level == ENABLED:
            open_optimized(loaded, providers)
        else:
            open_session(loaded, providers)
    except (VerifyError, ir.IRError) as exc:
        text = str(exc)
        found = _CANNOT_LOAD.search(text)
        return (text[found.end() :] if found else text).rstrip(".")
    return None


# How `open_session` and `open_optimized` word a refusal, before onnxruntime's own error.
_CANNOT_LOAD = re.compile(r"onnxruntime cannot load the model[^:]*: ")
