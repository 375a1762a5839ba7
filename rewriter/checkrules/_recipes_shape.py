"""Recipes for data-movement ops.

Transpose, Reshape, Expand, Slice, Pad, Squeeze, Unsqueeze, Shape, Size, Concat, Split,
Gather, Flatten, Tile, Dropout and Clip.

Structural inputs (target shapes, axes, starts, pads) are int64 constants whose values the
recipe draws so that the node is valid, including the forms rules single out: identity
permutations and reshapes, full slices, zero padding, spatial-only padding.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from typing import Any

import numpy as np

import ir
from rewriter.checkrules._line import LineBuild, RecipeError, Shape, Slot
from rewriter.checkrules._recipes import axis_in, float_attr, open_attributes, recipe

INT64_MAX = 2**63 - 1


def _input_shape(
    lb: LineBuild,
    slot: Slot,
    min_rank: int = 1,
    max_rank: int = 4,
    template_max_rank: int | None = None,
) -> Shape:
    if slot.shape is None:
        shape = lb.draw_shape(slot, min_rank, max_rank, template_max_rank=template_max_rank)
        lb.set(slot, lb.dtype_for(slot.position), shape)
    assert slot.shape is not None, "the shape was just decided"
    return slot.shape


@recipe("Transpose")
def transpose(lb: LineBuild) -> None:
    """A permutation of the input's axes (or none: reversed)."""
    x = lb.slots[0]
    # A perm the rule fixes, or one a where-hint forced, decides the rank.
    hinted = lb.choices.overrides.get(lb.attr_keys.get("perm", lb.key("attr", "perm")))
    fixed = lb.fixed_attrs.get("perm") or (hinted if isinstance(hinted, list) else None)
    template = lb.template(x)
    if x.shape is None and template is None and ("rank", x.key) not in lb.choices.overrides:
        # Permutations of 1 or 2 axes all commute: prefer ranks where composing them can err.
        rank = len(fixed) if fixed else lb.choices.pick(lb.key("rank"), (3, 4, 3, 4, 5, 2))
        lb.choices.override(("rank", x.key), rank)
    shape = _input_shape(lb, x)
    perm = lb.attr("perm", lambda key: lb.choices.permutation(key, len(shape)), omit_percent=15)
    if perm is not None and sorted(int(a) for a in perm) != list(range(len(shape))):
        raise RecipeError(f"perm {list(perm)} does not permute {len(shape)} axes")
    open_attributes(lb, len(shape))


def reshape_targets(shape: Shape, allow_zero: bool) -> list[list[int]]:
    """Valid Reshape targets for `shape`: itself, flattenings, -1 and 0 (copy) forms."""
    size = math.prod(shape)
    targets = [list(shape), [size], [-1]]
    if len(shape) >= 2:
        targets.append([shape[0], -1])
        targets.append([-1, shape[-1]])
        targets.append([*shape[:-2], shape[-2] * shape[-1]])
        if not allow_zero:
            targets.append([0, *list(shape[1:])])
            targets.append([0, -1])
    targets.append([1, *shape])
    targets.append([*shape, 1])
    return targets


def template_targets(shape: Shape, wanted: Shape, allow_zero: bool) -> list[list[int]]:
    """Targets giving the `wanted` result: itself, with one -1, with 0 for copied dims."""
    targets = [list(wanted)]
    targets.extend([*wanted[:i], -1, *wanted[i + 1 :]] for i in range(len(wanted)))
    copied = [0 if i < len(shape) and d == shape[i] else d for i, d in enumerate(wanted)]
    if not allow_zero and copied != list(wanted):
        targets.append(copied)
    return targets


