"""Random small models over the ops the rule library touches, for the soundness fuzzer.

A model is a chain of *motifs* applied to one running tensor: each motif writes the ops some
rules of the library look for (an algebraic identity, a clamp pair, a Conv with a per-channel
scale or a BatchNormalization, a written-out LayerNorm, GELU, HardSwish, attention, reshapes,
shape reads, an If whose branches name their values alike, two Loop bodies that do the same, a
local function reusing the main graph's names, ops of newer opsets for the decompositions of
a lower target opset, ...), with parameters drawn to sit on the edges: dtypes float, float16,
double, bfloat16, integers and bool; dims of size 0 and symbolic dims; constants that are NaN,
infinities, signed zeros, subnormals, the dtype's extremes or numbers close to a rule's
literal. Inputs are drawn the same way (`input_values`). `fuzz.check_rewrite` pushes each model
through the default library and compares it with the original under onnxruntime.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np
import onnx
import onnx.helper as oh
import onnx.numpy_helper
from hypothesis import strategies as st

FLOATS = ("float32", "float16", "float64", "bfloat16")
INTEGERS = ("int64", "int32", "int8", "uint8")


def np_dtype(name: str) -> np.dtype[Any]:
    """The numpy dtype of a dtype name (ml_dtypes for bfloat16)."""
    return np.dtype(ml_dtypes.bfloat16) if name == "bfloat16" else np.dtype(name)


def onnx_type(name: str) -> int:
    """The ONNX element type of a dtype name."""
    if name == "bfloat16":
        return onnx.TensorProto.BFLOAT16
    return int(oh.np_dtype_to_tensor_dtype(np.dtype(name)))


def special_floats(name: str) -> list[float]:
    """Values where float rewrites break: NaN, infinities, signed zeros, subnormals, extremes."""
    info = ml_dtypes.finfo(np_dtype(name))  # type: ignore[no-untyped-call]
    return [
        float("nan"),
        float("inf"),
        float("-inf"),
        0.0,
        -0.0,
        float(info.smallest_subnormal),
        -float(info.smallest_subnormal),
        float(info.max),
        float(info.min),
        float(info.tiny),
        1.0,
        -1.0,
        2.0,
        0.5,
        1e-4,
        3e4,
    ]


@dataclasses.dataclass
class Tensor:
    """The running value: its name, dtype name and run-time shape."""

    name: str
    dtype: str
    shape: tuple[int, ...]


@dataclasses.dataclass
class Case:
    """A generated model, its input arrays, and the rewrite's target opset (or None)."""

    model: onnx.ModelProto
    feeds: dict[str, np.ndarray]
    target_opset: int | None
    motifs: tuple[str, ...]


class Builder:
    """Nodes, constants, inputs and outputs of a model under construction."""

    def __init__(self, draw: st.DrawFn, opset: int) -> None:
        self.draw = draw
        self.opset = opset
        self.nodes: list[Any] = []
        self.initializers: list[Any] = []
        self.inputs: list[Any] = []
        self.outputs: list[Any] = []
        self.feeds: dict[str, np.ndarray] = {}
        self.functions: list[Any] = []
        self.count = 0
        self.used: set[str] = set()

    def fresh(self, stem: str) -> str:
        self.count += 1
        return f"{stem}{self.count}"

    def named(self, name: str) -> str:
        """`name` itself the first time (to collide with names in other scopes), else fresh."""
        if name in self.used:
            return self.fresh(name)
        self.used.add(name)
        return name

    def node(self, op: str, inputs: list[str], outputs: int = 1, **attrs: Any) -> list[str]:
        names = [self.fresh(op.lower()) for _ in range(outputs)]
        self.nodes.append(oh.make_node(op, inputs, names, **attrs))
        return names

    def one(self, op: str, inputs: list[str], **attrs: Any) -> str:
        return self.node(op, inputs, **attrs)[0]

    def const(self, array: np.ndarray, stem: str = "c") -> str:
        """A constant: an initializer, or (sometimes) a Constant node."""
        name = self.fresh(stem)
        tensor = onnx.numpy_helper.from_array(np.asarray(array), name)
        if self.draw(st.integers(0, 3)) == 0:
            self.nodes.append(oh.make_node("Constant", [], [name], value=tensor))
        else:
            self.initializers.append(tensor)
        return name

    def input(self, name: str, dtype: str, shape: tuple[int, ...], symbolic: bool = True) -> str:
        """A graph input of that run-time shape; some dims declared as symbols."""
        dims: list[Any] = []
        for axis, size in enumerate(shape):
            named = symbolic and self.draw(st.integers(0, 2)) == 0
            dims.append(f"{name}_d{axis}" if named else size)
        self.inputs.append(oh.make_tensor_value_info(name, onnx_type(dtype), dims))
        self.feeds[name] = self.draw(input_values(dtype, shape))
        return name

    def output(self, name: str) -> None:
        self.outputs.append(onnx.ValueInfoProto(name=name))

    def model(self) -> onnx.ModelProto:
        graph = oh.make_graph(self.nodes, "fuzz", self.inputs, self.outputs, self.initializers)
        imports = [oh.make_opsetid("", self.opset)]
        if self.functions:
            imports.append(oh.make_opsetid("local", 1))
        model = oh.make_model(graph, opset_imports=imports, functions=self.functions)
        model.ir_version = 10
        return model


