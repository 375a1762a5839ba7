"""What stands at a position of a parsed `.rw` file: an op, a call, a name, an include.

The syntax tree's nodes carry their spans; the smallest node whose span holds the position
is what the cursor is on. Positions are 1-based lines and columns, like the spans.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator

from rewriter import dsl
from rewriter._errors import Span
from rewriter.lsp._analysis import span_contains


@dataclasses.dataclass(frozen=True, slots=True)
class Spot:
    """The smallest syntax node at a position, and the top-level item (rule, ...) around it."""

    node: object
    item: dsl.Item


def spot_at(file: dsl.File, line: int, col: int) -> Spot | None:
    """The node at (line, col) of `file`, or None outside every item."""
    for item in file.items:
        span = getattr(item, "span", None)
        if not isinstance(span, Span) or not span_contains(span, line, col):
            continue
        holders = [(node, _span_of(node)) for node in walk(item)]
        inside = [(node, s) for node, s in holders if s is not None and span_contains(s, line, col)]
        # Nested nodes of the same extent (an op pattern of one op): the innermost, last walked.
        smallest = min(reversed(inside), key=lambda pair: _extent(pair[1]))
        return Spot(smallest[0], item)
    return None


def _span_of(node: object) -> Span | None:
    span = getattr(node, "span", None)
    return span if isinstance(span, Span) else None


def _extent(span: Span) -> tuple[int, int]:
    """How much text a span covers, for ordering: lines first, then columns."""
    return span.end_line - span.line, span.end_col - span.col


def walk(node: object) -> Iterator[object]:
    """`node` and every syntax node inside it, in field order (source order for a rule)."""
    yield node
    if not dataclasses.is_dataclass(node) or isinstance(node, type):
        return
    for field in dataclasses.fields(node):
        yield from _walk_value(getattr(node, field.name))


def _walk_value(value: object) -> Iterator[object]:
    if isinstance(value, tuple):
        for item in value:
            yield from _walk_value(item)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type | Span):
        yield from walk(value)


def on_call_name(call: dsl.Call, line: int, col: int) -> bool:
    """True when (line, col) is on the function name of `call` (not its arguments)."""
    return line == call.span.line and call.span.col <= col <= call.span.col + len(call.func)


def name_spans(item: dsl.Rule | dsl.Constraint, source: str) -> Iterator[tuple[str, Span]]:
    """Every (name, span) of a value, node or parameter name in an item, in source order."""
    for node in walk(item):
        if isinstance(node, dsl.Name | dsl.InputVar | dsl.OutputVar | dsl.Param):
            span = node.span
            yield (
                node.name,
                Span(span.path, span.line, span.col, span.line, span.col + len(node.name)),
            )
        elif isinstance(node, dsl.LetStmt):
            found = _find(source, node.span, rf"\blet\s+({re.escape(node.name)})\b")
            if found is not None:
                yield node.name, found
        elif isinstance(node, dsl.NodePattern | dsl.NodeStmt) and node.as_name:
            found = _find(source, node.span, rf"\bas\s+({re.escape(node.as_name)})\b")
            if found is not None:
                yield node.as_name, found


def definition_of(item: dsl.Rule | dsl.Constraint, name: str, source: str) -> Span | None:
    """Where `name` is first bound in the item: its first occurrence in source order."""
    found = [span for seen, span in name_spans(item, source) if seen == name]
    return min(found, key=lambda s: (s.line, s.col)) if found else None


def _find(source: str, span: Span, pattern: str) -> Span | None:
    """The first match of `pattern`'s group 1 in the text of `span`'s lines, from its start."""
    lines = source.splitlines()
    for number in range(span.line, min(span.end_line, len(lines)) + 1):
        text = lines[number - 1]
        start = span.col - 1 if number == span.line else 0
        match = re.search(pattern, text[start:])
        if match is not None:
            col = start + match.start(1) + 1
            return Span(span.path, number, col, number, col + len(match.group(1)))
    return None
