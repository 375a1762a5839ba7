"""The accuracy budget: keep the approximate rewrites the model can afford, undo the others.

A rule with an `approximate` clause (quantization, lower precision) changes numerics on
purpose. With a budget (`RewriteOptions.budget`, `rewrite MODEL --accept snr>=35`), a run
treats every site such a rule rewrote, `(rule, anchor)` as `TraceEntry.site` names it, as a
candidate:

1. Measure on the tuning inputs: the model with every candidate applied (the first run), the
   model with none (the float baseline: every candidate excluded through
   `RewriteOptions.excluded_sites`), and the model with each candidate alone (all others
   excluded). Leaving a site out can let another approximate rewrite take its nodes (the
   MatMul left float fuses into a Gemm that a Gemm rule quantizes): such a site joins the
   layer of the site it replaces (the one whose own run does not fire it), so a layer is
   kept float or approximate as a whole, and the measurements are taken again.
2. Rank the layers by the first acceptance's metric with that layer alone, worst (most
   sensitive) first.
3. Greedy: keep the k most sensitive layers in float for k = 0, 1, ... until the whole model
   meets every acceptance on the tuning inputs. Values of k are tried `width` at a time in parallel
   (the evaluator's cores), and the smallest k that meets the budget wins, exactly as one by
   one would choose.
4. Rewrite once more with the chosen sites excluded (their skip entries in the trace say
   why), and check the result on independent inputs: generated with another seed, and the
   held-out half of the caller's samples (every second one).

Every measurement is one `_sensitivity.evaluate` call, run serially, on local processes or
on Ray (`_sensitivity.Evaluator`). The outcome is a `BudgetResult` on the `RewriteResult`.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

import ir
from rewriter._errors import RewriteError
from rewriter.api._budget_types import (
    AccuracyBudget,
    BudgetResult,
    BudgetStep,
    SiteResult,
)
from rewriter.api._sensitivity import Evaluation, Evaluator, Site, Workload, default_jobs
from rewriter.dsl import _ast as ast
from rewriter.verification import (
    ALL_OUTPUTS,
    METRICS,
    Acceptance,
    AccuracyData,
    VerifyError,
    accuracy_data,
    format_metric,
    score,
)

if TYPE_CHECKING:
    from rewriter.api._options import RewriteOptions
    from rewriter.api._rewrite import RewriteResult

Array = npt.NDArray[np.generic]

# Rounds of "exclude every candidate; did new approximate sites appear?" before giving up.
_DISCOVERY_ROUNDS = 4


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


def _inputs(
    source: Any, budget: AccuracyBudget, input_shapes: Mapping[str, tuple[int, ...]]
) -> tuple[AccuracyData, AccuracyData, list[str]]:
    """(tuning inputs, independent inputs for the final check, notes)."""
    common: dict[str, Any] = {
        "input_ranges": budget.input_ranges,
        "input_shapes": input_shapes,
        "dims": budget.dims,
        "providers": budget.providers,
    }
    notes = []
    given: tuple[AccuracyData | None, AccuracyData | None] = (None, None)
    if budget.samples:
        data = accuracy_data(source, examples=0, samples=budget.samples, **common)
        given = _halves(data)
        if len(data) < 2:
            notes.append("one given sample: the final check reuses it (not independent)")
    tuning: AccuracyData | None = None
    final: AccuracyData | None = None
    if budget.examples:
        tuning = accuracy_data(source, examples=budget.examples, seed=budget.seed, **common)
        final = accuracy_data(source, examples=budget.examples, seed=budget.seed + 1, **common)
    if tuning is None and given[0] is None:
        raise ValueError("an accuracy budget needs examples > 0 or samples")
    return _joined([given[0], tuning]), _joined([given[1], final]), notes


# ---------------------------------------------------------------------------------------------
# Tuning


def source_snapshot(model: Any, budget: AccuracyBudget) -> str | bytes:
    """The original model as workers load it, taken before the first run changes it.

    Its path, or its ONNX bytes (in-memory models, and Ray, whose workers may not see our
    files).
    """
    if isinstance(model, str | os.PathLike) and budget.ray_address is None:
        return os.fspath(model)
    if isinstance(model, str | os.PathLike):
        model = ir.load(model)
    if isinstance(model, ir.Model):
        return bytes(ir.to_onnx(model).SerializeToString())
    return bytes(model.SerializeToString())


def snapshot_model(snapshot: str | bytes) -> Any:
    """A snapshot as a model source the verifier and `rewrite` accept (a path or a proto)."""
    if isinstance(snapshot, str):
        return snapshot
    import onnx

    return onnx.load_from_string(snapshot)


Layer = tuple[Site, ...]
"""A layer as the report shows it: the site the full run rewrote, then the sites that take
its place when it is left out (another approximate rule on the same nodes)."""


def _ranked(sites: Sequence[Site], alone: Mapping[Site, Evaluation], metric: str) -> list[Site]:
    """The sites, most sensitive first (worst metric alone; failures first; ties in order)."""
    order = {site: index for index, site in enumerate(sites)}

    def key(site: Site) -> tuple[float, int]:
        evaluation = alone[site]
        if evaluation.failure:
            return (-math.inf, order[site])
        value = evaluation.value(metric)
        badness = -value if METRICS[metric] == ">=" else value
        return (-badness if not math.isnan(badness) else -math.inf, order[site])

    return sorted(sites, key=key)


@dataclasses.dataclass
class Decision:
    """What tuning measured and chose, before the final rewrite and its check."""

    layers: list[Layer]
    alone: dict[Site, Evaluation]
    ranked: list[Site]
    baseline: Evaluation
    steps: list[BudgetStep]
    kept: int
    evaluations: int
    runner: str
    notes: list[str]

    def reason(self, site: Site, accept: Sequence[Acceptance]) -> str:
        """Why a left-out site was left out: its cost alone, the model's with it."""
        rank = self.ranked.index(site) + 1
        before = next((s for s in self.steps if s.left_out == rank - 1), None)
        alone = self.alone[site]
        if alone.failure:
            return f"the model with only it approximate failed ({alone.failure})"
        reached = _values_text(before.values, accept, before.bounds) if before else "the budget"
        return (
            f"{_values_text(alone.values, accept)} with only it approximate; with it the "
            f"model reaches {reached}"
        )

    def excluded(self, accept: Sequence[Acceptance]) -> dict[Site, str]:
        """The sites left out, with the reasons the trace records."""
        count = len(self.ranked)
        return {
            site: (
                f"left out by the accuracy budget (sensitive site {rank} of {count}): "
                f"{self.reason(site, accept)}"
            )
            for rank, site in enumerate(self.ranked[: self.kept], 1)
        }


