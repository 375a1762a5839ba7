"""TensorFlow BERT's Einsum attention (tf2onnx) as MatMul / Reshape / Transpose, then fused."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.numpy_helper
import onnx.parser
import pytest

import ir
import rewriter
from tests.helpers import assert_same_outputs, op_types
from tests.patterns.fusion_helpers import check_fired, fired

EINSUM = rewriter.library_path() / "fusion" / "einsum.rw"


def _with_weights(text: str, **shapes: tuple[int, ...]) -> onnx.ModelProto:
    model = onnx.parser.parse_model(text)
    rng = np.random.default_rng(0)
    for name, shape in shapes.items():
        array = rng.uniform(-1.0, 1.0, shape).astype(np.float32)
        model.graph.initializer.append(onnx.numpy_helper.from_array(array, name))
    onnx.checker.check_model(model, full_check=True)
    return model


def tf_bert_attention(opset: int = 23, ms: bool = False, scale: float = 0.5) -> onnx.ModelProto:
    """The attention of TF's BERT as tf2onnx writes it (4 heads of 4, hidden 16)."""
    domains = f'"" : {opset}' + (', "com.microsoft" : 1' if ms else "")
    return _with_weights(
        f"""<ir_version: 8, opset_import: [{domains}]>
        g (float[B, S, 16] x, int64[B, S] m) => (float[B, S, 16] y) {{
            qe = Einsum <equation = "abc,cde->abde"> (x, wq)
            q = Add (qe, bq)
            c = Constant <value = float {{{scale}}}> ()
            qs = Mul (q, c)
            ke = Einsum <equation = "abc,cde->abde"> (x, wk)
            k = Add (ke, bk)
            ve = Einsum <equation = "abc,cde->abde"> (x, wv)
            v = Add (ve, bv)
            axes = Constant <value = int64[2] {{1, 2}}> ()
            u = Unsqueeze (m, axes)
            mf = Cast <to = 1> (u)
            one = Constant <value = float {{1.0}}> ()
            keep = Sub (one, mf)
            big = Constant <value = float {{-10000.0}}> ()
            mask = Mul (keep, big)
            s = Einsum <equation = "aecd,abcd->acbe"> (k, qs)
            a = Add (s, mask)
            p = Softmax <axis = 3> (a)
            o = Einsum <equation = "acbe,aecd->abcd"> (p, v)
            y = Einsum <equation = "abcd,cde->abe"> (o, wo)
        }}""",
        wq=(16, 4, 4),
        wk=(16, 4, 4),
        wv=(16, 4, 4),
        bq=(4, 4),
        bk=(4, 4),
        bv=(4, 4),
        wo=(4, 4, 16),
    )


def test_the_einsum_forms_become_matmuls():
    model = tf_bert_attention(opset=17)
    result = rewriter.rewrite(model, [EINSUM])
    assert dict(fired(result)) == {
        "einsum_projection_to_matmul": 3,
        "add_bias_before_head_split": 3,
        "einsum_scaled_scores_to_matmul": 1,
        "einsum_weighted_values_to_matmul": 1,
        "einsum_merge_heads_to_matmul": 1,
    }
    ir.verify(result.model)
    assert "Einsum" not in op_types(result.proto)
    assert_same_outputs(model, result.proto, rtol=1e-4, atol=1e-5)


def test_the_default_library_fuses_it_into_attention_at_opset_23():
    model = tf_bert_attention()
    result = rewriter.rewrite(model)
    assert op_types(result.proto).count("Attention") == 1
    assert "Einsum" not in op_types(result.proto)
    assert_same_outputs(model, result.proto, rtol=1e-4, atol=1e-5)


def test_the_contrib_rules_pack_it_into_onnxruntimes_attention():
    model = tf_bert_attention(opset=17, ms=True)
    library = rewriter.library_path()
    result = rewriter.rewrite(model, [library, library / "ort"])
    assert fired(result)["ort_attention_from_projections"] == 1
    ops = op_types(result.proto)
    assert ops.count("Attention") == 1
    assert "Einsum" not in ops
    assert "MatMul" in ops  # the output projection stays
    assert_same_outputs(model, result.proto, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    ("equation", "shapes"),
    [
        ("abc,cde->abde", {"w": (16, 4, 4)}),
        ("abcd,cde->abe", {"w": (4, 4, 16)}),
    ],
)
def test_a_projection_by_a_weight_input_stays_an_einsum(equation, shapes):
    # the weight is a graph input: it cannot be reshaped when the rule fires
    rank = 3 if equation.startswith("abc,") else 4
    dims = "B, S, 16" if rank == 3 else "B, S, 4, 4"
    out = "float[B, S, 4, 4]" if rank == 3 else "float[B, S, 16]"
    model = onnx.parser.parse_model(
        f"""<ir_version: 8, opset_import: ["" : 17]>
        g (float[{dims}] x, float[{", ".join(map(str, shapes["w"]))}] w) => ({out} y) {{
            y = Einsum <equation = "{equation}"> (x, w)
        }}"""
    )
    assert not fired(rewriter.rewrite(model, [EINSUM]))


def test_a_broadcast_head_axis_stays_an_einsum():
    # Einsum pairs the heads of K and Q without broadcasting; MatMul would broadcast 1 to 2
    model = onnx.parser.parse_model(
        """<ir_version: 8, opset_import: ["" : 17]>
        g (float[2, 3, 1, 4] k, float[2, 5, 2, 4] q) => (float[2, 2, 5, 3] s) {
            s = Einsum <equation = "aecd,abcd->acbe"> (k, q)
        }"""
    )
    assert not fired(rewriter.rewrite(model, [EINSUM]))


def test_a_bias_that_does_not_split_like_the_heads_stays_after_the_reshape():
    model = _with_weights(
        """<ir_version: 8, opset_import: ["" : 17]>
        g (float[B, S, 16] t) => (float[B, S, 4, 4] y) {
            shape = Constant <value = int64[4] {0, 0, 4, 4}> ()
            r = Reshape (t, shape)
            y = Add (r, b)
        }""",
        b=(1, 4),
    )
    assert not fired(rewriter.rewrite(model, [EINSUM]))


def test_add_bias_before_head_split():
    model = _with_weights(
        """<ir_version: 8, opset_import: ["" : 17]>
        g (float[B, S, 16] t) => (float[B, S, 4, 4] y) {
            shape = Constant <value = int64[4] {0, 0, 4, 4}> ()
            r = Reshape (t, shape)
            y = Add (r, b)
        }""",
        b=(4, 4),
    )
    check_fired(model, rewriter.rewrite(model, [EINSUM]), {"add_bias_before_head_split": 1}, None)
