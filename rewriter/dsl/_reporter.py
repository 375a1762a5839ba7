"""Collects the checker's diagnostics, with source lines, for one or more files."""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence

from rewriter._errors import Diagnostic, Span
from rewriter.dsl._source import diagnostic


class Reporter:
    """Accumulates errors and warnings; every check reports here instead of raising."""

    def __init__(self, sources: Mapping[str, str]) -> None:
        self.sources = sources
        self.diagnostics: list[Diagnostic] = []
        self._lines: dict[str, list[str]] = {}

    def error(self, span: Span, message: str, notes: Sequence[Diagnostic] = ()) -> None:
        """Record an error at `span`."""
        self.diagnostics.append(self._make("error", span, message, notes))

    def warning(self, span: Span, message: str) -> None:
        """Record a warning at `span`."""
        self.diagnostics.append(self._make("warning", span, message, ()))

    def note(self, span: Span, message: str) -> Diagnostic:
        """A note to attach to an error."""
        return self._make("note", span, message, ())

    def _make(
        self, severity: str, span: Span, message: str, notes: Sequence[Diagnostic]
    ) -> Diagnostic:
        return diagnostic(severity, span, message, self.sources.get(span.path, ""), notes)

    def locate(self, within: Span, word: str, skip: int = 0) -> Span:
        """The span of the first whole `word` from `skip` characters into `within`.

        Used to point at a name inside a statement whose AST node keeps only the whole
        statement's span (`pass NAME`, `let NAME`, `use "module"`). Falls back to `within`.
        """
        lines = self._source_lines(within.path)
        if not 1 <= within.line <= len(lines):
            return within
        pattern = _word_pattern(word)
        for number in range(within.line, min(within.end_line, len(lines)) + 1):
            line = lines[number - 1]
            start = within.col - 1 + skip if number == within.line else 0
            found = pattern.search(line, start)
            if found is not None:
                col = found.start() + 1
                return Span(within.path, number, col, number, col + len(word))
        return within

    def _source_lines(self, path: str) -> list[str]:
        lines = self._lines.get(path)
        if lines is None:
            lines = self.sources.get(path, "").split("\n")
            self._lines[path] = lines
        return lines


@functools.lru_cache(maxsize=1024)
def _word_pattern(word: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![\w.]){re.escape(word)}(?!\w)")


def head(span: Span, width: int) -> Span:
    """The first `width` characters of `span` (a keyword or name at its start)."""
    return Span(span.path, span.line, span.col, span.line, span.col + width)
