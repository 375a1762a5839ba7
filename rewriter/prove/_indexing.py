"""Ops that move elements: index algebra over symbolic shapes.

Each op maps an output index to the input index it reads, so compositions (a Transpose of a
Reshape of a Slice) stay one function of the index and a query needs no element count:

* Transpose reads `x[j]` with `j[perm[k]] = i[k]`;
* Squeeze / Unsqueeze drop or insert axes of size 1 (a squeezed dim must be 1: `valid`);
* Reshape and Flatten go through the row-major offset (`0` copies a dim, `-1` is inferred;
  the element count must be kept);
* Slice follows ONNX's clamping of starts and ends (negative ones count from the end; steps
  of either sign, constant);
* Concat picks the input whose range along the axis holds the index (other dims equal);
* Gather reads the data at the index an element of `indices` holds (a negative one counts
  from the end; out of range the element is poison, where onnxruntime fails);
* Expand broadcasts to a shape given as a tensor; Shape and Size give the dims as int64.

Structural inputs (a Reshape's target, a Slice's bounds, a Gather's indices, an Expand's
shape) may be symbolic: their elements become integer terms. Axes and steps must be constants.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import z3

import ir
from rewriter.prove._broadcast import broadcast_shapes, operand_index
from rewriter.prove._common import NotModelledError, OpError, Semantics, key_of, present
from rewriter.prove._dtypes import kind_of
from rewriter.prove._tensor import (
    Dim,
    Element,
    Index,
    SymbolicTensor,
    all_of,
    as_int,
    either,
    product,
    same_dim,
    term,
    tidy,
)

Attributes = Mapping[str, object]
Inputs = Sequence[SymbolicTensor | None]


def _normalize_axis(op: str, axis: object, rank: int) -> int:
    if not isinstance(axis, int | np.integer) or not -rank <= int(axis) < rank:
        raise OpError(f"{op}: axis {axis!r} outside rank {rank}")
    return int(axis) % rank


def integer_elements(tensor: SymbolicTensor) -> list[z3.ArithRef]:
    """The elements of a rank-0 or rank-1 integer tensor of static length, as integer terms.

    Raises:
        OpError: not an integer tensor of rank 0 or 1 with a static length.
    """
    kind = kind_of(tensor.dtype)
    if not kind.is_integer or tensor.rank > 1:
        raise OpError("a structural input is an integer tensor of rank 0 or 1")
    if tensor.rank == 0:
        positions: list[Index] = [()]
    else:
        length = as_int(tensor.shape[0])
        if length is None:
            raise NotModelledError("a structural input of symbolic length")
        positions = [(z3.IntVal(k),) for k in range(length)]
    found = []
    for position in positions:
        value = z3.simplify(tensor.value(position))
        found.append(tidy_int(z3.BV2Int(value, is_signed=kind.signed)))
    return found


def tidy_int(value: z3.ArithRef) -> z3.ArithRef:
    """The term, simplified to a numeral where it is one."""
    simplified = z3.simplify(value)
    return z3.IntVal(simplified.as_long()) if z3.is_int_value(simplified) else simplified


def constant_ints(op: str, what: str, tensor: SymbolicTensor) -> list[int]:
    """The elements of a structural input that must be a constant (axes, steps)."""
    values = [as_int(v) for v in integer_elements(tensor)]
    if any(v is None for v in values):
        raise NotModelledError(f"{op}: {what} must be constant")
    return [v for v in values if v is not None]


def _ints_attribute(op: str, attributes: Attributes, name: str) -> list[int] | None:
    value = attributes.get(name)
    if value is None:
        return None
    if not isinstance(value, Sequence) or not all(isinstance(v, int) for v in value):
        raise OpError(f"{op}: `{name}` is a list of ints")
    return [int(v) for v in value]


def _with_valid(tensor: SymbolicTensor, valid: z3.BoolRef) -> SymbolicTensor:
    return SymbolicTensor(
        tensor.dtype, tensor.shape, tensor.at, tensor.key, z3.simplify(z3.And(tensor.valid, valid))
    )


# ---------------------------------------------------------------------------------------------
# Transpose, Squeeze, Unsqueeze


def _transpose(attributes: Attributes, inputs: Inputs) -> list[SymbolicTensor]:
    (x,) = present("Transpose", inputs, 1)
    perm = _ints_attribute("Transpose", attributes, "perm")
    if perm is None:
        perm = list(reversed(range(x.rank)))
    if sorted(perm) != list(range(x.rank)):
        raise OpError(f"Transpose: perm {perm} is not a permutation of {x.rank} axes")
    shape = tuple(x.shape[p] for p in perm)

    def at(index: Index) -> Element:
        source: list[z3.ArithRef] = [z3.IntVal(0)] * x.rank
        for k, p in enumerate(perm):
            source[p] = index[k]
        return x.at(tuple(source))

    return [SymbolicTensor(x.dtype, shape, at, key_of("Transpose", attributes, inputs), x.valid)]


def _axes(op: str, attributes: Attributes, inputs: Inputs) -> list[int] | None:
    given = inputs[1] if len(inputs) > 1 else None
    if given is not None:
        return constant_ints(op, "axes", given)
    return _ints_attribute(op, attributes, "axes")


def _squeeze(attributes: Attributes, inputs: Inputs) -> list[SymbolicTensor]:
    (x,) = present("Squeeze", inputs, 1)
    axes = _axes("Squeeze", attributes, inputs)
    if axes is None:
        axes = [k for k, d in enumerate(x.shape) if as_int(d) == 1]
        if any(as_int(d) is None for d in x.shape):
            raise NotModelledError("Squeeze without axes on symbolic dims")
    dropped = sorted({_normalize_axis("Squeeze", a, x.rank) for a in axes})
    kept = [k for k in range(x.rank) if k not in dropped]
    valid = all_of([same_dim(x.shape[k], 1) for k in dropped])

    def at(index: Index) -> Element:
        source: list[z3.ArithRef] = [z3.IntVal(0)] * x.rank
        for position, k in zip(index, kept, strict=True):
            source[k] = position
        return x.at(tuple(source))

    shape = tuple(x.shape[k] for k in kept)
    tensor = SymbolicTensor(x.dtype, shape, at, key_of("Squeeze", attributes, inputs), x.valid)
    return [_with_valid(tensor, valid)]


def _unsqueeze(attributes: Attributes, inputs: Inputs) -> list[SymbolicTensor]:
    (x,) = present("Unsqueeze", inputs, 1)
    axes = _axes("Unsqueeze", attributes, inputs)
    if axes is None:
        raise OpError("Unsqueeze needs axes")
    rank = x.rank + len(axes)
    added = sorted({_normalize_axis("Unsqueeze", a, rank) for a in axes})
    if len(added) != len(axes):
        raise OpError("Unsqueeze: repeated axes")
    kept = [k for k in range(rank) if k not in added]
    shape: list[Dim] = [1] * rank
    for k, dim in zip(kept, x.shape, strict=True):
        shape[k] = dim

    def at(index: Index) -> Element:
        return x.at(tuple(index[k] for k in kept))

    key = key_of("Unsqueeze", attributes, inputs)
    return [SymbolicTensor(x.dtype, tuple(shape), at, key, x.valid)]


# ---------------------------------------------------------------------------------------------
# Reshape, Flatten


def _row_major(dims: Sequence[Dim], index: Index) -> z3.ArithRef:
    """The row-major offset of `index` in a tensor of `dims`."""
    offset: z3.ArithRef = z3.IntVal(0)
    for dim, position in zip(dims, index, strict=True):
        offset = offset * term(dim) + position
    return offset


def _unravel(dims: Sequence[Dim], offset: z3.ArithRef) -> Index:
    """The index of row-major `offset` in a tensor of `dims`."""
    positions: list[z3.ArithRef] = []
    rest = offset
    for dim in reversed(dims):
        number = as_int(dim)
        if number == 1:
            positions.append(z3.IntVal(0))
            continue
        positions.append(rest % term(dim))
        rest = rest / term(dim)
    return tuple(reversed(positions))


def reshaped(x: SymbolicTensor, shape: Sequence[Dim], key: object) -> SymbolicTensor:
    """`x` read as `shape` in row-major order (same element count: `valid`)."""
    valid = z3.And(x.valid, term(product(x.shape)) == term(product(shape)))

    def at(index: Index) -> Element:
        return x.at(_unravel(x.shape, _row_major(shape, index)))

    return SymbolicTensor(x.dtype, tuple(tidy(d) for d in shape), at, key, z3.simplify(valid))


def _reshape(attributes: Attributes, inputs: Inputs) -> list[SymbolicTensor]:
    x, target = present("Reshape", inputs, 2)
    allow_zero = attributes.get("allowzero", 0) == 1
    wanted = integer_elements(target)
    if any(as_int(v) is None for v in wanted):
        return [_reshape_computed(x, wanted, allow_zero, key_of("Reshape", attributes, inputs))]
    conditions: list[z3.BoolRef] = []
    dims: list[Dim | None] = []
    inferred_at: int | None = None
    for k, value in enumerate(wanted):
        number = as_int(value)
        assert number is not None, "every entry is a number here"
        if number == -1:
            if inferred_at is not None:
                raise OpError("Reshape: two -1 dims")
            inferred_at = k
            dims.append(None)
        elif number == 0 and not allow_zero:
            if k >= x.rank:
                raise OpError("Reshape: a 0 past the input's rank")
            dims.append(x.shape[k])
        else:
            if number < -1:
                raise OpError(f"Reshape: dim {number}")
            dims.append(number)
    if inferred_at is not None:
        known = product([d for d in dims if d is not None])
        total = product(x.shape)
        inferred = tidy(term(total) / term(known))
        conditions.append(term(known) != 0)
        conditions.append(term(total) % term(known) == 0)
        dims[inferred_at] = inferred
    shape = [d for d in dims if d is not None]
    tensor = reshaped(x, shape, key_of("Reshape", attributes, inputs))
    return [_with_valid(tensor, all_of(conditions))]


def _reshape_computed(
    x: SymbolicTensor, wanted: Sequence[z3.ArithRef], allow_zero: bool, key: object
) -> SymbolicTensor:
    """A Reshape to a shape computed at run time: each entry may be -1, 0 or a size.

    ONNX's rules, stated over the entries' terms: at most one -1 (the size divided by the
    other dims, which must divide it), a 0 copies the input's dim at its position (unless
    allowzero, where 0 is a size and no -1 may stand beside it), nothing below -1.
    """
    conditions: list[z3.BoolRef] = [v >= -1 for v in wanted]
    inferred = [v == -1 for v in wanted]
    conditions.append(z3.Sum([z3.If(m, 1, 0) for m in inferred]) <= 1)
    explicit: list[z3.ArithRef] = []
    for k, value in enumerate(wanted):
        if allow_zero:
            explicit.append(value)
        elif k < x.rank:
            explicit.append(z3.If(value == 0, term(x.shape[k]), value))
        else:
            conditions.append(value != 0)
            explicit.append(value)
    if allow_zero:
        conditions.append(z3.Not(z3.And(z3.Or(*inferred), z3.Or(*[v == 0 for v in wanted]))))
    known = z3.IntVal(1)
    for minus, size in zip(inferred, explicit, strict=True):
        known = known * z3.If(minus, z3.IntVal(1), size)
    total = term(product(x.shape))
    has_inferred = z3.Or(*inferred) if inferred else z3.BoolVal(False)
    conditions.append(z3.Implies(has_inferred, z3.And(known != 0, total % known == 0)))
    dims = [
        tidy(z3.If(minus, total / known, size))
        for minus, size in zip(inferred, explicit, strict=True)
    ]
    return _with_valid(reshaped(x, dims, key), all_of(conditions))


def _flatten(attributes: Attributes, inputs: Inputs) -> list[SymbolicTensor]:
    (x,) = present("Flatten", inputs, 1)
    axis = attributes.get("axis", 1)
    if not isinstance(axis, int) or not -x.rank <= axis <= x.rank:
        raise OpError(f"Flatten: axis {axis!r}")
    axis = axis % x.rank if axis < 0 else axis
    shape = [product(x.shape[:axis]), product(x.shape[axis:])]
    return [reshaped(x, shape, key_of("Flatten", attributes, inputs))]


# ---------------------------------------------------------------------------------------------
# Slice


def _clamp(value: z3.ArithRef, low: z3.ArithRef, high: z3.ArithRef) -> z3.ArithRef:
    return z3.If(value < low, low, z3.If(value > high, high, value))


def slice_bounds(
    start: z3.ArithRef, end: z3.ArithRef, step: int, dim: Dim
) -> tuple[z3.ArithRef, Dim]:
    """ONNX's effective start and the output length of one sliced axis."""
    size = term(dim)
    start = z3.If(start < 0, start + size, start)
    end = z3.If(end < 0, end + size, end)
    if step > 0:
        start = _clamp(start, z3.IntVal(0), size)
        end = _clamp(end, z3.IntVal(0), size)
        span = end - start
        length = z3.If(span <= 0, z3.IntVal(0), (span + (step - 1)) / step)
    else:
        start = _clamp(start, z3.IntVal(0), size - 1)
        end = _clamp(end, z3.IntVal(-1), size - 1)
        span = start - end
        length = z3.If(span <= 0, z3.IntVal(0), (span + (-step - 1)) / (-step))
    return tidy_int(start), tidy(length)