@recipe("Reshape")
def reshape(lb: LineBuild) -> None:
    """A constant target shape that keeps the element count (the template's when it has one)."""
    shape = _input_shape(lb, lb.slots[0], 0, 4)
    allow_zero = bool(lb.attr("allowzero", lambda key: lb.choices.pick(key, (0, 1))) or 0)
    target = lb.slots[1] if len(lb.slots) > 1 else None
    if target is not None and target.resolved is None:
        wanted = lb.output_template()
        if wanted is not None and math.prod(wanted) == math.prod(shape):
            options = template_targets(shape, wanted, allow_zero)
        else:
            options = reshape_targets(shape, allow_zero)
        lb.int_values(target, lb.choices.pick(("value", target.key, "form"), options))
    open_attributes(lb, len(shape))


@recipe("Expand")
def expand(lb: LineBuild) -> None:
    """A target shape that broadcasts the input: itself, ones, a new leading axis, 1 -> k."""
    shape = _input_shape(lb, lb.slots[0], 0, 3)
    grown = [d if d != 1 else 3 for d in shape]
    options = [list(shape), [1] * len(shape), [2, *shape], grown, [1]]
    target = lb.slots[1]
    if target.resolved is None:
        lb.int_values(target, lb.choices.pick(("value", target.key, "form"), options))


def _slice_params(
    lb: LineBuild, shape: Shape, forced_axes: list[int] | None = None
) -> tuple[list[int], list[int], list[int], list[int]]:
    """starts, ends, axes, steps: a full slice, a crop, a reversal or a strided slice.

    `forced_axes` are the axes a where-hint gave the axes input (the bounds follow them).
    """
    rank = len(shape)
    if rank == 0:
        raise RecipeError("Slice needs rank >= 1")
    choices = lb.choices
    axes = [a for a in range(rank) if choices.chance(lb.key("axis", a), 60)] or [rank - 1]
    if forced_axes is not None and all(-rank <= a < rank for a in forced_axes):
        axes = [a + rank if a < 0 else a for a in forced_axes]
        if len(set(axes)) != len(axes):
            raise RecipeError("Slice's hinted axes repeat an axis")
    form = choices.pick(lb.key("slice_form"), ("full", "crop", "strided", "reverse", "full_max"))
    starts, ends, steps = [], [], []
    for a in axes:
        dim = shape[a]
        if form in ("full", "full_max"):
            starts.append(0)
            ends.append(INT64_MAX if form == "full_max" else dim)
            steps.append(1)
        elif form == "crop":
            start = choices.integer(lb.key("start", a), 0, dim - 1)
            starts.append(start)
            ends.append(choices.integer(lb.key("end", a), start + 1, dim))
            steps.append(1)
        elif form == "strided":
            starts.append(0)
            ends.append(dim)
            steps.append(choices.integer(lb.key("step", a), 1, 3))
        else:
            starts.append(-1)
            ends.append(-INT64_MAX)
            steps.append(-1)
    if choices.chance(lb.key("negative_axes"), 30):
        axes = [a - rank for a in axes]
    return starts, ends, axes, steps


def _forced_axes(lb: LineBuild) -> list[int] | None:
    """The axes input's values a where-hint forced (`normalize_axis(value(axes), r) == k`)."""
    slot = lb.present(3)
    forced = None if slot is None else lb.choices.overrides.get(("value", slot.key))
    if forced is None:
        return None
    return [int(a) for a in np.ravel(np.asarray(forced))]


@recipe("Slice")
def slice_op(lb: LineBuild) -> None:
    """Slice with constant starts/ends/axes/steps (inputs from opset 10, attributes before)."""
    shape = _input_shape(lb, lb.slots[0], template_max_rank=5)
    starts, ends, axes, steps = _slice_params(lb, shape, _forced_axes(lb))
    if lb.has_attr("starts"):
        lb.attr("starts", lambda key: starts, omit_percent=0)
        lb.attr("ends", lambda key: ends, omit_percent=0)
        lb.attr("axes", lambda key: axes, omit_percent=30)
        return
    for position, values in ((1, starts), (2, ends), (3, axes), (4, steps)):
        slot = lb.present(position)
        if slot is not None:
            _fit_hint(lb, slot.key, len(values))
            lb.int_values(slot, values)
    open_attributes(lb, len(shape))


