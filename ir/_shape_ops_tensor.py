"""Shape rules of the ops that build and move shapes: Shape, Gather, Slice, Concat, Reshape...

These are the ops exporters compute shapes with (`Shape -> Gather -> Unsqueeze -> Concat ->
Reshape`), so each rule also follows shape values element by element where its output is
one. Reshape's `0` copies an input dim only when allowzero is 0; a symbolic element can be 0
at run time, so it is taken as the output dim only when that is still right then (the input
dim at that position is a multiple of it: both are 0 together), or when allowzero is 1.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ir._core import Graph, Node, Tensor, Value
from ir._enums import DataType
from ir._shape_facts import (
    LARGE,
    MAX_ELEMENTS,
    OutputFacts,
    Rule,
    Shape,
    ShapeData,
    ShapeFacts,
    attr_int,
    attr_ints,
    attr_tensor,
    broadcast,
    element_count,
    input_at,
    ints_input_or_attr,
    ints_of,
    merge_dim,
    normalize_axes,
    normalize_axis,
)
from ir._symbolic_dims import DimExpr, const, exact_quotient, is_at_least, minimum, product


def _shape(node: Node, facts: ShapeFacts) -> Sequence[OutputFacts]:
    """Shape(x, start, end): the dims of x as a shape value."""
    dims = facts.shape(input_at(node, 0))
    if dims is None:
        return [OutputFacts((None,))]
    rank = len(dims)
    start = _clamp_axis(attr_int(node, "start", 0), rank)
    end = _clamp_axis(attr_int(node, "end", rank), rank)
    picked = dims[start:end]
    return [OutputFacts((const(len(picked)),), ShapeData(picked))]


def _clamp_axis(axis: int, rank: int) -> int:
    if axis < 0:
        axis += rank
    return min(max(axis, 0), rank)


def _size(node: Node, facts: ShapeFacts) -> Sequence[OutputFacts]:
    count = element_count(facts.shape(input_at(node, 0)))
    return [OutputFacts((), ShapeData((count,), scalar=True))]


def _constant(node: Node, facts: ShapeFacts) -> Sequence[OutputFacts]:
    """Constant: the shape of its value; small integer values are shape values."""
    tensor = attr_tensor(node, "value")
    if tensor is not None:
        return [OutputFacts(_static(tensor.shape), tensor_data(tensor))]
    scalar = node.attribute("value_int")
    if isinstance(scalar, int):
        return [OutputFacts((), ShapeData((const(scalar),), scalar=True))]
    values = attr_ints(node, "value_ints")
    if values is not None:
        data = ShapeData(tuple(const(v) for v in values)) if len(values) <= MAX_ELEMENTS else None
        return [OutputFacts((const(len(values)),), data)]
    if isinstance(node.attribute("value_float"), float):
        return [OutputFacts(())]
    floats = node.attribute("value_floats")
    if isinstance(floats, tuple):
        return [OutputFacts((const(len(floats)),))]
    return [OutputFacts()]


def _static(dims: Sequence[int]) -> Shape:
    return tuple(const(d) for d in dims)


def tensor_data(tensor: Tensor) -> ShapeData | None:
    """The elements of a small integer or bool tensor of rank 0 or 1 (read only then)."""
    if len(tensor.shape) > 1 or tensor.size > MAX_ELEMENTS:
        return None
    if not (tensor.dtype.is_integer or tensor.dtype == DataType.BOOL):
        return None
    array = np.asarray(tensor.numpy()).reshape(-1)
    elements = tuple(const(int(v)) for v in array.tolist())
    return ShapeData(elements, scalar=len(tensor.shape) == 0)


def _constant_of_shape(node: Node, facts: ShapeFacts) -> Sequence[OutputFacts]:
    target = facts.data(input_at(node, 0))
    if target is None:
        return [OutputFacts(_unknown_dims(facts, input_at(node, 0)))]
    shape = tuple(_as_size(e) for e in target.elements)
    value = attr_tensor(node, "value")
    fill = tensor_data(value) if value is not None else None
    data = None
    lengths = [d.as_int() if d is not None else None for d in shape]
    if fill is not None and len(fill.elements) == 1 and len(shape) <= 1:
        count = lengths[0] if shape else 1
        if count is not None and count <= MAX_ELEMENTS:
            data = ShapeData(fill.elements * count, scalar=not shape)
    return [OutputFacts(shape, data)]


def _unknown_dims(facts: ShapeFacts, shape_input: Value | None) -> Shape | None:
    """Unknown dims, as many as a 1-D shape input of known length holds."""
    dims = facts.shape(shape_input)
    if dims is None or len(dims) != 1 or dims[0] is None:
        return None
    length = dims[0].as_int()
    return (None,) * length if length is not None else None


def _as_size(element: DimExpr | None) -> DimExpr | None:
    """An element of ConstantOfShape's or Expand's shape as a dim.

    A negative constant is no size; a symbolic element is the dim on every input the node
    accepts (it fails on a negative one).
    """
    if element is None:
        return None
    value = element.as_int()
    return None if value is not None and value < 0 else element


# Gather / Slice / Concat / Split ---------------------------------------------------------------


def _gather(node: Node, facts: ShapeFacts) -> Sequence[OutputFacts]:
    source = facts.shape(input_at(node, 0))
    indices = facts.shape(input_at(node, 1))
    if source is None or indices is None:
        return [OutputFacts()]
    axis = normalize_axis(attr_int(node, "axis", 0), len(source))
    if axis is None:
        return [OutputFacts()]
    shape = source[:axis] + indices + source[axis + 1 :]
    return [OutputFacts(shape, _gathered(facts, node) if axis == 0 else None)]


def _gathered(facts: ShapeFacts, node: Node) -> ShapeData | None:
    data = facts.data(input_at(node, 0))
    picks = facts.data(input_at(node, 1))
    positions = picks.ints() if picks is not None else None
    if data is None or data.scalar or picks is None or positions is None:
        return None
    length = len(data.elements)
    elements: list[DimExpr | None] = []
    for position in positions:
        index = position + length if position < 0 else position
        if not 0 <= index < length:
            return None
        elements.append(data.elements[index])
    return ShapeData(tuple(elements), scalar=picks.scalar)


def _slice(node: Node, facts: ShapeFacts) -> Sequence[OutputFacts]:
    source = facts.shape(input_at(node, 0))
    if source is None:
        return [OutputFacts()]
    bounds = _slice_bounds(node, facts, len(source))
    if bounds is None:
        return [OutputFacts((None,) * len(source))]
    dims = list(source)
    for axis, start, end, step in bounds:
        dims[axis] = _slice_length(source[axis], start, end, step)
    data = facts.data(input_at(node, 0))
    return [OutputFacts(tuple(dims), _sliced(data, bounds) if data is not None else None)]


SliceBounds = tuple[tuple[int, DimExpr | None, DimExpr | None, int | None], ...]


def _slice_bounds(node: Node, facts: ShapeFacts, rank: int) -> SliceBounds | None:
    """(axis, start, end, step) per sliced axis, from inputs (opset 10+) or attributes."""
    if len(node.inputs) > 1:
        starts_data = facts.data(input_at(node, 1))
        ends_data = facts.data(input_at(node, 2))
        if starts_data is None or ends_data is None:
            return None
        starts: tuple[DimExpr | None, ...] = starts_data.elements
        ends: tuple[DimExpr | None, ...] = ends_data.elements
        axes = ints_of(facts, input_at(node, 3)) if input_at(node, 3) is not None else None
        steps = ints_of(facts, input_at(node, 4)) if input_at(node, 4) is not None else None
        if input_at(node, 3) is not None and axes is None:
            return None
        if input_at(node, 4) is not None and steps is None:
            return None
    else:
        start_ints = attr_ints(node, "starts")
        end_ints = attr_ints(node, "ends")
        if start_ints is None or end_ints is None:
            return None
        starts = tuple(const(v) for v in start_ints)
        ends = tuple(const(v) for v in end_ints)
        axes = attr_ints(node, "axes")
        steps = None
    axes = tuple(range(len(starts))) if axes is None else axes
    steps = (1,) * len(starts) if steps is None else steps
    if not len(starts) == len(ends) == len(axes) == len(steps):
        return None
    normalized = normalize_axes(axes, rank)
    if normalized is None:
        return None
    return tuple(zip(normalized, starts, ends, steps, strict=True))


def _slice_length(
    dim: DimExpr | None, start: DimExpr | None, end: DimExpr | None, step: int | None
) -> DimExpr | None:
    """Elements a slice keeps on one axis, with ONNX's clamping (None when not certain)."""
    if start is None or end is None or not step:
        return None
    size, first, last = (dim.as_int() if dim is not None else None), start.as_int(), end.as_int()
    if size is not None and first is not None and last is not None:
        return const(len(slice_range(size, first, last, step)))
    if dim is None or step < 0:
        return None
    low = _clamped_index(start, dim)
    high = _clamped_index(end, dim)
    if low is None or high is None:
        return None
    span = high - low
    if not is_at_least(high, low):
        value = span.as_int()
        return const(0) if value is not None and value < 0 else None
    return span if step == 1 else span.ceildiv(step)