def _slice(attributes: Attributes, inputs: Inputs) -> list[SymbolicTensor]:
    (x,) = present("Slice", inputs, 1)
    if len(inputs) >= 3 and inputs[1] is not None and inputs[2] is not None:
        starts = integer_elements(inputs[1])
        ends = integer_elements(inputs[2])
        axes_input = inputs[3] if len(inputs) > 3 else None
        steps_input = inputs[4] if len(inputs) > 4 else None
        axes = constant_ints("Slice", "axes", axes_input) if axes_input is not None else None
        steps = constant_ints("Slice", "steps", steps_input) if steps_input is not None else None
    else:
        given_starts = _ints_attribute("Slice", attributes, "starts")
        given_ends = _ints_attribute("Slice", attributes, "ends")
        if given_starts is None or given_ends is None:
            raise OpError("Slice needs starts and ends")
        starts = [z3.IntVal(v) for v in given_starts]
        ends = [z3.IntVal(v) for v in given_ends]
        axes = _ints_attribute("Slice", attributes, "axes")
        steps = None
    axes = axes if axes is not None else list(range(len(starts)))
    steps = steps if steps is not None else [1] * len(starts)
    if not len(starts) == len(ends) == len(axes) == len(steps) or 0 in steps:
        raise OpError("Slice: starts, ends, axes and steps differ in length, or a step is 0")
    begin: dict[int, tuple[z3.ArithRef, int]] = {}
    shape = list(x.shape)
    for start, end, axis, step in zip(starts, ends, axes, steps, strict=True):
        k = _normalize_axis("Slice", axis, x.rank)
        if k in begin:
            raise OpError("Slice: an axis sliced twice")
        first, length = slice_bounds(start, end, step, x.shape[k])
        begin[k] = (first, step)
        shape[k] = length

    def at(index: Index) -> Element:
        source = list(index)
        for k, (first, step) in begin.items():
            source[k] = tidy_int(first + index[k] * step)
        return x.at(tuple(source))

    key = key_of("Slice", attributes, inputs)
    return [SymbolicTensor(x.dtype, tuple(shape), at, key, x.valid)]