def _fit_hint(lb: LineBuild, key: str, count: int) -> None:
    """Read a hinted bound vector that does not fit the slice's `count` axes as one value.

    (A hint copied from a value an earlier draw gave two entries; the `where` lines that
    hinted it name one entry, `int(value(starts)) == k`.)
    """
    forced = lb.choices.overrides.get(("value", key))
    if forced is None:
        return
    array = np.ravel(np.asarray(forced))
    if array.size not in (1, count):
        lb.choices.override(("value", key), array[0])


def _pads(lb: LineBuild, shape: Shape, mode: str) -> list[int]:
    rank = len(shape)
    choices = lb.choices
    form = choices.pick(lb.key("pad_form"), ("zero", "spatial", "any", "negative"))
    high = 2
    if mode == "reflect":
        high = max(min(min(shape) - 1, 2), 0)
    if form == "zero" or high == 0:
        return [0] * (2 * rank)
    if form == "spatial" and rank >= 3:
        begin = [0, 0] + [choices.integer(lb.key("pb", a), 0, high) for a in range(2, rank)]
        end = [0, 0] + [choices.integer(lb.key("pe", a), 0, high) for a in range(2, rank)]
        return begin + end
    low = -1 if form == "negative" and mode == "constant" else 0
    pads = [choices.integer(lb.key("p", i), low, high) for i in range(2 * rank)]
    for a in range(rank):
        if shape[a] + pads[a] + pads[a + rank] < 1:
            pads[a] = pads[a + rank] = 0
    return pads


@recipe("Pad")
def pad(lb: LineBuild) -> None:
    """Constant/reflect/edge padding; pads an input from opset 11, an attribute before."""
    shape = _input_shape(lb, lb.slots[0])
    mode = lb.attr("mode", lambda key: lb.choices.pick(key, ("constant", "reflect", "edge")))
    mode = mode or "constant"
    pads = _pads(lb, shape, mode)
    if lb.has_attr("pads"):
        lb.attr("pads", lambda key: pads, omit_percent=0)
        lb.attr("value", lambda key: float(lb.choices.pick(key, (0.0, 1.5, -1.0))))
        return
    slot = lb.present(1)
    if slot is not None and slot.resolved is None:
        lb.int_values(slot, pads)
    value_slot = lb.present(2)
    if value_slot is not None:
        lb.set(value_slot, lb.dtype_for(0), lb.choices.pick(lb.key("cv_shape"), ((), (1,))))
    axes_slot = lb.present(3)
    if axes_slot is not None:
        raise RecipeError("Pad with an axes input is not generated")
    open_attributes(lb, len(shape))


def _unsqueeze_axes(lb: LineBuild, key: object, rank: int) -> list[int]:
    count = lb.choices.integer((key, "count"), 1, 2)
    out_rank = rank + count
    axes = sorted({lb.choices.integer((key, i), 0, out_rank - 1) for i in range(count)})
    if len(axes) != count:
        axes = list(range(out_rank - count, out_rank))
    if lb.negative_axes and lb.choices.chance((key, "negative"), 40):
        axes = [a - out_rank for a in axes]
    return axes


@recipe("Unsqueeze")
def unsqueeze(lb: LineBuild) -> None:
    """New size-1 axes (an attribute before opset 13, a constant input from 13)."""
    shape = _input_shape(lb, lb.slots[0], 0, 3)
    if lb.has_attr("axes"):
        lb.attr("axes", lambda key: _unsqueeze_axes(lb, key, len(shape)), omit_percent=0)
        return
    slot = lb.present(1)
    if slot is not None and slot.resolved is None:
        lb.int_values(slot, _unsqueeze_axes(lb, ("value", slot.key, "axes"), len(shape)))


