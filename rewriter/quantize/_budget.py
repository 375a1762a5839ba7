"""The accuracy budget: keep the approximate layers the model can afford, the others float.

A rule with an `approximate` clause (quantization, lower precision) changes numerics on
purpose. With a budget (`RewriteOptions.budget`, `rewrite MODEL --accept snr>=35`), the
staged run (`rewriter.api`) rewrites the float model once with the approximate rules, groups
the rewrites into layers (`_sites`), and this module chooses, per layer, an approximate option
or float:

1. Measure on the tuning inputs, all on one switchable model (`_sensitivity`): every layer
   approximate (its first option), every layer float (the baseline), and each candidate (a
   layer's option) alone, the other layers float. A layer's later options are what milder
   rules write when its first one is left out (int8, else float16, else float), or the same
   rule's other form (`Option.form`: 7-bit int8 weights after 8-bit ones where onnxruntime's
   sums saturate, `rewriter.api`). Layers whose written form computes in float until
   onnxruntime fuses it (static QDQ int8 into QLinearConv) are measured as deployed: the
   switchable model runs with `ORT_ENABLE_ALL` (`Workload.as_deployed`), so the budget sees
   the integer kernel, saturation and rounding included.
2. Rank the candidates by the first acceptance's metric alone, worst (most sensitive) first.
3. Greedy: leave out the k most sensitive candidates for k = 0, 1, ... until the whole model
   meets every acceptance on the tuning inputs (a layer whose options are all left out is
   float). Values of k are tried `width` at a time (the evaluator's processes), and the
   smallest k that meets the budget wins, exactly as one by one would choose.
4. The caller writes the chosen model (`_sites.materialize`) and `finish` checks it on
   independent inputs: generated with another seed, and the held-out half of the caller's
   samples (every second one).

Nothing is rewritten while measuring: the rewrite happened once, and each measurement is a
run of one session with other switch inputs.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rewriter._errors import RewriteError
from rewriter.quantize._budget_types import (
    AccuracyBudget,
    BudgetResult,
    BudgetStep,
    SiteResult,
)
from rewriter.quantize._sensitivity import (
    Candidate,
    Choice,
    Evaluation,
    Evaluator,
    Workload,
)
from rewriter.quantize._sites import Layer, Layers, switch_name
from rewriter.verification import (
    METRICS,
    Acceptance,
    AccuracyData,
    InputOptions,
    VerifyError,
    accuracy_data,
    format_metric,
    score,
)


def _worse(metric: str, value: float, reference: float) -> float:
    """How much worse `value` is than `reference` (positive: worse); NaN when undefined."""
    difference = reference - value if METRICS[metric] == ">=" else value - reference
    return math.nan if math.isnan(difference) else difference


# ---------------------------------------------------------------------------------------------
# Inputs


def _halves(data: AccuracyData) -> tuple[AccuracyData, AccuracyData]:
    """Every second input for tuning, the others held out (both ways when only one)."""
    if len(data) < 2:
        return data, data
    tune = dataclasses.replace(
        data, feeds=data.feeds[::2], reference=data.reference[::2], inputs=("given samples",)
    )
    held = dataclasses.replace(
        data,
        feeds=data.feeds[1::2],
        reference=data.reference[1::2],
        inputs=("held-out given samples",),
    )
    return tune, held


def _joined(parts: Sequence[AccuracyData | None]) -> AccuracyData:
    present = [p for p in parts if p is not None and len(p)]
    first = present[0]
    return dataclasses.replace(
        first,
        seed=present[-1].seed,  # the generated inputs come last: their seed is the one to show
        feeds=tuple(f for p in present for f in p.feeds),
        reference=tuple(r for p in present for r in p.reference),
        inputs=tuple(line for p in present for line in p.inputs),
    )


def budget_inputs(
    source: Any, budget: AccuracyBudget, input_shapes: Mapping[str, tuple[int, ...]]
) -> tuple[AccuracyData, AccuracyData, list[str]]:
    """(tuning inputs, independent inputs for the final check, notes).

    The original's outputs on them are computed once.

    Raises:
        VerifyError: the original cannot be run on the inputs.
    """

    def drawn(examples: int, seed: int, samples: Sequence[Mapping[str, Any]]) -> AccuracyData:
        inputs = InputOptions(
            examples,
            seed,
            samples,
            ranges=budget.input_ranges,
            shapes=input_shapes,
            dims=budget.dims,
        )
        return accuracy_data(source, inputs, budget.providers)

    notes = []
    given: tuple[AccuracyData | None, AccuracyData | None] = (None, None)
    if budget.samples:
        data = drawn(0, budget.seed, budget.samples)
        given = _halves(data)
        if len(data) < 2:
            notes.append("one given sample: the final check reuses it (not independent)")
    tuning: AccuracyData | None = None
    final: AccuracyData | None = None
    if budget.examples:
        tuning = drawn(budget.examples, budget.seed, ())
        final = drawn(budget.examples, budget.seed + 1, ())
    if tuning is None and given[0] is None:
        raise ValueError("an accuracy budget needs examples > 0 or samples")
    return _joined([given[0], tuning]), _joined([given[1], final]), notes


# ---------------------------------------------------------------------------------------------
# Tuning


def _candidates(layers: Layers) -> list[Candidate]:
    return [(layer.index, option) for layer in layers for option in range(len(layer.options))]


def choice_without(layers: Layers, left_out: set[Candidate]) -> dict[int, int | None]:
    """Each layer's first option not left out, None (float) when all are."""
    chosen: dict[int, int | None] = {}
    for layer in layers:
        options = [i for i in range(len(layer.options)) if (layer.index, i) not in left_out]
        chosen[layer.index] = options[0] if options else None
    return chosen


