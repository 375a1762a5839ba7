"""The export forms of attention that patterns/fusion/attention.rw fuses beyond the classic
eager chain: transformers' guarded SDPA export (with and without a mask), unscaled scores
(the scale applied to Q earlier), the SDPA scales absorbed into the attribute, and grouped-
query heads repeated before the attention. Each is built small, rewritten, and run on
onnxruntime against the original, also on inputs with a fully masked row, NaN and infinity,
where the guarded form must keep the written-out graph's values exactly (NaN included)."""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx
import pytest

import rewriter
from rewriter.cli import main
from tests.helpers import batched_key_transpose_text
from tests.patterns.fusion_helpers import (
    FUSION,
    WITH_PASSES,
    build,
    check_fired,
    fired,
    op_types,
    random_feeds,
    rewrite,
    session,
)

ATTENTION = FUSION / "attention.rw"

SHAPES = "float[2, 2, 3, 4] q, float[2, 2, 4, 5] kt, float[2, 2, 5, 4] v"
OUT = "float[2, 2, 3, 4] y"


def _model(body: str, inputs: str = SHAPES, out: str = OUT, opset: int = 23) -> onnx.ModelProto:
    return build(
        f"""<ir_version: 10, opset_import: ["" : {opset}]>
        g ({inputs}) => ({out}) {{
            {body}
        }}"""
    )


# transformers' SDPA export: Q and K^T scaled by sqrt(scale), a -inf padding mask, NaN guard.
SDPA_SCALES = """c = Constant <value = float {0.70710677}> ()
            qs = Mul (q, c)
            ks = Mul (kt, c)
            s = MatMul (qs, ks)"""
MINUS_INF_MASK = """zero = Constant <value = float {0.0}> ()
            minus_inf = Constant <value = float {-inf}> ()
            mask = Where (keep, zero, minus_inf)"""
GUARD = """nan = IsNaN (p)
            pz = Where (nan, zero, p)
            y = MatMul (pz, v)"""
GUARDED_WITH_MASK = f"""{SDPA_SCALES}
            {MINUS_INF_MASK}
            a = Add (s, mask)
            p = Softmax <axis = -1> (a)
            {GUARD}"""
GUARDED = f"""{SDPA_SCALES}
            zero = Constant <value = float {{0.0}}> ()
            p = Softmax <axis = -1> (s)
            {GUARD}"""
KEEP = "bool[2, 1, 1, 5] keep"


def _special_feeds() -> list[dict[str, np.ndarray]]:
    """Inputs where a guard acts: a fully masked batch row, NaN / inf in Q, K and V."""
    rng = np.random.default_rng(7)
    base = {
        "q": rng.standard_normal((2, 2, 3, 4)).astype(np.float32),
        "kt": rng.standard_normal((2, 2, 4, 5)).astype(np.float32),
        "v": rng.standard_normal((2, 2, 5, 4)).astype(np.float32),
        "keep": np.ones((2, 1, 1, 5), dtype=bool),
    }
    masked = {**base, "keep": base["keep"].copy()}
    masked["keep"][1] = False  # every key of batch 1 is padding
    q_special = {**base, "q": base["q"].copy()}
    q_special["q"][0, 0, 1, 2] = np.nan
    q_special["q"][1, 1, 0, 0] = np.inf
    k_inf = {**base, "kt": base["kt"].copy()}
    k_inf["kt"][0, 1, 3, 4] = np.inf
    v_special = {**masked, "v": base["v"].copy()}
    v_special["v"][0, 0, 2, 1] = np.nan
    v_special["v"][1, 1, 4, 3] = -np.inf
    return [base, masked, q_special, k_inf, v_special]


def _assert_same_on(original, rewritten, feeds_list) -> None:
    a, b = session(original), session(rewritten)
    names = {i.name for i in a.get_inputs()}
    for feeds in feeds_list:
        feeds = {k: v for k, v in feeds.items() if k in names}
        (x,) = a.run(None, feeds)
        (y,) = b.run(None, feeds)
        np.testing.assert_array_equal(np.isnan(x), np.isnan(y))
        np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6)


