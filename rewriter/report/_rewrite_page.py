"""The rewrite report: what a run changed, with before/after pictures rule by rule.

Sections, in order: an overview (summary of nodes, parameters, rewrites and the verdict of
verification; contents: every section below, each rule with its count; time per phase;
the op counts before/after as a chart with the full table folded below it), rules applied
(fusions first, see `_rule_sections`), the accuracy budget (when one was given: the
sensitivity plot, the per-site table and the greedy steps), verification (when it ran; the
budget's final check), built-in passes, skipped rules. The overview is kept short so that
a 2000-pixel-high screenshot of the page shows the first fusion's before/after pictures.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import ir
from rewriter.api import RewriteResult
from rewriter.api import collect_stats as collect
from rewriter.report import _rule_sections
from rewriter.report._chart import Series, bar_chart, threshold_chart
from rewriter.report._html import Html, esc, human_bytes, page, seconds, section, table
from rewriter.report._options import ReportOptions
from rewriter.verification import AccuracyResult

if TYPE_CHECKING:
    from rewriter.api import BudgetResult
    from rewriter.verification import VerifyResult

    Verification = VerifyResult | AccuracyResult

_STATUS_CSS = {"ok": "ok", "-": "meta"}


def _verification(verification: Verification | None) -> Html:
    if verification is None:
        return Html("")
    rows = [
        (
            *row[:-1],
            Html(f'<span class="{_STATUS_CSS.get(row[-1], "bad")}">{esc(row[-1])}</span>'),
        )
        for row in verification.table_rows()
    ]
    verdict = "ok" if verification.ok else "bad"
    notes = "".join(f"<li>{esc(n)}</li>" for n in verification.notes())
    body = (
        f'<p class="{verdict}">{esc(verification.summary())}</p>'
        + table(verification.table_header, rows, numeric=verification.numeric_columns)
        + (f"<ul>{notes}</ul>" if notes else "")
        + f'<p class="meta">{verification.examples_run} examples run '
        f"(seed {verification.seed}); original on {esc(verification.original_runtime)}, "
        f"rewritten on {esc(verification.rewritten_runtime)}</p>"
    )
    return section("verification", "Verification", body)


def _speed(result: RewriteResult) -> Html:
    """The speed check: the latency against float, and the groups kept float and why."""
    speed = result.speed
    if speed is None and not result.notes:
        return Html("")
    parts = [f"<p>{esc(note)}</p>" for note in result.notes]
    if speed is not None:
        from rewriter.quantize import kept_float_reason

        parts.insert(0, f'<p class="ok">{esc(speed.summary())}</p>')
        rows = "".join(
            f"<tr><td>{esc(g.rule)}</td><td>{len(g.layers)}</td><td>{g.approximate_ms:.3f}</td>"
            f"<td>{g.float_ms:.3f}</td><td>"
            f"{esc(kept_float_reason(g.rule, g.slower_by) if g.kept_float else 'kept quantized')}"
            "</td></tr>"
            for g in speed.groups
        )
        parts.append(
            "<table><tr><th>rule</th><th>layers</th><th>approximate (ms)</th>"
            f"<th>float (ms)</th><th>verdict</th></tr>{rows}</table>"
        )
    return section("speed", "Precision: speed check and forms", "".join(parts))


def _budget(budget: BudgetResult | None) -> Html:
    """The accuracy budget: the sensitivity plot and the per-site table (see `_budget`)."""
    if budget is None:
        return Html("")
    from rewriter.verification import format_metric

    metric = budget.metric
    intro = (
        f'<p class="{"ok" if budget.ok else "bad"}">{esc(budget.summary())}</p>'
        f'<p class="meta">{budget.evaluations} measurements of one switchable model '
        f"{esc(budget.runner)}; "
        "sensitivity: the whole model's metric with only that site approximate (lower "
        "snr or cosine, higher max_rel: more sensitive); the most sensitive are kept in "
        "float until the model meets the budget, then the result is checked on independent "
        "inputs (under Verification).</p>"
    )
    if not budget.sites:
        return section("budget", "Accuracy budget", intro)
    chart = threshold_chart(
        [s.layer for s in budget.sites],
        [s.value(metric) for s in budget.sites],
        marked=[s.kept_float for s in budget.sites],
        threshold=budget.accept[0].bound,
        legend=("approximate", "kept float"),
        title=f"{metric} with only this site approximate",
        fmt=lambda v: format_metric(metric, v),
    )
    steps = [
        (
            step.left_out,
            *(
                format_metric(m, v)
                for m, v in step.values
                if m in {a.metric for a in budget.accept}
            ),
            human_bytes(step.bytes) if step.bytes else "-",
            Html('<span class="ok">met</span>' if step.met else '<span class="bad">not met</span>'),
        )
        for step in budget.steps
    ]
    metrics = [m for m, _ in budget.steps[0].values if m in {a.metric for a in budget.accept}]
    notes = "".join(f"<li>{esc(n)}</li>" for n in budget.notes)
    body = (
        intro
        + chart
        + table(budget.table_header, budget.table_rows(), numeric=budget.numeric_columns)
        + "<h3>Greedy steps (tuning inputs)</h3>"
        + table(("sites left out", *metrics, "model size", "budget"), steps, numeric=(0, 1))
        + (f"<ul>{notes}</ul>" if notes else "")
    )
    return section("budget", "Accuracy budget", body)


# The phases a run can have, in the order `rewrite MODEL` runs them, with what each covers.
PHASES = {
    "load_rules": "parse and check the rule files",
    "load_model": "read the ONNX model into the IR",
    "convert": "convert the opset with onnx's version converter",
    "rewrite": "infer types and shapes, apply rules and passes until nothing changes",
    "check": "run onnx's checker on the result",
    "verify": "run both models on generated inputs and compare the outputs",
    "budget": "measure the approximate rewrites, keep the sensitive ones float, check the result",
    "save": "write the rewritten model",
    "report": "draw the pictures and render this page (writing it is not included)",
}


def _in_run_order(timings: Mapping[str, float]) -> dict[str, float]:
    """Known phases in `PHASES` order, then any others in the order given."""
    known = {phase: timings[phase] for phase in PHASES if phase in timings}
    return {**known, **timings}


def _timings(timings: Mapping[str, float]) -> Html:
    ordered = _in_run_order(timings)
    total = sum(ordered.values())
    rows = [
        (
            Html(f'<span title="{esc(PHASES.get(phase, phase))}">{esc(phase)}</span>'),
            seconds(t),
            f"{t / (total or 1.0):.0%}",
            Html(f'<span style="width: {100 * t / (total or 1.0):.1f}%"></span>'),
        )
        for phase, t in ordered.items()
    ]
    rows.append((Html("<b>total</b>"), seconds(total), "", Html("")))
    # A phase's name carries what it covers as a tooltip.
    body = table(("phase", "time", "share", ""), rows, numeric=(1, 2), css_class="timings")
    return section("timings", "Time per phase", body)


def _op_counts(result: RewriteResult, options: ReportOptions) -> Html:
    before, after = result.ops_before, result.ops_after
    ops = sorted(
        set(before) | set(after),
        key=lambda op: (-max(before.get(op, 0), after.get(op, 0)), op),
    )
    shown = ops[: options.chart_ops]
    chart = bar_chart(
        shown,
        [
            Series("before", tuple(float(before.get(op, 0)) for op in shown)),
            Series("after", tuple(float(after.get(op, 0)) for op in shown)),
        ],
        title="nodes by op type, before and after",
    )
    rows = [
        (op, before.get(op, 0), after.get(op, 0), f"{after.get(op, 0) - before.get(op, 0):+d}")
        for op in ops
    ]
    folded = (
        f"<details><summary>all {len(ops)} op types</summary>"
        + table(("op", "before", "after", "change"), rows, numeric=(1, 2, 3))
        + "</details>"
    )
    caption = (
        f"the {len(shown)} most frequent of {len(ops)} op types" if len(ops) > len(shown) else ""
    )
    return section(
        "ops", "Nodes by op type", f'<p class="meta">{esc(caption)}</p>' + chart + folded
    )


def _parameters(stats: Mapping[str, object] | None) -> str:
    if stats is None:
        return "?"
    count = int(str(stats["parameters"]))
    return f"{count:,} ({human_bytes(int(str(stats['parameter_bytes'])))})"


def _opsets(stats: Mapping[str, object] | None) -> str:
    if stats is None:
        return "?"
    opsets = stats["opsets"]
    assert isinstance(opsets, dict), "collect() returns opsets as a dict"
    return ", ".join(f"{domain or 'ai.onnx'} {version}" for domain, version in opsets.items())


def _verdict(verification: Verification | None) -> str:
    """One line: the verification's outcome, linked to its table."""
    if verification is None:
        return ""
    css = "ok" if verification.ok else "bad"
    return (
        f'<p class="{css}"><a href="#verification">verification</a>: '
        f"{esc(verification.summary())}</p>"
    )