def _clamped_index(index: DimExpr, dim: DimExpr) -> DimExpr | None:
    """A slice bound after ONNX's normalization and clamping to [0, dim], for a positive step."""
    value = index.as_int()
    size = dim.as_int()
    if value is not None:
        if value >= LARGE:
            return dim
        if value <= -LARGE:
            return const(0)
        if size is not None:
            normalized = value + size if value < 0 else value
            return const(min(max(normalized, 0), size))
        return minimum(index, dim) if value >= 0 else None
    return minimum(index, dim)


def slice_range(size: int, start: int, end: int, step: int) -> range:
    """The indices a Slice keeps along an axis of `size`, as onnxruntime computes them.

    ONNX's clamping, which is not Python's for a negative step (a start below -size is
    clamped to 0, so it keeps element 0; Python keeps nothing), and onnxruntime's reading of
    an end of INT32_MAX or INT64_MAX as "to the end" in the step's direction (with a negative
    step the first element is kept, where ONNX's clamping to size - 1 keeps nothing).
    """
    if start < 0:
        start += size
    start = min(max(start, 0), size - 1 if step < 0 else size)
    if end in _END_OF_AXIS:
        end = -1 if step < 0 else size
    else:
        if end < 0:
            end += size
        end = min(max(end, -1 if step < 0 else 0), size - 1 if step < 0 else size)
    return range(start, end, step) if size > 0 else range(0)


