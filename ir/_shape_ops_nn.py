"""Shape rules of MatMul, Gemm, convolutions, pooling and reductions.

Spatial output dims are expressions in the input dims, with the integer arithmetic the
operator definitions state: `floor((in + pads - dilation*(k-1) - 1) / stride) + 1` for
convolution and pooling, `ceil(in / stride)` for SAME padding. onnxruntime computes the same
size for convolutions wherever the output is not empty-or-negative, where it rejects the
input. Pooling divides toward zero there instead (a size-1 input under a size-2 kernel and
stride 2 gives one window), so a pooled dim is stated only where the numerator cannot be
negative. Where onnx's inference and onnxruntime disagree (`_shape_disputes`: pooling with
`ceil_mode=1`, pooling under SAME with dilations, ConvTranspose under SAME, Resize by scales)
these rules state a dim only where the two computations agree, and no dim otherwise.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np

from ir._core import Node
from ir._shape_facts import (
    OutputFacts,
    Rule,
    Shape,
    ShapeData,
    ShapeFacts,
    attr_int,
    attr_ints,
    attr_str,
    broadcast,
    held_by,
    input_at,
    ints_input_or_attr,
    ints_of,
    normalize_axes,
    normalize_axis,
)
from ir._symbolic_dims import DimExpr, const, product


def _matmul(node: Node, facts: ShapeFacts) -> Sequence[OutputFacts]:
    left = facts.shape(input_at(node, 0))
    right = facts.shape(input_at(node, 1))
    if not left or not right:
        return [OutputFacts()]
    a = (const(1), *left) if len(left) == 1 else left
    b = (*right, const(1)) if len(right) == 1 else right
    batch = broadcast([a[:-2], b[:-2]])
    if batch is None:
        return [OutputFacts()]
    rows: Shape = () if len(left) == 1 else (a[-2],)
    columns: Shape = () if len(right) == 1 else (b[-1],)
    return [OutputFacts(batch + rows + columns)]


def _gemm(node: Node, facts: ShapeFacts) -> Sequence[OutputFacts]:
    a = facts.shape(input_at(node, 0))
    b = facts.shape(input_at(node, 1))
    if a is None or b is None or len(a) != 2 or len(b) != 2:
        return [OutputFacts()]
    rows = a[1] if attr_int(node, "transA", 0) else a[0]
    columns = b[0] if attr_int(node, "transB", 0) else b[1]
    return [OutputFacts((rows, columns))]


@dataclasses.dataclass(frozen=True, slots=True)
class _Window:
    """Kernel, strides, dilations, pads and auto_pad of one convolution or pooling node."""

    kernel: tuple[DimExpr | None, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    pads: tuple[int, ...]
    auto_pad: str

    def output_dim(self, index: int, size: DimExpr | None) -> DimExpr | None:
        """The output size along spatial axis `index` for an input of `size`."""
        kernel = self.kernel[index]
        if size is None or kernel is None:
            return None
        stride = self.strides[index]
        if self.auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            return size.ceildiv(stride)
        padding = 0
        if self.auto_pad != "VALID":
            padding = self.pads[index] + self.pads[index + len(self.kernel)]
        reach = (kernel - 1) * self.dilations[index] + 1
        return (size + padding - reach) // stride + 1

    def transposed_dim(self, index: int, size: DimExpr | None, extra: int) -> DimExpr | None:
        """ConvTranspose's output size along spatial axis `index` (`extra`: output_padding)."""
        kernel = self.kernel[index]
        if size is None or kernel is None:
            return None
        stride = self.strides[index]
        if self.auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            return size * stride
        padding = 0
        if self.auto_pad != "VALID":
            padding = self.pads[index] + self.pads[index + len(self.kernel)]
        reach = (kernel - 1) * self.dilations[index] + 1
        return (size - 1) * stride + extra + reach - padding


def _window_settings(node: Node, spatial: int, kernel: Sequence[DimExpr | None]) -> _Window | None:
    strides = attr_ints(node, "strides") or (1,) * spatial
    dilations = attr_ints(node, "dilations") or (1,) * spatial
    pads = attr_ints(node, "pads") or (0,) * (2 * spatial)
    if len(strides) != spatial or len(dilations) != spatial or len(pads) != 2 * spatial:
        return None
    if len(kernel) != spatial or any(s <= 0 for s in strides):
        return None
    return _Window(tuple(kernel), strides, dilations, pads, attr_str(node, "auto_pad", "NOTSET"))


