"""Shape facts against the shapes onnxruntime produces, over grids of ops and attributes.

onnx's shape inference and onnxruntime do not always compute the same output size (pooling
with `ceil_mode`, pooling under SAME with dilations, ConvTranspose under SAME, Resize by float
scales: see `ir/_shape_disputes.py`). A fact must be what onnxruntime computes, so each case
builds one node, runs it in onnxruntime, and checks every known dim of the node's output
facts, once with the inputs' static dims and once with every input dim symbolic (the walk's
own rules, evaluated at the real sizes). Cases onnxruntime rejects check nothing. The fast run
checks a fixed sample of the grid; `--run-slow` checks all of it.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import onnx
import onnx.helper
import onnx.numpy_helper
import onnxruntime as ort
import pytest

import ir
import rewriter
from tests.helpers import assert_same_outputs, model_from_text, session

SAMPLE_EVERY = 7


@dataclasses.dataclass(frozen=True)
class Case:
    """One node: its op, attributes, fed inputs, constant inputs (in order) and opset."""

    op: str
    attrs: Mapping[str, Any]
    inputs: tuple[tuple[str, np.ndarray | None, bool], ...]  # (name, array, fed)
    opset: int
    outputs: int = 1

    def __str__(self) -> str:
        shapes = [
            None if a is None else list(a.shape) if fed else a.tolist() for _, a, fed in self.inputs
        ]
        return f"{self.op}{dict(self.attrs)} {shapes} opset {self.opset}"


def _zeros(*shape: int) -> np.ndarray:
    return np.zeros(shape, np.float32)


def _fed(*arrays: np.ndarray) -> tuple[tuple[str, np.ndarray | None, bool], ...]:
    return tuple((f"x{i}", a, True) for i, a in enumerate(arrays))


def _const(name: str, value: Any) -> tuple[str, np.ndarray | None, bool]:
    return (name, None if value is None else np.asarray(value), False)


def _pool_cases() -> Iterator[Case]:
    for op, length, kernel, stride, pad, ceil, dilation, auto_pad in itertools.product(
        ("MaxPool", "AveragePool", "LpPool"),
        (1, 2, 4, 5, 6, 7),
        (1, 2, 3),
        (1, 2, 3),
        (0, 1),
        (0, 1),
        (1, 2),
        ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"),
    ):
        if auto_pad != "NOTSET" and pad:
            continue
        if op == "LpPool" and dilation != 1:
            continue
        attrs: dict[str, Any] = {"kernel_shape": [kernel], "strides": [stride]}
        if ceil:
            attrs["ceil_mode"] = 1
        if auto_pad == "NOTSET":
            attrs["pads"] = [pad, pad]
        else:
            attrs["auto_pad"] = auto_pad
        if dilation != 1:
            attrs["dilations"] = [dilation]
        yield Case(op, attrs, _fed(_zeros(1, 1, length)), 19)


def _conv_cases() -> Iterator[Case]:
    for op, length, kernel, stride, dilation, auto_pad, extra in itertools.product(
        ("Conv", "ConvTranspose"),
        (1, 2, 4, 5, 7),
        (1, 2, 3),
        (1, 2, 3),
        (1, 2),
        ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"),
        (0, 1),
    ):
        attrs: dict[str, Any] = {"kernel_shape": [kernel], "strides": [stride]}
        if auto_pad == "NOTSET":
            attrs["pads"] = [1, 0]
        else:
            attrs["auto_pad"] = auto_pad
        if dilation != 1:
            attrs["dilations"] = [dilation]
        if extra:
            if op == "Conv" or extra >= max(stride, dilation):
                continue
            attrs["output_padding"] = [extra]
        weight = _const("w", np.ones((1, 1, kernel), np.float32))
        yield Case(op, attrs, (*_fed(_zeros(1, 1, length)), weight), 19)


def _resize_cases() -> Iterator[Case]:
    scales = (0.3, 0.5, 0.6, 0.7, 1.0, 1.1, 1.5, 1.7, 2.0, 2.3, 2.5, 3.1, 4.0)
    for length, scale in itertools.product((1, 3, 5, 7, 10), scales):
        factors = np.array([1, 1, scale, scale], np.float32)
        x = _fed(_zeros(1, 1, length, length))
        yield Case("Resize", {"mode": "nearest"}, (*x, _const("r", None), _const("s", factors)), 13)
        yield Case("Resize", {"mode": "nearest"}, (*x, _const("s", factors)), 10)
        yield Case("Upsample", {"mode": "nearest"}, (*x, _const("s", factors)), 9)
        yield Case(
            "Resize",
            {"mode": "linear", "axes": [2]},
            (*x, _const("r", None), _const("s", np.array([scale], np.float32))),
            19,
        )
    for length, size, policy in itertools.product(
        (3, 5, 10), (1, 3, 7), ("stretch", "not_larger", "not_smaller")
    ):
        sizes = np.array([1, 1, size, size + 1], np.int64)
        x = _fed(_zeros(1, 1, length, length + 2))
        attrs = {"mode": "nearest", "keep_aspect_ratio_policy": policy}
        yield Case(
            "Resize", attrs, (*x, _const("r", None), _const("s", None), _const("z", sizes)), 19
        )


def _other_cases() -> Iterator[Case]:
    for start, limit, delta in (
        (0, 1, 0.1),
        (0, 1, 0.3),
        (1, 2.1, 0.1),
        (0.5, 3.3, 0.7),
        (10, 0, -0.3),
    ):
        for dtype in (np.float32, np.float64):
            bounds = [
                _const(n, dtype(v)) for n, v in zip("sld", (start, limit, delta), strict=True)
            ]
            yield Case("Range", {}, tuple(bounds), 13)
    for length, pieces in itertools.product((5, 6, 7, 8, 9), (2, 3, 4)):
        yield Case("Split", {"num_outputs": pieces}, _fed(_zeros(length)), 18, outputs=pieces)
    for length, pads in itertools.product((4, 5), ([0, -1], [-1, -1], [1, -2], [2, 0])):
        yield Case("Pad", {}, (*_fed(_zeros(length)), _const("p", np.array(pads, np.int64))), 18)
    for length, (start, end, step) in itertools.product(
        (5, 6),
        (
            (0, 10, 2),
            (4, -10, -2),
            (-1, -100, -1),
            (1, 3, 5),
            (10, 0, -3),
            # onnxruntime: an end of INT_MAX is the axis' end in the step's direction, a start
            # below -size with a negative step is clamped to 0 (onnx's inference differs)
            (-1, 2**63 - 1, -1),
            (2, 2**31 - 1, -2),
            (-9, -9, -1),
        ),
    ):
        bounds = [
            _const(n, np.array([v], np.int64))
            for n, v in zip("seat", (start, end, 0, step), strict=True)
        ]
        yield Case("Slice", {}, (*_fed(_zeros(length)), *bounds), 13)
    for length, crop in itertools.product((4, 5), (2, 3, 6, 7)):
        size = _const("c", np.array([crop, crop], np.int64))
        yield Case("CenterCropPad", {}, (*_fed(_zeros(length, length)), size), 18)
    for length, onesided in itertools.product((4, 5, 8), (0, 1)):
        yield Case("DFT", {"onesided": onesided}, _fed(_zeros(1, length, 1)), 17)
    for length, k in itertools.product((3, 4), (1, 2, 3, 4)):
        yield Case("TopK", {}, (*_fed(_zeros(length)), _const("k", np.array([k], np.int64))), 11, 2)


@functools.cache
def _grid() -> tuple[Case, ...]:
    return (*_pool_cases(), *_conv_cases(), *_resize_cases(), *_other_cases())


def _model(case: Case, symbolic: bool) -> onnx.ModelProto:
    inputs, initializers, names = [], [], []
    for name, array, fed in case.inputs:
        if array is None:
            names.append("")
            continue
        names.append(name)
        if not fed:
            initializers.append(onnx.numpy_helper.from_array(array, name))
            continue
        dims = [f"{name}_{k}" for k in range(array.ndim)] if symbolic else list(array.shape)
        elem = onnx.helper.np_dtype_to_tensor_dtype(array.dtype)
        inputs.append(onnx.helper.make_tensor_value_info(name, elem, dims))
    outs = [f"t{k}" for k in range(case.outputs)]
    nodes = [onnx.helper.make_node(case.op, names, outs, **case.attrs)]
    nodes += [onnx.helper.make_node("Identity", [t], [f"{t}_out"]) for t in outs]
    graph = onnx.helper.make_graph(
        nodes, "grid", inputs, [onnx.ValueInfoProto(name=f"{t}_out") for t in outs], initializers
    )
    return onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", case.opset)])


def _run(model: onnx.ModelProto, case: Case) -> list[tuple[int, ...]] | None:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 4
    feeds = {name: a for name, a, fed in case.inputs if fed and a is not None}
    try:
        runner = ort.InferenceSession(
            model.SerializeToString(), options, providers=["CPUExecutionProvider"]
        )
        return [r.shape for r in runner.run(None, feeds)]
    except Exception:  # onnxruntime rejects the case: no size to compare with
        return None


def _known(dim: ir.Dim, sizes: Mapping[str, int]) -> int | None:
    if dim is None or isinstance(dim, int):
        return dim
    try:
        return int(eval(dim, {"floor": math.floor, "min": min}, dict(sizes)))
    except NameError:
        return None  # a symbol onnx invented: states nothing


def _check(case: Case) -> tuple[list[str], int]:
    """Disagreements between facts and onnxruntime, and how many known dims were checked."""
    problems: list[str] = []
    checked = 0
    for symbolic in (False, True):
        model = _model(case, symbolic)
        actual = _run(model, case)
        if actual is None:
            return [], 0
        sizes = {
            f"{name}_{k}": d
            for name, a, fed in case.inputs
            if fed and a is not None
            for k, d in enumerate(a.shape)
        }
        lifted = ir.from_onnx(model)
        ir.infer_types(lifted)
        node = next(iter(lifted.graph))
        for value, shape in zip(node.outputs, actual, strict=True):
            fact = ir.fact_type(value)
            if not isinstance(fact, ir.TensorType) or fact.shape is None:
                continue
            dims = [_known(d, sizes) for d in fact.shape]
            checked += sum(d is not None for d in dims)
            if len(dims) != len(shape) or any(
                d is not None and d != s for d, s in zip(dims, shape, strict=False)
            ):
                kind = "symbolic" if symbolic else "static"
                problems.append(f"{case} ({kind}): fact {fact.shape}, onnxruntime {shape}")
    return problems, checked


def _check_all(cases: tuple[Case, ...]) -> None:
    problems: list[str] = []
    checked = 0
    for case in cases:
        found, count = _check(case)
        problems += found
        checked += count
    assert problems == []
    assert checked > 2 * len(cases), "the facts state too few dims to check anything"


def test_facts_agree_with_onnxruntime_on_a_sample_of_the_grid() -> None:
    _check_all(_grid()[::SAMPLE_EVERY])


@pytest.mark.slow
def test_facts_agree_with_onnxruntime_on_the_whole_grid() -> None:
    _check_all(_grid())


@pytest.mark.parametrize(
    ("op", "attrs", "length", "expected"),
    [
        # the case: onnx infers 4, onnxruntime computes 3
        ("MaxPool", {"kernel_shape": [2], "strides": [2], "pads": [1, 1], "ceil_mode": 1}, 5, 3),
        ("AveragePool", {"kernel_shape": [1], "strides": [2], "ceil_mode": 1}, 4, 2),
        (
            "MaxPool",
            {"kernel_shape": [2], "strides": [1], "auto_pad": "SAME_UPPER", "dilations": [2]},
            5,
            4,
        ),
    ],
)
def test_static_shape_of_a_disputed_pool_is_not_folded(
    op: str, attrs: dict[str, Any], length: int, expected: int
) -> None:
    model = onnx.helper.make_model(
        onnx.helper.make_graph(
            [
                onnx.helper.make_node(op, ["x"], ["p"], **attrs),
                onnx.helper.make_node("Shape", ["p"], ["s"]),
            ],
            "g",
            [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 1, length])],
            [onnx.helper.make_tensor_value_info("s", onnx.TensorProto.INT64, [3])],
        ),
        opset_imports=[onnx.helper.make_opsetid("", 19)],
    )
    result = rewriter.rewrite(model)
    feeds = {"x": np.zeros((1, 1, length), np.float32)}
    (shape,) = session(result.proto).run(None, feeds)
    assert shape.tolist() == [1, 1, expected]
    assert_same_outputs(model, result.proto)


@pytest.mark.parametrize("opset", [17, 19])
@pytest.mark.parametrize(
    ("op", "attrs", "length", "expected"),
    [
        # ceil(27 / 2) + 1 = 15 windows, the last starting at 28 < 30: every runtime agrees
        ("MaxPool", {"kernel_shape": [3], "strides": [2], "ceil_mode": 1}, 30, 15),
        ("AveragePool", {"kernel_shape": [3], "strides": [2], "ceil_mode": 1}, 80, 40),
        ("MaxPool", {"kernel_shape": [2], "strides": [3], "pads": [1, 0], "ceil_mode": 1}, 9, 4),
    ],
)
def test_static_shape_of_a_ceil_mode_pool_without_a_window_to_drop_is_folded(
    op: str, attrs: dict[str, Any], length: int, expected: int, opset: int
) -> None:
    model = onnx.helper.make_model(
        onnx.helper.make_graph(
            [
                onnx.helper.make_node(op, ["x"], ["p"], **attrs),
                onnx.helper.make_node("Shape", ["p"], ["s"]),
            ],
            "g",
            [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 1, length])],
            [onnx.helper.make_tensor_value_info("s", onnx.TensorProto.INT64, [3])],
        ),
        opset_imports=[onnx.helper.make_opsetid("", opset)],
    )
    result = rewriter.rewrite(model)
    assert [n.op_type for n in result.proto.graph.node] == []  # the shape is a constant
    (shape,) = session(model).run(None, {"x": np.zeros((1, 1, length), np.float32)})
    assert shape.tolist() == [1, 1, expected]
    assert_same_outputs(model, result.proto)


def _resize_then_shape(scale: float, value_info: bool) -> onnx.ModelProto:
    text = f"""
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[1, 1, 10] x) => (int64[3] s, float[1, 1, ?] f) {{
        scales = Constant <value = float[3] {{1.0, 1.0, {scale}}}> ()
        r = Resize <mode = "nearest"> (x, , scales)
        f = Relu (r)
        s = Shape (f)
    }}
    """
    model = model_from_text(text)
    if value_info:
        model = onnx.shape_inference.infer_shapes(model)  # as exporters save it: onnx's dims
    return model


@pytest.mark.parametrize("scale", [2.3, 0.7, 3.1, 2.0])
@pytest.mark.parametrize("value_info", [False, True])
def test_static_shape_after_resize_by_scales_is_what_onnxruntime_computes(
    scale: float, value_info: bool
) -> None:
    model = _resize_then_shape(scale, value_info)
    result = rewriter.rewrite(model)
    feeds = {"x": np.arange(10, dtype=np.float32).reshape(1, 1, 10)}
    expected = session(model).run(None, feeds)
    got = session(result.proto).run(None, feeds)
    assert (
        got[0].tolist() == expected[0].tolist() == [1, 1, int(np.float32(10) * np.float32(scale))]
    )
    np.testing.assert_array_equal(got[1], expected[1])


def test_declared_dims_after_a_disputed_node_are_no_facts() -> None:
    """value_info written by onnx's inference (4) is not believed after a ceil-mode pool (3)."""
    text = """
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[1, 1, 5] x) => (int64[2] s) {
        p = MaxPool <kernel_shape = [2], strides = [2], pads = [1, 1], ceil_mode = 1> (x)
        f = Flatten (p)
        t = Tanh (f)
        s = Shape (t)
    }
    """
    model = onnx.shape_inference.infer_shapes(model_from_text(text))
    assert any(v.name == "t" for v in model.graph.value_info)
    lifted = ir.from_onnx(model)
    ir.infer_types(lifted)
    facts = {v.name: ir.fact_type(v) for n in lifted.graph for v in n.outputs}
    assert facts["t"].shape == (1, None)
    result = rewriter.rewrite(model)
    feeds = {"x": np.zeros((1, 1, 5), np.float32)}
    assert session(result.proto).run(None, feeds)[0].tolist() == [1, 3]