# ---------------------------------------------------------------------------------------------
# Concat, Gather, Expand, Shape, Size


def _concat(attributes: Attributes, inputs: Inputs) -> list[SymbolicTensor]:
    parts = [i for i in inputs if i is not None]
    if not parts:
        raise OpError("Concat takes at least one input")
    rank = parts[0].rank
    if any(p.rank != rank for p in parts) or len({p.dtype for p in parts}) != 1:
        raise OpError("Concat: inputs of different ranks or types")
    axis = _normalize_axis("Concat", attributes.get("axis"), rank)
    conditions = [p.valid for p in parts]
    for part in parts[1:]:
        conditions += [same_dim(part.shape[k], parts[0].shape[k]) for k in range(rank) if k != axis]
    offsets: list[Dim] = []
    total: Dim = 0
    for part in parts:
        offsets.append(total)
        total = tidy(term(total) + term(part.shape[axis]))
    shape = list(parts[0].shape)
    shape[axis] = total

    def at(index: Index) -> Element:
        element = parts[-1].at(_shifted(index, axis, offsets[-1]))
        for part, offset in reversed(list(zip(parts[:-1], offsets[:-1], strict=True))):
            here = part.at(_shifted(index, axis, offset))
            inside = index[axis] < term(offset) + term(part.shape[axis])
            poison = None
            if here.poison is not None or element.poison is not None:
                poison = z3.If(
                    inside,
                    here.poison if here.poison is not None else z3.BoolVal(False),
                    element.poison if element.poison is not None else z3.BoolVal(False),
                )
            element = Element(z3.If(inside, here.value, element.value), poison)
        return element

    key = key_of("Concat", attributes, inputs)
    return [SymbolicTensor(parts[0].dtype, tuple(shape), at, key, z3.simplify(all_of(conditions)))]


