"""Float64 replacements for ops that onnxruntime has no double kernel for.

The accuracy oracle (`_oracle`) runs a float64 copy of a model on onnxruntime. onnxruntime's CPU
provider has no double `Conv`, `Erf` (nor `Gelu`, whose body uses it), `GlobalAveragePool`,
`InstanceNormalization` or several activations. Each of them is written here with ops that do
have double kernels, to full double accuracy:

* `Conv`: im2col: the padded input sliced once per kernel offset (strides as Slice steps,
  dilations as offsets), the slices stacked on the channel axis and multiplied by the weights
  with one `MatMul` (a sum of `Mul`s for a depthwise convolution); groups become an axis.
  Explicit pads and `VALID` only (`SAME_*` pads depend on the input's size at run time: such a
  Conv stays in its own precision).
* `Erf`: a piecewise cubic Taylor polynomial on 4096 intervals of [0, 6) whose coefficients are
  computed here from `math.erf` and Hermite polynomials (the first around 0, so tiny arguments
  keep their relative accuracy); erf(x) = sign(x) for |x| >= 6 (1 - erf(6) is below double's
  resolution). Measured error: below 1e-13 absolute and relative. (onnx's reference evaluator
  computes Erf to float32 accuracy only.)
* `Gelu`, `GlobalAveragePool`, `GlobalMaxPool`, `InstanceNormalization`, `HardSigmoid`,
  `HardSwish`, `LeakyRelu`, `Elu`, `Selu`, `Celu`, `Softplus`, `Softsign`, `Mish`,
  `ThresholdedRelu` and `Mean`: their defining formulas.

A replacement is a list of new nodes and the values that stand for the op's outputs; it returns
None when it does not apply (an unknown rank, a non-constant kernel shape), and the oracle then
computes that node in its original precision instead. Every replacement needs opset 11 or newer
(Slice and Pad read their parameters as inputs from there).
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import ir

_BIG = np.iinfo(np.int64).max
MIN_OPSET = 11

# Erf: 4096 intervals of width 6/4096 on [0, 6), a cubic Taylor polynomial around each centre
# (4 table lookups per element: fewer, larger pieces cost more lookups, and lookups dominate).
_ERF_LIMIT = 6.0
_ERF_PIECES = 4096
_ERF_DEGREE = 3


class Emitter:
    """Builds the nodes of one replacement, with fresh names derived from the node's own."""

    def __init__(self, names: ir.NameAllocator, stem: str, opset: int) -> None:
        self.names = names
        self.stem = stem or "node"
        self.opset = opset
        self.nodes: list[ir.Node] = []

    def op(self, op_type: str, *inputs: ir.Value | None, **attributes: object) -> ir.Value:
        """Append one node; returns its (single) output."""
        out = ir.Value(self.names.fresh(f"{self.stem}_{op_type.lower()}"))
        node = ir.Node(
            op_type,
            inputs,
            attributes,
            outputs=[out],
            name=self.names.fresh(f"{self.stem}_double_{op_type.lower()}"),
        )
        self.nodes.append(node)
        return out

    def const(self, array: object) -> ir.Value:
        """A `Constant` node holding `array` (float arrays are float64)."""
        data = np.asarray(array)
        if data.dtype.kind == "f":
            data = data.astype(np.float64)
        return self.op("Constant", value=ir.NumpyTensor(data))

    def ints(self, values: Sequence[int]) -> ir.Value:
        """A 1-D int64 constant."""
        return self.const(np.asarray(values, dtype=np.int64))

    def scalar(self, value: float) -> ir.Value:
        """A 0-d float64 constant."""
        return self.const(np.asarray(value, dtype=np.float64))

    def reduce(self, op_type: str, x: ir.Value, axes: Sequence[int]) -> ir.Value:
        """ReduceMean/ReduceMax over `axes`, keeping them (axes as input from opset 18)."""
        if self.opset >= 18:
            return self.op(op_type, x, self.ints(axes), keepdims=1)
        return self.op(op_type, x, axes=list(axes), keepdims=1)

    def dims(self, shape: ir.Value, start: int, end: int | None = None) -> ir.Value:
        """`shape[start:end]` of a Shape output."""
        stop = _BIG if end is None else end
        return self.op("Slice", shape, self.ints([start]), self.ints([stop]))