_END_OF_AXIS = (2**31 - 1, 2**63 - 1)


def _sliced(data: ShapeData, bounds: SliceBounds) -> ShapeData | None:
    if data.scalar or len(bounds) != 1:
        return None
    axis, start, end, step = bounds[0]
    first = start.as_int() if start is not None else None
    last = end.as_int() if end is not None else None
    if axis != 0 or first is None or last is None or not step:
        return None
    kept = slice_range(len(data.elements), first, last, step)
    return ShapeData(tuple(data.elements[i] for i in kept))


def _concat(node: Node, facts: ShapeFacts) -> Sequence[OutputFacts]:
    shapes = [facts.shape(v) if v is not None else None for v in node.inputs]
    known = [s for s in shapes if s is not None]
    if not shapes or len(known) != len(shapes):
        return [OutputFacts()]
    rank = len(known[0])
    axis = normalize_axis(attr_int(node, "axis", 0), rank)
    if axis is None or any(len(s) != rank for s in known):
        return [OutputFacts()]
    dims: list[DimExpr | None] = []
    for position in range(rank):
        column = [s[position] for s in known]
        if position == axis:
            dims.append(None if None in column else _sum(column))
        else:
            dims.append(_merged(column))
    return [OutputFacts(tuple(dims), _concatenated(facts, node))]


def _sum(dims: Sequence[DimExpr | None]) -> DimExpr:
    total = const(0)
    for dim in dims:
        assert dim is not None, "unknown dims are checked by the caller"
        total = total + dim
    return total


def _merged(dims: Sequence[DimExpr | None]) -> DimExpr | None:
    found: DimExpr | None = None
    for dim in dims:
        found = merge_dim(found, dim)
    return found


def _concatenated(facts: ShapeFacts, node: Node) -> ShapeData | None:
    elements: list[DimExpr | None] = []
    for value in node.inputs:
        data = facts.data(value) if value is not None else None
        if data is None or data.scalar:
            return None
        elements.extend(data.elements)
    return ShapeData(tuple(elements)) if len(elements) <= MAX_ELEMENTS else None