def _squeeze_axes(lb: LineBuild, key: object, shape: Shape) -> list[int] | None:
    ones = [a for a, d in enumerate(shape) if d == 1]
    if not ones or lb.choices.chance((key, "all"), 15):
        return None
    axes = [a for a in ones if lb.choices.chance((key, a), 60)] or ones[:1]
    if lb.negative_axes and lb.choices.chance((key, "negative"), 40):
        axes = [a - len(shape) for a in axes]
    return axes


@recipe("Squeeze")
def squeeze(lb: LineBuild) -> None:
    """Removes size-1 axes (all of them when no axes are given)."""
    x = lb.slots[0]
    if x.shape is None:
        shape = lb.draw_shape(x, 1, 4)
        shape = tuple(
            1 if lb.choices.chance(lb.key("one", i), 40) else d for i, d in enumerate(shape)
        )
        lb.set(x, lb.dtype_for(0), shape)
    shape = x.shape or ()
    if lb.has_attr("axes"):
        lb.attr("axes", lambda key: _squeeze_axes(lb, key, shape), omit_percent=0)
        return
    slot = lb.present(1)
    if slot is not None and slot.resolved is None:
        axes = _squeeze_axes(lb, ("value", slot.key, "axes"), shape)
        if axes is None:
            raise RecipeError("Squeeze with an axes input needs a size-1 axis")
        lb.int_values(slot, axes)


@recipe("Shape")
def shape_op(lb: LineBuild) -> None:
    """Shape, with start/end attributes from opset 15 (of a 0-d tensor now and then)."""
    scalar = lb.choices.chance(lb.key("scalar"), 10)
    shape = _input_shape(lb, lb.slots[0], 0 if scalar else 1, 4)
    rank = len(shape)
    start = lb.attr("start", lambda key: lb.choices.integer(key, -rank, rank), omit_percent=50)
    first = min(max(int(start or 0) + (rank if int(start or 0) < 0 else 0), 0), rank)
    lb.attr("end", lambda key: _shape_end(lb, key, first, rank), omit_percent=50)


def _shape_end(lb: LineBuild, key: Hashable, first: int, rank: int) -> int:
    """Shape's `end`: mostly past `first` (a non-empty slice), as either sign; any now and then."""
    if first >= rank or lb.choices.chance((key, "any"), 10):
        return lb.choices.integer(key, -rank, rank)
    end = lb.choices.integer(key, first + 1, rank)
    if end < rank and lb.choices.chance((key, "negative"), 40):
        return end - rank
    return end


@recipe("Concat")
def concat(lb: LineBuild) -> None:
    """Inputs equal but along the axis."""
    reference = lb.reference()
    if reference is None:
        reference = _input_shape(lb, lb.slots[0])
    rank = len(reference)
    axis = int(lb.attr("axis", lambda key: axis_in(lb, key, rank), omit_percent=0))
    axis = axis + rank if axis < 0 else axis
    for slot in lb.slots:
        if slot.present and slot.resolved is None:
            size = lb.choices.integer(lb.key("size", slot.position), 1, 3)
            shape = list(reference)
            shape[axis] = size
            lb.set(slot, lb.dtype_for(slot.position), tuple(shape))


@recipe("Split")
def split(lb: LineBuild) -> None:
    """Sizes along an axis summing to the dim (attribute, input, or num_outputs)."""
    shape = _input_shape(lb, lb.slots[0])
    rank = len(shape)
    axis = int(lb.attr("axis", lambda key: axis_in(lb, key, rank)) or 0)
    axis = axis + rank if axis < 0 else axis
    count = lb.output_count
    dim = shape[axis]
    if dim < count:
        raise RecipeError(f"cannot split {dim} into {count}")
    # the first piece takes a drawn share, the last the rest (rules may ask for an even head)
    first = lb.choices.integer(lb.key("first"), 1, dim - count + 1)
    sizes = [first] + [1] * (count - 1)
    sizes[-1] += dim - count - first + 1
    sizes_slot = lb.present(1)
    if lb.has_attr("split"):
        lb.attr("split", lambda key: sizes, omit_percent=50 if dim % count == 0 else 0)
    elif sizes_slot is not None:
        lb.int_values(sizes_slot, sizes)
    elif lb.has_attr("num_outputs"):
        if dim % count:
            lb.attrs["num_outputs"] = count
        else:
            lb.attr("num_outputs", lambda key: count, omit_percent=0)


