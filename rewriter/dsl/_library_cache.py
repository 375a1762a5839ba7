"""The shipped rule library, parsed ahead of time: `library_cache.json` beside the grammar.

Parsing the library (about 140 rules) takes a third of a second, which every run of the
`rewrite` command would pay. The cache holds the ASTs of those files as JSON, keyed by the
grammar's digest and the digest of every file's text in load order. `load_rules` uses it
when the files it is given have exactly those texts, under whatever paths they are named
(the spans take the given paths); any other set of files, or a stale cache, is parsed as
usual. Nothing is written at run time: `write_library_cache()` (run after changing
`patterns/`; a test checks the shipped cache is current) makes the file.

The JSON names only classes of `rewriter.dsl._ast` (and `Span`), each built from its field
values: reading it runs no code. A rule set with `use` declarations or warnings is never
cached (its loading has effects or output a cache would skip).
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.resources
import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rewriter._errors import Span
from rewriter.dsl import _ast as ast
from rewriter.dsl._parser import grammar_digest, grammar_text

logger = logging.getLogger(__name__)

_CACHE = "library_cache.json"
_FORMAT = 1
_CLASSES: dict[str, type] = {
    name: cls
    for name, cls in vars(ast).items()
    if isinstance(cls, type) and dataclasses.is_dataclass(cls) and cls.__module__ == ast.__name__
}


def cache_key(texts: Sequence[str]) -> str:
    """What a cache must have been built from to stand for files with these texts."""
    digest = hashlib.sha256(f"{_FORMAT} {grammar_digest(grammar_text())}\n".encode())
    for text in texts:
        digest.update(hashlib.sha256(text.encode()).digest())
    return digest.hexdigest()


def cached_files(paths: Sequence[str], texts: Sequence[str]) -> list[ast.File] | None:
    """The parsed files when the shipped cache was built from these texts, else None."""
    data = _read_cache()
    key = cache_key(texts)
    # The key comes first in the file: any other set of files is turned away before the
    # whole document is decoded (which costs a tenth of a second).
    if data is None or not data.startswith(f'{{"key":"{key}"'):
        return None
    try:
        document = json.loads(data)
        if document.get("key") != key or len(document["files"]) != len(paths):
            return None
        names = list(paths)
        return [
            _decode_file(encoded, names, index, text)
            for index, (encoded, text) in enumerate(zip(document["files"], texts, strict=True))
        ]
    except (ValueError, KeyError, TypeError, IndexError) as exc:
        logger.debug("the rule library cache is unusable (%s); parsing instead", exc)
        return None


def _read_cache() -> str | None:
    try:
        return importlib.resources.files("rewriter.dsl").joinpath(_CACHE).read_text()
    except OSError:
        return None


def write_library_cache(path: str | os.PathLike[str] | None = None) -> str:
    """Parse the shipped library and write its cache (into the package, or to `path`)."""
    from rewriter._api import default_library_files
    from rewriter.dsl._loader import load_rules

    files = default_library_files()
    ruleset = load_rules(*files)
    if ruleset.functions or ruleset.warnings:
        raise ValueError("a library with `use` declarations or warnings is not cached")
    texts = [f.source for f in ruleset.files]
    names = [f.path for f in ruleset.files]
    document = {
        "key": cache_key(texts),
        "files": [_encode(f, names) for f in ruleset.files],
    }
    target = path or str(importlib.resources.files("rewriter.dsl").joinpath(_CACHE))
    Path(target).write_text(json.dumps(document, separators=(",", ":")) + "\n")
    return str(target)


# ---------------------------------------------------------------------------------------------
# Encoding: a dataclass is {"C": class, "v": [field values]}, a tuple {"T": [...]}, a span
# {"S": [file index (or the path of a span made in code), line, col, end line, end col]}; the
# file's text is not stored (the caller has read it to compute the key).


def _encode(value: Any, names: list[str]) -> Any:
    if isinstance(value, Span):
        # A span of a file by its index; one made in code ("<none>") by its text.
        where: int | str = names.index(value.path) if value.path in names else value.path
        return {"S": [where, value.line, value.col, value.end_line, value.end_col]}
    if isinstance(value, ast.File):
        return {"C": "File", "v": [_encode(f, names) for f in _fields(value, skip="source")]}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {"C": type(value).__name__, "v": [_encode(f, names) for f in _fields(value)]}
    if isinstance(value, tuple):
        return {"T": [_encode(item, names) for item in value]}
    if isinstance(value, float) and value != value:
        raise ValueError("NaN literals are not cached")
    if value is None or isinstance(value, bool | int | float | str):
        return value
    raise TypeError(f"cannot cache a {type(value).__name__}")


def _fields(value: Any, skip: str = "") -> list[Any]:
    return [getattr(value, f.name) for f in dataclasses.fields(value) if f.name != skip]


def _decode_file(encoded: Any, paths: list[str], index: int, source: str) -> ast.File:
    """One file: its items and comments, named `paths[index]`, with its text."""
    if encoded.get("C") != "File":
        raise ValueError("a cached file is not a File")
    _, items, comments, span = (_decode(item, paths) for item in encoded["v"])
    return ast.File(paths[index], items, comments, source=source, span=span)


def _decode(encoded: Any, paths: list[str]) -> Any:
    if isinstance(encoded, dict):
        if "S" in encoded:
            where, line, col, end_line, end_col = encoded["S"]
            path = where if isinstance(where, str) else paths[where]
            return Span(path, line, col, end_line, end_col)
        if "T" in encoded:
            return tuple(_decode(item, paths) for item in encoded["T"])
        cls = _CLASSES[encoded["C"]]
        return cls(*(_decode(item, paths) for item in encoded["v"]))
    return encoded
