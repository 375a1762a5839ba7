"""Diagnostics tied to source text: attach the line a span points at."""

from __future__ import annotations

from collections.abc import Sequence

from rewriter._errors import Diagnostic, Span


def source_line(text: str, line: int) -> str:
    """Line `line` (1-based) of `text`, without its newline; "" when out of range."""
    if line < 1:
        return ""
    lines = text.split("\n")
    return lines[line - 1].rstrip("\r") if line <= len(lines) else ""


def diagnostic(
    severity: str,
    span: Span,
    message: str,
    text: str,
    notes: Sequence[Diagnostic] = (),
) -> Diagnostic:
    """A diagnostic whose source line is taken from `text`."""
    line = "".join(c if c.isprintable() or c == "\t" else "?" for c in source_line(text, span.line))
    return Diagnostic(severity, span, message, tuple(notes), line)