def _ranked(
    candidates: Sequence[Candidate], alone: Mapping[Candidate, Evaluation], metric: str
) -> list[Candidate]:
    """The candidates, most sensitive first (worst metric alone; failures first; ties in order)."""
    order = {candidate: index for index, candidate in enumerate(candidates)}

    def key(candidate: Candidate) -> tuple[float, int]:
        evaluation = alone[candidate]
        if evaluation.failure:
            return (-math.inf, order[candidate])
        value = evaluation.value(metric)
        badness = -value if METRICS[metric] == ">=" else value
        return (-badness if not math.isnan(badness) else -math.inf, order[candidate])

    return sorted(candidates, key=key)


@dataclasses.dataclass
class Decision:
    """What tuning measured and chose, before the final model and its check."""

    layers: Layers
    alone: dict[Candidate, Evaluation]
    ranked: list[Candidate]
    baseline: Evaluation
    steps: list[BudgetStep]
    kept: int
    evaluations: int
    runner: str
    notes: list[str]
    seconds: float = 0.0

    @property
    def choice(self) -> dict[int, int | None]:
        """The options chosen per layer (None: float)."""
        return choice_without(self.layers, set(self.ranked[: self.kept]))

    def reason(self, candidate: Candidate, accept: Sequence[Acceptance]) -> str:
        """Why a left-out candidate was left out: its cost alone, the model's with it."""
        rank = self.ranked.index(candidate) + 1
        before = next((s for s in self.steps if s.left_out == rank - 1), None)
        alone = self.alone[candidate]
        if alone.failure:
            return f"the model with only it approximate failed ({alone.failure})"
        reached = _values_text(before.values, accept, before.bounds) if before else "the budget"
        return (
            f"{_values_text(alone.values, accept)} with only it approximate; with it the "
            f"model reaches {reached}"
        )


Report = Callable[[str], None]


class _Progress:
    """Progress of the measurements: `measured / total, elapsed, about N s left`."""

    def __init__(self, report: Report | None) -> None:
        self.report = report
        self.start = time.perf_counter()
        self.done = 0
        self.total = 0

    def expect(self, count: int) -> None:
        self.total += count

    def advance(self, count: int, what: str) -> None:
        self.done += count
        if self.report is None:
            return
        elapsed = time.perf_counter() - self.start
        text = f"{what}: {self.done}/{self.total} measured, {elapsed:.1f} s"
        if 0 < self.done < self.total:
            left = elapsed / self.done * (self.total - self.done)
            text += f", about {left:.0f} s left"
        self.report(text)