class _Tuning:
    """One tuning run: the evaluator, the candidate sites and what was measured of them."""

    def __init__(
        self,
        evaluator: Evaluator,
        budget: AccuracyBudget,
        first: Evaluation,
        sites: Sequence[Site],
    ) -> None:
        self.evaluator = evaluator
        self.budget = budget
        self.first = first
        self.layers: list[Layer] = [(site,) for site in dict.fromkeys(sites)]
        self.evaluations = 0
        self.notes: list[str] = []

    def measure(self, site_sets: Sequence[frozenset[Site]], what: str) -> list[Evaluation]:
        if self.budget.progress is not None:
            count = f"{len(site_sets)} rewrite{'s' * (len(site_sets) != 1)}"
            self.budget.progress(f"{what}: measuring {count} {self.evaluator.description}")
        self.evaluations += len(site_sets)
        return self.evaluator.map(site_sets)

    def sensitivities(self) -> tuple[Evaluation, dict[Site, Evaluation]]:
        """The float baseline and each site alone; sites are added until none appear.

        A site that appears when every known one is left out joins the layer of the site
        whose own run (every other site left out) does not fire it: that site's rewrite
        took its nodes. It is measured alone like the others, so the greedy can leave the
        first rewrite out and keep the one in its place (int8, else float16, else float).
        """
        for _ in range(_DISCOVERY_ROUNDS):
            sites = [site for layer in self.layers for site in layer]
            every = frozenset(sites)
            sets = [every, *(every - {site} for site in sites)]
            baseline, *alone = self.measure(sets, f"sensitivity of {len(sites)} sites")
            new = [site for site in baseline.fired if site not in every]
            if not new:
                return baseline, dict(zip(sites, alone, strict=True))
            for site in new:
                owners = {sites[i] for i, run in enumerate(alone) if site not in run.fired}
                layer = next((i for i, ls in enumerate(self.layers) if owners & set(ls)), None)
                if layer is None or len(owners) > len(self.layers[layer]):
                    self.layers.append((site,))
                else:
                    self.layers[layer] += (site,)
            self.notes.append(
                f"leaving approximate rewrites out let {len(new)} others take their place "
                "(another rule on the same nodes); they are candidates too"
            )
        raise RewriteError(
            "the accuracy budget cannot settle its candidates: leaving approximate rewrites "
            f"out keeps letting new ones appear (after {_DISCOVERY_ROUNDS} rounds)"
        )

    def greedy(self, ranked: Sequence[Site], baseline: Evaluation) -> tuple[int, list[BudgetStep]]:
        """The fewest most-sensitive sites to leave out, and every step measured."""
        accept = self.budget.accept
        steps = [_step(0, self.first, accept)]
        if self.first.meets(accept):
            return 0, steps
        width = self.evaluator.width
        k = 1
        while k < len(ranked):
            batch = list(range(k, min(k + width, len(ranked))))
            what = f"greedy, {batch[0]} of {len(ranked)} sites left out"
            results = self.measure([frozenset(ranked[:n]) for n in batch], what)
            for n, evaluation in zip(batch, results, strict=True):
                steps.append(_step(n, evaluation, accept))
                if evaluation.meets(accept):
                    return n, steps
            k += width
        steps.append(_step(len(ranked), baseline, accept))
        return len(ranked), steps


