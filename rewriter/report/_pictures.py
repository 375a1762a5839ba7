"""Before/after pictures for many trace entries at once, with a text fallback.

`draw_pairs` takes the entries to draw, renders all their pictures with a single `dot` run,
and returns one HTML fragment per entry: the before picture, an arrow, the after picture.
If Graphviz is missing (or fails), every fragment is the text listing instead and
`Pictures.problem` says why, so the page can show a note with the install instructions.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence

from rewriter._trace import SnapshotNode, TraceEntry
from rewriter.report import _dot, _text
from rewriter.report._html import Html, esc

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True, slots=True)
class Pictures:
    """One HTML fragment per entry, and why pictures fell back to text (None if they did not)."""

    fragments: tuple[Html, ...]
    problem: str | None


def _figure(caption: str, content: str) -> str:
    return f"<figure><figcaption>{esc(caption)}</figcaption>{content}</figure>"


def pair(before: str, after: str) -> Html:
    """Two renderings side by side with an arrow between them."""
    return Html(
        '<div class="pair">'
        + _figure("before", before)
        + '<div class="arrow" aria-hidden="true">→</div>'
        + _figure("after", after)
        + "</div>"
    )


def text_pair(entry: TraceEntry) -> Html:
    """The before/after text listings of one entry."""
    return pair(_text.listing(entry.before), _text.listing(entry.after))


def _title(entry: TraceEntry, side: str) -> str:
    return f"{entry.rule} {side}"


def _sources(entries: Sequence[TraceEntry]) -> list[str]:
    sources = []
    for entry in entries:
        sources.append(_dot.snapshot_dot(entry.before, _title(entry, "before")))
        sources.append(_dot.snapshot_dot(entry.after, _title(entry, "after")))
    return sources


def draw_pairs(entries: Sequence[TraceEntry]) -> Pictures:
    """Before/after pictures of `entries` (one `dot` run), or text listings if impossible."""
    try:
        svgs = _dot.render_svgs(_sources(entries))
    except _dot.GraphvizUnavailableError as exc:
        logger.info("drawing subgraphs as text: %s", exc)
        return Pictures(tuple(text_pair(e) for e in entries), str(exc))
    fragments = tuple(
        pair(_empty_or(svgs[2 * i], e.before), _empty_or(svgs[2 * i + 1], e.after))
        for i, e in enumerate(entries)
    )
    return Pictures(fragments, None)


def _empty_or(svg: str, nodes: Sequence[SnapshotNode]) -> str:
    """The picture, or a short note when there was nothing to draw (a removed subgraph)."""
    if not nodes:
        return '<p class="meta">(nothing: the subgraph was removed)</p>'
    return svg