def _summary(
    result: RewriteResult,
    before: Mapping[str, object] | None,
    after: Mapping[str, object],
    verification: Verification | None,
) -> Html:
    trace = result.trace
    applied = sum(1 for e in trace.entries if e.kind == "rule")
    rules = len(_rule_sections.group_entries(trace.entries, "rule"))
    rows = [
        ("nodes", f"{result.nodes_before:,}", f"{result.nodes_after:,}"),
        ("parameters", _parameters(before), _parameters(after)),
        ("initializers", "?" if before is None else before["initializers"], after["initializers"]),
        ("opsets", _opsets(before), _opsets(after)),
    ]
    lines = [f"{applied} rewrites by {rules} rules; stopped: {trace.stop_reason.value}"]
    for entry in trace.entries:
        if entry.kind == "convert":
            converted = f"{', '.join(entry.matched)} → {', '.join(entry.created)}"
            lines.append(f"opset converted: {converted}")
    warnings = "".join(f'<p class="note">warning: {esc(w)}</p>' for w in trace.warnings)
    body = (
        table(("", "before", "after"), rows, numeric=(1, 2))
        + "".join(f"<p>{esc(line)}</p>" for line in lines)
        + _verdict(verification)
        + warnings
    )
    return section("summary", "Summary", body)