Replacement = tuple[list[ir.Node], list[ir.Value]]
Builder = Callable[[ir.Node, Emitter], list[ir.Value] | None]


def constant_array(value: ir.Value | None) -> np.ndarray[Any, Any] | None:
    """The values of an initializer or a `Constant` output (None for anything else)."""
    if value is None:
        return None
    if value.const_value is not None:
        return np.asarray(value.const_value.numpy())
    producer = value.producer()
    if producer is not None and producer.op_type == "Constant" and producer.domain == "":
        payload = producer.attribute("value")
        if isinstance(payload, ir.Tensor):
            return np.asarray(payload.numpy())
    return None


def static_shape(value: ir.Value | None) -> tuple[int, ...] | None:
    """The value's shape when every dim is a known size."""
    if value is None:
        return None
    found = constant_array(value)
    if found is not None:
        return tuple(int(d) for d in found.shape)
    fact = ir.fact_type(value)
    if not isinstance(fact, ir.TensorType) or fact.shape is None:
        return None
    if not all(isinstance(d, int) and d >= 0 for d in fact.shape):
        return None
    return tuple(int(d) for d in fact.shape)  # type: ignore[arg-type]


def rank_of(value: ir.Value | None) -> int | None:
    """The value's rank when known."""
    if value is None:
        return None
    fact = ir.fact_type(value)
    if isinstance(fact, ir.TensorType) and fact.shape is not None:
        return len(fact.shape)
    found = constant_array(value)
    return None if found is None else found.ndim


def _ints(node: ir.Node, name: str, default: Sequence[int]) -> list[int]:
    found = node.attribute(name)
    if isinstance(found, tuple) and found:
        return [int(v) for v in found if isinstance(v, int)]
    return list(default)


def _float(node: ir.Node, name: str, default: float) -> float:
    found = node.attribute(name)
    return float(found) if isinstance(found, int | float) else default


# ---------------------------------------------------------------------------------------------
# Conv


def _conv(node: ir.Node, emit: Emitter) -> list[ir.Value] | None:
    x = node.inputs[0]
    w = node.inputs[1] if len(node.inputs) > 1 else None
    b = node.inputs[2] if len(node.inputs) > 2 else None
    weight_shape = static_shape(w)
    auto_pad = node.attribute("auto_pad", "NOTSET")
    if x is None or w is None or weight_shape is None or len(weight_shape) < 3:
        return None
    if auto_pad not in ("NOTSET", "VALID", b"NOTSET", b"VALID"):
        return None
    spatial = len(weight_shape) - 2
    kernel = list(weight_shape[2:])
    if _ints(node, "kernel_shape", kernel) != kernel:
        return None
    found_group = node.attribute("group", 1)
    group = found_group if isinstance(found_group, int) and found_group else 1
    out_channels = weight_shape[0]
    if group < 1 or out_channels % group:
        return None
    pads = _ints(node, "pads", [0] * 2 * spatial)
    if auto_pad in ("VALID", b"VALID"):
        pads = [0] * 2 * spatial
    strides = _ints(node, "strides", [1] * spatial)
    dilations = _ints(node, "dilations", [1] * spatial)
    if len(pads) != 2 * spatial or len(strides) != spatial or len(dilations) != spatial:
        return None
    plan = _ConvPlan(emit, w, weight_shape, group, strides, dilations)
    data = x
    if any(pads):
        begins, ends = pads[:spatial], pads[spatial:]
        data = emit.op("Pad", data, emit.ints([0, 0, *begins, 0, 0, *ends]))
    y = plan.convolve(data)
    if b is not None:
        bias = emit.op("Reshape", b, emit.ints([out_channels] + [1] * spatial))
        y = emit.op("Add", y, bias)
    return [y]