def _step(kept: int, evaluation: Evaluation, accept: Sequence[Acceptance]) -> BudgetStep:
    return BudgetStep(
        kept, evaluation.values, evaluation.meets(accept), evaluation.bytes, evaluation.bounds
    )


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
    snapshot: str | bytes,
    ruleset: ast.RuleSet,
    options: RewriteOptions,
    first: RewriteResult,
) -> tuple[Decision | None, AccuracyData, list[str]]:
    """Choose the sites to leave out (`Decision.excluded`).

    Returns the decision (None when no approximate rule fired), the inputs of the final
    check and notes about the inputs.

    Raises:
        RewriteError: Ray is asked for but missing or unreachable; candidates never settle.
        VerifyError: the models cannot be measured (see `verification.accuracy_data`).
    """
    budget = options.budget
    assert budget is not None
    tuning, final_data, notes = _inputs(snapshot_model(snapshot), budget, options.input_shapes)
    sites = first.trace.approximate_sites()
    if not sites:
        return None, final_data, notes
    base = dataclasses.replace(options, budget=None, progress=None, record_subgraphs=False)
    workload = Workload(snapshot, ruleset, base, tuning, budget.accept, budget.confidence)
    measured = score(first.model, tuning, budget.accept, confidence=budget.confidence)
    overall = next(r for r in measured.rows if r.output == ALL_OUTPUTS)
    first_eval = Evaluation(
        frozenset(), overall.values, sites, first.proto.ByteSize(), overall.note, overall.bounds
    )
    jobs = budget.jobs or default_jobs()
    with Evaluator(workload, jobs=jobs, ray_address=budget.ray_address) as evaluator:
        run = _Tuning(evaluator, budget, first_eval, sites)
        baseline, alone = run.sensitivities()
        ranked = _ranked(list(alone), alone, budget.ranking_metric)
        if budget.confidence is not None:
            run.notes.append(
                f"while tuning, a model meets the budget when its {budget.confidence:.0%} "
                f"pessimistic bound over the {len(tuning)} tuning inputs does (bootstrap)"
            )
        if not baseline.meets(budget.accept):
            kept, steps = len(ranked), [_step(len(ranked), baseline, budget.accept)]
            run.notes.append(
                f"even with every approximate rewrite left out the model reaches only "
                f"{_values_text(baseline.values, budget.accept)} on the tuning inputs"
            )
        else:
            kept, steps = run.greedy(ranked, baseline)
        runner = evaluator.description
    return (
        Decision(
            run.layers,
            alone,
            ranked,
            baseline,
            steps,
            kept,
            run.evaluations,
            runner,
            run.notes,
        ),
        final_data,
        notes,
    )


