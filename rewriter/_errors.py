"""The rewriter's error types and how errors are reported on the command line."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping

import ir


class RewriteError(Exception):
    """Base class of errors about user input to the rewriter (rules, models, options)."""


class OptionError(RewriteError):
    """A value given to an option is wrong, said in the API's terms.

    `option` is the API's name for it (an options field or an argument: `input_shapes`,
    `stages`), `key` the entry it concerns (an input name, a symbol), `value` what was given
    (as text); `str()` reads `input_shapes['x']: no graph input of that name`. The command
    line says the same with its own flag (`--input-shape x: no graph input of that name`,
    `subject(flag)`), so nothing below it names a flag.
    """

    def __init__(
        self, option: str, problem: str, *, key: str | None = None, value: str | None = None
    ) -> None:
        self.option = option
        self.problem = problem
        self.key = key
        self.value = value
        super().__init__(f"{self.subject()}: {problem}")

    def subject(self, flag: str | None = None) -> str:
        """What the error is about: in the API's terms, or with `flag` as a command line has it."""
        if flag is not None:
            given = "=".join(part for part in (self.key, self.value) if part is not None)
            return f"{flag} {given}" if given else flag
        name = self.option if self.key is None else f"{self.option}[{self.key!r}]"
        return name if self.value is None else f"{name}={self.value}"


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


class AdvisedError(RewriteError):
    """An error that options can remedy: `remedies` names them as the API does.

    The message says what to change in plain words; a command line appends its flags for the
    remedies (`describe_error`).
    """

    def __init__(self, message: str, remedies: tuple[str, ...]) -> None:
        self.remedies = remedies
        super().__init__(message)


def describe_error(exc: BaseException, flags: Mapping[str, str] | None = None) -> tuple[str, int]:
    """A one-line (or, for rule errors, rendered) message and exit code for any exception.

    `flags` maps options' API names to the flags a command line spells them with: an
    `OptionError` about such an option is said with the flag.
    """
    if isinstance(exc, OptionError) and flags and exc.option in flags:
        return f"{exc.subject(flags[exc.option])}: {exc.problem}", 2
    if isinstance(exc, AdvisedError) and flags:
        named = [flags[name] for name in exc.remedies if name in flags]
        return (f"{exc} ({', '.join(dict.fromkeys(named))})" if named else str(exc)), 2
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