def _shifted(index: Index, axis: int, offset: Dim) -> Index:
    moved = list(index)
    moved[axis] = tidy_int(index[axis] - term(offset))
    return tuple(moved)


def _gather(attributes: Attributes, inputs: Inputs) -> list[SymbolicTensor]:
    data, indices = present("Gather", inputs, 2)
    kind = kind_of(indices.dtype)
    if not kind.is_integer:
        raise OpError("Gather's indices are integers")
    axis = _normalize_axis("Gather", attributes.get("axis", 0), data.rank)
    size = term(data.shape[axis])
    shape = (*data.shape[:axis], *indices.shape, *data.shape[axis + 1 :])

    def at(index: Index) -> Element:
        inner = index[axis : axis + indices.rank]
        read = indices.at(tuple(inner))
        position = z3.BV2Int(read.value, is_signed=kind.signed)
        outside = z3.Or(position < -size, position >= size)
        position = z3.If(position < 0, position + size, position)
        source = (*index[:axis], position, *index[axis + indices.rank :])
        element = data.at(tuple(source))
        return Element(element.value, either(either(element.poison, read.poison), outside))

    valid = z3.simplify(z3.And(data.valid, indices.valid))
    return [SymbolicTensor(data.dtype, shape, at, key_of("Gather", attributes, inputs), valid)]