def _layer_results(
    decision: Decision, first: RewriteResult, final: RewriteResult, budget: AccuracyBudget
) -> tuple[SiteResult, ...]:
    """One row per layer, most sensitive first, its status read from the final run's trace."""
    entries = {e.site: e for e in first.trace.entries if e.approximate}
    entries.update({e.site: e for e in final.trace.entries if e.approximate})
    applied = set(final.trace.approximate_sites())
    left_out = set(decision.ranked[: decision.kept])
    metric = budget.ranking_metric
    baseline = decision.baseline
    reference = baseline.value(metric) if not baseline.failure else math.nan
    position = {site: index for index, site in enumerate(decision.ranked)}
    layers = sorted(decision.layers, key=lambda layer: position[layer[0]])
    chosen = next((s for s in decision.steps if s.left_out == decision.kept), None)
    met = f": {_values_text(chosen.values, budget.accept, chosen.bounds)}" if chosen else ""
    results = []
    for rank, layer in enumerate(layers, 1):
        site = layer[0]
        evaluation = decision.alone[site]
        entry = entries.get(site)
        value = evaluation.value(metric) if not evaluation.failure else math.nan
        # Against an exact float baseline (snr inf) a loss has no finite size: shown as "-".
        loss = _worse(metric, value, reference) if math.isfinite(reference) else math.nan
        in_place = [s for s in layer if s in applied]
        if in_place and in_place[0] == site:
            reason = f"the model meets the budget with it approximate{met}"
        elif in_place:
            substitute = in_place[0]
            reason = (
                f"`{site[0]}` left out ({decision.reason(site, budget.accept)}); "
                f"`{substitute[0]}` approximates it instead"
            )
        elif site in left_out:
            reason = f"too sensitive: {decision.reason(site, budget.accept)}"
        else:
            reason = "not applied in the final model (another rewrite took these nodes)"
        results.append(
            SiteResult(
                rule=site[0],
                anchor=site[1],
                nodes=entry.matched if entry is not None else (),
                location=entry.location if entry is not None else "",
                clause=entry.approximate if entry is not None else "",
                rank=rank,
                alone=evaluation.values,
                loss=loss,
                kept_float=not in_place,
                reason=reason,
                failure=evaluation.failure,
                alternatives=layer[1:],
                applied=in_place[0][0] if in_place else "",
            )
        )
    return tuple(results)


def finish(
    decision: Decision | None,
    final_data: AccuracyData,
    notes: Sequence[str],
    first: RewriteResult,
    result: RewriteResult,
    budget: AccuracyBudget,
) -> BudgetResult:
    """The outcome: the layers as the final model has them, and its independent check.

    Raises:
        RewriteError: the final model cannot be measured.
    """
    try:
        final = score(
            result.model,
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
        _layer_results(decision, first, result, budget),
        decision.baseline.values,
        tuple(decision.steps),
        chosen.met,
        final,
        evaluations=decision.evaluations,
        runner=decision.runner,
        notes=tuple(all_notes),
    )