def _scale(result) -> float:
    (node,) = [n for n in result.proto.graph.node if n.op_type == "Attention"]
    return next(a.f for a in node.attribute if a.name == "scale")


def test_guarded_sdpa_with_a_minus_inf_mask_is_fused_exactly():
    model = _model(GUARDED_WITH_MASK, inputs=f"{SHAPES}, {KEEP}")
    result = rewrite(model, ATTENTION)
    check_fired(
        model,
        result,
        {
            "fuse_attention_guarded_with_mask": 1,
            "absorb_query_scale_into_attention": 1,
            "absorb_key_scale_into_attention": 1,
        },
        None,
    )
    ops = op_types(result.proto)
    assert "Softmax" not in ops
    assert ops.count("Attention") == 1
    assert _scale(result) == pytest.approx(0.5)
    # fully masked rows, NaN and infinite Q, K, V: the guard's values, NaN where it has NaN
    _assert_same_on(model, result.proto, _special_feeds())


def test_guarded_sdpa_without_a_mask_is_fused_exactly():
    model = _model(GUARDED)
    result = rewrite(model, ATTENTION)
    check_fired(
        model,
        result,
        {
            "fuse_attention_guarded": 1,
            "absorb_query_scale_into_attention": 1,
            "absorb_key_scale_into_attention": 1,
        },
        None,
    )
    assert "Softmax" not in op_types(result.proto)
    _assert_same_on(model, result.proto, _special_feeds())


def test_a_guard_that_writes_another_value_is_not_fused():
    # Where(IsNaN(p), 1, p) is no guard Attention reproduces.
    body = GUARDED_WITH_MASK.replace("pz = Where (nan, zero, p)", "pz = Where (nan, one, p)")
    body = "one = Constant <value = float {1.0}> ()\n            " + body
    model = _model(body, inputs=f"{SHAPES}, {KEEP}")
    result = rewrite(model, ATTENTION)
    assert "Attention" not in op_types(result.proto)
    assert not fired(result)


def test_unscaled_scores_are_fused_with_scale_one():
    # Whisper: the query projection was scaled before the heads were split.
    model = _model(
        """s = MatMul (q, kt)
            p = Softmax <axis = -1> (s)
            y = MatMul (p, v)"""
    )
    result = rewrite(model, ATTENTION)
    check_fired(model, result, {"fuse_attention_unscaled": 1}, ["Transpose", "Attention"])
    assert _scale(result) == 1.0


def test_unscaled_scores_with_a_padding_mask_are_fused():
    model = _model(
        """zero = Constant <value = float {0.0}> ()
            lowest = Constant <value = float {-3.4028234663852886e38}> ()
            mask = Where (keep, zero, lowest)
            s = MatMul (q, kt)
            a = Add (mask, s)
            p = Softmax <axis = -1> (a)
            y = MatMul (p, v)""",
        inputs=f"{SHAPES}, {KEEP}",
    )
    result = rewrite(model, ATTENTION)
    check_fired(model, result, {"fuse_attention_unscaled_with_mask": 1}, None)
    assert "Softmax" not in op_types(result.proto)
    _assert_same_on(model, result.proto, _special_feeds()[:2])


def test_unscaled_scores_with_a_minus_inf_mask_are_not_fused_by_default():
    # Without a guard a fully masked row is NaN written out and 0 in Attention.
    model = _model(
        f"""{MINUS_INF_MASK}
            s = MatMul (q, kt)
            a = Add (s, mask)
            p = Softmax <axis = -1> (a)
            y = MatMul (p, v)""",
        inputs=f"{SHAPES}, {KEEP}",
    )
    result = rewrite(model, ATTENTION)
    assert "Attention" not in op_types(result.proto)