def _conv(node: Node, facts: ShapeFacts) -> Sequence[OutputFacts]:
    x = facts.shape(input_at(node, 0))
    w = facts.shape(input_at(node, 1))
    if x is None or len(x) < 3:
        return [OutputFacts()]
    spatial = len(x) - 2
    kernel = _kernel(node, w, spatial)
    window = _window_settings(node, spatial, kernel) if kernel is not None else None
    channels = w[0] if w is not None and len(w) == len(x) else None
    if window is None:
        return [OutputFacts((x[0], channels, *([None] * spatial)))]
    dims = tuple(window.output_dim(i, x[2 + i]) for i in range(spatial))
    return [OutputFacts((x[0], channels, *dims))]


def _kernel(node: Node, w: Shape | None, spatial: int) -> tuple[DimExpr | None, ...] | None:
    given = attr_ints(node, "kernel_shape")
    if given is not None:
        return tuple(const(k) for k in given)
    if w is not None and len(w) == spatial + 2:
        return w[2:]
    return None


def _conv_transpose(node: Node, facts: ShapeFacts) -> Sequence[OutputFacts]:
    x = facts.shape(input_at(node, 0))
    w = facts.shape(input_at(node, 1))
    if x is None or len(x) < 3:
        return [OutputFacts()]
    spatial = len(x) - 2
    group = attr_int(node, "group", 1)
    per_group = w[1] if w is not None and len(w) == len(x) else None
    channels = per_group * group if per_group is not None else None
    given = attr_ints(node, "output_shape")
    if given is not None and len(given) == spatial:
        return [OutputFacts((x[0], channels, *(const(d) for d in given)))]
    kernel = _kernel(node, w, spatial)
    window = _window_settings(node, spatial, kernel) if kernel is not None else None
    extras = attr_ints(node, "output_padding") or (0,) * spatial
    if window is None or len(extras) != spatial or window.auto_pad in _SAME:
        # Under SAME, onnxruntime's sizes differ from onnx's (strides, output_padding).
        return [OutputFacts((x[0], channels, *([None] * spatial)))]
    dims = tuple(window.transposed_dim(i, x[2 + i], extras[i]) for i in range(spatial))
    return [OutputFacts((x[0], channels, *dims))]


def _pool(node: Node, facts: ShapeFacts) -> Sequence[OutputFacts]:
    x = facts.shape(input_at(node, 0))
    if x is None or len(x) < 3:
        return [OutputFacts()]
    spatial = len(x) - 2
    given = attr_ints(node, "kernel_shape")
    kernel = tuple(const(k) for k in given) if given is not None else None
    window = _window_settings(node, spatial, kernel) if kernel is not None else None
    if window is None:
        dims: tuple[DimExpr | None, ...] = (None,) * spatial
    else:
        ceil_mode = attr_int(node, "ceil_mode", 0) == 1
        dims = tuple(_pooled_dim(window, i, x[2 + i], ceil_mode) for i in range(spatial))
    shape = (x[0], x[1], *dims)
    return [OutputFacts(shape)] * len(node.outputs)


def _pooled_dim(
    window: _Window, index: int, size: DimExpr | None, ceil_mode: bool
) -> DimExpr | None:
    """A pooled size where onnx's formula and onnxruntime's provably agree, else None.

    onnxruntime divides `in + pads - reach` by the stride toward zero (so a negative numerator
    above -stride still gives one window), and with `ceil_mode` drops a last window that would
    start in the end padding; under SAME it pads for the undilated kernel. So: SAME only
    without dilations; otherwise the numerator must be non-negative for every input size of
    at least 1 (an empty spatial axis is rejected), and with `ceil_mode` the division exact.
    """
    kernel = window.kernel[index]
    if size is None or kernel is None:
        return None
    stride = window.strides[index]
    if window.auto_pad in _SAME:
        if window.dilations[index] != 1 or (ceil_mode and stride != 1):
            return None
        return size.ceildiv(stride)
    head = tail = 0
    if window.auto_pad != "VALID":
        head = window.pads[index]
        tail = window.pads[index + len(window.kernel)]
    reach = (kernel - 1) * window.dilations[index] + 1
    numerator = size + head + tail - reach
    if not (numerator - size + 1).is_nonnegative() and not numerator.is_nonnegative():
        return None
    if ceil_mode and stride != 1:
        exact = numerator.as_int()
        reach_int = reach.as_int()
        if exact is not None and exact % stride == 0 and reach_int is not None and tail < reach_int:
            return numerator // stride + 1
        return _ceil_pooled_static(size, head, stride, exact)
    return numerator // stride + 1


