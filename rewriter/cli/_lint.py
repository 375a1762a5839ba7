"""`rewrite lint PATH...`: parse and check rule files, print located diagnostics.

Each diagnostic prints as `file:line:col: severity: message`, the source line and a caret,
on standard output; a one-line summary goes to standard error. Exit codes: 0 when there is
no error (warnings allowed, unless `--werror`), 2 when there is any error.
"""

from __future__ import annotations

import argparse
import sys

from rewriter._errors import Diagnostic
from rewriter.api import check_files
from rewriter.dsl import find_rule_files, parse_files

EXIT_OK = 0
EXIT_ERRORS = 2


def run(args: argparse.Namespace) -> int:
    """Lint the files; return the exit code."""
    files = find_rule_files(args.paths)
    if not files:
        sys.stderr.write("rewrite lint: no .rw files found\n")
        return EXIT_ERRORS
    parsed, syntax_errors = parse_files(files)
    diagnostics = syntax_errors + check_files(parsed, allow_python=args.allow_python)
    order = {str(path): index for index, path in enumerate(files)}
    diagnostics.sort(key=lambda d: (order.get(d.span.path, len(order)), d.span.line, d.span.col))
    for diagnostic in diagnostics:
        sys.stdout.write(diagnostic.render() + "\n")
    errors = _count(diagnostics, "error")
    warnings = _count(diagnostics, "warning")
    sys.stderr.write(f"{_plural(len(files), 'file')} checked: {_summary(errors, warnings)}\n")
    if errors or (args.werror and warnings):
        return EXIT_ERRORS
    return EXIT_OK


def _count(diagnostics: list[Diagnostic], severity: str) -> int:
    return sum(1 for d in diagnostics if d.severity == severity)


def _summary(errors: int, warnings: int) -> str:
    if not errors and not warnings:
        return "no problems"
    return f"{_plural(errors, 'error')}, {_plural(warnings, 'warning')}"


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"