@st.composite
def input_values(
    draw: st.DrawFn,
    dtype: str,
    shape: tuple[int, ...],
    special_odds: int = 2,
    divisible: bool = False,
) -> np.ndarray:
    """An array: ordinary numbers with special values mixed in (`special_odds` times in
    `special_odds + 1`). With `divisible`, integers are never the type's minimum."""
    count = int(np.prod(shape))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return np.asarray(rng.random(shape) > 0.5)
    if dtype in INTEGERS:
        info = np.iinfo(np.dtype(dtype))
        values = rng.integers(-3, 4, count)
        # onnxruntime's integer Div (1.32) kills the process (SIGFPE) on the type's minimum
        # over -1 (a zero divisor is an error it reports): such inputs cannot be compared
        lowest = info.min + 1 if divisible else info.min
        extremes = np.array([lowest, info.max, 0, -1, 1], dtype=np.int64)
        if draw(st.booleans()):
            mask = rng.random(count) < 0.2
            values = np.where(mask, rng.choice(extremes, count), values)
        return np.clip(values, info.min, info.max).astype(dtype).reshape(shape)
    values = rng.standard_normal(count) * draw(st.sampled_from([1.0, 0.01, 100.0]))
    if draw(st.integers(0, special_odds)) > 0:
        specials = np.array(special_floats(dtype))
        mask = rng.random(count) < draw(st.sampled_from([0.1, 0.3]))
        values = np.where(mask, rng.choice(specials, count), values)
    with np.errstate(all="ignore"):
        return values.astype(np_dtype(dtype)).reshape(shape)


def _scalar(draw: st.DrawFn, dtype: str, usual: list[float]) -> float:
    """A constant near the rules' literals, or a special value."""
    pool = usual + [float(np.nextafter(np.float32(u), np.float32(2 * u + 1))) for u in usual]
    if dtype in FLOATS:
        pool += special_floats(dtype)
    return draw(st.sampled_from(pool))


def _array(value: Any, dtype: str) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.asarray(value, dtype=np.float64).astype(np_dtype(dtype))


def _float_like(draw: st.DrawFn, b: Builder, cur: Tensor, shape: tuple[int, ...]) -> str:
    """A constant of `cur`'s dtype and `shape`: ordinary numbers, some special."""
    return b.const(draw(_weights(cur.dtype, shape)))


def _weights(dtype: str, shape: tuple[int, ...]) -> st.SearchStrategy[np.ndarray]:
    """Constant weights or statistics: ordinary numbers in two cases out of three (a fold's
    condition holds), special values mixed in otherwise."""
    return input_values(dtype, shape, special_odds=1)  # type: ignore[no-any-return]


# ---------------------------------------------------------------------------------------------
# Motifs: each writes some ops on `cur` and returns the new running value (or `cur`).

Motif = Callable[[st.DrawFn, Builder, Tensor], Tensor]


def algebra(draw: st.DrawFn, b: Builder, cur: Tensor) -> Tensor:
    """x op c for the identities: + 0, - 0, * 1, / 1, ** 1, ** 2."""
    op = draw(st.sampled_from(["Add", "Sub", "Mul", "Div", "Pow"]))
    if cur.dtype == "bool":
        return cur
    usual = {"Add": [0.0, -0.0], "Sub": [0.0, -0.0], "Mul": [1.0], "Div": [1.0], "Pow": [1.0, 2.0]}
    shape = draw(st.sampled_from([(), (1,), cur.shape[-1:] if cur.shape else ()]))
    if cur.dtype in FLOATS:
        c = b.const(_array(np.full(shape, _scalar(draw, cur.dtype, usual[op])), cur.dtype))
    else:
        # onnxruntime's integer Div kills the process (SIGFPE) on a zero divisor and on the
        # type's minimum over -1: those inputs cannot be compared, only crash the fuzzer
        low = {"Pow": 0, "Div": 1}.get(op, -1)
        value = draw(st.integers(low, 2))
        c = b.const(np.full(shape, value).astype(np_dtype(cur.dtype)))
    args = [cur.name, c] if draw(st.integers(0, 3)) else [c, cur.name]
    if op in ("Sub", "Div", "Pow"):
        args = [cur.name, c]
    out_shape = tuple(np.broadcast_shapes(cur.shape, shape))
    return Tensor(b.one(op, args), cur.dtype, out_shape)


