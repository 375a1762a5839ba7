"""Recipes for neural-network ops.

Conv, ConvInteger, ConvTranspose, the pools, BatchNormalization, Gemm, MatMul,
LayerNormalization, RMSNormalization, Attention, Softmax, the reductions, Einsum (explicit
equations) and the recurrent ops (RNN, GRU, LSTM).

Shapes are small (dims of 1 to 4, a batch of 1 or 2) but cover what folding rules are
sensitive to: groups (including depthwise), strides, dilations, padding modes, transposed
Gemm operands, batched MatMul, trailing-axes normalization.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np

import ir
from rewriter.checkrules._line import LineBuild, RecipeError, Shape, Slot, TensorSpec
from rewriter.checkrules._recipes import axis_in, float_attr, open_attributes, recipe
from rewriter.checkrules._values import EPSILONS

_AUTO_PADS = ("NOTSET", "NOTSET", "NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")


def _ints(lb: LineBuild, key: Hashable, count: int, low: int, high: int) -> list[int]:
    return [lb.choices.integer((key, i), low, high) for i in range(count)]


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _conv_attrs(lb: LineBuild, spatial: int) -> tuple[str, list[int], list[int], list[int]]:
    """auto_pad, strides, dilations and pads (begin..., end...) of a Conv-like node."""
    auto_pad = lb.attr("auto_pad", lambda key: lb.choices.pick(key, _AUTO_PADS), omit_percent=50)
    strides = lb.attr("strides", lambda key: _ints(lb, key, spatial, 1, 2), omit_percent=40)
    dilations = lb.attr("dilations", lambda key: _ints(lb, key, spatial, 1, 2), omit_percent=50)
    pads: list[int] | None = None
    if auto_pad in (None, "NOTSET"):
        pads = lb.attr("pads", lambda key: _ints(lb, key, 2 * spatial, 0, 2), omit_percent=40)
    return (
        auto_pad or "NOTSET",
        list(strides or [1] * spatial),
        list(dilations or [1] * spatial),
        list(pads or [0] * (2 * spatial)),
    )


def _check_len(name: str, values: list[int], count: int) -> None:
    if len(values) != count:
        raise RecipeError(f"`{name}` has {len(values)} entries, the input has {count} spatial axes")


def _conv_layout(lb: LineBuild, x: Slot, w: Slot, dtypes: tuple[ir.DataType, ir.DataType]) -> int:
    """Decide a Conv-like node's x [N, C, spatial...], w [M, C / group, k...] and attributes.

    Returns the output channels M.
    """
    if x.shape is not None:
        if len(x.shape) < 3:
            raise RecipeError(f"{lb.op_type} needs an input of rank >= 3")
        spatial = len(x.shape) - 2
        channels = x.shape[1]
    elif w.shape is not None:  # weights made by an earlier line (a ConstantOfShape, ...)
        if len(w.shape) < 3:
            raise RecipeError(f"{lb.op_type} needs weights of rank >= 3")
        spatial = len(w.shape) - 2
        channels = 0
    else:
        spatial = lb.choices.pick(lb.key("spatial"), (2, 2, 1, 3))
        channels = 0
    if channels:
        group = lb.attr("group", lambda key: lb.choices.pick(key, _divisors(channels)))
    else:
        group = lb.attr("group", lambda key: lb.choices.pick(key, (1, 2, 3)))
        per_group = w.shape[1] if w.shape is not None else None
        channels = int(group) * (per_group or lb.choices.integer(lb.key("cin"), 1, 3))
    group = int(group)
    if channels % group:
        raise RecipeError(f"group {group} does not divide {channels} channels")
    auto_pad, strides, dilations, pads = _conv_attrs(lb, spatial)
    for name, values, count in (("strides", strides, spatial), ("dilations", dilations, spatial)):
        _check_len(name, values, count)
    _check_len("pads", pads, 2 * spatial)
    if w.shape is not None:
        out_channels, kernel = w.shape[0], list(w.shape[2:])
    else:
        out_channels = group * lb.choices.integer(lb.key("mout"), 1, 3)
        kernel = _ints(lb, lb.key("kernel"), spatial, 1, 3)
    lb.attr("kernel_shape", lambda key: list(kernel), omit_percent=60)
    if x.shape is None:
        batch = lb.choices.integer(lb.key("batch"), 1, 2)
        dims = []
        for i in range(spatial):
            span = dilations[i] * (kernel[i] - 1) + 1
            needed = span - (pads[i] + pads[i + spatial] if auto_pad == "NOTSET" else 0)
            dims.append(max(needed, 1) + lb.choices.integer(lb.key("extra", i), 0, 2))
        lb.set(x, dtypes[0], (batch, channels, *dims))
    lb.set(w, dtypes[1], (out_channels, channels // group, *kernel))
    open_attributes(lb, spatial + 2)
    return int(out_channels)


@recipe("Conv")
def conv(lb: LineBuild) -> None:
    """Conv: x [N, C, spatial...], w [M, C / group, k...], optional b [M]."""
    x, w, b = lb.slots[0], lb.slots[1], lb.present(2)
    dtype = lb.dtype_for(0)
    out_channels = _conv_layout(lb, x, w, (dtype, dtype))
    if b is not None:
        lb.set(b, lb.dtype_for(0), (out_channels,))


# (x, w) element types onnxruntime's QLinearConv runs on the CPU.
_QUANTIZED_PAIRS = (
    (ir.DataType.UINT8, ir.DataType.UINT8),
    (ir.DataType.UINT8, ir.DataType.INT8),
    (ir.DataType.INT8, ir.DataType.INT8),
)


@recipe("QLinearConv")
def qlinear_conv(lb: LineBuild) -> None:
    """Quantized Conv: x, w as (u)int8 with float scales and zero points, int32 bias [M].

    Scales are positive constants and zero points constants of the quantized types, per
    tensor (w's per output channel half the time), so the node is one a quantizer writes.
    """
    if len(lb.slots) < 8:
        raise RecipeError("QLinearConv needs its eight quantization inputs")
    x, w = lb.slots[0], lb.slots[3]
    known = x.resolved.dtype if x.resolved is not None else None
    pairs = [p for p in _QUANTIZED_PAIRS if known is None or p[0] == known] or [
        (known or ir.DataType.UINT8, ir.DataType.INT8)
    ]
    x_type, w_type = lb.choices.pick(lb.key("quantized"), pairs)
    out_channels = _conv_layout(lb, x, w, (x_type, w_type))
    y_type = x_type  # onnxruntime's kernels quantize the result like the input
    per_channel = lb.choices.chance(lb.key("per_channel"), 50)
    w_params: Shape = (out_channels,) if per_channel else ()
    layout = (
        (1, ir.DataType.FLOAT, ()),
        (2, x_type, ()),
        (4, ir.DataType.FLOAT, w_params),
        (5, w_type, w_params),
        (6, ir.DataType.FLOAT, ()),
        (7, y_type, ()),
    )
    for position, dtype, shape in layout:
        slot = lb.slots[position]
        if dtype == ir.DataType.FLOAT:
            values = _positive_scales(lb, slot.key, shape)
        else:
            values = _zero_points(lb, slot.key, dtype, shape)
        lb.set(slot, dtype, shape, values=values)
    bias = lb.present(8)
    if bias is not None:
        lb.set(bias, ir.DataType.INT32, (out_channels,))


def _positive_scales(lb: LineBuild, key: Hashable, shape: Shape) -> np.ndarray[Any, Any]:
    seed = lb.choices.integer(("seed", key), 0, 2**16)
    return np.random.default_rng(seed).uniform(0.01, 0.5, shape).astype(np.float32)


def _zero_points(
    lb: LineBuild, key: Hashable, dtype: ir.DataType, shape: Shape
) -> np.ndarray[Any, Any]:
    """Zero points: 0 (symmetric) or a value inside the type's range."""
    np_dtype = ir.numpy_dtype(dtype)
    if lb.choices.chance(("symmetric", key), 40):
        return np.zeros(shape, np_dtype)
    seed = lb.choices.integer(("seed", key), 0, 2**16)
    low, high = (0, 255) if dtype == ir.DataType.UINT8 else (-128, 127)
    return np.random.default_rng(seed).integers(low, high + 1, shape).astype(np_dtype)


@recipe("ConvInteger")
def conv_integer(lb: LineBuild) -> None:
    """Integer Conv: x, w (u)int8 (every pair runs on onnxruntime's CPU), the result int32.

    The zero points are optional: x's a scalar, w's a scalar or one per output channel.
    """
    x, w = lb.slots[0], lb.slots[1]
    types = (ir.DataType.UINT8, ir.DataType.INT8)
    known = x.resolved.dtype if x.resolved is not None else None
    if known is not None and known not in types:
        raise RecipeError(f"ConvInteger takes uint8 or int8 inputs, not {known.onnx_name}")
    x_type = known or lb.choices.pick(lb.key("x_type"), types)
    w_type = lb.choices.pick(lb.key("w_type"), types)
    out_channels = _conv_layout(lb, x, w, (x_type, w_type))
    x_zero, w_zero = lb.present(2), lb.present(3)
    if x_zero is not None:
        lb.set(x_zero, x_type, (), values=_zero_points(lb, x_zero.key, x_type, ()))
    if w_zero is not None:
        per_channel = lb.choices.chance(lb.key("per_channel"), 50)
        shape: Shape = (out_channels,) if per_channel else ()
        lb.set(w_zero, w_type, shape, values=_zero_points(lb, w_zero.key, w_type, shape))


@recipe("ConvTranspose")
def conv_transpose(lb: LineBuild) -> None:
    """ConvTranspose: x [N, C, spatial...], w [C, M / group, k...], optional b [M]."""
    x, w, b = lb.slots[0], lb.slots[1], lb.present(2)
    spatial = len(x.shape) - 2 if x.shape is not None else lb.choices.pick(lb.key("sp"), (2, 1))
    if spatial < 1:
        raise RecipeError("ConvTranspose needs an input of rank >= 3")
    channels = x.shape[1] if x.shape is not None else 0
    if channels:
        group = int(lb.attr("group", lambda key: lb.choices.pick(key, _divisors(channels))))
    else:
        group = int(lb.attr("group", lambda key: lb.choices.pick(key, (1, 2))))
        channels = group * lb.choices.integer(lb.key("cin"), 1, 3)
    if channels % group:
        raise RecipeError(f"group {group} does not divide {channels} channels")
    strides = lb.attr("strides", lambda key: _ints(lb, key, spatial, 1, 2), omit_percent=40)
    strides = list(strides or [1] * spatial)
    dilations = list(
        lb.attr("dilations", lambda key: _ints(lb, key, spatial, 1, 2), omit_percent=60)
        or [1] * spatial
    )
    pads = list(
        lb.attr("pads", lambda key: _ints(lb, key, 2 * spatial, 0, 1), omit_percent=50)
        or [0] * (2 * spatial)
    )
    lb.attr(
        "output_padding",
        lambda key: [lb.choices.integer((key, i), 0, s - 1) for i, s in enumerate(strides)],
        omit_percent=70,
    )
    kernel = list(w.shape[2:]) if w.shape is not None else _ints(lb, lb.key("k"), spatial, 1, 3)
    per_group = w.shape[1] if w.shape is not None else lb.choices.integer(lb.key("m"), 1, 3)
    if x.shape is None:
        dims = [lb.choices.integer(lb.key("dim", i), 1, 3) + 1 for i in range(spatial)]
        lb.set(x, lb.dtype_for(0), (lb.choices.integer(lb.key("batch"), 1, 2), channels, *dims))
    for i in range(spatial):
        span = dilations[i] * (kernel[i] - 1) + 1
        size = strides[i] * (x.shape[2 + i] - 1) + span - pads[i] - pads[i + spatial]  # type: ignore[index]
        if size < 1:
            raise RecipeError("ConvTranspose output would be empty")
    dtype = lb.dtype_for(0)
    lb.set(w, dtype, (channels, per_group, *kernel))
    if b is not None:
        lb.set(b, dtype, (per_group * group,))
    open_attributes(lb, spatial + 2)


@recipe("AveragePool", "MaxPool", "LpPool")
def pool(lb: LineBuild) -> None:
    """Pools: x [N, C, spatial...], a kernel_shape (required) that fits the padded input.

    Pads stay below the kernel on every side (onnxruntime refuses larger ones).
    """
    x = lb.slots[0]
    if x.shape is not None:
        if len(x.shape) < 3:
            raise RecipeError(f"{lb.op_type} needs an input of rank >= 3")
        spatial = len(x.shape) - 2
    else:
        spatial = lb.choices.pick(lb.key("spatial"), (2, 2, 1))
    kernel = list(lb.attr("kernel_shape", lambda key: _ints(lb, key, spatial, 1, 3)) or [])
    _check_len("kernel_shape", kernel, spatial)
    auto_pad = lb.attr("auto_pad", lambda key: lb.choices.pick(key, _AUTO_PADS), omit_percent=60)
    strides = list(
        lb.attr("strides", lambda key: _ints(lb, key, spatial, 1, 2), omit_percent=40)
        or [1] * spatial
    )
    _check_len("strides", strides, spatial)
    pads = [0] * (2 * spatial)
    if auto_pad in (None, "NOTSET"):
        drawn = lb.attr(
            "pads",
            lambda key: [
                lb.choices.integer((key, i), 0, kernel[i % spatial] - 1) for i in range(2 * spatial)
            ],
            omit_percent=40,
        )
        pads = list(drawn or pads)
        _check_len("pads", pads, 2 * spatial)
    if any(p >= kernel[i % spatial] for i, p in enumerate(pads)):
        raise RecipeError("pads as large as the kernel (onnxruntime refuses them)")
    dilations = [1] * spatial
    if lb.has_attr("dilations"):
        drawn = lb.attr("dilations", lambda key: _ints(lb, key, spatial, 1, 2), omit_percent=60)
        dilations = list(drawn or dilations)
    if lb.has_attr("ceil_mode"):
        lb.attr("ceil_mode", lambda key: lb.choices.pick(key, (0, 1)), omit_percent=60)
    if lb.has_attr("count_include_pad"):
        lb.attr("count_include_pad", lambda key: lb.choices.pick(key, (0, 1)), omit_percent=40)
    spans = [dilations[i] * (kernel[i] - 1) + 1 for i in range(spatial)]
    if x.shape is None:
        dims = [
            max(spans[i] - pads[i] - pads[i + spatial], 1)
            + lb.choices.integer(lb.key("extra", i), 0, 2)
            for i in range(spatial)
        ]
        batch = lb.choices.integer(lb.key("batch"), 1, 2)
        channels = lb.choices.integer(lb.key("c"), 1, 3)
        lb.set(x, lb.dtype_for(0), (batch, channels, *dims))
    elif auto_pad in (None, "NOTSET"):
        for i in range(spatial):
            if x.shape[2 + i] + pads[i] + pads[i + spatial] < spans[i]:
                raise RecipeError(f"the kernel does not fit spatial axis {i}")
    open_attributes(lb, spatial + 2)


@recipe("BatchNormalization", "InstanceNormalization")
def batch_normalization(lb: LineBuild) -> None:
    """X [N, C, ...]; every other input is per channel [C]."""
    x = lb.slots[0]
    if x.shape is None:
        lb.set(x, lb.dtype_for(0), lb.draw_shape(x, 2, 4))
    shape = x.shape
    assert shape is not None, "the input shape was just decided"
    if len(shape) < 2:
        raise RecipeError(f"{lb.op_type} needs an input of rank >= 2")
    for slot in lb.slots[1:]:
        lb.set(slot, lb.dtype_for(slot.position), (shape[1],))
    lb.attr("epsilon", lambda key: float(lb.choices.pick(key, EPSILONS)))
    lb.attr(
        "momentum", lambda key: float(lb.choices.pick(key, float_attr("momentum"))), omit_percent=70
    )
    lb.attr("training_mode", lambda key: 0, omit_percent=70)
    open_attributes(lb, len(shape))


@recipe("Gemm")
def gemm(lb: LineBuild) -> None:
    """A [M, K] (or [K, M]), B [K, N] (or [N, K]), C broadcasting to [M, N]."""
    a, b, c = lb.slots[0], lb.slots[1], lb.present(2)
    trans_a = int(lb.attr("transA", lambda key: lb.choices.pick(key, (0, 1))) or 0)
    trans_b = int(lb.attr("transB", lambda key: lb.choices.pick(key, (0, 1))) or 0)
    lb.attr("alpha", lambda key: float(lb.choices.pick(key, float_attr("alpha"))))
    lb.attr("beta", lambda key: float(lb.choices.pick(key, float_attr("beta"))))
    if a.shape is not None:
        if len(a.shape) != 2:
            raise RecipeError("Gemm needs a 2-D A")
        m, k = (a.shape[1], a.shape[0]) if trans_a else a.shape
    else:
        m, k = lb.choices.integer(lb.key("m"), 1, 4), lb.choices.integer(lb.key("k"), 1, 4)
    if b.shape is not None:
        if len(b.shape) != 2:
            raise RecipeError("Gemm needs a 2-D B")
        n = b.shape[0] if trans_b else b.shape[1]
        k_b = b.shape[1] if trans_b else b.shape[0]
        if a.shape is None:
            k = k_b
    else:
        n = lb.choices.integer(lb.key("n"), 1, 4)
    dtype = lb.dtype_for(0)
    lb.set(a, dtype, (k, m) if trans_a else (m, k))
    lb.set(b, dtype, (n, k) if trans_b else (k, n))
    if c is not None:
        lb.set(c, dtype, lb.shape_choice(c, [(n,), (1, n), (m, n), (m, 1), (), (1,)]))
    open_attributes(lb, 2)


@recipe("MatMul", "MatMulInteger")
def matmul(lb: LineBuild) -> None:
    """A [..., M, K] @ B [..., K, N] (either may be 1-D)."""
    a, b = lb.slots[0], lb.slots[1]
    if a.shape is None:
        if b.shape is not None:
            k = b.shape[-2] if len(b.shape) >= 2 else b.shape[0]
            template = lb.template(a)
            if template is None or not template or template[-1] != k:
                template = (lb.choices.integer(lb.key("m"), 1, 4), k)
            lb.set(a, lb.dtype_for(0), template)
        else:
            lb.set(a, lb.dtype_for(0), lb.draw_shape(a, 1, 4))
    a_shape = a.shape
    assert a_shape is not None, "A was just decided"
    k = a_shape[-1]
    n = lb.choices.integer(lb.key("n"), 1, 4)
    template = lb.template(b)
    if template is not None and len(template) >= 2 and template[-2] == k:
        n = template[-1]
    batch = a_shape[:-2]
    options: list[Shape] = [(k, n), (k,)]
    if batch:
        options.append((*batch, k, n))
        options.append((1,) * len(batch) + (k, n))
    if b.shape is None:
        lb.set(b, lb.dtype_for(1), lb.shape_choice(b, options))
    open_attributes(lb, len(a_shape))


@recipe("LayerNormalization", "RMSNormalization", "SimplifiedLayerNormalization")
def layer_normalization(lb: LineBuild) -> None:
    """X of rank >= 1; scale and bias have the normalized shape x.shape[axis:]."""
    x = lb.slots[0]
    if x.shape is None:
        lb.set(x, lb.dtype_for(0), lb.draw_shape(x, 1, 4))
    shape = x.shape
    assert shape is not None, "x was just decided"
    axis = int(lb.attr("axis", lambda key: axis_in(lb, key, len(shape))))
    axis = axis + len(shape) if axis < 0 else axis
    if not 0 <= axis < len(shape):
        raise RecipeError(f"axis {axis} is outside rank {len(shape)}")
    lb.attr("epsilon", lambda key: float(lb.choices.pick(key, EPSILONS)))
    for slot in lb.slots[1:]:
        lb.set(slot, lb.dtype_for(slot.position), shape[axis:])
    open_attributes(lb, len(shape))
    if ir.schemas.find_schema(lb.op_type, lb.domain, lb.opset) is None:
        _runtime_normalization_types(lb, shape, axis)


def _runtime_normalization_types(lb: LineBuild, shape: Shape, axis: int) -> None:
    """Output types of onnxruntime's own normalization (onnx's inference does not know it).

    Y is like X; the statistics have `stash_type` (float; onnxruntime's kernels take no
    other for SimplifiedLayerNormalization) and X's dims before `axis`, 1 from it on.
    """
    stash = lb.attrs.get("stash_type", int(ir.DataType.FLOAT))
    if stash != int(ir.DataType.FLOAT):
        raise RecipeError(f"{lb.op_type}: onnxruntime's kernels keep statistics in float")
    x = lb.slots[0].resolved
    dtype = x.dtype if x is not None else lb.dtype_for(0)
    stats = (*shape[:axis], *(1,) * (len(shape) - axis))
    specs = [TensorSpec(dtype, tuple(shape))]
    specs += [TensorSpec(ir.DataType.FLOAT, stats)] * (max(lb.output_count, 1) - 1)
    lb.output_specs = specs


@recipe("Softmax", "LogSoftmax", "Hardmax")
def softmax(lb: LineBuild) -> None:
    """One input of rank >= 1 and an axis."""
    x = lb.slots[0]
    if x.shape is None:
        lb.set(x, lb.dtype_for(0), lb.draw_shape(x, 1, 4))
    rank = len(x.shape or ())
    if rank == 0:
        raise RecipeError(f"{lb.op_type} needs rank >= 1")
    lb.attr("axis", lambda key: axis_in(lb, key, rank))
    open_attributes(lb, rank)


def reduction_axes(lb: LineBuild, key: Hashable, rank: int) -> list[int] | None:
    """Axes to reduce: often the trailing ones, sometimes any subset; None: all axes."""
    choices = lb.choices
    form = choices.pick((key, "form"), ("trailing", "subset", "trailing", "all"))
    if form == "all" or rank == 0:
        return None
    if form == "trailing":
        count = choices.integer((key, "count"), 1, min(rank, 2))
        axes = list(range(rank - count, rank))
    else:
        axes = [i for i in range(rank) if choices.chance((key, "take", i), 50)] or [rank - 1]
    if lb.negative_axes and choices.chance((key, "negative"), 40):
        axes = [a - rank for a in axes]
    return axes


@recipe(
    "ReduceMean",
    "ReduceSum",
    "ReduceMax",
    "ReduceMin",
    "ReduceProd",
    "ReduceL1",
    "ReduceL2",
    "ReduceLogSum",
    "ReduceLogSumExp",
    "ReduceSumSquare",
)
def reduction(lb: LineBuild) -> None:
    """Axes as an attribute (older opsets) or as a constant second input."""
    x = lb.slots[0]
    if x.shape is None:
        lb.set(x, lb.dtype_for(0), lb.draw_shape(x, 1, 4))
    rank = len(x.shape or ())
    lb.attr("keepdims", lambda key: lb.choices.pick(key, (1, 0)))
    if lb.has_attr("axes"):
        lb.attr("axes", lambda key: reduction_axes(lb, key, rank))
    axes_slot = lb.present(1)
    if axes_slot is not None and axes_slot.resolved is None:
        axes = reduction_axes(lb, ("value", axes_slot.key, "axes"), rank) or []
        lb.int_values(axes_slot, axes)
    open_attributes(lb, rank)


@recipe("Attention")
def attention(lb: LineBuild) -> None:
    """4-D Q [B, H, S, D], K [B, H, L, D], V [B, H, L, Dv], optional mask [.., S, L]."""
    q, k, v = lb.slots[0], lb.slots[1], lb.slots[2]
    choices = lb.choices
    batch, heads = choices.integer(lb.key("b"), 1, 2), choices.integer(lb.key("h"), 1, 3)
    seq, keys = choices.integer(lb.key("s"), 1, 4), choices.integer(lb.key("l"), 1, 4)
    depth, value_depth = choices.integer(lb.key("d"), 1, 4), choices.integer(lb.key("dv"), 1, 4)
    # Operands an earlier line made (a Concat of past and present keys) fix their dims.
    for slot in (q, k, v):
        if slot.shape is not None and len(slot.shape) != 4:
            raise RecipeError(f"Attention is generated on 4-D operands, not {slot.shape}")
    if k.shape is not None:
        batch, heads, keys, depth = k.shape
    if v.shape is not None:
        batch, heads, keys, value_depth = v.shape
    if q.shape is not None:
        batch, _, seq, depth = q.shape
    dtype = lb.dtype_for(0)
    wanted = {
        id(q): (batch, heads, seq, depth),
        id(k): (batch, heads, keys, depth),
        id(v): (batch, heads, keys, value_depth),
    }
    for slot in (q, k, v):
        if slot.shape is None:
            lb.set(slot, dtype, wanted[id(slot)])
        elif tuple(slot.shape) != wanted[id(slot)] and slot is not q:
            raise RecipeError("Attention's K and V made by earlier lines do not agree")
    lb.attr("scale", lambda key: float(choices.pick(key, (0.5, 0.125, 2.0, 1e-3))), omit_percent=50)
    lb.attr("is_causal", lambda key: choices.pick(key, (0, 1)), omit_percent=50)
    mask = lb.present(3)
    if mask is not None:
        is_bool = choices.chance(lb.key("bool_mask"), 40)
        mask_type = ir.DataType.BOOL if is_bool else dtype
        shapes = [(seq, keys), (1, 1, seq, keys), (batch, heads, seq, keys), (batch, 1, seq, keys)]
        lb.set(mask, mask_type, lb.shape_choice(mask, shapes))
    for slot in lb.slots[4:]:
        if slot.present:
            raise RecipeError("Attention with past key/value is not generated")
    open_attributes(lb, 4)


@recipe("RotaryEmbedding")
def rotary_embedding(lb: LineBuild) -> None:
    """4-D X [B, N, S, H] (H even) and cos, sin tables [B, S, R / 2].

    R is the rotated part of H (`rotary_embedding_dim`, 0 meaning all of H); no position ids.
    """
    x, cos, sin = lb.slots[0], lb.slots[1], lb.slots[2]
    choices = lb.choices
    if x.shape is None:
        batch, heads = choices.integer(lb.key("b"), 1, 2), choices.integer(lb.key("n"), 1, 3)
        seq, half = choices.integer(lb.key("s"), 1, 4), choices.integer(lb.key("half"), 1, 3)
        lb.set(x, lb.dtype_for(0), (batch, heads, seq, 2 * half))
    shape = x.shape
    assert shape is not None, "x was just decided"
    if len(shape) != 4 or shape[3] % 2:
        raise RecipeError(f"RotaryEmbedding needs a 4-D input of even head size, not {shape}")
    rotated = int(lb.attr("rotary_embedding_dim", lambda key: 0)) or shape[3]
    if rotated % 2 or rotated > shape[3]:
        raise RecipeError(f"rotary_embedding_dim {rotated} does not fit head size {shape[3]}")
    for table in (cos, sin):
        if table.resolved is None:
            lb.set(table, lb.dtype_for(0), (shape[0], shape[2], rotated // 2))
    if len(lb.slots) > 3 and lb.slots[3].present:
        raise RecipeError("RotaryEmbedding with position ids is not generated")
    lb.attr("interleaved", lambda key: 0)
    open_attributes(lb, 4)


@recipe("Einsum")
def einsum(lb: LineBuild) -> None:
    """Operands shaped by the equation: one size per letter, shared by every operand.

    Only explicit equations (no `...`); without one from the rule, a batched matrix product
    `bij,bjk->bik` of two operands.
    """
    count = len(lb.slots)
    equation = str(lb.attr("equation", lambda key: "bij,bjk->bik" if count == 2 else None))
    terms = equation.replace(" ", "").split("->")[0].split(",")
    if "..." in equation or len(terms) != count:
        raise RecipeError(f"Einsum equation {equation!r} is not generated for {count} inputs")
    sizes: dict[str, int] = {}
    for slot, term in zip(lb.slots, terms, strict=True):
        known = slot.shape
        if known is None:
            continue
        if len(known) != len(term):
            raise RecipeError(f"Einsum operand of rank {len(known)} for {term!r}")
        for letter, dim in zip(term, known, strict=True):
            if sizes.setdefault(letter, dim) != dim:
                raise RecipeError(f"Einsum letter {letter!r} has two sizes")
    for slot, term in zip(lb.slots, terms, strict=True):
        if slot.shape is None:
            shape = tuple(
                sizes.setdefault(letter, lb.choices.integer(lb.key("letter", letter), 1, 4))
                for letter in term
            )
            lb.set(slot, lb.dtype_for(slot.position), shape)


_RNN_GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}


@recipe("RNN", "GRU", "LSTM")
def recurrent(lb: LineBuild) -> None:
    """RNN / GRU / LSTM: inputs shaped for the direction, gates and hidden size drawn.

    X [seq, batch, input] (layout 0) or [batch, seq, input] (layout 1); W, R, B per direction
    and gate, sequence_lens [batch] int32 within seq, initial_h / initial_c [directions,
    batch, hidden] (batch first with layout 1), P [directions, 3 * hidden].
    """
    x = lb.slots[0]
    gates = _RNN_GATES[lb.op_type]
    direction = str(
        lb.attr(
            "direction", lambda key: lb.choices.pick(key, ("forward", "reverse", "bidirectional"))
        )
    )
    directions = 2 if direction == "bidirectional" else 1
    layout = int(lb.attr("layout", lambda key: lb.choices.pick(key, (0, 1))) or 0)
    if x.shape is None:
        seq = lb.choices.integer(lb.key("seq"), 1, 3)
        batch = lb.choices.integer(lb.key("batch"), 1, 2)
        size = lb.choices.integer(lb.key("input"), 1, 4)
        lb.set(x, lb.dtype_for(0), (batch, seq, size) if layout else (seq, batch, size))
    shape = x.shape
    assert shape is not None, "X was just decided"
    if len(shape) != 3:
        raise RecipeError(f"{lb.op_type} needs a 3-D X")
    seq, batch = (shape[1], shape[0]) if layout else (shape[0], shape[1])
    hidden = int(lb.attr("hidden_size", lambda key: lb.choices.integer(key, 1, 4), omit_percent=0))
    dtype = lb.dtype_for(0)
    lb.set(lb.slots[1], dtype, (directions, gates * hidden, shape[2]))
    lb.set(lb.slots[2], dtype, (directions, gates * hidden, hidden))
    state = (batch, directions, hidden) if layout else (directions, batch, hidden)
    sizes = {3: (directions, 2 * gates * hidden), 5: state, 6: state, 7: (directions, 3 * hidden)}
    for position, slot_shape in sizes.items():
        slot = lb.present(position)
        if slot is not None:
            lb.set(slot, dtype, slot_shape)
    lengths = lb.present(4)
    if lengths is not None:
        values = [lb.choices.integer(lb.key("length", b), 1, seq) for b in range(batch)]
        lb.set(lengths, ir.DataType.INT32, (batch,), values=np.asarray(values, np.int32))
    lb.attr("linear_before_reset", lambda key: lb.choices.pick(key, (0, 1)))
    open_attributes(lb, 3, skip=("activations", "activation_alpha", "activation_beta", "clip"))