@recipe("Gather", "GatherElements")
def gather(lb: LineBuild) -> None:
    """Indices in range of the gathered axis (negative ones too)."""
    data, indices = lb.slots[0], lb.slots[1]
    shape = _input_shape(lb, data)
    rank = len(shape)
    axis = int(lb.attr("axis", lambda key: axis_in(lb, key, rank)) or 0)
    dim = shape[axis]
    if dim == 0:
        raise RecipeError("no index into an empty axis")
    if indices.resolved is None:
        idx_shape = lb.shape_choice(indices, [(), (2,), (2, 2)])
        if lb.op_type == "GatherElements":
            idx_shape = shape
        seed = lb.choices.integer(("seed", indices.key), 0, 2**16)
        values = np.random.default_rng(seed).integers(-dim, dim, idx_shape)
        lb.set(indices, ir.DataType.INT64, tuple(idx_shape), values=values)


@recipe("Flatten")
def flatten(lb: LineBuild) -> None:
    """Flatten at an axis in [-rank, rank]."""
    shape = _input_shape(lb, lb.slots[0])
    lb.attr("axis", lambda key: axis_in(lb, key, len(shape), allow_rank=True))


@recipe("Tile")
def tile(lb: LineBuild) -> None:
    """Repeats per axis."""
    shape = _input_shape(lb, lb.slots[0])
    slot = lb.slots[1]
    if slot.resolved is None:
        lb.int_values(slot, [lb.choices.integer(lb.key("r", i), 1, 2) for i in range(len(shape))])


@recipe("Dropout")
def dropout(lb: LineBuild) -> None:
    """Dropout: ratio and training_mode inputs from opset 12 (scalars), attributes before."""
    shape = _input_shape(lb, lb.slots[0], 0, 4)
    if lb.has_attr("ratio"):
        lb.attr("ratio", lambda key: float(lb.choices.pick(key, float_attr("ratio"))))
    ratio = lb.present(1)
    if ratio is not None:
        lb.set(ratio, lb.dtype_for(1), ())
    training = lb.present(2)
    if training is not None:
        lb.set(training, ir.DataType.BOOL, ())
    open_attributes(lb, len(shape))


@recipe("Clip")
def clip(lb: LineBuild) -> None:
    """min/max as scalar inputs (opset 11) or attributes."""
    shape = _input_shape(lb, lb.slots[0], 0, 4)
    for slot in lb.slots[1:]:
        if slot.present:
            lb.set(slot, lb.dtype_for(0), ())
    open_attributes(lb, len(shape))


@recipe("ScatterND")
def scatter_nd(lb: LineBuild) -> None:
    """Indices [k, q] naming k distinct slices of data's first q axes; updates to match.

    Forms: every row of data in order (a full overwrite), every row permuted, some rows, or
    single elements. Indices are distinct, as `reduction = "none"` needs.
    """
    data, indices, updates = lb.slots[0], lb.slots[1], lb.slots[2]
    shape = _input_shape(lb, data, 1, 3)
    lb.attr("reduction", lambda key: lb.choices.pick(key, ("none", "add", "mul", "max", "min")))
    form = lb.choices.pick(lb.key("scatter_form"), ("rows", "rows", "permuted", "some", "elements"))
    depth = len(shape) if form == "elements" else 1
    positions = [list(p) for p in np.ndindex(*shape[:depth])]
    seed = lb.choices.integer(("seed", indices.key), 0, 2**16)
    rng = np.random.default_rng(seed)
    if form in ("permuted", "some", "elements"):
        positions = [positions[i] for i in rng.permutation(len(positions))]
    if form in ("some", "elements"):
        positions = positions[: lb.choices.integer(lb.key("count"), 1, len(positions))]
    if indices.resolved is None:
        values = np.asarray(positions, dtype=np.int64).reshape(len(positions), depth)
        lb.set(indices, ir.DataType.INT64, values.shape, values=values)
    index_shape = indices.shape
    assert index_shape is not None, "the indices were just decided"
    depth = index_shape[-1]
    lb.set(updates, lb.dtype_for(0), (*index_shape[:-1], *shape[depth:]))