def test_a_query_scale_that_broadcasts_up_is_not_absorbed():
    # Q * c with c of rank 5 makes a rank-5 input: no Attention to absorb into.
    model = _model(
        """c = Constant <value = float[1, 1, 1, 1, 1] {0.5}> ()
            qs = Mul (q, c)
            s = MatMul (qs, kt)
            p = Softmax <axis = -1> (s)
            y = MatMul (p, v)""",
        out="float[1, 2, 2, 3, 4] y",
    )
    result = rewrite(model, ATTENTION)
    assert "Attention" not in op_types(result.proto)


GQA_INPUTS = "float[B, 4, S, 8] q, float[B, 2, S, 8] k, float[B, 2, S, 8] v"


def _grouped(repeat_v: str = "2") -> onnx.ModelProto:
    """Llama's repeat_kv: K and V of 2 heads repeated to 4 before Softmax(Q K^T / c) V."""
    return build(
        f"""<ir_version: 10, opset_import: ["" : 23]>
        g ({GQA_INPUTS}) => (float[B, 4, S, 8] y)
          <int64[1] two = {{2}}, int64[5] kshape = {{1, 2, 2, 1, 8}},
           int64[5] vshape = {{1, 2, {repeat_v}, 1, 8}}, int64[4] heads = {{0, 4, -1, 8}}>
        {{
            ku = Unsqueeze (k, two)
            ke = Expand (ku, kshape)
            kr = Reshape (ke, heads)
            vu = Unsqueeze (v, two)
            ve = Expand (vu, vshape)
            vr = Reshape (ve, heads)
            kt = Transpose <perm = [0, 1, 3, 2]> (kr)
            s = MatMul (q, kt)
            c = Constant <value = float {{2.828427}}> ()
            ss = Div (s, c)
            p = Softmax <axis = -1> (ss)
            y = MatMul (p, vr)
        }}"""
    )


def test_grouped_query_heads_are_read_natively():
    model = _grouped()
    result = rewrite(model, ATTENTION, FUSION.parent / "folding", options=WITH_PASSES)
    counts = fired(result)
    assert counts["fuse_attention"] == 1
    assert counts["attention_native_grouped_heads"] == 1
    ops = op_types(result.proto)
    assert ops == ["Attention"], ops
    (attention,) = result.proto.graph.node
    assert list(attention.input) == ["q", "k", "v"]
    check_fired(model, result, dict(counts), None)


def test_head_repeats_that_differ_between_k_and_v_stay():
    # V expanded to one copy per head (shape [B, 2, 1, S, 8], reshaped to 4 heads of half
    # the sequence) is no grouping: V keeps its repeat and nothing is taken out.
    model = _grouped(repeat_v="1")
    result = rewrite(model, ATTENTION, FUSION.parent / "folding", options=WITH_PASSES)
    assert "attention_native_grouped_heads" not in fired(result)


def test_random_inputs_agree_for_every_form():
    # the special-value feeds above check NaN; these check ordinary values of other sizes
    for body, inputs in ((GUARDED_WITH_MASK, f"{SHAPES}, {KEEP}"), (GUARDED, SHAPES)):
        model = _model(body, inputs=inputs)
        result = rewrite(model, ATTENTION)
        _assert_same_on(model, result.proto, [random_feeds(model, seed) for seed in range(3)])