def _contents(result: RewriteResult, verification: Verification | None) -> Html:
    """Links to every section of the page, with counts; each rule is listed by kind."""
    entries = result.trace.entries
    groups = _rule_sections.rule_groups(entries)
    applied = sum(len(g.indices) for g in groups)
    links = [
        '<a href="#summary">Summary</a>',
        '<a href="#timings">Time per phase</a>',
        '<a href="#ops">Nodes by op type</a>',
    ]
    if result.budget is not None:
        met = "met" if result.budget.ok else "NOT met"
        links.append(f'<a href="#budget">Accuracy budget</a>: {met}')
    if verification is not None:
        outcome = "equivalent" if verification.ok else "NOT equivalent"
        if isinstance(verification, AccuracyResult):
            outcome = "within the budget" if verification.ok else "outside the budget"
        links.append(f'<a href="#verification">Verification</a>: {outcome}')
    runs = sum(1 for e in entries if e.kind == "pass")
    if runs:
        links.append(f'<a href="#passes">Built-in passes</a> &times; {runs}')
    links.append(f'<a href="#skipped">Skipped rules</a> &times; {len(result.trace.skips)}')
    items = (
        f"<li>{' · '.join(links)}</li>"
        f'<li><a href="#rules">Rules applied</a>: {applied} rewrites by {len(groups)} rules'
        f"{_rule_sections.rule_contents(groups)}</li>"
    )
    return Html(f'<nav id="contents" class="contents"><ul>{items}</ul></nav>')


def _source_stats(source: str | os.PathLike[str] | ir.Model | None) -> dict[str, object] | None:
    if source is None:
        return None
    model = source if isinstance(source, ir.Model) else ir.load(source)
    return collect(model)


def render_rewrite_report(
    result: RewriteResult,
    *,
    source: str | os.PathLike[str] | ir.Model | None = None,
    verification: Verification | None = None,
    timings: Mapping[str, float] | None = None,
    options: ReportOptions | None = None,
) -> str:
    """The rewrite report of `result` as one self-contained HTML page.

    Args:
        result: a rewrite run; run it with `record_subgraphs=True` to get pictures.
        source: the input model (a path or an IR model), for its parameter counts.
        verification: the verification of the result, if one ran.
        timings: more phases (or better measures of them) than `result.timings`, e.g.
            verification; the time to render this page is added as `report` unless given.
        options: how much to show (defaults: `ReportOptions()`).
    """
    start = time.perf_counter()
    options = options or ReportOptions()
    summary = _summary(result, _source_stats(source), collect(result.model), verification)
    details = [
        _rule_sections.rules_applied(result, options),
        _speed(result),
        _budget(result.budget),
        _verification(verification),
        _rule_sections.passes(result),
        _rule_sections.skipped(result.trace.skips),
    ]
    phases = {**result.timings, **(timings or {})}
    # What remains after this (the overview, joining the strings) takes well under 1 ms.
    phases.setdefault("report", time.perf_counter() - start)
    overview = (
        f'<div class="overview"><div>{summary}{_timings(phases)}</div>'
        f"<div>{_op_counts(result, options)}</div></div>"
    )
    parts = [_contents(result, verification), overview, *details]
    name = Path(os.fspath(source)).name if isinstance(source, str | os.PathLike) else "model"
    applied = sum(1 for e in result.trace.entries if e.kind == "rule")
    subtitle = f"{result.nodes_before:,} → {result.nodes_after:,} nodes, {applied} rewrites"
    return page(f"Rewrite report: {name}", subtitle, "".join(parts))