class _ConvPlan:
    """One Conv as im2col: strided slices per kernel offset, stacked, times the weights.

    A depthwise Conv (one input and one output channel per group) sums elementwise products
    instead; a grouped one puts the groups on an axis of their own.
    """

    def __init__(
        self,
        emit: Emitter,
        w: ir.Value,
        weight_shape: tuple[int, ...],
        group: int,
        strides: list[int],
        dilations: list[int],
    ) -> None:
        self.emit = emit
        self.w = w
        self.weights = constant_array(w)
        self.kernel = weight_shape[2:]
        self.out_channels = weight_shape[0]
        self.per_group = weight_shape[1]
        self.group = group
        self.strides = strides
        self.dilations = dilations
        self.spatial = len(self.kernel)
        self.offsets = list(itertools.product(*(range(k) for k in self.kernel)))
        self.depthwise = self.per_group == 1 and self.out_channels == group

    def convolve(self, data: ir.Value) -> ir.Value:
        """The Conv of `data` (already padded)."""
        if self.depthwise:
            return self._depthwise(data)
        emit = self.emit
        grouped = data
        first_spatial = 2
        if self.group > 1:
            target = [0, self.group, self.per_group, *([-1] if self.spatial == 1 else [])]
            if self.spatial > 1:
                shape = emit.op("Shape", data)
                target_value = emit.op(
                    "Concat",
                    emit.ints([0, self.group, self.per_group]),
                    emit.dims(shape, 2),
                    axis=0,
                )
            else:
                target_value = emit.ints(target)
            grouped = emit.op("Reshape", data, target_value)
            first_spatial = 3
        axes = list(range(first_spatial, first_spatial + self.spatial))
        windows = [self._window(grouped, offset, axes) for offset in self.offsets]
        patches = windows[0] if len(windows) == 1 else emit.op("Concat", *windows, axis=axes[0] - 1)
        columns = len(self.offsets) * self.per_group
        flat_shape = [0, columns, -1] if self.group == 1 else [0, self.group, columns, -1]
        flat = emit.op("Reshape", patches, emit.ints(flat_shape))
        product = emit.op("MatMul", self._matrix(), flat)
        out_shape = emit.op(
            "Concat",
            emit.ints([0, self.out_channels]),
            emit.dims(emit.op("Shape", patches), first_spatial),
            axis=0,
        )
        return emit.op("Reshape", product, out_shape)

    def _depthwise(self, data: ir.Value) -> ir.Value:
        emit = self.emit
        axes = list(range(2, 2 + self.spatial))
        parts = []
        for index, offset in enumerate(self.offsets):
            window = self._window(data, offset, axes)
            parts.append(emit.op("Mul", window, self._depthwise_weights(index)))
        return parts[0] if len(parts) == 1 else emit.op("Sum", *parts)

    def _window(self, data: ir.Value, offset: tuple[int, ...], axes: list[int]) -> ir.Value:
        """The input positions that kernel offset `offset` reads, for every output position."""
        starts, ends = [], []
        for position, size, dilation in zip(offset, self.kernel, self.dilations, strict=True):
            starts.append(position * dilation)
            tail = (size - 1 - position) * dilation
            ends.append(-tail if tail else _BIG)
        emit = self.emit
        return emit.op(
            "Slice",
            data,
            emit.ints(starts),
            emit.ints(ends),
            emit.ints(axes),
            emit.ints(self.strides),
        )

    def _matrix(self) -> ir.Value:
        """The weights as [M, K*Cg] (or [G, M/G, K*Cg]), columns offset-major like the patches."""
        kernel_size = len(self.offsets)
        groups, per_out = self.group, self.out_channels // self.group
        emit = self.emit
        if self.weights is not None:
            array = np.asarray(self.weights, np.float64)
            array = array.reshape(groups, per_out, self.per_group, kernel_size)
            array = array.transpose(0, 1, 3, 2).reshape(
                groups, per_out, kernel_size * self.per_group
            )
            return emit.const(array[0] if groups == 1 else array)
        shaped = emit.op("Reshape", self.w, emit.ints([groups, per_out, self.per_group, -1]))
        swapped = emit.op("Transpose", shaped, perm=[0, 1, 3, 2])
        target = [per_out, -1] if groups == 1 else [groups, per_out, -1]
        return emit.op("Reshape", swapped, emit.ints(target))

    def _depthwise_weights(self, index: int) -> ir.Value:
        """Offset `index`'s weight per channel, shaped [M, 1, ...] to broadcast over positions."""
        emit = self.emit
        target = [self.out_channels] + [1] * self.spatial
        if self.weights is not None:
            matrix = np.asarray(self.weights, np.float64).reshape(self.out_channels, -1)
            return emit.const(matrix[:, index].reshape(target))
        flat = emit.op("Reshape", self.w, emit.ints([self.out_channels, -1]))
        column = emit.op("Gather", flat, emit.ints([index]), axis=1)
        return emit.op("Reshape", column, emit.ints(target))


