"""`rewrite fmt PATH... [--check]`: rewrite rule files in their canonical layout.

Without `--check`, files that would change are rewritten in place, atomically (a temporary
file beside the original, then a rename). With `--check`, nothing is written: the files
that would change are listed and the exit code is 1 if there are any. A file that does not
parse is reported with its diagnostic and left alone (exit code 2).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from rewriter._errors import RuleError
from rewriter.dsl import find_rule_files, format_file, parse, read_rule_file

EXIT_OK = 0
EXIT_WOULD_CHANGE = 1
EXIT_ERRORS = 2


def run(args: argparse.Namespace) -> int:
    """Format the files; return the exit code."""
    files = find_rule_files(args.paths)
    if not files:
        sys.stderr.write("rewrite fmt: no .rw files found\n")
        return EXIT_ERRORS
    changed: list[Path] = []
    failed = False
    for path in files:
        try:
            text = read_rule_file(path)
            formatted = _format_checked(text, str(path))
        except RuleError as exc:
            sys.stderr.write(str(exc) + "\n")
            failed = True
            continue
        if formatted == text:
            continue
        changed.append(path)
        if not args.check:
            write_atomically(path, formatted)
    verb = "would reformat" if args.check else "reformatted"
    for path in changed:
        sys.stdout.write(f"{verb} {path}\n")
    if failed:
        return EXIT_ERRORS
    if args.check and changed:
        return EXIT_WOULD_CHANGE
    return EXIT_OK


def _format_checked(text: str, filename: str) -> str:
    """The formatted text, after making sure it means the same as the original."""
    formatted = format_file(text, filename)
    if parse(formatted, filename) != parse(text, filename):
        raise AssertionError(f"formatting {filename} would change its meaning; please report it")
    return formatted


def write_atomically(path: Path, text: str) -> None:
    """Replace `path`'s contents with `text` so that readers see the old or the new file."""
    mode = path.stat().st_mode & 0o7777
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
