"""The rewrite report: what a run changed, with before/after pictures rule by rule.

Sections, in order: an overview (summary of nodes, parameters and rewrites, time per
phase, and the op counts before/after as a chart with the full table folded below it),
verification (when it ran), rules applied (see `_rule_sections`), built-in passes, skipped
rules.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import ir
from rewriter._api import RewriteResult
from rewriter._cmd_stats import collect
from rewriter.report import _rule_sections
from rewriter.report._chart import Series, bar_chart
from rewriter.report._html import Html, esc, human_bytes, page, seconds, section, table
from rewriter.report._options import ReportOptions

if TYPE_CHECKING:
    from rewriter.verify import VerifyResult


def _verification(verification: VerifyResult | None) -> Html:
    if verification is None:
        return Html("")
    rows = [
        (
            out.name,
            out.dtype,
            "x".join(map(str, out.shape)) if out.shape else "scalar",
            "-" if out.max_abs_err is None else f"{out.max_abs_err:.3g}",
            "-" if out.max_rel_err is None else f"{out.max_rel_err:.3g}",
            out.mismatched,
            str(out.tolerance),
            Html('<span class="ok">ok</span>' if out.ok else '<span class="bad">MISMATCH</span>'),
        )
        for out in verification.outputs
    ]
    header = (
        "output",
        "dtype",
        "shape",
        "max abs err",
        "max rel err",
        "mismatched",
        "tolerance",
        "status",
    )
    verdict = "ok" if verification.ok else "bad"
    notes = "".join(f"<li>{esc(n)}</li>" for n in verification.notes())
    body = (
        f'<p class="{verdict}">{esc(verification.summary())}</p>'
        + table(header, rows, numeric=(3, 4, 5))
        + (f"<ul>{notes}</ul>" if notes else "")
        + f'<p class="meta">{verification.examples_run} examples run '
        f"(seed {verification.seed}); original on {esc(verification.original_runtime)}, "
        f"rewritten on {esc(verification.rewritten_runtime)}</p>"
    )
    return section("verification", "Verification", body)


def _timings(timings: Mapping[str, float]) -> Html:
    total = sum(timings.values()) or 1.0
    rows = [(phase, seconds(t), f"{t / total:.0%}") for phase, t in timings.items()]
    chart = bar_chart(
        list(timings),
        [Series("seconds", tuple(timings.values()))],
        title="time per phase",
        fmt=seconds,
    )
    body = table(("phase", "time", "share"), rows, numeric=(1, 2)) + chart
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


def _summary(
    result: RewriteResult, before: Mapping[str, object] | None, after: Mapping[str, object]
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
        + warnings
    )
    return section("summary", "Summary", body)


def _source_stats(source: str | os.PathLike[str] | ir.Model | None) -> dict[str, object] | None:
    if source is None:
        return None
    model = source if isinstance(source, ir.Model) else ir.load(source)
    return collect(model)


def render_rewrite_report(
    result: RewriteResult,
    *,
    source: str | os.PathLike[str] | ir.Model | None = None,
    verification: VerifyResult | None = None,
    timings: Mapping[str, float] | None = None,
    options: ReportOptions | None = None,
) -> str:
    """The rewrite report of `result` as one self-contained HTML page.

    Args:
        result: a rewrite run; run it with `record_subgraphs=True` to get pictures.
        source: the input model (a path or an IR model), for its parameter counts.
        verification: the verification of the result, if one ran.
        timings: more phases to show after `result.timings` (e.g. verification).
        options: how much to show (defaults: `ReportOptions()`).
    """
    options = options or ReportOptions()
    summary = _summary(result, _source_stats(source), collect(result.model))
    overview = (
        f'<div class="overview"><div>{summary}'
        f"{_timings({**result.timings, **(timings or {})})}</div>"
        f"<div>{_op_counts(result, options)}</div></div>"
    )
    parts = [
        overview,
        _verification(verification),
        _rule_sections.rules_applied(result, options),
        _rule_sections.passes(result),
        _rule_sections.skipped(result.trace.skips),
    ]
    name = Path(os.fspath(source)).name if isinstance(source, str | os.PathLike) else "model"
    applied = sum(1 for e in result.trace.entries if e.kind == "rule")
    subtitle = f"{result.nodes_before:,} → {result.nodes_after:,} nodes, {applied} rewrites"
    return page(f"Rewrite report: {name}", subtitle, "".join(parts))