# ---------------------------------------------------------------------------------------------
# Erf and Gelu


def _hermite(order: int, x: float) -> float:
    """The physicists' Hermite polynomial H_order(x)."""
    previous, current = 1.0, 2.0 * x
    if order == 0:
        return previous
    for n in range(1, order):
        previous, current = current, 2.0 * x * current - 2.0 * n * previous
    return current


@functools.cache
def erf_table() -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """(centres, coefficients[piece, power]) of the piecewise Taylor polynomial of erf.

    The k-th derivative of erf is `2/sqrt(pi) * (-1)^(k-1) * H_(k-1)(x) * exp(-x^2)`.
    """
    width = _ERF_LIMIT / _ERF_PIECES
    centres = (np.arange(_ERF_PIECES) + 0.5) * width
    # The first piece is expanded around 0 (erf is odd there: the polynomial is x times an
    # even one), so that erf(x) keeps its relative accuracy for tiny x.
    centres[0] = 0.0
    table = np.zeros((_ERF_PIECES, _ERF_DEGREE + 1))
    scale = 2.0 / math.sqrt(math.pi)
    for piece, centre in enumerate(centres):
        c = float(centre)
        table[piece, 0] = math.erf(c)
        for power in range(1, _ERF_DEGREE + 1):
            derivative = scale * (-1) ** (power - 1) * _hermite(power - 1, c) * math.exp(-c * c)
            table[piece, power] = derivative / math.factorial(power)
    return centres, table


def erf_values(emit: Emitter, x: ir.Value) -> ir.Value:
    """Nodes computing erf(x) in double (see the module docstring)."""
    centres, table = erf_table()
    width = _ERF_LIMIT / _ERF_PIECES
    magnitude = emit.op("Abs", x)
    is_nan = emit.op("IsNaN", x)
    clean = emit.op("Where", is_nan, emit.scalar(0.0), magnitude)
    capped = emit.op("Min", clean, emit.scalar(_ERF_LIMIT - width / 2))
    scaled = emit.op("Mul", capped, emit.scalar(1.0 / width))
    index = emit.op("Cast", emit.op("Floor", scaled), to=int(ir.DataType.INT64))
    u = emit.op("Sub", capped, emit.op("Gather", emit.const(centres), index))
    poly = emit.op("Gather", emit.const(table[:, _ERF_DEGREE]), index)
    for power in range(_ERF_DEGREE - 1, -1, -1):
        coefficient = emit.op("Gather", emit.const(table[:, power]), index)
        poly = emit.op("Add", emit.op("Mul", poly, u), coefficient)
    inside = emit.op("Less", clean, emit.scalar(_ERF_LIMIT))
    unsigned = emit.op("Where", inside, poly, emit.scalar(1.0))
    signed = emit.op("Mul", emit.op("Sign", x), unsigned)
    return emit.op("Where", is_nan, x, signed)


def _erf(node: ir.Node, emit: Emitter) -> list[ir.Value] | None:
    x = node.inputs[0]
    return None if x is None else [erf_values(emit, x)]