def copies(draw: st.DrawFn, b: Builder, cur: Tensor) -> Tensor:
    """Identity, inference Dropout, a no-op Cast, Expand, Slice, Pad or Transpose."""
    kind = draw(
        st.sampled_from(["Identity", "Dropout", "Cast", "Expand", "Slice", "Pad", "Transpose"])
    )
    rank = len(cur.shape)
    if kind == "Dropout" and cur.dtype in FLOATS:
        ratio = b.const(np.array(draw(st.sampled_from([0.0, 0.5])), np.float32))
        return Tensor(b.one("Dropout", [cur.name, ratio]), cur.dtype, cur.shape)
    if kind == "Cast":
        return Tensor(b.one("Cast", [cur.name], to=onnx_type(cur.dtype)), cur.dtype, cur.shape)
    if kind == "Expand":
        shape = b.const(np.array(draw(st.sampled_from([cur.shape, (1,) * rank])), np.int64))
        return Tensor(b.one("Expand", [cur.name, shape]), cur.dtype, cur.shape)
    if kind == "Slice" and rank:
        axis = draw(st.integers(0, rank - 1))
        end = draw(st.sampled_from([cur.shape[axis], 2**62, cur.shape[axis] + 3]))
        parts = [b.const(np.array([v], np.int64)) for v in (0, end, axis)]
        return Tensor(b.one("Slice", [cur.name, *parts]), cur.dtype, cur.shape)
    if kind == "Pad" and rank:
        pads = b.const(np.zeros(2 * rank, np.int64))
        return Tensor(b.one("Pad", [cur.name, pads]), cur.dtype, cur.shape)
    if kind == "Transpose" and rank:
        perm = list(range(rank))
        return Tensor(b.one("Transpose", [cur.name], perm=perm), cur.dtype, cur.shape)
    return Tensor(b.one("Identity", [cur.name]), cur.dtype, cur.shape)


def casts(draw: st.DrawFn, b: Builder, cur: Tensor) -> Tensor:
    """Cast to another type and (often) back: lossless widenings and lossy narrowings."""
    target = draw(st.sampled_from([*FLOATS, *INTEGERS, "bool"]))
    first = Tensor(b.one("Cast", [cur.name], to=onnx_type(target)), target, cur.shape)
    if draw(st.booleans()):
        return first
    return Tensor(b.one("Cast", [first.name], to=onnx_type(cur.dtype)), cur.dtype, cur.shape)


def layout(draw: st.DrawFn, b: Builder, cur: Tensor) -> Tensor:
    """Transpose pairs, Reshape chains, Flatten, Unsqueeze + Squeeze, a computed Reshape."""
    rank = len(cur.shape)
    kind = draw(st.sampled_from(["transposes", "reshapes", "flatten", "unsqueeze", "computed"]))
    if kind == "transposes" and rank >= 2:
        p1 = draw(st.permutations(range(rank)))
        p2 = draw(st.permutations(range(rank)))
        t = b.one("Transpose", [cur.name], perm=list(p1))
        mid = tuple(cur.shape[i] for i in p1)
        return Tensor(b.one("Transpose", [t], perm=list(p2)), cur.dtype, tuple(mid[i] for i in p2))
    if kind == "flatten" and rank >= 2:
        out = (cur.shape[0], int(np.prod(cur.shape[1:])))
        return Tensor(b.one("Flatten", [cur.name], axis=1), cur.dtype, out)
    if kind == "unsqueeze":
        axis = draw(st.integers(-rank - 1, rank))
        axes = b.const(np.array([axis], np.int64))
        t = b.one("Unsqueeze", [cur.name, axes])
        return Tensor(b.one("Squeeze", [t, axes]), cur.dtype, cur.shape)
    if kind == "computed" and rank >= 2:
        s = b.one("Shape", [cur.name])
        first = b.one(
            "Slice", [s, b.const(np.array([0], np.int64)), b.const(np.array([1], np.int64))]
        )
        rest = b.const(np.array([-1], np.int64))
        target = b.one("Concat", [first, rest], axis=0)
        out = (cur.shape[0], int(np.prod(cur.shape[1:])))
        return Tensor(b.one("Reshape", [cur.name, target]), cur.dtype, out)
    total = int(np.prod(cur.shape))
    middle = draw(st.sampled_from([[total], [-1], [1, -1], [0, -1] if rank else [-1]]))
    t = b.one("Reshape", [cur.name, b.const(np.array(middle, np.int64))])
    back = [int(d) for d in cur.shape] or [1]
    if not cur.shape:
        back = []
    return Tensor(b.one("Reshape", [t, b.const(np.array(back, np.int64))]), cur.dtype, cur.shape)