def test_why_not_names_the_failing_condition_and_its_values(tmp_path, capsys):
    # double attention stays written out (Attention's scale is a float32 attribute).
    text = onnx.printer.to_text(_model(GUARDED_WITH_MASK, inputs=f"{SHAPES}, {KEEP}"))
    path = tmp_path / "m.onnx"
    onnx.save(onnx.parser.parse_model(text.replace("float", "double")), path)
    rule = "fuse_attention_guarded_with_mask"
    assert main([str(path), "--rules", str(ATTENTION), "--why-not", rule]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("why not `fuse_attention_guarded_with_mask` (")
    (line,) = [line for line in lines if "<MatMul>(y)" in line or line.startswith("  y")]
    source = ATTENTION.read_text().splitlines()
    dtype_line = source.index('  dtype(q) in ["float", "bfloat16"]') + 1
    assert "`is_attention(q, kt, v, ax)` is false: " in line
    assert (
        f'{ATTENTION}:{dtype_line}: `dtype(q) in ["float", "bfloat16"]` (dtype(q) is "double")'
        in line
    )


def test_grouped_query_heads_under_the_sdpa_guard():
    # Llama's SDPA export: the guard's zero rows read the repeated V, which stays for them.
    model = build(
        f"""<ir_version: 10, opset_import: ["" : 23]>
        g ({GQA_INPUTS}) => (float[B, 4, S, 8] y)
          <int64[1] two = {{2}}, int64[5] rep = {{1, 2, 2, 1, 8}}, int64[4] heads = {{0, 4, -1, 8}}>
        {{
            ku = Unsqueeze (k, two)
            ke = Expand (ku, rep)
            kr = Reshape (ke, heads)
            vu = Unsqueeze (v, two)
            ve = Expand (vu, rep)
            vr = Reshape (ve, heads)
            kt = Transpose <perm = [0, 1, 3, 2]> (kr)
            c = Constant <value = float {{0.59460354}}> ()
            qs = Mul (q, c)
            ks = Mul (kt, c)
            s = MatMul (qs, ks)
            zero = Constant <value = float {{0.0}}> ()
            p = Softmax <axis = -1> (s)
            nan = IsNaN (p)
            pz = Where (nan, zero, p)
            y = MatMul (pz, vr)
        }}"""
    )
    result = rewrite(model, ATTENTION, FUSION.parent / "folding", options=WITH_PASSES)
    counts = fired(result)
    assert counts["fuse_attention_guarded"] == 1
    assert counts["attention_native_grouped_heads"] == 1
    (attention,) = [n for n in result.proto.graph.node if n.op_type == "Attention"]
    assert list(attention.input) == ["q", "k", "v"]
    check_fired(model, result, dict(counts), None)
    rng = np.random.default_rng(5)
    feeds = {
        name: rng.standard_normal((2, heads, 3, 8)).astype(np.float32)
        for name, heads in (("q", 4), ("k", 2), ("v", 2))
    }
    feeds["k"][1, 0, 2, 3] = np.inf
    feeds["v"][0, 1, 1, 5] = np.nan
    _assert_same_on(model, result.proto, [feeds])


def _batched_key_transpose(merged: str = "{-1, 5, 4}", split: str = "{2, 2, 4, 5}"):
    """The dynamo exporter's K^T: Reshape(Transpose(Reshape(k, [b*h, s, d]), [0, 2, 1]))."""
    return build(
        f"""<ir_version: 10, opset_import: ["" : 23]>
        g (float[2, 2, 3, 4] q, float[2, 2, 5, 4] k, float[2, 2, 5, 4] v) => ({OUT})
          <int64[3] merged = {merged}, int64[4] split = {split}>
        {{
            r = Reshape (k, merged)
            t = Transpose <perm = [0, 2, 1]> (r)
            kt = Reshape (t, split)
            c = Constant <value = float {{0.5}}> ()
            qs = Mul (q, c)
            ks = Mul (kt, c)
            s = MatMul (qs, ks)
            p = Softmax <axis = -1> (s)
            y = MatMul (p, v)
        }}"""
    )


def test_dynamo_batched_key_transpose_becomes_one_transpose():
    model = _batched_key_transpose()
    result = rewrite(model, ATTENTION, FUSION.parent / "folding", options=WITH_PASSES)
    counts = fired(result)
    assert counts["batched_key_transpose_to_transpose"] == 1
    assert counts["fuse_attention_scaled_inputs"] == 1
    (attention,) = [n for n in result.proto.graph.node if n.op_type == "Attention"]
    assert list(attention.input) == ["q", "k", "v"]
    check_fired(model, result, dict(counts), None)


def test_a_batched_transpose_that_moves_elements_across_heads_stays():
    # [b*h, s, d] -> [b*h, d, s] read back as [2, 2, 5, 4]: not K^T, the rule must not fire.
    model = build(
        """<ir_version: 10, opset_import: ["" : 23]>
        g (float[2, 2, 5, 4] k) => (float[2, 2, 5, 4] y)
          <int64[3] merged = {-1, 5, 4}, int64[4] back = {2, 2, 5, 4}>
        {
            r = Reshape (k, merged)
            t = Transpose <perm = [0, 2, 1]> (r)
            y = Reshape (t, back)
        }"""
    )
    result = rewrite(model, ATTENTION)
    assert "batched_key_transpose_to_transpose" not in fired(result)


def test_a_key_scale_met_after_the_transposes_is_absorbed():
    # Attention(q, Mul(k, c), v): what optimize_transposes leaves of Transpose(Mul(K^T, c))
    attention = build(
        """<ir_version: 10, opset_import: ["" : 23]>
        g (float[2, 2, 3, 4] q, float[2, 2, 5, 4] k, float[2, 2, 5, 4] v) => (float[2, 2, 3, 4] y)
        {
            c = Constant <value = float {0.5}> ()
            ks = Mul (k, c)
            y = Attention <scale = 0.25> (q, ks, v)
        }"""
    )
    result = rewrite(attention, ATTENTION, FUSION.parent / "folding", options=WITH_PASSES)
    check_fired(attention, result, {"absorb_transposed_key_scale_into_attention": 1}, None)
    assert "Mul" not in op_types(result.proto)
    assert _scale(result) == pytest.approx(0.125)


# The dynamo exporter with its optimizer: K^T as a batched 3-D transpose whose Reshape targets
# are computed from K's own shape (allowzero 0).
OPTIMIZED_DYNAMO_KT = batched_key_transpose_text(23)


@pytest.mark.parametrize("k_shape", [(2, 4, 3, 16), (1, 4, 1, 16), (0, 4, 3, 16)])
def test_batched_key_transpose_from_computed_shapes(k_shape: tuple[int, ...]) -> None:
    model = build(OPTIMIZED_DYNAMO_KT)
    # The rule alone: it reads the Reshape targets through `shape_value`, where shape facts
    # of the 3-D value may be unknown (as in the exports, where they are).
    library = rewriter.load_rules(ATTENTION)
    alone = dataclasses.replace(
        library,
        rules=tuple(r for r in library.rules if r.name == "batched_key_transpose_from_shapes"),
        passes=(),
    )
    by_rule = rewriter.rewrite(model, alone)
    assert fired(by_rule)["batched_key_transpose_from_shapes"] == 1
    by_library = rewrite(model)
    for result in (by_rule, by_library):
        assert "Reshape" not in op_types(result.proto)
        assert op_types(result.proto).count("Transpose") == 1
    k = np.random.default_rng(0).standard_normal(k_shape).astype(np.float32)
    want = session(model).run(None, {"k": k})[0]
    for result in (by_rule, by_library):
        have = session(result.proto).run(None, {"k": k})[0]
        np.testing.assert_array_equal(want, have)


def test_batched_key_transpose_with_an_empty_sequence_fails_in_the_original() -> None:
    # With seq = 0 the first Reshape's 0 copies a dim and the second asks for a fourth dim of
    # a rank-3 tensor: onnxruntime refuses the original, so the rewrite changes nothing the
    # original computes (the rule's comment relies on this).
    model = build(OPTIMIZED_DYNAMO_KT)
    with pytest.raises(Exception, match="exceeds the dimension size"):
        session(model).run(None, {"k": np.zeros((2, 4, 0, 16), np.float32)})
