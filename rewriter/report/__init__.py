"""HTML reports: what a rewrite run did (with subgraph pictures) and model statistics.

`render_rewrite_report(result, ...)` and `render_stats_report(model, ...)` return one
self-contained HTML page each (inline CSS, script and SVG; nothing is fetched when it is
viewed); `write_rewrite_report` / `write_stats_report` write them atomically. Subgraph
pictures are laid out by Graphviz (`dot`, through the `graphviz` package, the `report`
extra); without it the page lists the subgraphs as text and says how to install it.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import ir
from rewriter.api import Profile, RewriteResult
from rewriter.report._dot import INSTALL_HINT, graphviz_missing
from rewriter.report._options import ReportOptions
from rewriter.report._rewrite_page import render_rewrite_report
from rewriter.report._stats_page import render_stats_report

if TYPE_CHECKING:
    from rewriter.verification import AccuracyResult, VerifyResult


def _write_atomically(path: str | os.PathLike[str], text: str) -> None:
    target = Path(path)
    try:
        handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent or ".")
    except OSError as exc:  # names the hidden temporary file: name the file asked for
        raise ir.cannot_write(exc, os.fspath(path)) from exc
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
        # mkstemp makes the file private; a report is an ordinary file.
        umask = os.umask(0)
        os.umask(umask)
        Path(temporary).chmod(0o666 & ~umask)
        os.replace(temporary, target)
    except OSError as exc:
        Path(temporary).unlink(missing_ok=True)
        if exc.filename is None or exc.filename == temporary:
            raise ir.cannot_write(exc, os.fspath(path)) from exc
        raise
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def write_rewrite_report(
    path: str | os.PathLike[str],
    result: RewriteResult,
    *,
    source: str | os.PathLike[str] | ir.Model | None = None,
    verification: VerifyResult | AccuracyResult | None = None,
    timings: Mapping[str, float] | None = None,
    options: ReportOptions | None = None,
) -> None:
    """Write the rewrite report of `result` to `path` (see `render_rewrite_report`)."""
    html = render_rewrite_report(
        result, source=source, verification=verification, timings=timings, options=options
    )
    _write_atomically(path, html)


def write_stats_report(
    path: str | os.PathLike[str],
    model: ir.Model,
    *,
    name: str = "model",
    top: int = 20,
    profile: Profile | None = None,
) -> None:
    """Write the statistics report of `model` to `path` (see `render_stats_report`)."""
    _write_atomically(path, render_stats_report(model, name=name, top=top, profile=profile))


__all__ = [
    "INSTALL_HINT",
    "ReportOptions",
    "graphviz_missing",
    "render_rewrite_report",
    "render_stats_report",
    "write_rewrite_report",
    "write_stats_report",
]
