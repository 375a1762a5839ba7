"""patterns/ort/attention.rw's 4-D core rules: attention whose heads are split another way than
the projection chain the older rules need (GPT-2's one projection split three ways, Whisper's
unscaled scores) -> com.microsoft.MultiHeadAttention, checked on onnxruntime's kernel,
including a fully masked row (NaN in both) and near misses."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from tests.patterns.fusion_helpers import (
    LIBRARY,
    ORT_RULES,
    WITH_PASSES,
    build,
    check_fired,
    fired,
    rewrite,
    session,
)

MHA = ORT_RULES / "attention.rw"
FOLDING = LIBRARY / "folding"

HEADER = '<ir_version: 8, opset_import: ["" : 17, "com.microsoft" : 1]>'


def _gpt2_like(scores: str, mask: bool = True, heads: str = "2") -> onnx.ModelProto:
    """One [B, S, 24] projection split into Q, K, V of 2 heads of 4, Q scaled per position
    (a stand-in for the rotary embedding between the heads and the attention, which the
    projection-chain rules cannot see through), attention, heads merged."""
    mask_input = ", float[B, 1, S, S] m" if mask else ""
    add = "a = Add (ss, m)" if mask else "a = Identity (ss)"
    return build(
        f"""{HEADER}
        g (float[B, S, 24] x, float[1, 1, S, 4] t{mask_input}) => (float[B, S, 8] y)
          <int64[4] heads = {{0, 0, {heads}, 4}}, int64[3] merged = {{0, 0, 8}},
           int64[3] split = {{8, 8, 8}}>
        {{
            q3, k3, v3 = Split <axis = 2> (x, split)
            qr = Reshape (q3, heads)
            qh = Transpose <perm = [0, 2, 1, 3]> (qr)
            q = Mul (qh, t)
            kr = Reshape (k3, heads)
            kt = Transpose <perm = [0, 2, 3, 1]> (kr)
            vr = Reshape (v3, heads)
            v = Transpose <perm = [0, 2, 1, 3]> (vr)
            s = MatMul (q, kt)
            {scores}
            {add}
            p = Softmax <axis = -1> (a)
            o = MatMul (p, v)
            ot = Transpose <perm = [0, 2, 1, 3]> (o)
            y = Reshape (ot, merged)
        }}"""
    )


def rewriter_run(model: onnx.ModelProto):
    return rewrite(model, FOLDING, MHA, options=WITH_PASSES)


DIV = """c = Constant <value = float {2.0}> ()
            ss = Div (s, c)"""
UNSCALED = "ss = Identity (s)"


@pytest.mark.parametrize(
    ("scores", "mask", "rule"),
    [
        (DIV, True, "ort_mha_from_scaled_scores_with_mask"),
        (DIV, False, "ort_mha_from_scaled_scores"),
        (UNSCALED, False, "ort_mha_from_unscaled_scores"),
    ],
)
def test_attention_core_becomes_multi_head_attention(scores, mask, rule):
    model = _gpt2_like(scores, mask)
    result = rewriter_run(model)
    counts = fired(result)
    assert counts[rule] == 1
    ops = [n.op_type for n in result.proto.graph.node]
    assert ops.count("MultiHeadAttention") == 1
    assert "Softmax" not in ops
    check_fired(model, result, dict(counts), None)


def test_a_fully_masked_row_is_nan_in_both():
    model = _gpt2_like(DIV)
    fused = rewriter_run(model).proto
    rng = np.random.default_rng(3)
    feeds = {
        "x": rng.standard_normal((2, 3, 24)).astype(np.float32),
        "t": rng.standard_normal((1, 1, 3, 4)).astype(np.float32),
        "m": np.zeros((2, 1, 3, 3), np.float32),
    }
    feeds["m"][1, 0, 2, :] = -np.inf
    feeds["m"][0, 0, 0, 1] = -np.inf
    (expected,) = session(model).run(None, feeds)
    (got,) = session(fused).run(None, feeds)
    assert np.isnan(expected[1, 2]).all()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_symbolic_heads_are_left_alone():
    # num_heads is an attribute: a head count only known at run time cannot be written.
    model = build(
        f"""{HEADER}
        g (float[B, H, S, 4] q, float[B, H, 4, S] kt, float[B, H, S, 4] v) => (float[B, S, N] y)
          <int64[3] merged = {{0, 0, -1}}>
        {{
            s = MatMul (q, kt)
            p = Softmax <axis = -1> (s)
            o = MatMul (p, v)
            ot = Transpose <perm = [0, 2, 1, 3]> (o)
            y = Reshape (ot, merged)
        }}"""
    )
    result = rewriter_run(model)
    assert not any(r.startswith("ort_mha_") for r in fired(result))


def test_without_the_contrib_domain_nothing_is_fused():
    text = onnx.printer.to_text(_gpt2_like(DIV))
    model = onnx.parser.parse_model(text.replace(', "com.microsoft" : 1', ""))
    result = rewriter_run(model)
    assert "MultiHeadAttention" not in [n.op_type for n in result.proto.graph.node]
