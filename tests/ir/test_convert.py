"""Opset conversion: onnx's version converter behind a one-line error."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.parser
import onnx.version_converter
import pytest
from onnx import TensorProto, helper, numpy_helper

import ir
from ir._held_weights import HeldWeights, HeldWeightsError
from tests.helpers import session


def _reshape(opset: int) -> ir.Model:
    text = f"""
    <ir_version: 8, opset_import: ["" : {opset}]>
    g (float[2, 3] x, int64[2] s) => (float[3, 2] y) {{
        y = Reshape (x, s)
    }}
    """
    return ir.from_onnx(onnx.parser.parse_model(text))


def test_a_missing_adapter_is_one_line_naming_the_op_and_versions():
    with pytest.raises(ir.ConversionError) as caught:
        ir.convert_version(_reshape(14), 13)
    message = str(caught.value)
    assert message == (
        "cannot convert from opset 14 to 13: onnx's version converter has no adapter for "
        "`Reshape` from opset 14"
    )
    assert "\n" not in message
    assert "Assertion" not in message


def test_a_conversion_with_adapters_works():
    converted = ir.convert_version(_reshape(13), 14)
    assert converted.opset_imports[""] == 14


# ---------------------------------------------------------------------------------------------
# The converter is given the model without its weights, which the result shares.

WIDTH = 100  # more elements than a structure-only lowering keeps


def _weighted(opset: int) -> onnx.ModelProto:
    """MatMul by a large initializer, Add of a large Constant, a branch with a large
    initializer of its own, and a ReduceMean whose axes are an attribute before opset 18 and
    a small initializer from 18 on (what an adapter must read to convert down)."""
    rng = np.random.default_rng(0)
    weight = numpy_helper.from_array(rng.standard_normal((WIDTH, WIDTH)).astype(np.float32), "w")
    bias = numpy_helper.from_array(rng.standard_normal(WIDTH).astype(np.float32), "b")
    inner = numpy_helper.from_array(rng.standard_normal(WIDTH).astype(np.float32), "inner")
    branch = helper.make_graph(
        [helper.make_node("Mul", ["u", "inner"], ["then_out"])],
        "then",
        [],
        [helper.make_tensor_value_info("then_out", TensorProto.FLOAT, None)],
        [inner],
    )
    other = helper.make_graph(
        [helper.make_node("Neg", ["u"], ["else_out"])],
        "else",
        [],
        [helper.make_tensor_value_info("else_out", TensorProto.FLOAT, None)],
    )
    reduce_node = (
        helper.make_node("ReduceMean", ["v", "axes"], ["y"], keepdims=0)
        if opset >= 18
        else helper.make_node("ReduceMean", ["v"], ["y"], axes=[1], keepdims=0)
    )
    initializers = [weight]
    if opset >= 18:
        initializers.append(numpy_helper.from_array(np.array([1], np.int64), "axes"))
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "w"], ["t"]),
            helper.make_node("Constant", [], ["c"], value=bias),
            helper.make_node("Add", ["t", "c"], ["u"]),
            helper.make_node("If", ["flag"], ["v"], then_branch=branch, else_branch=other),
            reduce_node,
        ],
        "weighted",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, WIDTH]),
            helper.make_tensor_value_info("flag", TensorProto.BOOL, []),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
        initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    onnx.checker.check_model(model, full_check=True)
    return model


def _tensors(graph: onnx.GraphProto) -> list[onnx.TensorProto]:
    """Every TensorProto of a graph: initializers and attribute tensors, subgraphs included."""
    found = list(graph.initializer)
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.TENSOR:
                found.append(attr.t)
            found.extend(attr.tensors)
            for sub in (attr.g, *attr.graphs) if attr.HasField("g") else attr.graphs:
                found.extend(_tensors(sub))
    return found


def _outputs(model: onnx.ModelProto) -> list[np.ndarray]:
    feeds = {"x": np.linspace(-1, 1, 2 * WIDTH, dtype=np.float32).reshape(2, WIDTH)}
    return [
        out
        for flag in (True, False)
        for out in session(model).run(None, {**feeds, "flag": np.array(flag)})
    ]


def _branch_initializer(model: ir.Model) -> ir.Tensor | None:
    branching = next(n for n in model.graph if n.op_type == "If")
    then_branch = branching.attribute("then_branch")
    assert isinstance(then_branch, ir.Graph)
    return then_branch.initializers["inner"].const_value


def _constant_value(model: ir.Model) -> object:
    return next(n for n in model.graph if n.op_type == "Constant").attribute("value")


def test_the_converted_model_shares_the_original_weights():
    original = ir.from_onnx(_weighted(17))
    converted = ir.convert_version(original, 18)
    assert converted.opset_imports[""] == 18
    weight = converted.graph.initializers["w"].const_value
    assert weight is original.graph.initializers["w"].const_value
    assert _constant_value(converted) is _constant_value(original)
    assert _branch_initializer(converted) is _branch_initializer(original)
    reduce_node = next(n for n in converted.graph if n.op_type == "ReduceMean")
    assert len(reduce_node.inputs) == 2  # the adapter made the axes an input
    expected = onnx.version_converter.convert_version(_weighted(17), 18)
    lowered = ir.to_onnx(converted)
    assert [t.SerializeToString() for t in _tensors(lowered.graph)] == [
        t.SerializeToString() for t in _tensors(expected.graph)
    ]
    ir.verify(converted)
    for got, want in zip(_outputs(lowered), _outputs(_weighted(17)), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_the_converter_is_not_given_large_tensors(monkeypatch):
    given: list[onnx.ModelProto] = []
    convert = onnx.version_converter.convert_version

    def spy(model: onnx.ModelProto, target: int) -> onnx.ModelProto:
        given.append(model)
        return convert(model, target)

    monkeypatch.setattr(onnx.version_converter, "convert_version", spy)
    ir.convert_version(ir.from_onnx(_weighted(17)), 18)
    (model,) = given
    large = [t for t in _tensors(model.graph) if np.prod(t.dims) >= WIDTH]
    assert [t.name for t in large] == ["w", "b", "inner"]
    assert all(t.data_location == TensorProto.EXTERNAL and not t.raw_data for t in large)
    assert [i.name for i in model.graph.input] == ["x", "flag"]


def test_converting_down_still_reads_small_constants():
    converted = ir.convert_version(ir.from_onnx(_weighted(18)), 17)
    reduce_node = next(n for n in converted.graph if n.op_type == "ReduceMean")
    assert reduce_node.attribute("axes") == (1,)
    lowered = ir.to_onnx(converted)
    for got, want in zip(_outputs(lowered), _outputs(_weighted(18)), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_a_stand_in_whose_shape_changed_is_refused():
    held = HeldWeights()
    tensor = ir.NumpyTensor(np.zeros((WIDTH, WIDTH), np.float32), "w")
    stand_in = held.stand_in(tensor, "w")
    stand_in.dims[:] = [WIDTH * WIDTH]
    graph = helper.make_graph(
        [helper.make_node("Identity", ["w"], ["y"])],
        "g",
        [],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [stand_in],
    )
    model = ir.from_onnx(helper.make_model(graph))
    with pytest.raises(HeldWeightsError, match=r"came back from the converter as float\[10000\]"):
        held.restore(model)