def _gelu(node: ir.Node, emit: Emitter) -> list[ir.Value] | None:
    x = node.inputs[0]
    if x is None:
        return None
    approximate = node.attribute("approximate", "none")
    if approximate in ("tanh", b"tanh"):
        cube = emit.op("Mul", emit.op("Mul", x, x), x)
        inner = emit.op("Add", x, emit.op("Mul", cube, emit.scalar(0.044715)))
        scaled = emit.op("Mul", inner, emit.scalar(math.sqrt(2.0 / math.pi)))
        curve = emit.op("Tanh", scaled)
    else:
        curve = erf_values(emit, emit.op("Mul", x, emit.scalar(1.0 / math.sqrt(2.0))))
    half = emit.op("Mul", x, emit.scalar(0.5))
    return [emit.op("Mul", half, emit.op("Add", curve, emit.scalar(1.0)))]


# ---------------------------------------------------------------------------------------------
# Pooling and normalization


def _global_pool(reduce_op: str) -> Builder:
    def build(node: ir.Node, emit: Emitter) -> list[ir.Value] | None:
        x = node.inputs[0]
        rank = rank_of(x)
        if x is None or rank is None or rank < 3:
            return None
        return [emit.reduce(reduce_op, x, range(2, rank))]

    return build


def _instance_normalization(node: ir.Node, emit: Emitter) -> list[ir.Value] | None:
    x, scale, bias = (*node.inputs, None, None, None)[:3]
    rank = rank_of(x)
    if x is None or scale is None or bias is None or rank is None or rank < 3:
        return None
    axes = list(range(2, rank))
    epsilon = _float(node, "epsilon", 1e-5)
    centred = emit.op("Sub", x, emit.reduce("ReduceMean", x, axes))
    variance = emit.reduce("ReduceMean", emit.op("Mul", centred, centred), axes)
    deviation = emit.op("Sqrt", emit.op("Add", variance, emit.scalar(epsilon)))
    normalized = emit.op("Div", centred, deviation)
    shape = emit.ints([-1] + [1] * (rank - 2))
    scaled = emit.op("Mul", normalized, emit.op("Reshape", scale, shape))
    return [emit.op("Add", scaled, emit.op("Reshape", bias, shape))]


# ---------------------------------------------------------------------------------------------
# Activations


def _unary(formula: Callable[[ir.Node, Emitter, ir.Value], ir.Value]) -> Builder:
    def build(node: ir.Node, emit: Emitter) -> list[ir.Value] | None:
        x = node.inputs[0]
        return None if x is None else [formula(node, emit, x)]

    return build


def _hard_sigmoid_of(emit: Emitter, x: ir.Value, alpha: float, beta: float) -> ir.Value:
    line = emit.op("Add", emit.op("Mul", x, emit.scalar(alpha)), emit.scalar(beta))
    return emit.op("Max", emit.op("Min", line, emit.scalar(1.0)), emit.scalar(0.0))


def _hard_sigmoid(node: ir.Node, emit: Emitter, x: ir.Value) -> ir.Value:
    return _hard_sigmoid_of(emit, x, _float(node, "alpha", 0.2), _float(node, "beta", 0.5))


def _hard_swish(node: ir.Node, emit: Emitter, x: ir.Value) -> ir.Value:
    del node
    return emit.op("Mul", x, _hard_sigmoid_of(emit, x, 1.0 / 6.0, 0.5))


def _negative_branch(emit: Emitter, x: ir.Value, negative: ir.Value) -> ir.Value:
    """`negative` where x < 0, x elsewhere (NaN stays NaN)."""
    return emit.op("Where", emit.op("Less", x, emit.scalar(0.0)), negative, x)


def _leaky_relu(node: ir.Node, emit: Emitter, x: ir.Value) -> ir.Value:
    return _negative_branch(emit, x, emit.op("Mul", x, emit.scalar(_float(node, "alpha", 0.01))))


def _expm1_times(emit: Emitter, x: ir.Value, alpha: float) -> ir.Value:
    return emit.op("Mul", emit.op("Sub", emit.op("Exp", x), emit.scalar(1.0)), emit.scalar(alpha))


