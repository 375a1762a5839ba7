"""Rule IR values as flat JSON arrays, and back: how a loaded rule set is kept in a cache.

`encode_ir(value)` writes a value built of the rule IR's classes, tuples, lists and literals in
postfix order; `decode_ir` builds it again. Reading runs no code: the tokens name only the IR's
own classes, each built from its field values. An object reached twice (a named constraint
that several rules call) is written once and shared again when read, and every source span
once, in a table: a rule set's spans are more than a third of its objects.

Tokens: a string, float, bool or null stands for itself; a non-negative integer is a class
(`IR_LAYOUT` order) built from the values its fields pushed; a negative integer is a marker:
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

from rewriter._errors import Span
from rewriter.rules import _expr, _pattern, _rewrite, _rule

_INT = -1  # the next token is an integer value
_TUPLE = -2  # the next token counts the values before that form a tuple
_LIST = -3  # the same for a list
_KEEP = -4  # the object just built is read again later: keep it (in order)
_KEPT = -5  # the next token is the index of a kept object
_SPAN = -16  # and below: the span at index _SPAN - token of the span table

_CLASSES: dict[str, type] = {
    f"{cls.__module__}.{cls.__qualname__}": cls
    for module in (_expr, _pattern, _rewrite, _rule)
    for cls in vars(module).values()
    if isinstance(cls, type)
    and dataclasses.is_dataclass(cls)
    and cls.__module__ == module.__name__
    and cls is not _rule.RuleSet  # it holds mappings and plugin functions: not encoded
}
_ORDER = sorted(_CLASSES)
_INDEX = {_CLASSES[name]: index for index, name in enumerate(_ORDER)}
_BUILD = [(_CLASSES[name], len(dataclasses.fields(_CLASSES[name]))) for name in _ORDER]

IR_LAYOUT = repr([(name, [f.name for f in dataclasses.fields(_CLASSES[name])]) for name in _ORDER])
"""Every encoded class with its fields: an encoding is read only by code of the same layout."""


class _Encoder:
    def __init__(self, shared: set[int]) -> None:
        self.shared = shared
        self.tokens: list[Any] = []
        self.kept: dict[int, int] = {}
        self.spans: dict[Span, int] = {}

    def value(self, value: Any) -> None:
        tokens = self.tokens
        if isinstance(value, Span):
            tokens.append(_SPAN - self.spans.setdefault(value, len(self.spans)))
        elif type(value) in _INDEX:
            kept = self.kept.get(id(value))
            if kept is not None:
                tokens.extend((_KEPT, kept))
                return
            for field in dataclasses.fields(value):
                self.value(getattr(value, field.name))
            tokens.append(_INDEX[type(value)])
            if id(value) in self.shared:
                self.kept[id(value)] = len(self.kept)
                tokens.append(_KEEP)
        elif isinstance(value, tuple | list):
            for item in value:
                self.value(item)
            tokens.extend((_TUPLE if isinstance(value, tuple) else _LIST, len(value)))
        elif isinstance(value, int) and not isinstance(value, bool):
            tokens.extend((_INT, value))
        elif value is None or isinstance(value, bool | float | str):
            tokens.append(value)
        else:
            raise TypeError(f"a {type(value).__name__} is not a rule IR value")


def encode_ir(value: Any) -> dict[str, Any]:
    """The JSON-ready encoding of `value` (IR objects, tuples, lists and literals).

    Raises:
        TypeError: `value` holds something else (a plugin function, a mapping).
    """
    seen: set[int] = set()
    shared: set[int] = set()
    _find_shared(value, seen, shared)
    encoder = _Encoder(shared)
    encoder.value(value)
    paths: dict[str, int] = {}
    table: list[int] = []
    for span in encoder.spans:
        path = paths.setdefault(span.path, len(paths))
        table.extend((path, span.line, span.col, span.end_line, span.end_col))
    return {"paths": list(paths), "spans": table, "tokens": encoder.tokens}


def _find_shared(value: Any, seen: set[int], shared: set[int]) -> None:
    """Collect the IR objects `value` reaches more than once."""
    if type(value) in _INDEX:
        if id(value) in seen:
            shared.add(id(value))
            return
        seen.add(id(value))
        for field in dataclasses.fields(value):
            _find_shared(getattr(value, field.name), seen, shared)
    elif isinstance(value, tuple | list):
        for item in value:
            _find_shared(item, seen, shared)


def decode_ir(data: dict[str, Any]) -> Any:
    """The value `encode_ir` wrote as `data`.

    Raises:
        ValueError, TypeError, KeyError, IndexError, StopIteration: `data` is no encoding.
    """
    paths = data["paths"]
    table = data["spans"]
    spans = [
        Span(paths[table[i]], table[i + 1], table[i + 2], table[i + 3], table[i + 4])
        for i in range(0, len(table), 5)
    ]
    stack: list[Any] = []
    kept: list[Any] = []
    push = stack.append
    pending: Iterator[Any] = iter(data["tokens"])
    for token in pending:
        if type(token) is not int:  # a literal (bools are not ints here)
            push(token)
        elif token >= 0:
            cls, count = _BUILD[token]
            args = stack[len(stack) - count :]
            del stack[len(stack) - count :]
            push(cls(*args))
        elif token <= _SPAN:
            push(spans[_SPAN - token])
        elif token == _INT:
            push(next(pending))
        elif token in (_TUPLE, _LIST):
            count = next(pending)
            items = stack[len(stack) - count :]
            del stack[len(stack) - count :]
            push(tuple(items) if token == _TUPLE else items)
        elif token == _KEEP:
            kept.append(stack[-1])
        elif token == _KEPT:
            push(kept[next(pending)])
        else:
            raise ValueError(f"unknown marker {token}")
    (value,) = stack
    return value
