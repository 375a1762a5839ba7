"""onnxruntime's ops in the default domain where onnx has none: accepted, typed, converted.

The oracle is onnxruntime itself: the types the IR infers are the ones its kernels return,
and a converted model computes what the original computes.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx.helper
import onnx.parser
import onnxruntime as ort
import pytest

import ir
from ir._runtime_ops import RUNTIME_OPS


def _model(text: str) -> onnx.ModelProto:
    return onnx.parser.parse_model(text)


def _layer_norm(
    opset: int, op: str = "LayerNormalization", attrs: str = "", stats: str = "float[N, 4, 1]"
) -> onnx.ModelProto:
    """x -> op -> Relu (and the statistics, of type `stats`, as outputs)."""
    bias = ", b" if op == "LayerNormalization" else ""
    names = "m, v" if op == "LayerNormalization" else "v"
    outputs = "float[N, 4, 8] r, " + ", ".join(f"{stats} {s}_out" for s in names.split(", "))
    stat_nodes = "\n".join(f"{s}_out = Identity ({s})" for s in names.split(", "))
    text = f"""
    <ir_version: 8, opset_import: ["" : {opset}]>
    g (float[N, 4, 8] x) => ({outputs})
    <float[8] s = {{1, 2, 1, 2, 1, 2, 1, 2}}, float[8] b = {{0, 1, 0, 1, 0, 1, 0, 1}}> {{
        y, {names} = {op} {attrs} (x, s{bias})
        t = Relu (y)
        r = Identity (t)
        {stat_nodes}
    }}
    """
    return _model(text)


def _session(proto: onnx.ModelProto) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(
        proto.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )


def _run(proto: onnx.ModelProto, x: np.ndarray) -> list[np.ndarray]:
    return _session(proto).run(None, {"x": x})


_X = np.random.default_rng(0).standard_normal((3, 4, 8)).astype(np.float32)


def test_the_table_lists_ops_only_where_onnx_has_no_schema():
    for op in RUNTIME_OPS:
        last = (op.end_opset or ir.schemas.latest_opset() + 1) - 1
        for opset in range(op.first_opset, last + 1):
            assert ir.schemas.find_schema(op.op_type, "", opset) is None, (op.op_type, opset)


@pytest.mark.parametrize(
    ("op", "opset"), [("LayerNormalization", 14), ("SimplifiedLayerNormalization", 18)]
)
def test_a_model_onnxruntime_runs_is_accepted(op, opset):
    proto = _layer_norm(opset, op)
    _run(proto, _X)  # onnxruntime runs it
    ir.validate_model(ir.from_onnx(proto))


def test_an_old_experimental_op_is_refused_where_onnxruntime_refuses_it_and_says_so():
    proto = _model("""
    <ir_version: 8, opset_import: ["" : 12]>
    g (float[2] x) => (float[2] y) { y = Affine <alpha = 2.0> (x) }
    """)
    with pytest.raises(Exception, match="not a registered function/op"):
        _session(proto)
    with pytest.raises(ir.ModelLoadError) as caught:
        ir.validate_model(ir.from_onnx(proto))
    assert str(caught.value).endswith(
        "op 'Affine' does not exist in ai.onnx opset 12, and onnxruntime runs its own 'Affine' "
        "in that domain only from opset 1 to 9"
    )


@pytest.mark.parametrize(
    ("op", "opset", "attrs", "stats"),
    [
        ("LayerNormalization", 14, "", "float[N, 4, 1]"),
        ("LayerNormalization", 16, "<stash_type = 11>", "double[N, 4, 1]"),
        ("SimplifiedLayerNormalization", 18, "<axis = -2>", "float[N, 1, 1]"),
        ("SimplifiedLayerNormalization", 13, "", "float[N, 4, 1]"),
    ],
)
def test_types_follow_onnxruntime_through_the_op_and_past_it(op, opset, attrs, stats):
    proto = _layer_norm(opset, op, attrs, stats)
    model = ir.from_onnx(proto)
    ir.infer_types(model)
    produced = {v.name: v for n in model.graph for v in n.outputs}
    results = dict(zip([o.name for o in proto.graph.output], _run(proto, _X), strict=True))
    # The op's outputs and the Relu after it have no declared type: facts only.
    checked = {"y": "r", "t": "r", **{name: f"{name}_out" for name in ("m", "v")}}
    for name, output in checked.items():
        if name not in produced:
            continue
        array = results[output]
        fact = ir.fact_type(produced[name])
        assert produced[name].type is None, name
        assert isinstance(fact, ir.TensorType), name
        assert ir.numpy_dtype(fact.dtype) == array.dtype, name
        assert fact.shape is not None, name
        assert len(fact.shape) == array.ndim, name
        for dim, size in zip(fact.shape, array.shape, strict=True):
            assert dim in (size, "N"), (name, fact.shape, array.shape)


def _outputs_equal(original: onnx.ModelProto, converted: onnx.ModelProto) -> None:
    for want, got in zip(_run(original, _X), _run(converted, _X), strict=True):
        np.testing.assert_array_equal(want, got)


def test_layer_normalization_below_17_converts_to_the_standard_op():
    proto = _layer_norm(14)
    converted = ir.to_onnx(ir.convert_version(ir.from_onnx(proto), 23))
    assert converted.opset_import[0].version == 23
    assert [n.op_type for n in converted.graph.node][:2] == ["LayerNormalization", "Relu"]
    assert {entry.domain for entry in converted.opset_import} == {""}
    onnx.checker.check_model(converted, full_check=True)  # the standard op at 23
    _outputs_equal(proto, converted)


def test_simplified_layer_normalization_is_kept_with_a_note(caplog):
    proto = _layer_norm(18, "SimplifiedLayerNormalization")
    converted = ir.to_onnx(ir.convert_version(ir.from_onnx(proto), 23))
    assert converted.graph.node[0].op_type == "SimplifiedLayerNormalization"
    assert converted.graph.node[0].domain == ""
    assert "kept 1 SimplifiedLayerNormalization node(s) as they are at opset 23" in caplog.text
    _outputs_equal(proto, converted)


def test_an_op_inside_a_subgraph_converts_too():
    proto = _model("""
    <ir_version: 8, opset_import: ["" : 14]>
    g (bool c, float[2, 4] x) => (float[2, 4] y)
    <float[4] s = {1, 1, 1, 1}> {
        y = If (c) <
            then_branch = t () => (float[2, 4] a) { a = LayerNormalization (x, s) },
            else_branch = e () => (float[2, 4] z) { z = Relu (x) }
        >
    }
    """)
    converted = ir.to_onnx(ir.convert_version(ir.from_onnx(proto), 18))
    branch = converted.graph.node[0].attribute[0].g
    assert branch.node[0].op_type == "LayerNormalization"
    assert branch.node[0].domain == ""
    onnx.checker.check_model(converted, full_check=True)


def test_a_conversion_onnxruntime_would_refuse_is_refused_naming_the_op():
    proto = _model("""
    <ir_version: 4, opset_import: ["" : 8]>
    g (float[1, 3, 2, 2] x) => (float[1, 3, 2, 2] y) {
        y = ImageScaler <scale = 0.5, bias = [1.0, 2.0, 3.0]> (x)
    }
    """)
    _session(proto)  # runs at opset 8
    assert ir.convert_version(ir.from_onnx(proto), 9).opset_imports[""] == 9
    with pytest.raises(ir.ConversionError) as caught:
        ir.convert_version(ir.from_onnx(proto), 10)
    assert str(caught.value) == (
        "cannot convert from opset 8 to 10: node 'ImageScaler' is onnxruntime's 'ImageScaler', "
        "which it runs in the default domain only from opset 1 to 9, and onnx has no op of the "
        "same meaning at opset 10"
    )


def _skip_norm_without_import(domain: str = "com.microsoft") -> onnx.ModelProto:
    """x + x -> a SkipLayerNormalization of `domain` that the model does not import."""
    graph = onnx.helper.make_graph(
        [
            onnx.helper.make_node("Add", ["x", "x"], ["a"]),
            onnx.helper.make_node(
                "SkipLayerNormalization", ["a", "x", "s", "b"], ["z"], domain=domain
            ),
        ],
        "g",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 3, 8])],
        [onnx.helper.make_tensor_value_info("z", onnx.TensorProto.FLOAT, [2, 3, 8])],
        [
            onnx.numpy_helper.from_array(np.linspace(0.5, 2, 8, dtype=np.float32), "s"),
            onnx.numpy_helper.from_array(np.linspace(-1, 1, 8, dtype=np.float32), "b"),
        ],
    )
    return onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 14)])


def test_a_runtime_domain_used_without_an_import_is_imported_as_onnxruntime_reads_it(
    tmp_path, caplog
):
    path = tmp_path / "no_import.onnx"
    onnx.save(_skip_norm_without_import(), path)
    feeds = {"x": np.random.default_rng(0).standard_normal((2, 3, 8)).astype(np.float32)}
    expected = ort.InferenceSession(str(path)).run(None, feeds)[0]  # onnxruntime runs it
    model = ir.load(path)
    assert model.opset_imports == {"": 14, "com.microsoft": 1}
    assert "does not import; imported at version 1" in caplog.text
    converted = ir.convert_version(model, 23)
    out = tmp_path / "converted.onnx"
    ir.save(converted, out)
    onnx.checker.check_model(onnx.load(out))
    got = ort.InferenceSession(str(out)).run(None, feeds)[0]
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)


def test_an_unknown_domain_used_without_an_import_is_still_refused(tmp_path):
    path = tmp_path / "unknown_domain.onnx"
    onnx.save(_skip_norm_without_import("my.ops"), path)
    with pytest.raises(ir.ModelLoadError, match=r"uses domain 'my\.ops', which the model does not"):
        ir.load(path)


def _rms_norm_out_of_order(opset_imports: list[onnx.OperatorSetIdProto]) -> onnx.ModelProto:
    """x + x, then its RMS normalization, with the Add listed last (onnxruntime's
    SimplifiedLayerNormalization fusion tests build such models, importing com.microsoft only)."""
    nodes = [
        onnx.helper.make_node("Mul", ["d", "d"], ["dd"]),
        onnx.helper.make_node("ReduceMean", ["dd", "axes"], ["var"]),
        onnx.helper.make_node("Add", ["var", "eps"], ["ve"]),
        onnx.helper.make_node("Sqrt", ["ve"], ["sd"]),
        onnx.helper.make_node("Div", ["d", "sd"], ["y"]),
        onnx.helper.make_node("Add", ["x", "x"], ["d"]),
    ]
    graph = onnx.helper.make_graph(
        nodes,
        "g",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 3, 8])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 3, 8])],
        [
            onnx.numpy_helper.from_array(np.array([1e-5], np.float32), "eps"),
            onnx.numpy_helper.from_array(np.array([-1], np.int64), "axes"),
        ],
    )
    return onnx.helper.make_model(graph, opset_imports=opset_imports, ir_version=8)


def test_the_default_domain_used_without_an_import_is_imported_as_onnxruntime_reads_it(
    tmp_path, caplog
):
    path = tmp_path / "no_default_import.onnx"
    onnx.save(_rms_norm_out_of_order([onnx.helper.make_opsetid("com.microsoft", 1)]), path)
    feeds = {"x": np.random.default_rng(0).standard_normal((2, 3, 8)).astype(np.float32)}
    expected = ort.InferenceSession(str(path)).run(None, feeds)[0]  # onnxruntime runs it
    model = ir.load(path)
    assert model.opset_imports == {"com.microsoft": 1, "": onnx.defs.onnx_opset_version()}
    assert "onnx's default domain, which the model does not import; imported at opset" in (
        caplog.text
    )
    out = tmp_path / "saved.onnx"
    ir.save(model, out)
    got = ort.InferenceSession(str(out)).run(None, feeds)[0]
    np.testing.assert_array_equal(got, expected)


def test_values_of_a_graph_listed_out_of_order_are_typed():
    model = ir.from_onnx(_rms_norm_out_of_order([onnx.helper.make_opsetid("", 18)]))
    ir.infer_types(model)
    types = {v.name: ir.inferred_type(v) for node in model.graph for v in node.outputs}
    dtypes = {n: t.dtype if t is not None else None for n, t in types.items() if n != "y"}
    assert dtypes == dict.fromkeys(("dd", "var", "ve", "sd", "d"), ir.DataType.FLOAT)
    assert types["var"].shape == (2, 3, 1)


def test_the_nodes_a_conversion_would_refuse_are_listed():
    proto = _model("""
    <ir_version: 4, opset_import: ["" : 8]>
    g (float[1, 3, 2, 2] x) => (float[1, 3, 2, 2] z) {
        y = ImageScaler <scale = 0.5, bias = [1.0, 2.0, 3.0]> (x)
        t = ThresholdedRelu <alpha = 0.5> (y)
        z = Affine <alpha = 2.0> (t)
    }
    """)
    model = ir.from_onnx(proto)
    assert ir.runtime_ops_lost(model, 9) == ()  # onnxruntime still runs them at 9
    # ThresholdedRelu becomes the standard op at 10; the other two have no standard op.
    assert [n.op_type for n in ir.runtime_ops_lost(model, 10)] == ["ImageScaler", "Affine"]
    assert ir.runtime_ops_lost(model, 8) == ()