class _Tuning:
    """One tuning run: the evaluator, the candidates and what was measured of them."""

    def __init__(
        self, evaluator: Evaluator, budget: AccuracyBudget, layers: Layers, progress: _Progress
    ) -> None:
        self.evaluator = evaluator
        self.budget = budget
        self.layers = layers
        self.progress = progress
        self.evaluations = 0

    def measure(self, choices: Sequence[Choice], what: str) -> list[Evaluation]:
        """Each choice's evaluation, reported in batches of the evaluator's width."""
        results: list[Evaluation] = []
        width = max(1, self.evaluator.width)
        for start in range(0, len(choices), width):
            batch = choices[start : start + width]
            results.extend(self.evaluator.map(batch))
            self.evaluations += len(batch)
            self.progress.advance(len(batch), what)
        return results

    def sensitivities(self) -> tuple[Evaluation, Evaluation, dict[Candidate, Evaluation]]:
        """Every layer's first option, every layer float, and each candidate alone."""
        candidates = _candidates(self.layers)
        first = {layer.index: 0 for layer in self.layers}
        choices: list[Choice] = [first, {}, *({layer: option} for layer, option in candidates)]
        self.progress.expect(len(choices))
        measured = self.measure(choices, f"sensitivity of {len(candidates)} candidates")
        return measured[0], measured[1], dict(zip(candidates, measured[2:], strict=True))

    def greedy(
        self, ranked: Sequence[Candidate], first: Evaluation
    ) -> tuple[int, list[BudgetStep]]:
        """The fewest most-sensitive candidates to leave out, and every step measured."""
        accept = self.budget.accept
        steps = [_step(0, first, accept)]
        if first.meets(accept):
            return 0, steps
        width = max(1, self.evaluator.width)
        k = 1
        while k <= len(ranked):
            batch = list(range(k, min(k + width, len(ranked) + 1)))
            self.progress.expect(len(batch))
            choices = [choice_without(self.layers, set(ranked[:n])) for n in batch]
            results = self.measure(choices, f"greedy, {batch[0]} of {len(ranked)} left out")
            for n, evaluation in zip(batch, results, strict=True):
                steps.append(_step(n, evaluation, accept))
                if evaluation.meets(accept):
                    return n, steps
            k += width
        return len(ranked), steps


def _step(kept: int, evaluation: Evaluation, accept: Sequence[Acceptance]) -> BudgetStep:
    return BudgetStep(kept, evaluation.values, evaluation.meets(accept), 0, evaluation.bounds)


def _values_text(
    values: Sequence[tuple[str, float]],
    accept: Sequence[Acceptance],
    bounds: Sequence[tuple[str, float]] = (),
) -> str:
    """`snr 35.5 dB`, or with bounds `snr 35.5 dB (at worst 34.9 dB)`."""
    table, worst = dict(values), dict(bounds)
    parts = []
    for a in accept:
        text = f"{a.metric} {format_metric(a.metric, table.get(a.metric, math.nan))}"
        if a.metric in worst:
            text += f" (at worst {format_metric(a.metric, worst[a.metric])})"
        parts.append(text)
    return ", ".join(parts)


def tune(
    switchable: bytes,
    layers: Layers,
    tuning: AccuracyData,
    budget: AccuracyBudget,
    *,
    as_deployed: bool = False,
) -> Decision:
    """Choose each layer's option (`Decision.choice`) on the switchable model's session.

    `as_deployed`: measure with onnxruntime's graph optimizations (`Workload.as_deployed`).

    Raises:
        RewriteError: the switchable model cannot be measured; Ray is asked for but missing or
            unreachable.
    """
    start = time.perf_counter()
    switches = [
        switch_name(layer.index, option) for layer in layers for option in range(len(layer.options))
    ]
    workload = Workload.of(
        switchable,
        tuning,
        budget.accept,
        switches,
        providers=budget.providers,
        confidence=budget.confidence,
        as_deployed=as_deployed,
    )
    progress = _Progress(budget.progress)
    notes: list[str] = []
    if as_deployed:
        notes.append(
            "measured with onnxruntime's graph optimizations (ORT_ENABLE_ALL): DequantizeLinear "
            "-> Conv/MatMul layers run as the integer or 4-bit kernels it fuses them into"
        )
    with Evaluator(workload, jobs=budget.jobs or 1, ray_address=budget.ray_address) as evaluator:
        run = _Tuning(evaluator, budget, layers, progress)
        first, baseline, alone = run.sensitivities()
        if first.failure and "failed on input" in first.failure and baseline.failure:
            raise RewriteError(f"accuracy budget: {baseline.failure}")
        ranked = _ranked(list(alone), alone, budget.ranking_metric)
        if budget.confidence is not None:
            notes.append(
                f"while tuning, a model meets the budget when its {budget.confidence:.0%} "
                f"pessimistic bound over the {len(tuning)} tuning inputs does (bootstrap)"
            )
        if not baseline.meets(budget.accept):
            kept, steps = len(ranked), [_step(len(ranked), baseline, budget.accept)]
            notes.append(
                f"even with every approximate rewrite left out the model reaches only "
                f"{_values_text(baseline.values, budget.accept)} on the tuning inputs"
            )
        else:
            kept, steps = run.greedy(ranked, first)
        runner = evaluator.description
    return Decision(
        layers,
        alone,
        ranked,
        baseline,
        steps,
        kept,
        run.evaluations,
        runner,
        notes,
        time.perf_counter() - start,
    )


# ---------------------------------------------------------------------------------------------
# The outcome