def shapes(draw: st.DrawFn, b: Builder, cur: Tensor) -> Tensor:
    """Shape, Size and a dim of the shape, as extra outputs (compared exactly)."""
    rank = len(cur.shape)
    b.output(b.one("Shape", [cur.name]))
    b.output(b.one("Size", [cur.name]))
    if rank and b.opset >= 15:
        s = b.one("Shape", [cur.name], start=draw(st.integers(-rank, rank)))
        b.output(s)
        index = b.const(np.array(draw(st.integers(0, rank - 1)), np.int64))
        b.output(b.one("Gather", [b.one("Shape", [cur.name]), index], axis=0))
    return cur


def clamps(draw: st.DrawFn, b: Builder, cur: Tensor) -> Tensor:
    """Max/Min pairs, Clip and Relu combinations with constant bounds (NaN and inf too)."""
    if cur.dtype not in FLOATS:
        return cur
    lo = _scalar(draw, cur.dtype, [0.0, -1.0, 6.0])
    hi = _scalar(draw, cur.dtype, [1.0, 6.0, 0.0])
    clo, chi = b.const(_array(lo, cur.dtype)), b.const(_array(hi, cur.dtype))
    kind = draw(
        st.sampled_from(
            ["maxmin", "minmax", "minmin", "maxmax", "cliprelu", "reluclip", "clipclip"]
        )
    )
    x = cur.name
    if kind == "maxmin":
        y = b.one("Min", [b.one("Max", [x, clo]), chi])
    elif kind == "minmax":
        y = b.one("Max", [b.one("Min", [x, chi]), clo])
    elif kind == "minmin":
        y = b.one("Min", [b.one("Min", [x, clo]), chi])
    elif kind == "maxmax":
        y = b.one("Max", [b.one("Max", [x, clo]), chi])
    elif kind == "cliprelu":
        y = b.one("Relu", [b.one("Clip", [x, clo, chi])])
    elif kind == "reluclip":
        y = b.one("Clip", [b.one("Relu", [x]), clo, chi])
    else:
        lo2 = b.const(_array(_scalar(draw, cur.dtype, [-2.0, 0.5]), cur.dtype))
        hi2 = b.const(_array(_scalar(draw, cur.dtype, [2.0, 3.0]), cur.dtype))
        y = b.one("Clip", [b.one("Clip", [x, clo, chi]), lo2, hi2])
    return Tensor(y, cur.dtype, cur.shape)


def _channels_first(draw: st.DrawFn, b: Builder, cur: Tensor) -> Tensor:
    """`cur` as a rank-4 [N, C, H, W] tensor (reshaped when it is not)."""
    if len(cur.shape) == 4:
        return cur
    total = int(np.prod(cur.shape))
    shape = (1, 1, 1, total)
    name = b.one("Reshape", [cur.name, b.const(np.array(shape, np.int64))])
    return Tensor(name, cur.dtype, shape)


def conv(draw: st.DrawFn, b: Builder, cur: Tensor) -> Tensor:
    """A Conv followed by a per-channel Mul or Add, a BatchNormalization, or a zero Pad."""
    if cur.dtype not in ("float32", "float16", "float64"):
        return cur
    x = _channels_first(draw, b, cur)
    n, c, h, w = x.shape
    out = draw(st.integers(1, 3))
    weights = draw(_weights(cur.dtype, (out, c, 1, 1)))
    if draw(st.booleans()):
        weights = np.where(
            np.arange(weights.size).reshape(weights.shape) % 2 == 0, 0, weights
        ).astype(weights.dtype)
    inputs = [x.name, b.const(weights)]
    if draw(st.booleans()):
        inputs.append(b.const(draw(_weights(cur.dtype, (out,)))))
    kind = draw(st.sampled_from(["mul", "add", "bn", "pad"]))
    if kind == "pad":
        pads = b.const(np.array([0, 0, 1, 0, 0, 0, 0, 1], np.int64))
        padded = b.one("Pad", [x.name, pads])
        inputs[0] = padded
        return Tensor(b.one("Conv", inputs), cur.dtype, (n, out, h + 1, w + 1))
    y = b.one("Conv", inputs)
    shape = (n, out, h, w)
    if kind == "bn":
        stats = [b.const(draw(_weights(cur.dtype, (out,)))) for _ in range(4)]
        epsilon = draw(st.sampled_from([1e-5, 0.0, 1e-12]))
        return Tensor(b.one("BatchNormalization", [y, *stats], epsilon=epsilon), cur.dtype, shape)
    scale = b.const(
        draw(_weights(cur.dtype, draw(st.sampled_from([(out, 1, 1), (1, out, 1, 1), ()]))))
    )
    return Tensor(b.one("Mul" if kind == "mul" else "Add", [y, scale]), cur.dtype, shape)


