"""What the language server knows about one open `.rw` buffer: its parse, includes, diagnostics.

The buffer's text is parsed as it stands (not the file on disk); the files it includes are
read through a `Reader` (the server's open buffers first, then the disk) and parsed too, so
named constraints defined elsewhere are known. The diagnostics are those `rewrite lint`
gives for the same text: syntax errors, then the checks against the standard vocabulary,
restricted to this file, plus one at an `include` whose file cannot be read or parsed.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from pathlib import Path

from rewriter import dsl
from rewriter._errors import Diagnostic, RuleError, Span
from rewriter.api import check_files

Reader = Callable[[Path], str]
"""Reads a file's text (an open buffer's, else the disk's); raises OSError when it cannot."""


@dataclasses.dataclass(frozen=True, slots=True)
class Analysis:
    """One buffer, analyzed.

    `file` is the parse of this text (None on a syntax error); `included` the files it
    includes, directly or not, in the order first included.
    """

    path: str
    text: str
    file: dsl.File | None
    included: tuple[dsl.File, ...]
    diagnostics: tuple[Diagnostic, ...]

    @property
    def files(self) -> tuple[dsl.File, ...]:
        """This file (when it parses) and those it includes."""
        return ((self.file,) if self.file is not None else ()) + self.included

    def constraints(self) -> dict[str, dsl.Constraint]:
        """The named constraints in scope: this file's and its includes', first definition wins."""
        found: dict[str, dsl.Constraint] = {}
        for file in self.files:
            for item in file.items:
                if isinstance(item, dsl.Constraint):
                    found.setdefault(item.name, item)
        return found

    def source_of(self, path: str) -> str:
        """The text of this file or of an included one (empty when unknown)."""
        for file in self.files:
            if file.path == path:
                return file.source
        return self.text if path == self.path else ""


def analyze(path: str, text: str, read: Reader) -> Analysis:
    """Parse and check `text` as the file `path`, reading what it includes with `read`."""
    try:
        file = dsl.parse(text, path)
    except RuleError as exc:
        return Analysis(path, text, None, (), tuple(_in_file(exc.diagnostics, path)))
    included, include_errors = _read_includes(file, read)
    checked = check_files([file, *included])
    diagnostics = (*include_errors, *_in_file(checked, path))
    return Analysis(path, text, file, tuple(included), tuple(_sorted(diagnostics)))


def include_target(file: dsl.File, include: dsl.IncludeDecl) -> Path:
    """The file an `include` names: its path relative to the including file's folder."""
    return Path(os.path.normpath(Path(file.path).parent / include.path))


def _read_includes(file: dsl.File, read: Reader) -> tuple[list[dsl.File], list[Diagnostic]]:
    """Every file `file` includes, transitively; errors are reported at `file`'s includes."""
    seen = {_identity(Path(file.path))}
    queue: list[tuple[dsl.File, dsl.IncludeDecl | None]] = [(file, None)]
    found: list[dsl.File] = []
    errors: list[Diagnostic] = []
    position = 0
    while position < len(queue):
        current, via = queue[position]
        position += 1
        for item in current.items:
            if not isinstance(item, dsl.IncludeDecl):
                continue
            target = include_target(current, item)
            if _identity(target) in seen:
                continue
            seen.add(_identity(target))
            # Problems deeper down are shown at the buffer's own include that led there.
            shown_at = via if via is not None else item
            try:
                included = dsl.parse(read(target), str(target))
            except OSError as exc:
                reason = exc.strerror or str(exc)
                errors.append(_error(file, shown_at, f"cannot include {target}: {reason}"))
                continue
            except RuleError as exc:
                first = exc.diagnostics[0]
                message = f"{target} has errors: {first.span}: {first.message}"
                errors.append(_error(file, shown_at, message))
                continue
            found.append(included)
            queue.append((included, shown_at))
    return found, errors


def _error(file: dsl.File, include: dsl.IncludeDecl, message: str) -> Diagnostic:
    line = file.source.splitlines()[include.path_span.line - 1]
    return Diagnostic("error", include.path_span, message, source_line=line)


def _identity(path: Path) -> Path:
    try:
        return path.resolve()
    except (OSError, ValueError):
        return path.absolute()


def _in_file(diagnostics: tuple[Diagnostic, ...] | list[Diagnostic], path: str) -> list[Diagnostic]:
    """The diagnostics located in `path` (a check of included files reports theirs too)."""
    return [d for d in diagnostics if d.span.path == path]


def _sorted(diagnostics: tuple[Diagnostic, ...]) -> list[Diagnostic]:
    return sorted(diagnostics, key=lambda d: (d.span.line, d.span.col))


def span_contains(span: Span, line: int, col: int) -> bool:
    """True when the 1-based (line, col) lies inside `span` (its end included, for typing)."""
    if (line, col) < (span.line, span.col):
        return False
    return (line, col) <= (span.end_line, span.end_col)
