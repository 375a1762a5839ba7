"""What per-op shape rules see and return: symbolic shapes, shape values, and helpers.

A *shape* is a tuple of dims, each a `DimExpr` or None (unknown); a shape of unknown rank is
None. A *shape value* (`ShapeData`) is what a small integer tensor of rank 0 or 1 holds,
element by element, when its elements are known as expressions: the output of `Shape`, the
`Concat` of its `Gather`s, the arithmetic an exporter does on them. Bool tensors of such
values (from `Equal`) hold 0 and 1.

Rules are sound: every dim and element they return holds for every input the model accepts.
Where that is not certain, they return None for it. Broadcasting follows numpy's rules:
equal dims stay; 1 against d gives d; a number N != 1 against a symbol gives N (the model runs
only when the symbol is 1 or N); two different symbols, or a symbol against an unknown dim,
give an unknown dim.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Protocol

from ir._core import Node, Tensor, Value
from ir._enums import DataType
from ir._symbolic_dims import DimExpr, assume_at_most, const, minimum_arguments

Shape = tuple[DimExpr | None, ...]
"""Dims of a tensor of known rank; a dim is None when unknown."""

# Shape values longer than this are not followed element by element (a weight is no shape).
MAX_ELEMENTS = 64
# Slice ends at least this large mean "to the end" (exporters write INT64_MAX or INT32_MAX).
LARGE = 2**31 - 1


@dataclasses.dataclass(frozen=True, slots=True)
class ShapeData:
    """The elements of an integer (or bool) tensor of rank 0 (`scalar`) or rank 1."""

    elements: tuple[DimExpr | None, ...]
    scalar: bool = False

    def ints(self) -> tuple[int, ...] | None:
        """The elements as ints when every one is a known constant."""
        found: list[int] = []
        for element in self.elements:
            value = element.as_int() if element is not None else None
            if value is None:
                return None
            found.append(value)
        return tuple(found)


@dataclasses.dataclass(frozen=True, slots=True)
class OutputFacts:
    """What a rule knows about one output: its shape and, for shape values, its elements."""

    shape: Shape | None = None
    data: ShapeData | None = None


class ShapeFacts(Protocol):
    """The facts a rule reads about a node's inputs."""

    def shape(self, value: Value | None) -> Shape | None:
        """The value's shape (None when its rank is unknown or the value is absent)."""
        ...

    def data(self, value: Value | None) -> ShapeData | None:
        """The value's elements, when it is a shape value whose elements are followed."""
        ...

    def opset(self) -> int:
        """The default domain's opset of the graph being inferred."""
        ...

    def dtype(self, value: Value | None) -> DataType:
        """The value's element type (UNDEFINED when unknown or the value is absent)."""
        ...


Rule = Callable[[Node, ShapeFacts], Sequence[OutputFacts] | None]
"""Facts for a node's outputs, in order (fewer than its outputs: the rest are unknown)."""
RuleTable = Mapping[str, Rule]


def held_by(element: DimExpr | None, dtype: DataType) -> DimExpr | None:
    """`element` when an integer of `dtype` holds it unchanged; None where it may wrap.

    Of an unknown type the int64 range is assumed (shape computations' own type).
    """
    if element is None or not (dtype.is_integer or dtype == DataType.UNDEFINED):
        return element
    bits = dtype.bitwidth if dtype.is_integer else 64
    unsigned = dtype.name.startswith("UINT")
    number = element.as_int()
    if number is None:
        return element if not unsigned or element.is_nonnegative() else None
    low, high = (0, 2**bits - 1) if unsigned else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    return element if low <= number <= high else None


# attributes -----------------------------------------------------------------------------------


def attr_int(node: Node, name: str, default: int) -> int:
    """An INT attribute, or `default` when it is absent or of another kind."""
    value = node.attribute(name, default)
    return value if isinstance(value, int) else default


def attr_ints(node: Node, name: str) -> tuple[int, ...] | None:
    """An INTS attribute, or None when it is absent."""
    value = node.attribute(name)
    if isinstance(value, tuple) and all(isinstance(v, int) for v in value):
        return tuple(int(v) for v in value)  # type: ignore[arg-type]
    return None


def attr_str(node: Node, name: str, default: str) -> str:
    """A STRING attribute, or `default`."""
    value = node.attribute(name, default)
    return value if isinstance(value, str) else default


def attr_tensor(node: Node, name: str) -> Tensor | None:
    """A TENSOR attribute, or None."""
    value = node.attribute(name)
    return value if isinstance(value, Tensor) else None


def input_at(node: Node, index: int) -> Value | None:
    """The node's input at `index`, None when it is absent or omitted."""
    inputs = node.inputs
    return inputs[index] if index < len(inputs) else None


def ints_of(facts: ShapeFacts, value: Value | None) -> tuple[int, ...] | None:
    """A shape value's elements as ints, when all are known constants."""
    data = facts.data(value)
    return data.ints() if data is not None else None


def ints_input_or_attr(
    node: Node, facts: ShapeFacts, index: int, name: str
) -> tuple[int, ...] | None:
    """Integers given as input `index` (newer opsets) or as attribute `name` (older ones)."""
    if index < len(node.inputs):
        return ints_of(facts, node.inputs[index])
    return attr_ints(node, name)


# shapes ---------------------------------------------------------------------------------------