def matmul(draw: st.DrawFn, b: Builder, cur: Tensor) -> Tensor:
    """MatMul with a constant weight, then a bias Add (Gemm) or a BatchNormalization."""
    if cur.dtype not in ("float32", "float16", "float64", "int32", "int64"):
        return cur
    total = int(np.prod(cur.shape))
    k = cur.shape[-1] if len(cur.shape) == 2 else total
    x = (
        cur.name
        if len(cur.shape) == 2
        else b.one("Reshape", [cur.name, b.const(np.array([1, total], np.int64))])
    )
    rows = cur.shape[0] if len(cur.shape) == 2 else 1
    n = draw(st.integers(1, 3))
    y = b.one("MatMul", [x, b.const(draw(_weights(cur.dtype, (k, n))))])
    if draw(st.booleans()) and cur.dtype in FLOATS:
        stats = [b.const(draw(_weights(cur.dtype, (n,)))) for _ in range(4)]
        return Tensor(b.one("BatchNormalization", [y, *stats]), cur.dtype, (rows, n))
    bias = b.const(draw(_weights(cur.dtype, draw(st.sampled_from([(n,), (1, n)])))))
    return Tensor(b.one("Add", [y, bias]), cur.dtype, (rows, n))


def _reduce_mean(b: Builder, x: str, axes: list[int]) -> str:
    if b.opset >= 18:
        return b.one("ReduceMean", [x, b.const(np.array(axes, np.int64))], keepdims=1)
    return b.one("ReduceMean", [x], axes=axes, keepdims=1)


def norms(draw: st.DrawFn, b: Builder, cur: Tensor) -> Tensor:
    """A written-out LayerNorm or RMSNorm over the last axis, with an affine Mul / Add."""
    if cur.dtype not in FLOATS or not cur.shape:
        return cur
    axes = [len(cur.shape) - 1]
    x = cur.name
    rms = draw(st.booleans())
    d = x if rms else b.one("Sub", [x, _reduce_mean(b, x, axes)])
    exponent = _scalar(draw, cur.dtype, [2.0])
    square = (
        b.one("Mul", [d, d])
        if draw(st.booleans())
        else b.one("Pow", [d, b.const(_array(exponent, cur.dtype))])
    )
    eps = b.const(_array(draw(st.sampled_from([1e-5, 1e-12, 0.0, 1e-3])), cur.dtype))
    root = b.one("Sqrt", [b.one("Add", [_reduce_mean(b, square, axes), eps])])
    if draw(st.booleans()):
        y = b.one("Div", [d, root])
    else:
        y = b.one("Mul", [d, b.one("Reciprocal", [root])])
    last = cur.shape[-1:]
    if draw(st.booleans()):
        y = b.one("Mul", [y, _float_like(draw, b, cur, last)])
    if draw(st.booleans()):
        y = b.one("Add", [y, _float_like(draw, b, cur, last)])
    return Tensor(y, cur.dtype, cur.shape)


def activations(draw: st.DrawFn, b: Builder, cur: Tensor) -> Tensor:
    """GELU (erf and tanh forms), HardSigmoid and HardSwish written out."""
    if cur.dtype not in FLOATS:
        return cur
    x = cur.name

    def c(value: float) -> str:
        return b.const(_array(value, cur.dtype))

    kind = draw(st.sampled_from(["gelu", "gelu_tanh", "hard_sigmoid", "hard_swish", "relu6"]))
    if kind == "gelu":
        scaling = draw(
            st.sampled_from(
                [("Div", 1.4142135623730951), ("Mul", 0.7071067811865476), ("Div", 1.41421)]
            )
        )
        u = b.one(scaling[0], [x, c(scaling[1])])
        h = b.one("Add", [b.one("Erf", [u]), c(1.0)])
        y = b.one("Mul", [b.one("Mul", [x, h]), c(0.5)])
    elif kind == "gelu_tanh":
        x3 = b.one("Pow", [x, c(3.0)])
        inner = b.one("Add", [x, b.one("Mul", [x3, c(0.044715)])])
        th = b.one("Tanh", [b.one("Mul", [inner, c(0.7978846)])])
        y = b.one("Mul", [b.one("Mul", [x, c(0.5)]), b.one("Add", [th, c(1.0)])])
    elif kind == "hard_sigmoid":
        a = _scalar(draw, cur.dtype, [0.2, 1 / 6])
        beta = _scalar(draw, cur.dtype, [0.5])
        t = b.one("Add", [b.one("Mul", [x, c(a)]), c(beta)])
        y = b.one("Clip", [t, c(0.0), c(1.0)])
    elif kind == "hard_swish":
        y = b.one(
            "Mul",
            [
                x,
                b.one(
                    "HardSigmoid", [x], alpha=draw(st.sampled_from([1 / 6, 0.2, 0.1667])), beta=0.5
                ),
            ],
        )
    else:
        r = b.one("Clip", [b.one("Add", [x, c(3.0)]), c(0.0), c(6.0)])
        k = draw(st.sampled_from([("Div", 6.0), ("Mul", 1 / 6), ("Mul", 0.1667)]))
        y = b.one(k[0], [b.one("Mul", [x, r]), c(k[1])])
    return Tensor(y, cur.dtype, cur.shape)


