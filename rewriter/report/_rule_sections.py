"""The per-rule part of the rewrite report: rules applied, built-in passes, skipped rules.

Each rule that fired gets a section: its name, kind and count, its proof status as
`rewrite prove` last found it for the rule as written (`rewriter.prove.recall`; the detail
in the tooltip), its source text with file:line, and one `<details>` block per application
(the first `open_applications` expanded) with the before/after pictures. Sections come in
order of kind (fusions, foldings, decompositions, other rewrites, cleanups; see
`rule_kind`), and within a kind in order of first application, so the page opens on what
people look for; `contents` lists them all with their counts. All pictures are drawn with
one `dot` run; at most `pictures_per_rule` applications per rule (and `max_pictures` in
all, given to the first sections) get pictures, the others a text listing, so the page
stays quick to make and to open.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping, Sequence

from rewriter.api import RewriteResult
from rewriter.dsl import user_cache
from rewriter.engine import (
    CLEANUP,
    DECOMPOSITION,
    FOLDING,
    FUSION,
    QUANTIZATION,
    REWRITE,
    SkipEntry,
    TraceEntry,
    rewrite_kind,
)
from rewriter.prove import recall
from rewriter.report import _dot, _pictures
from rewriter.report._html import Html, esc, section, slug, table
from rewriter.report._options import ReportOptions
from rewriter.report._rule_source import RuleSource, find_rule_source
from rewriter.rules import RuleSet

# Kinds of rule, in the order their sections appear (see `rewriter.engine.rewrite_kind`):
# fusions first, which is what people open the report for, cleanups last.
KINDS = {
    QUANTIZATION: "quantizations",
    FUSION: "fusions",
    FOLDING: "foldings",
    DECOMPOSITION: "decompositions",
    REWRITE: "other rewrites",
    CLEANUP: "cleanups",
}
_RANK = {kind: rank for rank, kind in enumerate(KINDS)}


@dataclasses.dataclass(frozen=True, slots=True)
class RuleGroup:
    """The applications of one rule: its name, its kind and their indices in the trace."""

    name: str
    kind: str
    indices: tuple[int, ...]


def group_entries(entries: Sequence[TraceEntry], kind: str) -> dict[str, list[int]]:
    """Entry indices of `kind`, grouped by rule name in order of first application."""
    groups: dict[str, list[int]] = {}
    for index, entry in enumerate(entries):
        if entry.kind == kind:
            groups.setdefault(entry.rule, []).append(index)
    return groups


def application_kind(entry: TraceEntry) -> str:
    """The kind of one rewrite, from the op types it matched and created."""
    return rewrite_kind(entry.matched_ops, entry.created_ops)


def rule_kind(entries: Sequence[TraceEntry]) -> str:
    """The kind of a rule: the first in `KINDS` order that any of its applications has."""
    return min(map(application_kind, entries), key=_RANK.__getitem__, default=REWRITE)


def rule_groups(entries: Sequence[TraceEntry]) -> tuple[RuleGroup, ...]:
    """The rules that fired, fusions first, then other rewrites, then cleanups.

    Within a kind, rules keep the order of their first application.
    """
    groups = [
        RuleGroup(name, rule_kind([entries[i] for i in indices]), tuple(indices))
        for name, indices in group_entries(entries, "rule").items()
    ]
    return tuple(sorted(groups, key=_section_rank))


def _section_rank(group: RuleGroup) -> int:
    return _RANK[group.kind]


def _to_draw(
    groups: Sequence[RuleGroup], entries: Sequence[TraceEntry], options: ReportOptions
) -> list[int]:
    """The entries that get pictures: the first few recorded ones of each rule, in page order."""
    chosen: list[int] = []
    for group in groups:
        recorded = [i for i in group.indices if entries[i].before or entries[i].after]
        chosen.extend(recorded[: options.pictures_per_rule])
    return chosen[: options.max_pictures]


def names(items: Sequence[str], limit: int = 4) -> str:
    """`a, b, c, d, +3 more` (or `-` for none)."""
    shown = ", ".join(items[:limit])
    if len(items) > limit:
        shown += f", +{len(items) - limit} more"
    return shown or "-"


def _short_names(labels: Sequence[str]) -> str:
    """The first two node labels, shortened to their last path parts, and how many more."""
    return names([_dot.short_name(label) for label in labels], limit=2)


def _application(number: int, entry: TraceEntry, body: str, *, is_open: bool) -> str:
    where = entry.graph or "main"
    created = _short_names(entry.created) if entry.created else "(removed)"
    # The summary stays on one line; the full names are in its tooltip and the pictures.
    full = f"{names(entry.matched, len(entry.matched))} → {names(entry.created, 99) or '-'}"
    summary = (
        f'<summary title="{esc(full)}">#{number} in <code>{esc(where)}</code>: '
        f"<code>{esc(_short_names(entry.matched))}</code> → <code>{esc(created)}</code></summary>"
    )
    state = " open" if is_open else ""
    return f'<details class="app"{state}>{summary}{body}</details>'


def _source_block(source: RuleSource | None) -> str:
    if source is None:
        return '<p class="meta">(source not available)</p>'
    width = len(str(source.first_line + source.text.count("\n")))
    numbered = "\n".join(
        f'<span class="ln">{source.first_line + i:>{width}}</span>  {esc(line)}'
        for i, line in enumerate(source.text.splitlines())
    )
    return f'<pre class="source"><code>{numbered}</code></pre>'


def _proof_badge(ruleset: RuleSet, name: str) -> str:
    """What `rewrite prove` found for the rule as written (its detail in the tooltip)."""
    rule = ruleset.rule(name)
    if rule is None:
        return ""
    proof = recall(rule, user_cache())
    if proof is None:
        ask = f"rewrite prove {rule.span.path} --rule {rule.name}" if rule.span.path else ""
        title = "no proof on record for this rule as written" + (f": {ask}" if ask else "")
        return f' <span class="proof meta" title="{esc(title)}">not proved yet</span>'
    css = {"proved": "ok", "refuted": "bad"}.get(proof.status.value, "meta")
    title = f"{proof.describe()} (rewrite prove, {proof.timeout:g} s per rule)"
    label = proof.status.value
    if proof.status.value == "proved" and not proof.exact:
        label = "proved up to rounding"
    return f' <span class="proof {css}" title="{esc(title)}">{esc(label)}</span>'


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
    group: RuleGroup, result: RewriteResult, drawn: Mapping[int, Html], options: ReportOptions
) -> str:
    entries = result.trace.entries
    name, indices = group.name, group.indices
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
    heading = (
        f'<h3>{esc(name)} <span class="kind {esc(slug(group.kind))}">{esc(group.kind)}</span> '
        f'<span class="meta">&times; {len(indices)}</span>'
        f"{_proof_badge(result.ruleset, name)} "
        f'<span class="where">{esc(entries[indices[0]].location)}</span></h3>'
    )
    heading += _source_block(source)
    attributes = f'id="rule-{esc(slug(name))}" data-kind="{esc(group.kind)}"'
    return f'<section class="rule" {attributes}>{heading}{"".join(blocks)}</section>'


_LEGEND = Html(
    '<p class="legend"><span class="matched">matched (replaced)</span>'
    '<span class="created">created by the rule</span>'
    '<span class="context">neighbour</span></p>'
)
_TOOLBAR = Html(
    '<p class="toolbar"><button type="button" data-expand="all">expand all</button>'
    '<button type="button" data-expand="none">collapse all</button></p>'
)


def _rule_links(groups: Sequence[RuleGroup]) -> str:
    return ", ".join(
        f'<a href="#rule-{esc(slug(g.name))}">{esc(g.name)}</a> &times; {len(g.indices)}'
        for g in groups
    )


def rule_contents(groups: Sequence[RuleGroup]) -> Html:
    """Every rule section, linked with its count, one line per kind (for the contents)."""
    lines = []
    for kind, title in KINDS.items():
        of_kind = [g for g in groups if g.kind == kind]
        if not of_kind:
            continue
        rewrites = sum(len(g.indices) for g in of_kind)
        lines.append(
            f'<li><span class="kind {esc(slug(kind))}">{esc(title)}</span> '
            f"({len(of_kind)} rules, {rewrites} rewrites): {_rule_links(of_kind)}</li>"
        )
    return Html(f"<ul>{''.join(lines)}</ul>" if lines else "")


def rules_applied(result: RewriteResult, options: ReportOptions) -> Html:
    """The "Rules applied" section: one section per rule, fusions first."""
    entries = result.trace.entries
    groups = rule_groups(entries)
    if not groups:
        return section("rules", "Rules applied", '<p class="meta">no rule fired</p>')
    to_draw = _to_draw(groups, entries, options)
    pictures = _pictures.draw_pairs([entries[i] for i in to_draw])
    drawn = dict(zip(to_draw, pictures.fragments, strict=True))
    note = ""
    if pictures.problem is not None:
        note = (
            f'<p class="note" id="no-pictures">Subgraphs are shown as text: '
            f"{esc(pictures.problem)}. To get pictures, install Graphviz: "
            f"{esc(_dot.INSTALL_HINT)}.</p>"
        )
    sections = "".join(_rule_section(group, result, drawn, options) for group in groups)
    body = f'{note}<div class="controls">{_LEGEND}{_TOOLBAR}</div>{sections}'
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
