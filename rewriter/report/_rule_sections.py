"""The per-rule part of the rewrite report: rules applied, built-in passes, skipped rules.

Each rule that fired gets a section: its name and count, its source text with file:line,
and one `<details>` block per application (the first `open_applications` expanded) with the
before/after pictures. All pictures are drawn with one `dot` run; at most
`pictures_per_rule` applications per rule (and `max_pictures` in all) get pictures, the
others a text listing, so the page stays quick to make and to open.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from rewriter._api import RewriteResult
from rewriter._trace import SkipEntry, TraceEntry
from rewriter.report import _dot, _pictures
from rewriter.report._html import Html, esc, section, slug, table
from rewriter.report._options import ReportOptions
from rewriter.report._rule_source import RuleSource, find_rule_source


def group_entries(entries: Sequence[TraceEntry], kind: str) -> dict[str, list[int]]:
    """Entry indices of `kind`, grouped by rule name in order of first application."""
    groups: dict[str, list[int]] = {}
    for index, entry in enumerate(entries):
        if entry.kind == kind:
            groups.setdefault(entry.rule, []).append(index)
    return groups


def _to_draw(
    groups: Mapping[str, list[int]], entries: Sequence[TraceEntry], options: ReportOptions
) -> list[int]:
    """The entries that get pictures: the first few recorded ones of each rule."""
    chosen: list[int] = []
    for indices in groups.values():
        recorded = [i for i in indices if entries[i].before or entries[i].after]
        chosen.extend(recorded[: options.pictures_per_rule])
    return sorted(chosen)[: options.max_pictures]


def names(items: Sequence[str], limit: int = 4) -> str:
    """`a, b, c, d, +3 more` (or `-` for none)."""
    shown = ", ".join(items[:limit])
    if len(items) > limit:
        shown += f", +{len(items) - limit} more"
    return shown or "-"


def _application(number: int, entry: TraceEntry, body: str, *, is_open: bool) -> str:
    where = entry.graph or "main"
    created = names(entry.created) if entry.created else "(removed)"
    summary = (
        f"#{number} in <code>{esc(where)}</code>: <code>{esc(names(entry.matched))}</code> → "
        f"<code>{esc(created)}</code>"
    )
    state = " open" if is_open else ""
    return f'<details class="app"{state}><summary>{summary}</summary>{body}</details>'


def _source_block(source: RuleSource | None, location: str) -> str:
    if source is None:
        return f'<p class="meta">{esc(location)} (source not available)</p>'
    width = len(str(source.first_line + source.text.count("\n")))
    numbered = "\n".join(
        f'<span class="ln">{source.first_line + i:>{width}}</span>  {esc(line)}'
        for i, line in enumerate(source.text.splitlines())
    )
    return f'<p class="meta">{esc(location)}</p><pre class="source"><code>{numbered}</code></pre>'


def _application_body(entry: TraceEntry, picture: Html | None, options: ReportOptions) -> str:
    if picture is not None:
        return picture
    if entry.before or entry.after:
        return (
            f'<p class="meta">pictures are drawn for the first {options.pictures_per_rule} '
            "applications of each rule; this one is listed as text</p>" + _pictures.text_pair(entry)
        )
    return '<p class="meta">no subgraph was recorded for this rewrite</p>'


def _rule_section(
    name: str,
    indices: Sequence[int],
    result: RewriteResult,
    drawn: Mapping[int, Html],
    options: ReportOptions,
) -> str:
    entries = result.trace.entries
    blocks = [
        _application(
            number,
            entries[index],
            _application_body(entries[index], drawn.get(index), options),
            is_open=number <= options.open_applications,
        )
        for number, index in enumerate(indices, 1)
    ]
    source = find_rule_source(result.ruleset, name)
    heading = f'<h3>{esc(name)} <span class="meta">&times; {len(indices)}</span></h3>'
    heading += _source_block(source, entries[indices[0]].location)
    anchor = esc(slug(name))
    return f'<section class="rule" id="rule-{anchor}">{heading}{"".join(blocks)}</section>'


_LEGEND = Html(
    '<p class="legend"><span class="matched">matched (replaced)</span>'
    '<span class="created">created by the rule</span>'
    '<span class="context">neighbour</span></p>'
)
_TOOLBAR = Html(
    '<p class="toolbar"><button type="button" data-expand="all">expand all</button>'
    '<button type="button" data-expand="none">collapse all</button></p>'
)


def rules_applied(result: RewriteResult, options: ReportOptions) -> Html:
    """The "Rules applied" section: a table of contents, then one section per rule."""
    entries = result.trace.entries
    groups = group_entries(entries, "rule")
    if not groups:
        return section("rules", "Rules applied", '<p class="meta">no rule fired</p>')
    to_draw = _to_draw(groups, entries, options)
    pictures = _pictures.draw_pairs([entries[i] for i in to_draw])
    drawn = dict(zip(to_draw, pictures.fragments, strict=True))
    toc = "".join(
        f'<li><a href="#rule-{esc(slug(name))}">{esc(name)}</a> &times; {len(indices)}</li>'
        for name, indices in groups.items()
    )
    note = ""
    if pictures.problem is not None:
        note = (
            f'<p class="note" id="no-pictures">Subgraphs are shown as text: '
            f"{esc(pictures.problem)}. To get pictures, install Graphviz: "
            f"{esc(_dot.INSTALL_HINT)}.</p>"
        )
    sections = "".join(_rule_section(n, ix, result, drawn, options) for n, ix in groups.items())
    body = f'<ul class="toc">{toc}</ul>{note}{_LEGEND}{_TOOLBAR}{sections}'
    return section("rules", "Rules applied", body)


def passes(result: RewriteResult) -> Html:
    """The built-in passes that changed the model, with where they were declared."""
    groups = group_entries(result.trace.entries, "pass")
    if not groups:
        return Html("")
    rows = []
    for name, indices in groups.items():
        source = find_rule_source(result.ruleset, name)
        declared = f"{source.path}:{source.first_line}" if source else "built-in"
        changed = names([m for i in indices for m in result.trace.entries[i].matched])
        rows.append((name, len(indices), declared, changed))
    body = (
        '<p class="meta">Built-in passes that changed the model (each row counts the runs '
        "that changed something).</p>"
        + table(("pass", "runs", "declared at", "graphs changed"), rows, numeric=(1,))
    )
    return section("passes", "Built-in passes", body)


def skipped(skips: Sequence[SkipEntry]) -> Html:
    """Rules that were not applied, deduplicated by (rule, location, reason) with counts."""
    if not skips:
        return section("skipped", "Skipped rules", '<p class="meta">no rule was skipped</p>')
    counts: Counter[tuple[str, str, str]] = Counter()
    nodes: dict[tuple[str, str, str], list[str]] = {}
    for skip in skips:
        key = (skip.rule, skip.location, skip.reason)
        counts[key] += 1
        if skip.node:
            nodes.setdefault(key, []).append(skip.node)
    rows = [
        (rule, location, reason, count, names(nodes.get((rule, location, reason), []), 3))
        for (rule, location, reason), count in counts.items()
    ]
    header = ("rule", "location", "reason", "times", "at nodes")
    return section("skipped", "Skipped rules", table(header, rows, numeric=(3,)))
