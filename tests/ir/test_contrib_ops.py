"""onnxruntime's own-domain ops typed as the standard op it types them as (`_contrib_ops`).

The oracle is onnxruntime: each fact the IR records for such an op's output (and for what is
computed from it) has the element type and dims of the tensor onnxruntime returns.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx.parser
import pytest

import ir
import rewriter
from ir._contrib_ops import CONTRIB_OPS
from tests.helpers import assert_same_outputs, op_types, session

_HEADER = '<ir_version: 8, opset_import: ["" : 17, "com.microsoft" : 1]>'

# X float[T, 1, 16] through a bidirectional int8 LSTM of hidden size 8, then the layout
# change and the Reshape a trained OCR model writes after it, whose shape is computed.
_LSTM = f"""
{_HEADER}
g (float[T, 1, 16] x) => (float[T, 1, 16] out, float[2, 1, 8] h)
<int8[2, 16, 32] w = {{{", ".join(["1"] * 1024)}}},
 int8[2, 8, 32] r = {{{", ".join(["-1"] * 512)}}},
 float[2, 64] b = {{{", ".join(["0.01"] * 128)}}},
 float[2] w_scale = {{0.01, 0.02}}, int8[2] w_zp = {{0, 0}},
 float[2] r_scale = {{0.03, 0.01}}, int8[2] r_zp = {{0, 0}},
 int64[3] flat = {{0, 0, -1}}, int64[1] zero = {{0}}, int64[2] tail = {{1, -1}}> {{
    y, h, c = com.microsoft.DynamicQuantizeLSTM <direction = "bidirectional", hidden_size = 8>
        (x, w, r, b, , , , , w_scale, w_zp, r_scale, r_zp)
    t = Transpose <perm = [0, 2, 1, 3]> (y)
    f = Reshape (t, flat)
    s = Shape (f)
    n = Gather <axis = 0> (s, zero)
    target = Concat <axis = 0> (n, tail)
    flat2 = Flatten <axis = 2> (f)
    out = Reshape (flat2, target)
}}
"""


def _model(text: str) -> onnx.ModelProto:
    return onnx.parser.parse_model(text)


def _assert_facts_are_onnxruntime_results(proto: onnx.ModelProto, feeds, names) -> None:
    """Each named value's fact has the dtype and dims onnxruntime computes for it."""
    probe = onnx.ModelProto()
    probe.CopyFrom(proto)
    for name in names:  # expose the intermediate values to read them back
        probe.graph.output.append(onnx.helper.make_empty_tensor_value_info(name))
    arrays = dict(zip(names, session(probe).run(list(names), feeds), strict=True))
    model = ir.from_onnx(proto)
    ir.infer_types(model)
    produced = {v.name: v for node in model.graph for v in node.outputs}
    for name in names:
        fact = ir.fact_type(produced[name])
        array = arrays[name]
        assert isinstance(fact, ir.TensorType), name
        assert ir.numpy_dtype(fact.dtype) == array.dtype, name
        assert fact.shape is not None, name
        assert len(fact.shape) == array.ndim, (name, fact.shape, array.shape)
        for dim, size in zip(fact.shape, array.shape, strict=True):
            assert dim == size or isinstance(dim, str), (name, fact.shape, array.shape)


def test_dynamic_quantize_lstm_is_typed_as_onnx_types_an_lstm():
    proto = _model(_LSTM)
    feeds = {"x": np.random.default_rng(0).standard_normal((5, 1, 16)).astype(np.float32)}
    _assert_facts_are_onnxruntime_results(proto, feeds, ("y", "h", "c", "t", "f", "flat2"))
    model = ir.from_onnx(proto)
    ir.infer_types(model)
    produced = {v.name: v for node in model.graph for v in node.outputs}
    # The sequence length is the input's symbol all the way through.
    assert ir.fact_type(produced["y"]) == ir.TensorType(ir.DataType.FLOAT, ("T", 2, 1, 8))
    assert ir.fact_type(produced["flat2"]) == ir.TensorType(ir.DataType.FLOAT, ("T", 16))