def _precision_word(rule: str) -> str:
    """`int8`, `int4`, `float16` from a rule's name; `approximate` when it names none."""
    for word in ("int8", "int4", "float16", "bfloat16", "fp8"):
        if word in rule:
            return word
    return "approximate"


def kept_float_reason(rule: str, slower_by: float) -> str:
    """`kept float: int8 slower by 12%` (the speed check's reason)."""
    return f"kept float: {_precision_word(rule)} slower by {100 * slower_by:.0f}%"


def _layer_rows(
    decision: Decision,
    final_choice: Mapping[int, int | None],
    budget: AccuracyBudget,
    slower: Mapping[int, float],
) -> tuple[SiteResult, ...]:
    """One row per layer, most sensitive first."""
    metric = budget.ranking_metric
    baseline = decision.baseline
    reference = baseline.value(metric) if not baseline.failure else math.nan
    position = {candidate: index for index, candidate in enumerate(decision.ranked)}
    layers = sorted(decision.layers, key=lambda layer: position[(layer.index, 0)])
    left_out = set(decision.ranked[: decision.kept])
    chosen = next((s for s in decision.steps if s.left_out == decision.kept), None)
    met = f": {_values_text(chosen.values, budget.accept, chosen.bounds)}" if chosen else ""
    rows = []
    for rank, layer in enumerate(layers, 1):
        evaluation = decision.alone[(layer.index, 0)]
        value = evaluation.value(metric) if not evaluation.failure else math.nan
        loss = _worse(metric, value, reference) if math.isfinite(reference) else math.nan
        picked = final_choice.get(layer.index)
        primary = layer.options[0]
        if layer.index in slower:
            reason = kept_float_reason(primary.rule, slower[layer.index])
        elif picked == 0:
            reason = f"the model meets the budget with it approximate{met}"
        elif picked is not None:
            reason = (
                f"`{primary.title}` left out ({decision.reason((layer.index, 0), budget.accept)}); "
                f"`{layer.options[picked].title}` approximates it instead"
            )
        elif (layer.index, 0) in left_out:
            reason = f"too sensitive: {decision.reason((layer.index, 0), budget.accept)}"
        else:
            reason = "kept float"
        rows.append(_site_result(layer, rank, evaluation, loss, picked, reason))
    return tuple(rows)


def _site_result(
    layer: Layer,
    rank: int,
    evaluation: Evaluation,
    loss: float,
    picked: int | None,
    reason: str,
) -> SiteResult:
    primary = layer.options[0]
    entry = primary.entries[0]
    return SiteResult(
        rule=entry.rule,
        anchor=entry.anchor,
        nodes=entry.matched,
        location=entry.location,
        clause=entry.approximate,
        rank=rank,
        alone=evaluation.values,
        loss=loss,
        kept_float=picked is None,
        reason=reason,
        failure=evaluation.failure,
        alternatives=tuple(site for option in layer.options[1:] for site in option.sites),
        applied=layer.options[picked].title if picked is not None else "",
    )


def finish(
    decision: Decision | None,
    final_data: AccuracyData,
    notes: Sequence[str],
    final_model: Any,
    final_choice: Mapping[int, int | None],
    budget: AccuracyBudget,
    slower: Mapping[int, float] | None = None,
) -> BudgetResult:
    """The outcome: the layers as the final model has them, and its independent check.

    `slower` holds the layers the speed check put back in float (layer -> how much slower
    the approximate one was).

    Raises:
        RewriteError: the final model cannot be measured.
    """
    try:
        final = score(
            final_model,
            final_data,
            budget.accept,
            ort_enable_all=budget.ort_enable_all,
            providers=budget.providers,
        )
    except VerifyError as exc:
        raise RewriteError(f"accuracy budget: {exc}") from exc
    if decision is None:
        return BudgetResult(
            budget.accept,
            (),
            (),
            (),
            True,
            final,
            notes=(*notes, "no approximate rule fired: nothing to tune"),
        )
    chosen = next(step for step in decision.steps if step.left_out == decision.kept)
    all_notes = [*notes, *decision.notes]
    if chosen.met and not final.ok:
        reached = _values_text(chosen.values, budget.accept, chosen.bounds)
        all_notes.append(
            f"the budget was met on the tuning inputs ({reached}) but not on the independent "
            "ones: measure on more inputs (--examples, --inputs) or leave a margin in the budget"
        )
    return BudgetResult(
        budget.accept,
        _layer_rows(decision, final_choice, budget, slower or {}),
        decision.baseline.values,
        tuple(decision.steps),
        chosen.met,
        final,
        evaluations=decision.evaluations,
        runner=decision.runner,
        notes=tuple(all_notes),
    )