def _expand(attributes: Attributes, inputs: Inputs) -> list[SymbolicTensor]:
    x, target = present("Expand", inputs, 2)
    wanted: list[Dim] = [tidy(v) for v in integer_elements(target)]
    shape, valid = broadcast_shapes([x.shape, wanted])

    def at(index: Index) -> Element:
        return x.at(operand_index(x, index))

    key = key_of("Expand", attributes, inputs)
    return [SymbolicTensor(x.dtype, shape, at, key, z3.simplify(z3.And(x.valid, valid)))]


def _dims_tensor(dims: Sequence[Dim], key: object) -> SymbolicTensor:
    values = [z3.Int2BV(term(d), 64) for d in dims]

    def at(index: Index) -> Element:
        if not dims:
            return Element(z3.BitVecVal(0, 64))  # an empty tensor: no index reads it
        value = values[-1]
        for k in reversed(range(len(values) - 1)):
            value = z3.If(index[0] == k, values[k], value)
        return Element(value)

    return SymbolicTensor(ir.DataType.INT64, (len(dims),), at, key)


def _shape(attributes: Attributes, inputs: Inputs) -> list[SymbolicTensor]:
    (x,) = present("Shape", inputs, 1)
    start = attributes.get("start", 0)
    end = attributes.get("end", x.rank)
    if not isinstance(start, int) or not isinstance(end, int):
        raise OpError("Shape: start and end are ints")
    start = max(0, min(x.rank, start + x.rank if start < 0 else start))
    end = max(0, min(x.rank, end + x.rank if end < 0 else end))
    dims = x.shape[start:end] if end > start else ()
    return [_dims_tensor(dims, key_of("Shape", attributes, inputs))]


def _size(attributes: Attributes, inputs: Inputs) -> list[SymbolicTensor]:
    (x,) = present("Size", inputs, 1)
    count = z3.Int2BV(term(product(x.shape)), 64)

    def at(index: Index) -> Element:
        del index
        return Element(count)

    return [SymbolicTensor(ir.DataType.INT64, (), at, key_of("Size", attributes, inputs))]


INDEXING: dict[str, Semantics] = {
    "Transpose": _transpose,
    "Squeeze": _squeeze,
    "Unsqueeze": _unsqueeze,
    "Reshape": _reshape,
    "Flatten": _flatten,
    "Slice": _slice,
    "Concat": _concat,
    "Gather": _gather,
    "Expand": _expand,
    "Shape": _shape,
    "Size": _size,
}
"""The ops that move elements, by op type (default domain)."""