def test_the_reshape_after_the_lstm_gets_a_constant_shape_and_computes_the_same():
    proto = _model(_LSTM)
    result = rewriter.rewrite(proto)
    rewritten = ir.to_onnx(result.model)
    assert "Shape" not in op_types(rewritten)
    assert "Concat" not in op_types(rewritten)
    assert_same_outputs(proto, rewritten)


_SINGLE_OPS = {
    "QLinearAdd": f"""
        {_HEADER}
        g (uint8[N, 1, 4] a, uint8[3, 1] b) => (uint8[N, 3, 4] y)
        <float s = {{0.5}}, uint8 z = {{3}}> {{
            q = com.microsoft.QLinearAdd (a, s, z, b, s, z, s, z)
            y = Identity (q)
        }}""",
    "MatMulIntegerToFloat": f"""
        {_HEADER}
        g (uint8[N, 4] a) => (float[N, 3] y)
        <int8[4, 3] b = {{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}}, float s = {{0.5}}> {{
            q = com.microsoft.MatMulIntegerToFloat (a, b, s, s)
            y = Identity (q)
        }}""",
    "DynamicQuantizeMatMul": f"""
        {_HEADER}
        g (float[N, 2, 4] a) => (float[N, 2, 3] y)
        <int8[4, 3] b = {{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}}, float s = {{0.5}}> {{
            q = com.microsoft.DynamicQuantizeMatMul (a, b, s)
            y = Identity (q)
        }}""",
    "FusedConv": f"""
        {_HEADER}
        g (float[N, 2, 7, 7] x) => (float[N, 3, 4, 4] y)
        <float[3, 2, 3, 3] w = {{{", ".join(["0.1"] * 54)}}}> {{
            q = com.microsoft.FusedConv <activation = "Relu", strides = [2, 2], pads = [1, 1, 1, 1]>
                (x, w)
            y = Identity (q)
        }}""",
    "FusedGemm": f"""
        {_HEADER}
        g (float[N, 4] a) => (float[N, 3] y)
        <float[3, 4] b = {{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}}> {{
            q = com.microsoft.FusedGemm <transB = 1, activation = "Relu"> (a, b)
            y = Identity (q)
        }}""",
    "FastGelu": f"""
        {_HEADER}
        g (float[N, 2, 4] x) => (float[N, 2, 4] y) <float[4] bias = {{1, 2, 3, 4}}> {{
            q = com.microsoft.FastGelu (x, bias)
            y = Identity (q)
        }}""",
}


@pytest.mark.parametrize("op", sorted(_SINGLE_OPS))
def test_each_op_is_typed_as_onnxruntime_computes(op):
    proto = _model(_SINGLE_OPS[op])
    rng = np.random.default_rng(1)
    feeds = {}
    for vi in proto.graph.input:
        dims = [d.dim_value or 5 for d in vi.type.tensor_type.shape.dim]
        dtype = onnx.helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type)
        feeds[vi.name] = (rng.standard_normal(dims) * 20).clip(0, 255).astype(dtype)
    _assert_facts_are_onnxruntime_results(proto, feeds, ("q",))


def test_an_op_of_that_name_in_another_domain_gets_no_facts():
    proto = _model("""
    <ir_version: 8, opset_import: ["" : 17, "my.ops" : 1]>
    g (float[N, 4] x) => (float[N, 4] y) {
        q = my.ops.FastGelu (x)
        y = Identity (q)
    }""")
    model = ir.from_onnx(proto)
    ir.infer_types(model)
    (q,) = next(node for node in model.graph if node.op_type == "FastGelu").outputs
    assert ir.fact_type(q) is None


def test_the_table_names_standard_ops_onnx_defines_at_the_named_version():
    for op in CONTRIB_OPS:
        schema = ir.schemas.find_schema(op.standard_op, "", op.standard_version)
        assert schema is not None, op.op_type
        assert schema.since_version <= op.standard_version, op.op_type
        assert len(op.inputs) <= len(schema.inputs), op.op_type
        names = set(schema.attributes)
        assert set(op.attributes) <= names, op.op_type
