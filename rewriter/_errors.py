"""The rewriter's error types and how errors are reported on the command line."""

from __future__ import annotations

import dataclasses
import os

import ir


class RewriteError(Exception):
    """Base class of errors about user input to the rewriter (rules, models, options)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Span:
    """A source location in a rule file: 1-based line and column, end exclusive."""

    path: str
    line: int
    col: int
    end_line: int
    end_col: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line}:{self.col}"


@dataclasses.dataclass(frozen=True, slots=True)
class Diagnostic:
    """One message about a rule file: severity, location, text, optional notes."""

    severity: str  # "error" | "warning" | "note"
    span: Span
    message: str
    notes: tuple[Diagnostic, ...] = ()
    source_line: str = ""

    def render(self) -> str:
        """`path:line:col: severity: message`, the source line, a caret, then the notes."""
        lines = [f"{self.span}: {self.severity}: {self.message}"]
        if self.source_line:
            text = self.source_line.rstrip("\n").expandtabs(1)
            lines.append(text)
            width = 1
            if self.span.end_line == self.span.line and self.span.end_col > self.span.col:
                width = self.span.end_col - self.span.col
            lines.append(" " * (self.span.col - 1) + "^" + "~" * (width - 1))
        for note in self.notes:
            lines.append(note.render())
        return "\n".join(lines)


class RuleError(RewriteError):
    """Errors in rule files; carries every diagnostic found."""

    def __init__(self, diagnostics: list[Diagnostic] | tuple[Diagnostic, ...]) -> None:
        self.diagnostics = tuple(diagnostics)
        super().__init__("\n".join(d.render() for d in self.diagnostics))

    @property
    def first_line(self) -> str:
        """The first diagnostic's header line."""
        d = self.diagnostics[0]
        return f"{d.span}: {d.severity}: {d.message}"


class RuleSyntaxError(RuleError):
    """A rule file does not parse."""


class RuleCheckError(RuleError):
    """A rule file parses but breaks a semantic rule (unknown op, unbound variable, ...)."""


def describe_error(exc: BaseException) -> tuple[str, int]:
    """A one-line (or, for rule errors, rendered) message and exit code for any exception."""
    if isinstance(exc, RuleError):
        return str(exc), 2
    if isinstance(exc, ir.IRError | RewriteError):
        return str(exc), 2
    if isinstance(exc, OSError) and (exc.strerror or "").startswith("cannot write"):
        return f"{exc.filename}: {exc.strerror}", 2
    if isinstance(exc, FileNotFoundError):
        return _describe_missing(exc.filename), 2
    if isinstance(exc, PermissionError):
        return f"{exc.filename}: permission denied", 2
    if isinstance(exc, IsADirectoryError):
        return f"{exc.filename}: is a directory", 2
    if isinstance(exc, OSError):
        reason = exc.strerror or str(exc)
        return (f"{exc.filename}: {reason}" if exc.filename else reason), 2
    if isinstance(exc, MemoryError):
        return "out of memory", 2
    return f"internal error ({type(exc).__name__}: {exc}); please report it with -vv output", 2


def _describe_missing(filename: object) -> str:
    """Name the missing folder rather than a file (often a temporary one) inside it."""
    if isinstance(filename, str):
        folder = os.path.dirname(filename)
        if folder and not os.path.isdir(folder):
            return f"{folder}: no such folder"
    return f"{filename}: no such file"
