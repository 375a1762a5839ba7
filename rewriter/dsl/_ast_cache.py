"""Parsed rule files kept in the user's cache folder, so the same text is parsed only once.

`parse_cached(text, path, cache)` is `parse(text, path)`, read from the cache when a parse of
exactly this text by this grammar is stored there (the entry's name is a digest of both; the
path is not part of it, spans take the path given). An entry is one flat JSON array that
names only classes of the syntax tree (and `Span`), each built from its field values: reading
it runs no code. Text that does not parse is never stored; its error comes from parsing it
again.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from typing import Any

from rewriter._cache import CacheFolder, digest
from rewriter._errors import Span
from rewriter.dsl import _ast as ast
from rewriter.dsl._lark import grammar_digest, grammar_text

logger = logging.getLogger(__name__)

_FORMAT = "2"
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
# A class is written as its index here (the layout above fixes the order) and read back with
# its field count.
_ORDER = sorted(_CLASSES)
_INDEX = {_CLASSES[name]: index for index, name in enumerate(_ORDER)}
_BUILD = [(_CLASSES[name], len(dataclasses.fields(_CLASSES[name]))) for name in _ORDER]


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
            return _decode(json.loads(data), path, text)
        except (ValueError, KeyError, TypeError, IndexError, StopIteration) as exc:
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


# Encoding: the tree in postfix order, one flat array (no JSON object per node, so reading an
# entry allocates little besides the tree itself). A string, float, bool or null stands for
# itself; a non-negative integer is a class (`_ORDER`), built from the values its fields
# pushed; negative integers are markers, followed by what they need:
_INT = -1  # the next token is an integer value
_TUPLE = -2  # the next token counts the values before that form a tuple
_SPAN = -3  # a span in this file: line, col, end line, end col follow
_SPAN_ELSEWHERE = -4  # a span in the file whose path was pushed before: four numbers follow
_FILE = -5  # the end: the File (its text is not stored; the caller has it)


def _encode(parsed: ast.File, path: str) -> list[Any]:
    """The postfix tokens of `parsed` (see above).

    Raises:
        ValueError: a NaN literal (JSON cannot hold it).
        TypeError: a value of a kind the tree does not hold.
    """
    tokens: list[Any] = []
    for field in _fields(parsed, skip="source"):
        _encode_value(field, path, tokens)
    tokens.append(_FILE)
    return tokens


def _encode_value(value: Any, path: str, tokens: list[Any]) -> None:
    if isinstance(value, Span):
        if value.path != path:
            tokens.append(value.path)
        marker = _SPAN if value.path == path else _SPAN_ELSEWHERE
        tokens.extend((marker, value.line, value.col, value.end_line, value.end_col))
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for field in _fields(value):
            _encode_value(field, path, tokens)
        tokens.append(_INDEX[type(value)])
    elif isinstance(value, tuple):
        for item in value:
            _encode_value(item, path, tokens)
        tokens.extend((_TUPLE, len(value)))
    elif isinstance(value, float) and value != value:
        raise ValueError("NaN literals are not cached")
    elif isinstance(value, int) and not isinstance(value, bool):
        tokens.extend((_INT, value))
    elif value is None or isinstance(value, bool | float | str):
        tokens.append(value)
    else:
        raise TypeError(f"cannot cache a {type(value).__name__}")


def _fields(value: Any, skip: str = "") -> list[Any]:
    return [getattr(value, f.name) for f in dataclasses.fields(value) if f.name != skip]


def _decode(tokens: list[Any], path: str, source: str) -> ast.File:
    """The File that `_encode` wrote as `tokens`, its spans and itself at `path`.

    Raises:
        ValueError, TypeError, IndexError, StopIteration: the tokens are not an entry.
    """
    stack: list[Any] = []
    push = stack.append
    pending = iter(tokens)
    for token in pending:
        if type(token) is not int:  # a literal (bools are not ints here)
            push(token)
        elif token >= 0:
            cls, count = _BUILD[token]
            args = stack[len(stack) - count :]
            del stack[len(stack) - count :]
            push(cls(*args))
        elif token == _INT:
            push(next(pending))
        elif token == _TUPLE:
            count = next(pending)
            items = tuple(stack[len(stack) - count :])
            del stack[len(stack) - count :]
            push(items)
        elif token == _SPAN:
            push(Span(path, next(pending), next(pending), next(pending), next(pending)))
        elif token == _SPAN_ELSEWHERE:
            push(Span(stack.pop(), next(pending), next(pending), next(pending), next(pending)))
        elif token == _FILE:
            _, items, comments, span = stack
            return ast.File(path, items, comments, source=source, span=span)
        else:
            raise ValueError(f"unknown marker {token}")
    raise ValueError("a cached entry ends before its File")
