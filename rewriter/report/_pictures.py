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

from rewriter.engine import SnapshotNode, TraceEntry
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


_NOTHING = '<p class="meta">(no nodes left: the matched nodes were removed)</p>'


def _jobs(entries: Sequence[TraceEntry]) -> list[tuple[str, Sequence[SnapshotNode]]]:
    """(title, nodes) of every non-empty picture, before then after for each entry."""
    jobs: list[tuple[str, Sequence[SnapshotNode]]] = []
    for entry in entries:
        for side, nodes in (("before", entry.before), ("after", entry.after)):
            if nodes:
                jobs.append((f"{entry.rule} {side}", nodes))
    return jobs


def draw_pairs(entries: Sequence[TraceEntry]) -> Pictures:
    """Before/after pictures of `entries` (one `dot` run), or text listings if impossible."""
    jobs = _jobs(entries)
    try:
        svgs = iter(_dot.render_svgs([_dot.snapshot_dot(nodes, title) for title, nodes in jobs]))
    except _dot.GraphvizUnavailableError as exc:
        logger.info("drawing subgraphs as text: %s", exc)
        return Pictures(tuple(text_pair(e) for e in entries), str(exc))
    fragments = []
    for entry in entries:
        # `svgs` yields the pictures in the order `_jobs` listed the non-empty sides.
        before = next(svgs) if entry.before else _NOTHING
        after = next(svgs) if entry.after else _NOTHING
        fragments.append(pair(before, after))
    return Pictures(tuple(fragments), None)
