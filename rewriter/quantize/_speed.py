"""The speed check: an approximate layer that makes the model slower goes back to float.

Smaller is not the point of quantizing; faster is. After the layers' options are chosen (all
approximate, or what the accuracy budget kept), the model is timed on onnxruntime with the
session options the caller names (`SpeedCheck`: CPU, ORT_ENABLE_ALL and the machine's threads
by default) against itself with one group of layers put back in float. The layers are grouped
by the rule that rewrote them (one form: dynamic int8 Conv, 4-bit MatMul, ...), so the check
costs one model and one session per group, not per layer; a group whose float version runs
faster by more than `margin` stays float ("kept float: int8 slower by 12%"). Last, the model
is timed against the float original (the model as the caller gave it): when it is still
slower, every layer goes back to float.

Timing: whole-model runs on the same inputs, the two models alternating (A B A B ...) so that
the machine's load falls on both alike, `rounds` pairs after a warm-up run each (more pairs for
models that run in a millisecond or less, up to about a second per comparison). With one
intra-op thread the calling thread's CPU time is measured (onnxruntime then runs the graph on
it), which leaves out waiting for a core on a busy machine; otherwise wall time.

Deciding: each pair gives a ratio (approximate run over the float run next to it, so a change
of load between pairs cancels), and a group goes back to float only when the ratios show it
slower by more than `margin` with 95% confidence: a sign test, whose one-sided lower bound on
the median ratio is an order statistic of the ratios (with 7 pairs, the smallest: every pair
must agree). While the bounds straddle `1 + margin`, the comparison is extended with more pairs
(up to 4x `rounds`); a group still undecided then keeps its approximate form, as not shown
slower. On a loaded machine the medians of a few runs each moved by more than the margin from
one run to the next, so the same model was kept float in one run and quantized in the next;
paired ratios and a confidence bound make the decision one that repeats.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from rewriter._errors import RewriteError
from rewriter.quantize._sites import Layers

LEVELS = ("disabled", "basic", "extended", "all")
# A comparison of two fast models runs more pairs than `rounds`, up to about this long.
_SECONDS_PER_COMPARISON = 1.0
_MOST_ROUNDS = 200
# An undecided comparison grows to at most this many times its pairs.
_MOST_EXTENSION = 4
# One-sided error allowed when calling a group slower (or not slower): 5%.
_ALPHA = 0.05


@dataclasses.dataclass(frozen=True, slots=True)
class SpeedCheck:
    """How the speed check times models (onnxruntime session options and repetitions).

    Attributes:
        threads: intra-op threads (0: onnxruntime's default, the machine's cores).
        level: graph optimization level: "disabled", "basic", "extended" or "all".
        providers: onnxruntime execution providers.
        rounds: timed runs of each model per comparison, alternating with the other's.
        margin: a group goes back to float only when its timed pairs show float faster by
            more than this share with 95% confidence (timing noise must not decide).
        samples: inputs to time on (the first is used); empty: the caller's default.
        enabled: False skips the check (`--no-speed-check`).
        progress: called with a few words as each group is timed (for a status line).
    """

    threads: int = 0
    level: str = "all"
    providers: tuple[str, ...] = ("CPUExecutionProvider",)
    rounds: int = 7
    margin: float = 0.03
    samples: tuple[Mapping[str, np.ndarray], ...] = ()
    enabled: bool = True
    progress: Callable[[str], None] | None = dataclasses.field(default=None, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "samples", tuple(self.samples))
        object.__setattr__(self, "providers", tuple(self.providers))
        if self.level not in LEVELS:
            raise ValueError(f"level must be one of {', '.join(LEVELS)}, got {self.level!r}")
        if isinstance(self.threads, bool) or self.threads < 0:
            raise ValueError(f"threads must be an int >= 0, got {self.threads!r}")
        if self.rounds < 1:
            raise ValueError(f"rounds must be at least 1, got {self.rounds!r}")
        if not 0.0 <= self.margin < 1.0:
            raise ValueError(f"margin must be in [0, 1), got {self.margin!r}")

    def describe(self) -> str:
        """`onnxruntime CPU, ORT_ENABLE_ALL, all threads`."""
        providers = ", ".join(p.removesuffix("ExecutionProvider") for p in self.providers)
        level = {"disabled": "ORT_DISABLE_ALL"}.get(self.level, f"ORT_ENABLE_{self.level.upper()}")
        threads = (
            "all threads"
            if self.threads == 0
            else f"{self.threads} thread" + ("s" * (self.threads != 1))
        )
        return f"onnxruntime {providers}, {level}, {threads}"


@dataclasses.dataclass(frozen=True, slots=True)
class GroupTiming:
    """One group of layers (one rule) timed approximate against float."""

    rule: str
    layers: tuple[int, ...]
    approximate_ms: float
    float_ms: float
    kept_float: bool
    ratio: float | None = None
    bounds: tuple[float, float] = (0.0, float("inf"))
    pairs: int = 0

    @property
    def slower_by(self) -> float:
        """How much slower the approximate version is (negative: faster).

        The median of the pairs' ratios when measured in pairs, else the ratio of the medians.
        """
        if self.ratio is not None:
            return self.ratio - 1.0
        return self.approximate_ms / self.float_ms - 1.0 if self.float_ms > 0 else 0.0


@dataclasses.dataclass(frozen=True, slots=True)
class SpeedResult:
    """What the speed check measured and put back in float."""

    check: SpeedCheck
    float_ms: float
    final_ms: float
    groups: tuple[GroupTiming, ...]
    seconds: float
    notes: tuple[str, ...] = ()

    @property
    def ratio(self) -> float:
        """The final model's latency over the float model's."""
        return self.final_ms / self.float_ms if self.float_ms > 0 else 1.0

    @property
    def slower(self) -> dict[int, float]:
        """Layer -> how much slower its approximate version was, for the layers kept float."""
        return {
            layer: group.slower_by
            for group in self.groups
            if group.kept_float
            for layer in group.layers
        }

    def summary(self) -> str:
        """One line: the latency ratio and what was kept float."""
        from rewriter.quantize._budget import kept_float_reason

        text = (
            f"speed: {self.ratio:.2f}x the float model's latency ({self.final_ms:.2f} ms against "
            f"{self.float_ms:.2f} ms; {self.check.describe()})"
        )
        kept = [g for g in self.groups if g.kept_float]
        for group in kept:
            count = f"{len(group.layers)} layer{'s' * (len(group.layers) != 1)}"
            text += f"; {kept_float_reason(group.rule, group.slower_by)} ({count}, `{group.rule}`)"
        return text

    def to_json(self) -> dict[str, object]:
        """Everything measured, ready for json.dump."""
        return {
            "summary": self.summary(),
            "session": self.check.describe(),
            "float_ms": self.float_ms,
            "final_ms": self.final_ms,
            "ratio": self.ratio,
            "seconds": self.seconds,
            "groups": [
                {
                    "rule": g.rule,
                    "layers": list(g.layers),
                    "approximate_ms": g.approximate_ms,
                    "float_ms": g.float_ms,
                    "slower_by": g.slower_by,
                    "ratio_bounds": list(g.bounds),
                    "pairs": g.pairs,
                    "kept_float": g.kept_float,
                }
                for g in self.groups
            ],
            "notes": list(self.notes),
        }


Build = Callable[[Mapping[int, int | None]], bytes]
"""Builds the model (ONNX bytes) with the given option per layer (None: float)."""


class _Timer:
    """Sessions of models under one set of session options, timed in alternation."""

    def __init__(self, check: SpeedCheck, feeds: Mapping[str, np.ndarray]) -> None:
        self.check = check
        self.feeds = dict(feeds)
        self.clock = time.thread_time if check.threads == 1 else time.perf_counter

    def session(self, model: bytes) -> Any:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.log_severity_level = 3
        level = ort.GraphOptimizationLevel
        options.graph_optimization_level = {
            "disabled": level.ORT_DISABLE_ALL,
            "basic": level.ORT_ENABLE_BASIC,
            "extended": level.ORT_ENABLE_EXTENDED,
            "all": level.ORT_ENABLE_ALL,
        }[self.check.level]
        options.intra_op_num_threads = self.check.threads
        try:
            session = ort.InferenceSession(model, options, providers=list(self.check.providers))
            session.run(None, self.feeds)  # warm-up: first-run allocations are not timed
        except Exception as exc:  # onnxruntime's error classes are not importable types
            raise RewriteError(f"speed check: onnxruntime cannot run a model: {exc}") from exc
        return session

    def compare(self, first: Any, second: Any, margin: float) -> Comparison:
        """The two sessions timed in alternating pairs until the ratio is decided.

        At least `rounds` pairs; a fast model gets more, up to about a second per comparison
        (medians of sub-millisecond runs need many to settle). While the confidence bounds
        of the ratio straddle `1 + margin`, more pairs are timed, up to `_MOST_EXTENSION`
        times as many.
        """
        start = time.perf_counter()
        first.run(None, self.feeds)
        second.run(None, self.feeds)
        pair = max(time.perf_counter() - start, 1e-6)
        rounds = max(self.check.rounds, min(_MOST_ROUNDS, int(_SECONDS_PER_COMPARISON / pair)))
        times: tuple[list[float], list[float]] = ([], [])
        target = rounds
        while True:
            while len(times[0]) < target:
                for session, bucket in ((first, times[0]), (second, times[1])):
                    begin = self.clock()
                    session.run(None, self.feeds)
                    bucket.append(self.clock() - begin)
            comparison = Comparison.of(times[0], times[1])
            if not comparison.undecided(margin) or target >= _MOST_EXTENSION * rounds:
                return comparison
            target = min(_MOST_EXTENSION * rounds, 2 * target)


@dataclasses.dataclass(frozen=True, slots=True)
class Comparison:
    """Two models timed in pairs: medians, and the median ratio with its confidence bounds."""

    first_ms: float
    second_ms: float
    ratio: float
    bounds: tuple[float, float]
    pairs: int

    @classmethod
    def of(cls, first: Sequence[float], second: Sequence[float]) -> Comparison:
        """From the seconds of each run, `first[i]` and `second[i]` timed one after the other."""
        ratios = sorted(
            a / b if b > 0 else float("inf") for a, b in zip(first, second, strict=True)
        )
        return cls(
            1000 * statistics.median(first),
            1000 * statistics.median(second),
            statistics.median(ratios),
            median_bounds(ratios),
            len(ratios),
        )

    def slower(self, margin: float) -> bool:
        """The first model is slower than the second by more than `margin`, with confidence."""
        return self.bounds[0] > 1.0 + margin

    def undecided(self, margin: float) -> bool:
        """The bounds straddle `1 + margin`: neither slower nor not slower is shown."""
        return self.bounds[0] <= 1.0 + margin < self.bounds[1]


def median_bounds(ordered: Sequence[float], alpha: float = _ALPHA) -> tuple[float, float]:
    """One-sided (1 - alpha) lower and upper bounds on the median of what `ordered` samples.

    Distribution-free (a sign test): the median lies below the k-th smallest sample only if at
    most k - 1 samples fall below it, which has probability P(Binomial(n, 1/2) <= k - 1); the
    bound is the largest order statistic where that is at most `alpha`. Too few samples for
    any bound (fewer than 5 at 5%) give (0, inf).
    """
    n = len(ordered)
    cumulative = 0.0
    index = -1
    for k in range(n):
        cumulative += math.comb(n, k) / 2**n
        if cumulative > alpha:
            break
        index = k
    if index < 0:
        return 0.0, float("inf")
    return ordered[index], ordered[n - 1 - index]


def _groups(layers: Layers, choice: Mapping[int, int | None]) -> list[tuple[str, list[int]]]:
    """The approximate layers grouped by the rule of their chosen option, in layer order."""
    groups: dict[str, list[int]] = {}
    for layer in layers:
        option = choice.get(layer.index)
        if option is not None:
            groups.setdefault(layer.options[option].rule, []).append(layer.index)
    return list(groups.items())


def check_speed(
    layers: Layers,
    choice: Mapping[int, int | None],
    build: Build,
    feeds: Mapping[str, np.ndarray],
    check: SpeedCheck,
    reference: bytes | None = None,
) -> tuple[dict[int, int | None], SpeedResult]:
    """The choice with the slower groups put back in float, and what was measured.

    `reference` is the float model the final model is timed against (the caller's original;
    None: the float model `build({})` gives).
    """
    progress = check.progress
    start = time.perf_counter()
    timer = _Timer(check, feeds)
    current = dict(choice)
    groups = _groups(layers, current)
    timings: list[GroupTiming] = []
    notes: list[str] = []
    current_session = timer.session(build(current))
    for number, (rule, members) in enumerate(groups, 1):
        if progress is not None:
            progress(f"speed check: group {number}/{len(groups)} (`{rule}`, {len(members)} layers)")
        without = {**current, **dict.fromkeys(members)}
        other = timer.session(build(without))
        measured = timer.compare(current_session, other, check.margin)
        slower = measured.slower(check.margin)
        timings.append(_timing(rule, members, measured, slower))
        if slower:
            current, current_session = without, other
    float_session = timer.session(reference if reference is not None else build({}))
    measured = timer.compare(current_session, float_session, check.margin)
    final_ms, float_ms = measured.first_ms, measured.second_ms
    if any(option is not None for option in current.values()) and measured.slower(check.margin):
        notes.append(
            f"every layer kept float: the approximate model was still slower by "
            f"{100 * (measured.ratio - 1):.0f}% than the float one"
        )
        members = [index for index, option in current.items() if option is not None]
        # Named after the rules it holds, so that the reason names their precision.
        rules = ", ".join(
            dict.fromkeys(rule for rule, group in groups if set(group) & set(members))
        )
        timings.append(_timing(f"every layer ({rules})", members, measured, True))
        current = dict.fromkeys(current)
        final_ms = float_ms
    seconds = time.perf_counter() - start
    return current, SpeedResult(check, float_ms, final_ms, tuple(timings), seconds, tuple(notes))


def _timing(rule: str, members: Sequence[int], measured: Comparison, kept: bool) -> GroupTiming:
    return GroupTiming(
        rule,
        tuple(members),
        measured.first_ms,
        measured.second_ms,
        kept,
        measured.ratio,
        measured.bounds,
        measured.pairs,
    )


def first_feeds(samples: Sequence[Mapping[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """The first sample, as onnxruntime takes feeds."""
    return {name: np.asarray(value) for name, value in samples[0].items()}
