"""A stamp of the code that parses, checks and lowers rules (for cache entries' names)."""

from __future__ import annotations

import functools
from pathlib import Path

import ir
from rewriter import rules


@functools.cache
def checker_stamp() -> str:
    """The code that parses, checks and lowers rules, by its modules' names, sizes and times.

    Part of every cache entry's name that depends on that code: an edited checker, rule IR or
    ir gives other names, so entries written before are never read.
    """
    stamps = []
    for package in (Path(__file__).parent, Path(rules.__file__).parent, Path(ir.__file__).parent):
        for module in sorted(package.glob("*.py")):
            stat = module.stat()
            stamps.append(f"{module.name} {stat.st_size} {stat.st_mtime_ns}")
    return "\n".join(stamps)