def attention(draw: st.DrawFn, b: Builder, cur: Tensor) -> Tensor:
    """Softmax(Q K^T * c [+ mask]) V on new 4-D inputs, with masks that may hold -inf."""
    dtype = draw(st.sampled_from(["float32", "float32", "float16"]))
    batch, heads, seq, kv, dim = (
        draw(st.integers(0, 2)),
        2,
        draw(st.integers(1, 3)),
        draw(st.integers(1, 4)),
        2,
    )
    q = b.input(b.fresh("q"), dtype, (batch, heads, seq, dim))
    k = b.input(b.fresh("k"), dtype, (batch, heads, kv, dim))
    v = b.input(b.fresh("v"), dtype, (batch, heads, kv, dim))
    kt = b.one("Transpose", [k], perm=[0, 1, 3, 2])
    scores = b.one("MatMul", [q, kt])
    scale = _scalar(draw, dtype, [0.5, 0.7071067811865476])
    scaled = b.one(draw(st.sampled_from(["Mul", "Div"])), [scores, b.const(_array(scale, dtype))])
    kind = draw(st.sampled_from(["none", "input", "where_lowest", "where_inf", "constant"]))
    mask_shape = draw(st.sampled_from([(batch, 1, seq, kv), (batch, 1, 1, kv), (kv,)]))
    if kind == "input":
        scaled = b.one("Add", [scaled, b.input(b.fresh("mask"), dtype, mask_shape)])
    elif kind in ("where_lowest", "where_inf"):
        keep = b.input(b.fresh("keep"), "bool", mask_shape)
        masked = (
            float(ml_dtypes.finfo(np_dtype(dtype)).min) if kind == "where_lowest" else float("-inf")
        )  # type: ignore[no-untyped-call]
        mask = b.one("Where", [keep, b.const(_array(0.0, dtype)), b.const(_array(masked, dtype))])
        scaled = b.one("Add", [scaled, mask])
    elif kind == "constant":
        scaled = b.one("Add", [scaled, b.const(draw(input_values(dtype, mask_shape)))])
    probs = b.one("Softmax", [scaled], axis=-1)
    y = b.one("MatMul", [probs, v])
    b.output(y)
    return cur


def scopes(draw: st.DrawFn, b: Builder, cur: Tensor) -> Tensor:
    """An If whose branches name their values alike (and like the main graph), or a local
    function whose body reuses the main graph's names."""
    if draw(st.booleans()) and cur.dtype in FLOATS:
        body = [
            oh.make_node("Add", ["a", "z"], ["t"]),
            oh.make_node("Shape", ["t"], ["s"]),
            oh.make_node("Cast", ["s"], ["sf"], to=onnx_type(cur.dtype)),
            oh.make_node("ReduceSum", ["sf"], ["n"], keepdims=0),
            oh.make_node("Mul", ["t", "n"], ["b"]),
        ]
        zero = oh.make_node(
            "Constant",
            [],
            ["z"],
            value=onnx.numpy_helper.from_array(_array([-0.0, -0.0, -0.0], cur.dtype)),
        )
        function = oh.make_function(
            "local", "scaled", ["a"], ["b"], [zero, *body], [oh.make_opsetid("", b.opset)]
        )
        if not any(f.name == "scaled" for f in b.functions):
            b.functions.append(function)
        # main-graph values named like the body's (`a`, `t`), of another shape than the call
        # that follows them: facts must not pass from one scope to the other
        a = b.named("a")
        b.nodes.append(oh.make_node("Identity", [cur.name], [a]))
        t = b.named("t")
        b.nodes.append(oh.make_node("Add", [a, b.const(_array(-0.0, cur.dtype))], [t]))
        small = b.one("scaled", [b.const(_array([1.0], cur.dtype))], domain="local")
        b.output(small)
        if cur.shape and cur.shape[-1] == 3:
            return Tensor(b.one("scaled", [t], domain="local"), cur.dtype, cur.shape)
        return Tensor(t, cur.dtype, cur.shape)
    cond = b.input(b.fresh("cond"), "bool", (), symbolic=False)
    branches = []
    for flip in (False, True):
        nodes = [
            oh.make_node("Identity", [cur.name], ["q"]),
            oh.make_node("Shape", ["q"], ["qs"]),
            oh.make_node(
                "Flatten" if flip else "Identity", ["q"], ["r"], **({"axis": 0} if flip else {})
            ),
            oh.make_node("Shape", ["r"], ["rs"]),
            oh.make_node("ReduceProd", ["rs"], ["out"], keepdims=1),
        ]
        branches.append(
            oh.make_graph(
                nodes,
                "branch",
                [],
                [oh.make_tensor_value_info("out", onnx.TensorProto.INT64, None)],
            )
        )
    b.output(b.one("If", [cond], then_branch=branches[0], else_branch=branches[1]))
    return cur