def _split(node: Node, facts: ShapeFacts) -> Sequence[OutputFacts]:
    source = facts.shape(input_at(node, 0))
    if source is None:
        return []
    axis = normalize_axis(attr_int(node, "axis", 0), len(source))
    if axis is None:
        return []
    count = len(node.outputs)
    sizes: Sequence[DimExpr | None]
    given = ints_input_or_attr(node, facts, 1, "split")
    if given is not None:
        sizes = [const(v) for v in given]
    elif (len(node.inputs) > 1 and input_at(node, 1) is not None) or source[axis] is None:
        sizes = [None] * count
    else:
        sizes = _even_split(source[axis], attr_int(node, "num_outputs", count), facts.opset())
    if len(sizes) != count:
        return []
    return [OutputFacts((*source[:axis], size, *source[axis + 1 :])) for size in sizes]


def _even_split(dim: DimExpr | None, count: int, opset: int) -> list[DimExpr | None]:
    """Chunk sizes of an even split.

    Before opset 18 the split must divide evenly; from 18 the last chunk is smaller when it
    does not.
    """
    if dim is None or count <= 0:
        return [None] * max(count, 0)
    if opset < 18:
        return [dim // count] * count
    chunk = dim.ceildiv(count)
    last = dim - chunk * (count - 1)
    return [*([chunk] * (count - 1)), last if last.is_nonnegative() else None]


# Unsqueeze / Squeeze / Reshape / Flatten ------------------------------------------------------


def _unsqueeze(node: Node, facts: ShapeFacts) -> Sequence[OutputFacts]:
    source = facts.shape(input_at(node, 0))
    axes = ints_input_or_attr(node, facts, 1, "axes")
    if source is None or axes is None:
        return [OutputFacts()]
    rank = len(source) + len(axes)
    positions = normalize_axes(axes, rank)
    if positions is None:
        return [OutputFacts()]
    remaining = iter(source)
    dims = tuple(const(1) if i in positions else next(remaining) for i in range(rank))
    data = facts.data(input_at(node, 0))
    lifted = ShapeData(data.elements) if data is not None and data.scalar else None
    return [OutputFacts(dims, lifted)]


def _squeeze(node: Node, facts: ShapeFacts) -> Sequence[OutputFacts]:
    source = facts.shape(input_at(node, 0))
    if source is None:
        return [OutputFacts()]
    axes = ints_input_or_attr(node, facts, 1, "axes")
    if axes is None and len(node.inputs) > 1 and input_at(node, 1) is not None:
        return [OutputFacts()]  # axes given but not known
    if axes is None:
        if any(d is None or d.as_int() is None for d in source):
            return [OutputFacts()]  # a symbolic dim may or may not be 1
        positions = tuple(i for i, d in enumerate(source) if d is not None and d.as_int() == 1)
    else:
        found = normalize_axes(axes, len(source))
        if found is None:
            return [OutputFacts()]
        positions = found
    dims = tuple(d for i, d in enumerate(source) if i not in positions)
    data = facts.data(input_at(node, 0))
    lowered = None
    if data is not None and not data.scalar and not dims and len(data.elements) == 1:
        lowered = ShapeData(data.elements, scalar=True)
    return [OutputFacts(dims, lowered)]


def _reshape(node: Node, facts: ShapeFacts) -> Sequence[OutputFacts]:
    source = facts.shape(input_at(node, 0))
    target = facts.data(input_at(node, 1))
    if target is None:
        return [OutputFacts(_unknown_dims(facts, input_at(node, 1)))]
    allow_zero = attr_int(node, "allowzero", 0) == 1
    dims: list[DimExpr | None] = []
    inferred: int | None = None
    for index, element in enumerate(target.elements):
        value = element.as_int() if element is not None else None
        if value == -1:
            if inferred is not None:
                return [OutputFacts()]  # two -1: the node is invalid
            inferred = index
            dims.append(None)
        elif value is not None and value < -1:
            return [OutputFacts()]
        else:
            dims.append(_target_dim(element, source, index, allow_zero))
    if inferred is not None:
        dims[inferred] = _inferred_dim(source, dims, inferred)
    shape = tuple(dims)
    return [OutputFacts(shape, _reshaped(facts.data(input_at(node, 0)), shape))]


def _target_dim(
    element: DimExpr | None, source: Shape | None, index: int, allow_zero: bool
) -> DimExpr | None:
    """The output dim a Reshape shape element other than -1 gives."""
    value = element.as_int() if element is not None else None
    if value == 0 and not allow_zero:
        return source[index] if source is not None and index < len(source) else None
    if value is not None:
        return element
    if allow_zero and element is not None and element.is_nonnegative():
        return element
    return _copy_safe(element, source, index)


def _copy_safe(element: DimExpr | None, source: Shape | None, index: int) -> DimExpr | None:
    """A symbolic element as the output dim, when its being 0 (copy) changes nothing.

    The element must also be provably non-negative: one that can be -1 asks Reshape to
    infer the dim.
    """
    if element is None or not element.is_nonnegative():
        return None
    if source is None or index >= len(source):
        return None
    copied = source[index]
    if copied is None:
        return None
    if copied == element or exact_quotient(copied, element) is not None:
        return element
    # element = k * copied for a number k != 0 (a product of dims that includes the copied
    # one, as TensorFlow's Tensordot computes it): element is 0 only when copied is
    multiple = exact_quotient(element, copied)
    if multiple is not None and multiple.as_int() not in (None, 0):
        return element
    return None


def _inferred_dim(
    source: Shape | None, dims: Sequence[DimExpr | None], index: int
) -> DimExpr | None:
    """The dim Reshape's -1 stands for: the input's elements over the other dims'."""
    total = element_count(source)
    others = [d for i, d in enumerate(dims) if i != index]
    if total is None or None in others:
        return None
    divisor = product(d for d in others if d is not None)
    if divisor.as_int() == 0:
        return None
    return exact_quotient(total, divisor)


def _reshaped(data: ShapeData | None, shape: Shape) -> ShapeData | None:
    if data is None or len(shape) > 1:
        return None
    if not shape:
        return ShapeData(data.elements, scalar=True) if len(data.elements) == 1 else None
    return ShapeData(data.elements) if shape[0] == const(len(data.elements)) else None


def _flatten(node: Node, facts: ShapeFacts) -> Sequence[OutputFacts]:
    source = facts.shape(input_at(node, 0))
    if source is None:
        return [OutputFacts((None, None))]
    axis = attr_int(node, "axis", 1)
    axis = axis + len(source) if axis < 0 else axis
    if not 0 <= axis <= len(source):
        return [OutputFacts()]
    return [OutputFacts((element_count(source[:axis]), element_count(source[axis:])))]


# Expand / Range / Tile / Transpose / Pad ------------------------------------------------------


def _expand(node: Node, facts: ShapeFacts) -> Sequence[OutputFacts]:
    source = facts.shape(input_at(node, 0))
    target = facts.data(input_at(node, 1))
    if target is None:
        return [OutputFacts()]
    shape = broadcast([source, tuple(_as_size(e) for e in target.elements)])
    data = facts.data(input_at(node, 0))
    expanded = None
    if data is not None and shape is not None and len(shape) <= 1:
        count = shape[0].as_int() if shape and shape[0] is not None else (1 if not shape else None)
        if count is not None and len(data.elements) in (1, count) and count <= MAX_ELEMENTS:
            elements = data.elements if len(data.elements) == count else data.elements * count
            expanded = ShapeData(elements, scalar=not shape)
    return [OutputFacts(shape, expanded)]


def _range(node: Node, facts: ShapeFacts) -> Sequence[OutputFacts]:
    items = [facts.data(input_at(node, i)) for i in range(3)]
    scalars = [d.elements[0] if d is not None and len(d.elements) == 1 else None for d in items]
    start, limit, delta = scalars
    step = delta.as_int() if delta is not None else None
    if start is None or limit is None or not step:
        return [OutputFacts((None,))]
    length = _range_length(limit - start, step)
    count = length.as_int() if length is not None else None
    data = None
    if count is not None and count <= MAX_ELEMENTS:
        data = ShapeData(tuple(start + k * step for k in range(count)))
    return [OutputFacts((length,), data)]


def _range_length(span: DimExpr, step: int) -> DimExpr | None:
    """`max(ceil(span / step), 0)`, Range's element count, when it can be stated."""
    value = span.as_int()
    if value is not None:
        return const(max(-(-value // step), 0))
    if step > 0 and span.is_nonnegative():
        return span.ceildiv(step)
    if step < 0 and (-span).is_nonnegative():
        return (-span).ceildiv(-step)
    return None


def _tile(node: Node, facts: ShapeFacts) -> Sequence[OutputFacts]:
    source = facts.shape(input_at(node, 0))
    repeats = facts.data(input_at(node, 1))
    if source is None:
        return [OutputFacts()]
    if repeats is None or len(repeats.elements) != len(source):
        return [OutputFacts((None,) * len(source))]
    dims = tuple(
        d * r if d is not None and r is not None else None
        for d, r in zip(source, repeats.elements, strict=True)
    )
    data = facts.data(input_at(node, 0))
    times = repeats.ints()
    tiled = None
    if data is not None and not data.scalar and times is not None:
        elements = data.elements * times[0]
        tiled = ShapeData(elements) if len(elements) <= MAX_ELEMENTS else None
    return [OutputFacts(dims, tiled)]


def _transpose(node: Node, facts: ShapeFacts) -> Sequence[OutputFacts]:
    source = facts.shape(input_at(node, 0))
    if source is None:
        return [OutputFacts()]
    perm = attr_ints(node, "perm")
    order = (
        tuple(reversed(range(len(source)))) if perm is None else normalize_axes(perm, len(source))
    )
    if order is None or len(order) != len(source):
        return [OutputFacts()]
    return [OutputFacts(tuple(source[i] for i in order))]


def _pad(node: Node, facts: ShapeFacts) -> Sequence[OutputFacts]:
    source = facts.shape(input_at(node, 0))
    if source is None:
        return [OutputFacts()]
    rank = len(source)
    pads = _pads(node, facts)
    axes: Sequence[int] | None = tuple(range(rank))
    if input_at(node, 3) is not None:
        axes = normalize_axes(ints_of(facts, input_at(node, 3)) or (), rank)
    if pads is None or axes is None or len(pads) != 2 * len(axes):
        return [OutputFacts((None,) * rank)]
    dims = list(source)
    for k, axis in enumerate(axes):
        dims[axis] = _padded(dims[axis], pads[k], pads[k + len(axes)])
    return [OutputFacts(tuple(dims))]


def _pads(node: Node, facts: ShapeFacts) -> tuple[DimExpr | None, ...] | None:
    """Pad's `pads`: an input from opset 11, an attribute before."""
    if len(node.inputs) > 1:
        data = facts.data(input_at(node, 1))
        return data.elements if data is not None else None
    given = attr_ints(node, "pads") or attr_ints(node, "paddings")
    return tuple(const(v) for v in given) if given is not None else None


def _padded(dim: DimExpr | None, before: DimExpr | None, after: DimExpr | None) -> DimExpr | None:
    if dim is None or before is None or after is None:
        return None
    total = dim + before + after
    return total if total.is_nonnegative() else None


def _shape_of_input(index: int) -> Rule:
    """Output 0 has the shape of input `index` (GatherElements, Scatter*, EyeLike)."""

    def rule(node: Node, facts: ShapeFacts) -> Sequence[OutputFacts]:
        return [OutputFacts(facts.shape(input_at(node, index)))]

    return rule


def _if(node: Node, facts: ShapeFacts) -> Sequence[OutputFacts]:
    """If: a dim both branches agree on (else unknown)."""
    then_graph = node.attribute("then_branch")
    else_graph = node.attribute("else_branch")
    if not isinstance(then_graph, Graph) or not isinstance(else_graph, Graph):
        return []
    found: list[OutputFacts] = []
    for a, b in zip(then_graph.outputs, else_graph.outputs, strict=False):
        left, right = facts.shape(a), facts.shape(b)
        if left is None or right is None or len(left) != len(right):
            found.append(OutputFacts())
            continue
        dims = tuple(
            x if x is not None and x == y else None for x, y in zip(left, right, strict=True)
        )
        found.append(OutputFacts(dims))
    return found


def _sequence_at(node: Node, facts: ShapeFacts) -> Sequence[OutputFacts]:
    """SequenceAt of a SplitToSequence, at a constant position: that piece's shape.

    The pieces of one sequence may differ in shape, so a sequence's element type is no fact
    about any one of them (`_shape_inference`); the piece a constant position picks is the
    split input's shape with the axis cut to that piece's size: the `split` entry there, a
    scalar `split` where the dim is static, or 1 (dropped without `keepdims`) with no
    `split` at all.
    """
    sequence = input_at(node, 0)
    split_node = sequence.producer() if sequence is not None else None
    position = facts.data(input_at(node, 1))
    if (
        split_node is None
        or split_node.op_type != "SplitToSequence"
        or split_node.domain not in ("", "ai.onnx")
        or position is None
        or len(position.elements) != 1
    ):
        return []
    index = position.elements[0].as_int() if position.elements[0] is not None else None
    source = facts.shape(input_at(split_node, 0))
    if index is None or source is None:
        return []
    axis = normalize_axis(attr_int(split_node, "axis", 0), len(source))
    if axis is None:
        return []
    split = input_at(split_node, 1)
    if split is None:
        if attr_int(split_node, "keepdims", 1) == 0:
            return [OutputFacts((*source[:axis], *source[axis + 1 :]))]
        return [OutputFacts((*source[:axis], const(1), *source[axis + 1 :]))]
    size = _piece_size(facts, split, source[axis], index)
    if size is None:
        return []
    return [OutputFacts((*source[:axis], size, *source[axis + 1 :]))]


def _piece_size(facts: ShapeFacts, split: Value, dim: DimExpr | None, index: int) -> DimExpr | None:
    """The size of piece `index` of a SplitToSequence by `split` along a dim of size `dim`."""
    data = facts.data(split)
    sizes = data.ints() if data is not None else None
    if data is None or sizes is None:
        return None
    if not data.scalar:
        if not -len(sizes) <= index < len(sizes):
            return None
        return const(sizes[index])
    total = dim.as_int() if dim is not None else None
    chunk = sizes[0] if sizes else 0
    if total is None or chunk <= 0:
        return None
    pieces = [min(chunk, total - start) for start in range(0, total, chunk)]
    if not -len(pieces) <= index < len(pieces):
        return None
    return const(pieces[index])


def _loop(node: Node, facts: ShapeFacts) -> Sequence[OutputFacts]:
    """Loop: a carried value keeps its shape when the body gives it back unchanged.

    The body's inputs are typed from their declarations; where the initial value has every
    dim known and equal to its body input's, and the body computes the same dims for its
    next value, every iteration starts from that shape, so the final value (or the initial
    one, after no iteration) has it. Scan outputs are left to onnx's inference.
    """
    body = node.attribute("body")
    if not isinstance(body, Graph):
        return []
    found: list[OutputFacts] = []
    carried = len(node.inputs) - 2
    for k in range(max(carried, 0)):
        if 2 + k >= len(body.inputs) or 1 + k >= len(body.outputs):
            break
        start = facts.shape(input_at(node, 2 + k))
        known = start is not None and all(d is not None for d in start)
        same = (
            known
            and facts.shape(body.inputs[2 + k]) == start
            and facts.shape(body.outputs[1 + k]) == start
        )
        found.append(OutputFacts(start) if same else OutputFacts())
    return found


RULES: dict[str, Rule] = {
    "Shape": _shape,
    "Size": _size,
    "Constant": _constant,
    "ConstantOfShape": _constant_of_shape,
    "Gather": _gather,
    "Slice": _slice,
    "Concat": _concat,
    "Split": _split,
    "Unsqueeze": _unsqueeze,
    "Squeeze": _squeeze,
    "Reshape": _reshape,
    "Flatten": _flatten,
    "Expand": _expand,
    "Range": _range,
    "Tile": _tile,
    "Transpose": _transpose,
    "Pad": _pad,
    "GatherElements": _shape_of_input(1),
    "ScatterElements": _shape_of_input(0),
    "ScatterND": _shape_of_input(0),
    "Scatter": _shape_of_input(0),
    "EyeLike": _shape_of_input(0),
    "If": _if,
    "Loop": _loop,
    "SequenceAt": _sequence_at,
}