def _ceil_pooled_static(
    size: DimExpr, head: int, stride: int, numerator: int | None
) -> DimExpr | None:
    """A `ceil_mode` pooled size of a static input where every computation agrees.

    onnx's `ceil(numerator / stride) + 1` windows, when the last of them starts inside the
    input or its head padding (before `size + head`), so that no runtime has a window to drop
    (onnxruntime drops one that would start past it at opset 19, keeps it at opset 17); else
    None, as for a symbolic size.
    """
    static = size.as_int()
    if static is None or numerator is None:
        return None
    count = -(-numerator // stride) + 1
    if (count - 1) * stride >= static + head:
        return None
    return const(count)


def _resize(node: Node, facts: ShapeFacts) -> Sequence[OutputFacts]:
    """Resize (opset 10+) and Upsample: `sizes` as given, `scales` where float32 and double agree.

    onnxruntime computes `int64(float32(in) * scale)` in float32, onnx `floor(in * scale)` in
    double (10 x 2.3 gives 23 and 22); a dim is stated only where both give the same size: a
    static one by computing both, a symbolic one for a scale of 1 or a power of two, which
    multiply exactly (below 2**24 elements along the axis, where float32 counts exactly).
    """
    x = facts.shape(input_at(node, 0))
    if x is None:
        return [OutputFacts()]
    unknown = OutputFacts((None,) * len(x))
    axes = _resize_axes(node, len(x))
    if axes is None:
        return [unknown]
    sizes = _resize_sizes(node, facts)
    if sizes is not None:
        if attr_str(node, "keep_aspect_ratio_policy", "stretch") != "stretch":
            return [unknown]
        if len(sizes) != len(axes):
            return [unknown]
        dims = list(x)
        for axis, size in zip(axes, sizes, strict=True):
            dims[axis] = const(size) if size >= 0 else None
        return [OutputFacts(tuple(dims))]
    scales = _resize_scales(node, facts)
    if scales is None or len(scales) != len(axes):
        return [unknown]
    dims = list(x)
    for axis, scale in zip(axes, scales, strict=True):
        dims[axis] = _scaled_dim(x[axis], scale)
    return [OutputFacts(tuple(dims))]


def _resize_axes(node: Node, rank: int) -> tuple[int, ...] | None:
    given = attr_ints(node, "axes")
    if given is None:
        return tuple(range(rank))
    return normalize_axes(given, rank)


def _resize_sizes(node: Node, facts: ShapeFacts) -> tuple[int, ...] | None:
    """Resize's `sizes` input when it is given and known (opset 11+)."""
    if node.op_type != "Resize":
        return None
    value = input_at(node, 3)
    if value is None or not value.name:
        return None
    found = ints_of(facts, value)
    return found if found else None


def _resize_scales(node: Node, facts: ShapeFacts) -> tuple[float, ...] | None:
    """The constant `scales` (an input, or Upsample's attribute before opset 9)."""
    if node.op_type == "Upsample":
        given = node.attribute("scales")
        if isinstance(given, tuple) and given:
            return tuple(float(np.float32(s)) for s in given)  # type: ignore[arg-type]
        index = 1
    else:
        index = 1 if facts.opset() < 11 else 2
    value = input_at(node, index)
    tensor = value.const_value if value is not None and not value.is_graph_input() else None
    if tensor is None or tensor.size == 0:
        return None
    return tuple(float(s) for s in np.asarray(tensor.numpy(), dtype=np.float32).reshape(-1))


def _scaled_dim(size: DimExpr | None, scale: float) -> DimExpr | None:
    if size is None or not math.isfinite(scale) or scale <= 0:
        return None
    static = size.as_int()
    if static is not None:
        wide = math.floor(static * scale)
        narrow = int(np.float32(np.float32(static) * np.float32(scale)))
        return const(wide) if wide == narrow else None
    if scale >= 1 and scale == float(2 ** round(math.log2(scale))):
        return size * int(scale)
    return None


def _global_pool(node: Node, facts: ShapeFacts) -> Sequence[OutputFacts]:
    x = facts.shape(input_at(node, 0))
    if x is None or len(x) < 2:
        return [OutputFacts()]
    return [OutputFacts((x[0], x[1], *([const(1)] * (len(x) - 2))))]


def _reduce(node: Node, facts: ShapeFacts) -> Sequence[OutputFacts]:
    x = facts.shape(input_at(node, 0))
    if x is None:
        return [OutputFacts()]
    keep = attr_int(node, "keepdims", 1) == 1
    axes_given = len(node.inputs) > 1 and input_at(node, 1) is not None
    axes = ints_input_or_attr(node, facts, 1, "axes")
    if axes is None and axes_given:
        return [OutputFacts((None,) * len(x) if keep else None)]
    if not axes:
        if attr_int(node, "noop_with_empty_axes", 0):
            return [OutputFacts(x)]
        axes = tuple(range(len(x)))
    positions = normalize_axes(axes, len(x))
    if positions is None:
        return [OutputFacts()]
    shape = _reduced(x, positions, keep)
    return [OutputFacts(shape, _reduced_shape_value(node, facts, len(x), keep))]


def _reduced_shape_value(node: Node, facts: ShapeFacts, rank: int, keep: bool) -> ShapeData | None:
    """ReduceProd / ReduceSum of a whole shape value: the product (sum) of its elements.

    TensorFlow's Tensordot (Keras Dense on a 4-D input) computes a Reshape's size as the
    product of some of its input's dims. A result its integer type cannot hold is unknown
    (onnxruntime wraps it), and so is a product past 2**53, which onnxruntime rounds.
    """
    if node.op_type not in ("ReduceProd", "ReduceSum") or rank != 1:
        return None
    data = facts.data(input_at(node, 0))
    if data is None or data.scalar or any(e is None for e in data.elements):
        return None
    elements = [e for e in data.elements if e is not None]
    if node.op_type == "ReduceProd":
        total = product(elements)
        number = total.as_int()
        if number is not None and abs(number) > 2**53:
            return None  # onnxruntime's integer product rounds there (as a double does)
    else:
        total = const(0)
        for element in elements:
            total = total + element
    found = held_by(total, facts.dtype(input_at(node, 0)))
    return ShapeData((found,), scalar=not keep) if found is not None else None


def _reduced(x: Shape, positions: Sequence[int], keep: bool) -> Shape:
    if keep:
        return tuple(const(1) if i in positions else d for i, d in enumerate(x))
    return tuple(d for i, d in enumerate(x) if i not in positions)


def _arg_reduce(node: Node, facts: ShapeFacts) -> Sequence[OutputFacts]:
    x = facts.shape(input_at(node, 0))
    if x is None:
        return [OutputFacts()]
    axis = normalize_axis(attr_int(node, "axis", 0), len(x))
    if axis is None:
        return [OutputFacts()]
    return [OutputFacts(_reduced(x, (axis,), attr_int(node, "keepdims", 1) == 1))]


def _top_k(node: Node, facts: ShapeFacts) -> Sequence[OutputFacts]:
    x = facts.shape(input_at(node, 0))
    if x is None:
        return []
    axis = normalize_axis(attr_int(node, "axis", -1), len(x))
    if axis is None:
        return []
    k_data = facts.data(input_at(node, 1))
    k = k_data.elements[0] if k_data is not None and len(k_data.elements) == 1 else None
    shape = (*x[:axis], k, *x[axis + 1 :])
    return [OutputFacts(shape), OutputFacts(shape)]


_SAME = ("SAME_UPPER", "SAME_LOWER")

_REDUCTIONS = [
    "ReduceL1",
    "ReduceL2",
    "ReduceLogSum",
    "ReduceLogSumExp",
    "ReduceMax",
    "ReduceMean",
    "ReduceMin",
    "ReduceProd",
    "ReduceSum",
    "ReduceSumSquare",
]

RULES: dict[str, Rule] = {
    "MatMul": _matmul,
    "MatMulInteger": _matmul,
    "Gemm": _gemm,
    "Conv": _conv,
    "ConvInteger": _conv,
    "ConvTranspose": _conv_transpose,
    "MaxPool": _pool,
    "AveragePool": _pool,
    "LpPool": _pool,
    "Resize": _resize,
    "Upsample": _resize,
    "GlobalAveragePool": _global_pool,
    "GlobalMaxPool": _global_pool,
    "GlobalLpPool": _global_pool,
    **dict.fromkeys(_REDUCTIONS, _reduce),
    "ArgMax": _arg_reduce,
    "ArgMin": _arg_reduce,
    "TopK": _top_k,
}