def _loop_body(b: Builder, q_node: Any) -> Any:
    """A Loop body adding the element count of its value `q` (written by `q_node`) to `acc`."""
    int64 = onnx.TensorProto.INT64
    nodes = [
        q_node,
        oh.make_node("Shape", ["q"], ["qs"]),
        oh.make_node("ReduceProd", ["qs"], ["n"], keepdims=1),
        oh.make_node("Add", ["acc", "n"], ["acc_out"]),
        oh.make_node("Identity", ["c"], ["c_out"]),
    ]
    return oh.make_graph(
        nodes,
        "body",
        [
            oh.make_tensor_value_info("i", int64, []),
            oh.make_tensor_value_info("c", onnx.TensorProto.BOOL, []),
            oh.make_tensor_value_info("acc", int64, [1]),
        ],
        [
            oh.make_tensor_value_info("c_out", onnx.TensorProto.BOOL, []),
            oh.make_tensor_value_info("acc_out", int64, [1]),
        ],
    )


def loops(draw: st.DrawFn, b: Builder, cur: Tensor) -> Tensor:
    """Two Loops whose bodies both name a value `q`, of different shapes (as exporters write):
    one reads the running value from the outer scope, the other makes a constant."""
    shape = draw(st.sampled_from([(3, 3), (1,), (0, 2), ()]))
    made = oh.make_node(
        "Constant", [], ["q"], value=onnx.numpy_helper.from_array(np.zeros(shape, np.float32))
    )
    outer = oh.make_node("Identity", [cur.name], ["q"])
    trips = b.const(np.array(draw(st.integers(0, 3)), np.int64))
    keep_going = b.const(np.array(True))
    for q_node in draw(st.permutations([outer, made])):
        start = b.const(np.zeros(1, np.int64))
        body = _loop_body(b, q_node)
        b.output(b.one("Loop", [trips, keep_going, start], body=body))
    return cur


def newer_ops(draw: st.DrawFn, b: Builder, cur: Tensor) -> Tensor:
    """Ops of newer opsets written as ops (Gelu, LayerNormalization, RMSNormalization,
    Attention), for the decompositions a lower target opset asks for."""
    if cur.dtype not in ("float32", "float16") or not cur.shape:
        return cur
    kind = draw(st.sampled_from(["gelu", "layer_norm", "rms_norm", "attention"]))
    last = cur.shape[-1:]
    if kind == "gelu" and b.opset >= 20:
        approximate = draw(st.sampled_from(["none", "tanh"]))
        return Tensor(b.one("Gelu", [cur.name], approximate=approximate), cur.dtype, cur.shape)
    if kind == "layer_norm" and b.opset >= 17:
        inputs = [cur.name, _float_like(draw, b, cur, last)]
        if draw(st.booleans()):
            inputs.append(_float_like(draw, b, cur, last))
        epsilon = draw(st.sampled_from([1e-5, 1e-12, 0.0]))
        y = b.one("LayerNormalization", inputs, axis=-1, epsilon=epsilon)
        return Tensor(y, cur.dtype, cur.shape)
    if kind == "rms_norm" and b.opset >= 23:
        y = b.one("RMSNormalization", [cur.name, _float_like(draw, b, cur, last)], axis=-1)
        return Tensor(y, cur.dtype, cur.shape)
    if kind == "attention" and b.opset >= 23:
        shape = (draw(st.integers(1, 2)), 2, draw(st.integers(1, 3)), 2)
        q, k, v = (b.input(b.fresh(n), cur.dtype, shape) for n in "qkv")
        inputs = [q, k, v]
        if draw(st.booleans()):
            mask_dtype = draw(st.sampled_from(["bool", cur.dtype]))
            inputs.append(b.input(b.fresh("mask"), mask_dtype, (shape[2], shape[2])))
        causal = int(draw(st.booleans())) if len(inputs) == 3 else 0
        b.output(b.one("Attention", inputs, is_causal=causal))
    return cur


