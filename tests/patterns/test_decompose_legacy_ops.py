"""onnxruntime's old experimental ops written out when a model converts past opset 9.

onnxruntime runs `ImageScaler`, `Affine`, `Scale` and `ParametricSoftplus` in the default
domain only below opset 10 (onnx dropped them); `rewrite --target-opset 10` or later writes
them in standard ops first (patterns/decompose/legacy_ops.rw), then converts. The oracle is
onnxruntime running the original at its own opset.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx.parser
import onnxruntime as ort
import pytest

import ir
import rewriter
from rewriter.cli import main

_X = np.random.default_rng(0).standard_normal((2, 3, 4, 5)).astype(np.float32) * 4


def _model(node: str, dtype: str = "float") -> onnx.ModelProto:
    return onnx.parser.parse_model(f"""
    <ir_version: 4, opset_import: ["" : 8]>
    g ({dtype}[N, 3, 4, 5] x) => ({dtype}[N, 3, 4, 5] z) {{
        y = {node} (x)
        z = Relu (y)
    }}
    """)


def _run(proto: onnx.ModelProto, x: np.ndarray = _X) -> np.ndarray:
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x})[0]


@pytest.mark.parametrize(
    "node",
    [
        "ImageScaler <scale = 0.5, bias = [1.0, -2.0, 0.25]>",
        "ImageScaler <bias = [1.0, -2.0, 0.25]>",
        "Affine <alpha = -1.5, beta = 0.1>",
        "Affine",
        "Scale <scale = 3.0>",
        "ParametricSoftplus <alpha = 2.0, beta = 0.5>",
    ],
)
def test_a_conversion_up_writes_the_op_in_standard_ops(node):
    original = _model(node)
    result = rewriter.rewrite(original, options=rewriter.RewriteOptions(target_opset=13))
    converted = ir.to_onnx(result.model)
    assert result.model.opset_imports[""] == 13
    op = node.split()[0]
    assert op not in {n.op_type for n in converted.graph.node}
    np.testing.assert_allclose(_run(converted), _run(original), rtol=2e-6, atol=1e-6)
    assert any(e.rule.startswith("decompose_") for e in result.trace.entries)


def test_without_a_conversion_the_op_stays():
    result = rewriter.rewrite(_model("ImageScaler <scale = 0.5, bias = [1.0, 2.0, 3.0]>"))
    assert "ImageScaler" in {n.op_type for n in result.model.graph.all_nodes()}
    assert result.model.opset_imports[""] == 8


def test_an_op_without_a_standard_form_still_stops_the_conversion_naming_the_node():
    original = _model("ScaledTanh <alpha = 2.0, beta = 0.5>")
    _run(original)  # onnxruntime runs it at opset 8
    with pytest.raises(ir.ConversionError) as caught:
        rewriter.rewrite(original, options=rewriter.RewriteOptions(target_opset=13))
    assert str(caught.value) == (
        "cannot convert from opset 8 to 13: node 'ScaledTanh' is onnxruntime's 'ScaledTanh', "
        "which it runs in the default domain only from opset 1 to 9, and onnx has no op of the "
        "same meaning at opset 13"
    )


def test_float16_is_left_to_the_refusal():
    # onnxruntime's kernels compute these in float (float16 inputs go through Casts); written
    # in float16 Mul/Add the result would round differently, so the rule does not fire.
    original = _model("Affine <alpha = 2.0, beta = 1.0>", dtype="float16")
    _run(original, _X.astype(np.float16))
    with pytest.raises(ir.ConversionError, match="node 'Affine' is onnxruntime's 'Affine'"):
        rewriter.rewrite(original, options=rewriter.RewriteOptions(target_opset=13))


def test_the_command_line_converts_and_verifies(tmp_path, capsys):
    source = tmp_path / "old.onnx"
    onnx.save(_model("ImageScaler <scale = 0.5, bias = [1.0, -2.0, 0.25]>"), source)
    out = tmp_path / "new.onnx"
    code = main([str(source), "-o", str(out), "--target-opset", "17", "--verify", "--no-progress"])
    assert code == 0, capsys.readouterr().err
    converted = onnx.load(out)
    assert [n.op_type for n in converted.graph.node] == ["Mul", "Add", "Relu"]
    assert converted.opset_import[0].version == 17