def normalize_axis(axis: int, rank: int) -> int | None:
    """`axis` in [0, rank), counting negative axes from the end; None when out of range."""
    if axis < 0:
        axis += rank
    return axis if 0 <= axis < rank else None


def normalize_axes(axes: Iterable[int], rank: int) -> tuple[int, ...] | None:
    """Every axis normalized (None when one is out of range or repeated)."""
    found: list[int] = []
    for axis in axes:
        normalized = normalize_axis(axis, rank)
        if normalized is None or normalized in found:
            return None
        found.append(normalized)
    return tuple(found)


def dims_of_ints(values: Iterable[int]) -> Shape:
    """A static shape."""
    return tuple(const(v) if v >= 0 else None for v in values)


def broadcast_dim(dims: Iterable[DimExpr | None]) -> DimExpr | None:
    """One output dim of numpy broadcasting (see the module docstring for the cases)."""
    column = list(dims)
    fixed: int | None = None
    others: list[DimExpr | None] = []
    for dim in column:
        if dim is not None and _is_shorter_copy(dim, column):
            continue
        value = dim.as_int() if dim is not None else None
        if value is None:
            others.append(dim)
        elif value != 1:
            if fixed is not None and fixed != value:
                return None  # incompatible: the node fails on every input
            fixed = value
    if fixed is not None:
        return const(fixed)
    if not others:
        return const(1)
    first = others[0]
    if first is not None and all(other == first for other in others[1:]):
        return first
    return None


def _is_shorter_copy(dim: DimExpr, column: Sequence[DimExpr | None]) -> bool:
    """True for `min(x, c...)` beside `x` in `column`, with every c a constant >= 1.

    Such a dim broadcasts away: it is `x` itself, or a constant c < x that must then be 1
    (else the node fails on that input). What `position_ids[:, :seq]` of a longer buffer is.
    """
    arguments = minimum_arguments(dim)
    if arguments is None:
        return False
    symbolic = [a for a in arguments if a.as_int() is None]
    constants = [a.as_int() for a in arguments if a.as_int() is not None]
    if len(symbolic) != 1 or any(c is None or c < 1 for c in constants):
        return False
    return any(other is not None and other == symbolic[0] for other in column)


def broadcast(shapes: Sequence[Shape | None]) -> Shape | None:
    """The numpy broadcast of `shapes` (None when a rank is unknown).

    A column that holds `min(x, c)` beside `x` (c >= 2) runs only where `x <= c`; the other
    columns are simplified under that bound (`_bounds_implied`). What a causal mask cut from
    a fixed buffer, `mask[:, :, total - seq : total, :total]`, broadcast against the scores
    [batch, heads, seq, total] gives: the cut keeps `seq` rows.
    """
    known: list[Shape] = []
    for shape in shapes:
        if shape is None:
            return None
        known.append(shape)
    if not known:
        return None
    columns = _columns(known)
    for bound, limit in _bounds_implied(columns):
        columns = [
            [assume_at_most(d, bound, limit) if d is not None else None for d in column]
            for column in columns
        ]
    return tuple(broadcast_dim(column) for column in columns)


def broadcast_bounds(shapes: Sequence[Shape | None]) -> list[tuple[DimExpr, int]]:
    """(x, c) for each bound every run of a broadcast of `shapes` implies: x <= c.

    What `broadcast` assumes within its result (see there); a node that computes the broadcast
    on every run (one of the main graph) makes the bound hold for the whole model.
    """
    known = [shape for shape in shapes if shape is not None]
    if len(known) != len(shapes) or not known:
        return []
    return _bounds_implied(_columns(known))


def _columns(shapes: Sequence[Shape]) -> list[list[DimExpr | None]]:
    """The dims of `shapes` aligned from the right, one list per output axis."""
    rank = max(len(s) for s in shapes)
    return [
        [s[position - rank + len(s)] for s in shapes if position - rank + len(s) >= 0]
        for position in range(rank)
    ]


def _bounds_implied(columns: Sequence[Sequence[DimExpr | None]]) -> list[tuple[DimExpr, int]]:
    """(x, c) for each `min(x, c)` beside `x` in a column, c >= 2: broadcasting needs x <= c.

    Both must be equal or one of them 1; `min(x, c) = 1` with c >= 2 means `x = 1`.
    """
    found: list[tuple[DimExpr, int]] = []
    for column in columns:
        for dim in column:
            if dim is None:
                continue
            arguments = minimum_arguments(dim)
            if arguments is None or len(arguments) != 2 or not _is_shorter_copy(dim, column):
                continue
            bound, cap = sorted(arguments, key=lambda a: a.as_int() is not None)
            limit = cap.as_int()
            if limit is not None and limit >= 2:
                found.append((bound, limit))
    return found


def merge_dim(a: DimExpr | None, b: DimExpr | None) -> DimExpr | None:
    """One dim that two facts give for the same axis (they must agree; a constant wins)."""
    if a is None:
        return b
    if b is None or a == b:
        return a
    return b if b.as_int() is not None else a


def element_count(shape: Shape | None) -> DimExpr | None:
    """The number of elements, None when a dim or the rank is unknown."""
    if shape is None:
        return None
    total = const(1)
    for dim in shape:
        if dim is None:
            return None
        total = total * dim
    return total


def same_as_input(node: Node, facts: ShapeFacts) -> Sequence[OutputFacts]:
    """The first output has the shape of the first input (elementwise unary ops)."""
    return [OutputFacts(facts.shape(input_at(node, 0)))]
