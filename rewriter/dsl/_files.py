"""Which rule files a load reads, and their text.

Kept apart from the loader, whose parser, checker and lowering a load served from the cache
(`_ruleset_cache`) never imports.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from rewriter._errors import RuleSyntaxError, Span
from rewriter.dsl._source import diagnostic


def find_rule_files(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """The `.rw` files that `paths` name, in load order, without repeats.

    Raises:
        FileNotFoundError: a path does not exist.
    """
    found: dict[Path, None] = {}
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            below = sorted(
                (p for p in path.rglob("*.rw") if p.is_file()), key=lambda p: p.as_posix()
            )
            for file in below:
                found.setdefault(file, None)
        elif path.is_file():
            found.setdefault(path, None)
        else:
            raise FileNotFoundError(2, "no such file or directory", os.fspath(path))
    return list(found)


def read_rule_file(path: Path) -> str:
    """The text of a rule file (a leading UTF-8 byte-order mark dropped).

    Raises:
        RuleSyntaxError: the file is not UTF-8 (the diagnostic points at the first bad byte).
        OSError: the file cannot be read.
    """
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        before = data[: exc.start].decode("utf-8", errors="replace")
        line = before.count("\n") + 1
        col = len(before) - (before.rfind("\n") + 1) + 1
        span = Span(str(path), line, col, line, col + 1)
        message = f"this file is not UTF-8 text (byte 0x{data[exc.start]:02x})"
        text = data.decode("utf-8", errors="replace")
        raise RuleSyntaxError([diagnostic("error", span, message, text)]) from exc
    # A byte-order mark (some Windows editors write one) is not part of the text.
    return text.removeprefix("\ufeff")