def _elu(node: ir.Node, emit: Emitter, x: ir.Value) -> ir.Value:
    return _negative_branch(emit, x, _expm1_times(emit, x, _float(node, "alpha", 1.0)))


def _selu(node: ir.Node, emit: Emitter, x: ir.Value) -> ir.Value:
    alpha = _float(node, "alpha", 1.67326319217681884765625)
    gamma = _float(node, "gamma", 1.05070102214813232421875)
    inner = emit.op(
        "Where",
        emit.op("LessOrEqual", x, emit.scalar(0.0)),
        _expm1_times(emit, x, alpha),
        x,
    )
    return emit.op("Mul", inner, emit.scalar(gamma))


def _celu(node: ir.Node, emit: Emitter, x: ir.Value) -> ir.Value:
    alpha = _float(node, "alpha", 1.0)
    scaled = emit.op("Mul", x, emit.scalar(1.0 / alpha))
    negative = emit.op("Min", _expm1_times(emit, scaled, alpha), emit.scalar(0.0))
    return emit.op("Add", emit.op("Max", x, emit.scalar(0.0)), negative)


def _softplus_of(emit: Emitter, x: ir.Value) -> ir.Value:
    # exp overflows past 709; for x > 30, log(1 + exp(x)) is x to double precision.
    bounded = emit.op("Min", x, emit.scalar(30.0))
    soft = emit.op("Log", emit.op("Add", emit.op("Exp", bounded), emit.scalar(1.0)))
    return emit.op("Where", emit.op("Greater", x, emit.scalar(30.0)), x, soft)


def _softplus(node: ir.Node, emit: Emitter, x: ir.Value) -> ir.Value:
    del node
    return _softplus_of(emit, x)


def _softsign(node: ir.Node, emit: Emitter, x: ir.Value) -> ir.Value:
    del node
    return emit.op("Div", x, emit.op("Add", emit.op("Abs", x), emit.scalar(1.0)))


def _mish(node: ir.Node, emit: Emitter, x: ir.Value) -> ir.Value:
    del node
    return emit.op("Mul", x, emit.op("Tanh", _softplus_of(emit, x)))


def _thresholded_relu(node: ir.Node, emit: Emitter, x: ir.Value) -> ir.Value:
    above = emit.op("Greater", x, emit.scalar(_float(node, "alpha", 1.0)))
    return emit.op("Where", above, x, emit.op("Mul", x, emit.scalar(0.0)))


def _mean(node: ir.Node, emit: Emitter) -> list[ir.Value] | None:
    inputs = [v for v in node.inputs if v is not None]
    if not inputs:
        return None
    total = inputs[0] if len(inputs) == 1 else emit.op("Sum", *inputs)
    return [emit.op("Mul", total, emit.scalar(1.0 / len(inputs)))]


BUILDERS: dict[str, Builder] = {
    "Conv": _conv,
    "Erf": _erf,
    "Gelu": _gelu,
    "GlobalAveragePool": _global_pool("ReduceMean"),
    "GlobalMaxPool": _global_pool("ReduceMax"),
    "InstanceNormalization": _instance_normalization,
    "HardSigmoid": _unary(_hard_sigmoid),
    "HardSwish": _unary(_hard_swish),
    "LeakyRelu": _unary(_leaky_relu),
    "Elu": _unary(_elu),
    "Selu": _unary(_selu),
    "Celu": _unary(_celu),
    "Softplus": _unary(_softplus),
    "Softsign": _unary(_softsign),
    "Mish": _unary(_mish),
    "ThresholdedRelu": _unary(_thresholded_relu),
    "Mean": _mean,
}
"""Default-domain ops with a double replacement, by op type."""


def double_replacement(node: ir.Node, emit: Emitter) -> Replacement | None:
    """The nodes that compute `node` in double, and its outputs' stand-ins (None: none)."""
    if node.domain not in ("", "ai.onnx") or emit.opset < MIN_OPSET or len(node.outputs) != 1:
        return None
    builder = BUILDERS.get(node.op_type)
    if builder is None:
        return None
    outputs = builder(node, emit)
    if outputs is None:
        return None
    return emit.nodes, outputs