def misc(draw: st.DrawFn, b: Builder, cur: Tensor) -> Tensor:
    """Smaller rules' patterns: Relu pairs, Min chains, a Dropout's unused mask, a Conv with a
    zero bias, two Slices that split an axis, a ScatterND writing every row, Squeeze and
    Reshape([-1]) of a 1-D value, Where(c == -1, 1, c) of a shape."""
    kind = draw(
        st.sampled_from(["relu", "dropout", "conv_bias", "slices", "scatter", "squeeze", "where"])
    )
    rank = len(cur.shape)
    if kind == "relu" and cur.dtype in FLOATS:
        return Tensor(b.one("Relu", [b.one("Relu", [cur.name])]), cur.dtype, cur.shape)
    if kind == "dropout" and cur.dtype in FLOATS:
        y = b.node("Dropout", [cur.name], outputs=2)[0]
        return Tensor(y, cur.dtype, cur.shape)
    if kind == "conv_bias" and cur.dtype in ("float32", "float64"):
        x = _channels_first(draw, b, cur)
        n, c, h, w = x.shape
        weights = b.const(draw(_weights(cur.dtype, (2, c, 1, 1))))
        zero = _array(np.full(2, draw(st.sampled_from([0.0, -0.0]))), cur.dtype)
        y = b.one("Conv", [x.name, weights, b.const(zero)])
        return Tensor(y, cur.dtype, (n, 2, h, w))
    if kind == "slices" and rank and cur.shape[0] >= 2:
        k = draw(st.integers(1, cur.shape[0] - 1))
        end = draw(st.sampled_from([cur.shape[0], 2**62]))

        def piece(start: int, stop: int) -> str:
            bounds = [b.const(np.array([v], np.int64)) for v in (start, stop, 0)]
            return b.one("Slice", [cur.name, *bounds])

        y = b.one("Concat", [piece(k, end), piece(0, k)], axis=0)
        return Tensor(y, cur.dtype, cur.shape)
    if kind == "scatter" and rank and b.opset >= 16:
        rows = np.arange(cur.shape[0], dtype=np.int64).reshape(-1, 1)
        updates = b.input(b.fresh("updates"), cur.dtype, cur.shape)
        y = b.one("ScatterND", [cur.name, b.const(rows), updates])
        return Tensor(y, cur.dtype, cur.shape)
    if kind == "squeeze":
        flat = b.one("Reshape", [cur.name, b.const(np.array([-1], np.int64))])
        size = int(np.prod(cur.shape))
        squeezed = b.one("Squeeze", [flat]) if size == 1 else flat
        y = b.one("Reshape", [squeezed, b.const(np.array([-1], np.int64))])
        b.output(y)
        return cur
    s = b.one("Shape", [cur.name])
    if cur.shape and draw(st.booleans()):
        minus = np.full(len(cur.shape), -1, np.int64)
        minus[: draw(st.integers(0, len(cur.shape)))] = 1
        s = b.one("Mul", [s, b.const(minus)])
    equal = b.one("Equal", [s, b.const(np.array(-1, np.int64))])
    b.output(b.one("Where", [equal, b.const(np.array(1, np.int64)), s]))
    return cur


def integers(draw: st.DrawFn, b: Builder, cur: Tensor) -> Tensor:
    """Integer shape arithmetic: Where(c == -1, 1, c), And/Or with constants."""
    values = b.input(b.fresh("ints"), "int64", (draw(st.integers(0, 4)),))
    equal = b.one("Equal", [values, b.const(np.array(-1, np.int64))])
    b.output(b.one("Where", [equal, b.const(np.array(1, np.int64)), values]))
    flags = b.input(b.fresh("flags"), "bool", (draw(st.integers(0, 3)),))
    b.output(b.one("And", [flags, b.const(np.array(True))]))
    b.output(b.one("Or", [flags, b.const(np.array([False]))]))
    return cur


MOTIFS: dict[str, Motif] = {
    "algebra": algebra,
    "copies": copies,
    "casts": casts,
    "layout": layout,
    "shapes": shapes,
    "clamps": clamps,
    "conv": conv,
    "matmul": matmul,
    "norms": norms,
    "activations": activations,
    "attention": attention,
    "scopes": scopes,
    "loops": loops,
    "integers": integers,
    "newer_ops": newer_ops,
    "misc": misc,
}


@st.composite
def cases(draw: st.DrawFn) -> Case:
    """A random model, its inputs and the target opset of its rewrite."""
    opset = draw(st.sampled_from([13, 17, 18, 20, 21, 23]))
    b = Builder(draw, opset)
    dtype = draw(
        st.sampled_from(
            ["float32", "float32", "float32", "float16", "float64", "bfloat16", "int64", "int32"]
        )
    )
    rank = draw(st.integers(1, 4))
    shape = tuple(draw(st.sampled_from([0, 1, 2, 3, 3, 4])) for _ in range(rank))
    cur = Tensor(b.input("x", dtype, shape), dtype, shape)
    chosen: list[str] = []
    for _ in range(draw(st.integers(1, 4))):
        name = draw(st.sampled_from(sorted(MOTIFS)))
        chosen.append(name)
        cur = MOTIFS[name](draw, b, cur)
    b.output(cur.name)
    # Up-conversion lets fusions into newer ops fire; down-conversion (one case in two where
    # the target is lower) runs the decompositions first.
    target = draw(st.sampled_from([None, None, None, 23, 20, 17, 13]))
    if target is not None and target < opset and draw(st.booleans()):
        target = None
    return Case(b.model(), b.feeds, target, tuple(chosen))
