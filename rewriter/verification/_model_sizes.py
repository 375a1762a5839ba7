"""The sizes a model itself mentions, and which symbolic dims they concern.

Generated examples keep dims small (1 to 6), where a rewrite that is right only up to some
size passes: `Slice(x, 0, 8) -> x` agrees with the original on every sequence of at most 8
positions. The sizes worth trying are the ones the model states: the length of a position
table, a Slice's ends, a Reshape target's dims, the constant a shape is compared with.
`model_sizes` collects them from the model's nodes and, where it can tell, the symbolic dim
each concerns (with the shape facts `ir.infer_types` records):

* Slice: a constant start or end on an axis whose dim is symbolic concerns that dim; a
  symbolic start or end (`seq`, read from a shape) on a constant or static axis (a position
  buffer of 128 entries sliced to the sequence length) makes that axis' length concern it;
* Gather / GatherElements on a constant table, with computed indices (position ids made by
  a Range over the sequence length, not ids the caller feeds): the table's length concerns
  the indices' symbolic dims;
* comparisons (Equal, Less, Greater, ..., Min, Max) of a shape value with a constant: the
  constant concerns the symbols on the other side;
* a dim expression the facts hold (`min(seq, 128)`): its numbers concern its symbols;
* Reshape targets and Expand shapes: their constant dims are sizes the model mentions,
  concerning no dim in particular (`general`).

Only sizes from 2 to `MAX_MENTIONED` count (`INT64_MAX` ends mean "to the end").
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence

import ir

MAX_MENTIONED = 1 << 16
_MIN_MENTIONED = 2
_STANDARD = ("", "ai.onnx")
_COMPARISONS = frozenset(
    {"Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "Min", "Max"}
)
# Ops through which computed indices are followed back (they keep the indices' values).
_INDEX_PATH = frozenset(
    {"Cast", "Unsqueeze", "Squeeze", "Reshape", "Expand", "Identity", "Add", "Sub", "Mul"}
)
_MAX_DEPTH = 16
_NUMBER = re.compile(r"(?<![\w.])\d+(?![\w.])")


@dataclasses.dataclass(frozen=True, slots=True)
class ModelSizes:
    """Sizes a model mentions: by the symbolic dim they concern, and the rest."""

    by_symbol: Mapping[str, tuple[int, ...]]
    general: tuple[int, ...]

    def for_symbol(self, symbol: str | None) -> tuple[int, ...]:
        """The sizes worth trying for a dim (its own, else the general ones), ascending.

        `symbol` is None for a dim without a name (unknown dims share the general sizes).
        """
        own = self.by_symbol.get(symbol, ()) if symbol is not None else ()
        return own or self.general

    def largest(self) -> int | None:
        """The largest size mentioned at all (None when the model mentions none)."""
        everything = [*self.general, *(s for sizes in self.by_symbol.values() for s in sizes)]
        return max(everything, default=None)

    def describe(self) -> str:
        """One line, e.g. "`sequence` 128; elsewhere 16, 64"."""
        parts = [
            f"`{symbol}` {', '.join(map(str, sizes))}"
            for symbol, sizes in self.by_symbol.items()
            if sizes
        ]
        if self.general:
            parts.append(f"elsewhere {', '.join(map(str, self.general))}")
        return "; ".join(parts) or "none"


class _Collector:
    """Sizes found so far, by symbol and in general (ordered sets)."""

    def __init__(self, symbols: Sequence[str]) -> None:
        self.symbols = tuple(symbols)
        self.patterns = {s: re.compile(rf"(?<![\w.]){re.escape(s)}(?![\w.])") for s in symbols}
        self.by_symbol: dict[str, dict[int, None]] = {s: {} for s in symbols}
        self.general: dict[int, None] = {}

    def symbols_in(self, dim: object) -> list[str]:
        """The known symbols a dim (an int, a symbol or an expression's text) mentions."""
        if not isinstance(dim, str) or not dim:
            return []
        if dim in self.patterns:
            return [dim]
        return [s for s, pattern in self.patterns.items() if pattern.search(dim)]

    def add(self, size: object, symbols: Iterable[str] = ()) -> None:
        if isinstance(size, bool) or not isinstance(size, int):
            return
        size = abs(size)
        if not _MIN_MENTIONED <= size <= MAX_MENTIONED:
            return
        targets = list(symbols)
        if not targets:
            self.general[size] = None
        for symbol in targets:
            self.by_symbol[symbol][size] = None

    def result(self) -> ModelSizes:
        by_symbol = {s: tuple(sorted(sizes)) for s, sizes in self.by_symbol.items() if sizes}
        return ModelSizes(by_symbol, tuple(sorted(self.general)))


def model_sizes(models: Iterable[ir.Model], symbols: Sequence[str]) -> ModelSizes:
    """The sizes the models mention (see the module docstring); `symbols`: the dims to relate.

    Reads the shape facts the models carry (`ir.infer_types` records them); a model without
    facts still gives the sizes its constants state.
    """
    collector = _Collector(symbols)
    for model in models:
        opset = model.opset_imports.get("", model.opset_imports.get("ai.onnx", 1))
        for graph in model.graphs():
            for node in graph:
                if node.domain in _STANDARD:
                    _visit(node, opset, collector)
                for value in node.outputs:
                    _from_facts(value, collector)
    return collector.result()


def _visit(node: ir.Node, opset: int, collector: _Collector) -> None:
    op = node.op_type
    if op == "Slice":
        _slice(node, opset, collector)
    elif op in ("Gather", "GatherElements"):
        _gather(node, collector)
    elif op in ("Reshape", "Expand") and len(node.inputs) > 1:
        for element in _elements(node.inputs[1], opset) or ():
            collector.add(element)
    elif op in _COMPARISONS:
        _comparison(node, opset, collector)


def _elements(value: ir.Value | None, opset: int) -> tuple[int | str | None, ...] | None:
    if value is None:
        return None
    return ir.shape_elements(value, opset)


def _shape(value: ir.Value | None) -> tuple[ir.Dim, ...] | None:
    """The value's shape: from its constant, else the facts."""
    if value is None:
        return None
    const = value.const_value
    if const is not None and not value.is_graph_input():
        return tuple(const.shape)
    fact = ir.fact_type(value)
    if isinstance(fact, ir.TensorType):
        return fact.shape
    return None


def _slice(node: ir.Node, opset: int, collector: _Collector) -> None:
    """A Slice's constant bounds concern its axes' symbols, and symbolic bounds its lengths."""
    data_shape = _shape(node.inputs[0] if node.inputs else None)
    if data_shape is None:
        return
    rank = len(data_shape)
    if len(node.inputs) >= 3:
        starts = _elements(node.inputs[1], opset)
        ends = _elements(node.inputs[2], opset)
        axes_value = node.inputs[3] if len(node.inputs) > 3 else None
        axes = _elements(axes_value, opset) if axes_value is not None else None
    else:  # Slice-1: attributes
        starts = _ints_attribute(node, "starts")
        ends = _ints_attribute(node, "ends")
        axes = _ints_attribute(node, "axes")
    if starts is None or ends is None:
        return
    if axes is None:
        axes = tuple(range(len(starts)))
    for axis, bounds in zip(axes, zip(starts, ends, strict=False), strict=False):
        if not isinstance(axis, int) or not -rank <= axis < rank:
            continue
        dim = data_shape[axis % rank]
        dim_symbols = collector.symbols_in(dim)
        for bound in bounds:
            if isinstance(bound, int):
                collector.add(bound, dim_symbols)
            elif isinstance(dim, int):
                # A position buffer sliced to a length read from a shape.
                collector.add(dim, collector.symbols_in(bound))


def _ints_attribute(node: ir.Node, name: str) -> tuple[int | str | None, ...] | None:
    value = node.attribute(name)
    if isinstance(value, Sequence) and all(isinstance(v, int) for v in value):
        return tuple(value)  # type: ignore[arg-type]
    return None


def _gather(node: ir.Node, collector: _Collector) -> None:
    """A constant table's length concerns the symbolic dims of the computed indices."""
    if len(node.inputs) < 2 or node.inputs[0] is None or node.inputs[1] is None:
        return
    table, indices = node.inputs[0], node.inputs[1]
    if _is_fed(indices):
        return  # ids the caller feeds are drawn inside the table; their shape is not its size
    table_shape = _shape(table)
    index_shape = _shape(indices)
    axis = node.attribute("axis", 0)
    if table_shape is None or index_shape is None or not isinstance(axis, int):
        return
    if not -len(table_shape) <= axis < len(table_shape):
        return
    length = table_shape[axis % len(table_shape)]
    if not isinstance(length, int):
        return
    symbols = [s for dim in index_shape for s in collector.symbols_in(dim)]
    if symbols:
        collector.add(length, dict.fromkeys(symbols))


def _is_fed(value: ir.Value) -> bool:
    """True when the value is a graph input or computed from one by index-preserving ops."""
    return any(found.is_graph_input() and found.const_value is None for found in _back(value, 0))


def _back(value: ir.Value, depth: int) -> Iterator[ir.Value]:
    yield value
    producer = value.producer()
    if producer is None or depth >= _MAX_DEPTH or producer.op_type not in _INDEX_PATH:
        return
    first = producer.inputs[0] if producer.inputs else None
    if first is not None:
        yield from _back(first, depth + 1)


def _comparison(node: ir.Node, opset: int, collector: _Collector) -> None:
    """Constants compared with a shape value concern the symbols on the other side."""
    sides = [_elements(v, opset) for v in node.inputs[:2]]
    if len(sides) != 2 or sides[0] is None or sides[1] is None:
        return
    for mine, theirs in ((sides[0], sides[1]), (sides[1], sides[0])):
        symbols = [s for element in theirs for s in collector.symbols_in(element)]
        if not symbols:
            continue
        for element in mine:
            collector.add(element, dict.fromkeys(symbols))


def _from_facts(value: ir.Value, collector: _Collector) -> None:
    """Numbers in a symbolic dim expression (`min(seq, 128)`) concern its symbols."""
    fact = ir.fact_type(value)
    if not isinstance(fact, ir.TensorType) or fact.shape is None:
        return
    for dim in fact.shape:
        if not isinstance(dim, str) or not _NUMBER.search(dim):
            continue
        symbols = collector.symbols_in(dim)
        if symbols:
            for number in _NUMBER.findall(dim):
                collector.add(int(number), symbols)


def symbol_of(key: tuple[str, str]) -> str | None:
    """The symbol of a sampled dim key (None for an unnamed dim)."""
    return key[1] if key[0] == "sym" else None


__all__ = ["MAX_MENTIONED", "ModelSizes", "model_sizes", "symbol_of"]
