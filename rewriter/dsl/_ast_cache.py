"""Parsed rule files kept in the user's cache folder, so the same text is parsed only once.

`parse_cached(text, path, cache)` is `parse(text, path)`, read from the cache when a parse of
exactly this text by this grammar is stored there (the entry's name is a digest of both; the
path is not part of it, spans take the path given). An entry is JSON that names only classes
of the syntax tree (and `Span`), each built from its field values: reading it runs no code.
Text that does not parse is never stored; its error comes from parsing it again.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
from typing import Any

from rewriter._cache import CacheFolder, digest
from rewriter._errors import Span
from rewriter.dsl import _ast as ast
from rewriter.dsl._lark import grammar_digest, grammar_text

logger = logging.getLogger(__name__)

_FORMAT = "1"
# The syntax tree's own classes and the rule IR's expression classes it is built with.
_CLASSES: dict[str, type] = {
    name: cls
    for name, cls in vars(ast).items()
    if isinstance(cls, type) and dataclasses.is_dataclass(cls) and cls is not Span
}
# Entries are decoded by field position: the key carries every AST class's field names, so
# a change to the AST never reads an entry written before it.
_LAYOUT = repr(
    sorted((name, [f.name for f in dataclasses.fields(cls)]) for name, cls in _CLASSES.items())
)


def _entry_name(text: str) -> str:
    return f"ast-{digest(_FORMAT, _LAYOUT, grammar_digest(grammar_text()), text)}.json"


def parse_cached(text: str, path: str, cache: CacheFolder) -> ast.File:
    """`parse(text, path)`, from `cache` when it holds this text's parse.

    Raises:
        RuleSyntaxError: the text does not parse.
    """
    name = _entry_name(text)
    data = cache.read(name)
    if data is not None:
        try:
            return _decode_file(_loads(data, path), path, text)
        except (ValueError, KeyError, TypeError, IndexError) as exc:
            logger.debug("cached parse %s is unusable (%s); parsing", name, exc)
    from rewriter.dsl._parser import parse  # the parser (and Lark) load only on a miss

    parsed = parse(text, path)
    try:
        encoded = _encode(parsed, path)
    except (TypeError, ValueError) as exc:  # a literal JSON cannot hold (NaN)
        logger.debug("not caching the parse of %s: %s", path, exc)
        return parsed
    cache.write(name, json.dumps(encoded, separators=(",", ":")).encode())
    return parsed


# Encoding: a dataclass is {"C": class, "v": [field values]}, a tuple {"T": [...]}, a span
# {"S": [0 for the file's own path or the path itself, line, col, end line, end col]}; the
# file's text is not stored (the caller has it).


def _encode(value: Any, path: str) -> Any:
    if isinstance(value, Span):
        where: int | str = 0 if value.path == path else value.path
        return {"S": [where, value.line, value.col, value.end_line, value.end_col]}
    if isinstance(value, ast.File):
        return {"C": "File", "v": [_encode(f, path) for f in _fields(value, skip="source")]}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {"C": type(value).__name__, "v": [_encode(f, path) for f in _fields(value)]}
    if isinstance(value, tuple):
        return {"T": [_encode(item, path) for item in value]}
    if isinstance(value, float) and value != value:
        raise ValueError("NaN literals are not cached")
    if value is None or isinstance(value, bool | int | float | str):
        return value
    raise TypeError(f"cannot cache a {type(value).__name__}")


def _fields(value: Any, skip: str = "") -> list[Any]:
    return [getattr(value, f.name) for f in dataclasses.fields(value) if f.name != skip]


def _decode_file(encoded: Any, path: str, source: str) -> ast.File:
    if encoded.get("C") != "File":
        raise ValueError("a cached entry is not a File")
    _, items, comments, span = encoded["v"]
    return ast.File(path, items, comments, source=source, span=span)


def _loads(data: bytes, path: str) -> Any:
    """The JSON of an entry with every object below the File decoded (see `_decode`)."""
    return json.loads(data, object_hook=functools.partial(_decode, path=path))


def _decode(encoded: dict[str, Any], path: str) -> Any:
    """One JSON object, its contents already decoded (json calls it innermost first)."""
    span = encoded.get("S")
    if span is not None:
        where, line, col, end_line, end_col = span
        return Span(path if where == 0 else where, line, col, end_line, end_col)
    items = encoded.get("T")
    if items is not None:
        return tuple(items)
    name = encoded["C"]
    if name == "File":
        return encoded  # built by `_decode_file`, which has the text
    return _CLASSES[name](*encoded["v"])