@recipe("Constant")
def constant(lb: LineBuild) -> None:
    """A `value` tensor of the base dtype, or one of the scalar and list attributes."""
    import onnx.numpy_helper

    from rewriter.checkrules._values import draw_constant

    form = lb.choices.pick(lb.key("constant_form"), ("value", "value", "value_float", "value_ints"))
    if not lb.has_attr(form):
        form = "value"
    if form == "value_float":
        lb.attrs[form] = float(lb.choices.pick(lb.key("float"), float_attr("value")))
    elif form == "value_ints":
        count = lb.choices.integer(lb.key("count"), 1, 3)
        lb.attrs[form] = [lb.choices.integer(lb.key("int", i), -3, 4) for i in range(count)]
    else:
        spec = lb.output_template()
        shape = spec if spec is not None else _constant_shape(lb)
        array = draw_constant(lb.choices, lb.key("value"), lb.base_dtype, shape)
        lb.attrs[form] = onnx.numpy_helper.from_array(array, "value")


def _constant_shape(lb: LineBuild) -> Shape:
    rank = lb.choices.integer(lb.key("rank"), 0, 3)
    return tuple(lb.choices.integer(lb.key("dim", i), 1, 4) for i in range(rank))


# Element types of ConstantOfShape's `value` (and of its output).
_FILL_DTYPES = (
    ir.DataType.FLOAT,
    ir.DataType.INT64,
    ir.DataType.FLOAT16,
    ir.DataType.DOUBLE,
    ir.DataType.INT32,
    ir.DataType.UINT8,
    ir.DataType.BOOL,
)


@recipe("ConstantOfShape")
def constant_of_shape(lb: LineBuild) -> None:
    """A 1-D int64 shape (the output's template when there is one) and a one-element value."""
    import onnx.numpy_helper

    shape_slot = lb.slots[0]
    if shape_slot.resolved is None:
        wanted = lb.output_template()
        lb.int_values(shape_slot, list(wanted if wanted is not None else _constant_shape(lb)))

    def draw(key: Hashable) -> Any:
        dtype = lb.choices.pick((key, "dtype"), _FILL_DTYPES)
        fill = lb.choices.pick((key, "fill"), (0.0, 1.0, -2.5, 3.0, 0.5))
        array = np.asarray([fill]).astype(ir.numpy_dtype(dtype))
        return onnx.numpy_helper.from_array(array, "value")

    lb.attr("value", draw, omit_percent=25)


@recipe("SplitToSequence")
def split_to_sequence(lb: LineBuild) -> None:
    """Pieces along an axis: a chunk size (a scalar) or sizes summing to the dim (a 1-D)."""
    shape = _input_shape(lb, lb.slots[0])
    rank = len(shape)
    axis = int(lb.attr("axis", lambda key: axis_in(lb, key, rank)) or 0)
    axis = axis + rank if axis < 0 else axis
    sizes_slot = lb.present(1)
    if sizes_slot is None:
        return  # one piece per element along the axis
    dim = shape[axis]
    pieces = lb.choices.integer(lb.key("pieces"), 2, 3)
    if dim < pieces:
        raise RecipeError(f"cannot split {dim} into {pieces}")
    if dim % pieces == 0 and lb.choices.chance(lb.key("chunk"), 50):
        lb.set(sizes_slot, ir.DataType.INT64, (), values=np.asarray(dim // pieces, np.int64))
        return
    sizes = [1] * pieces
    sizes[-1] += dim - pieces
    lb.int_values(sizes_slot, sizes)
