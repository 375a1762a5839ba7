"""fusion/rotary.rw: the rotate-half rotary embedding of Llama-family exports -> RotaryEmbedding."""

from __future__ import annotations

import pytest

import rewriter
from tests.patterns.fusion_helpers import (
    FUSION,
    LIBRARY,
    WITH_PASSES,
    build,
    check_fired,
    fired,
    rewrite,
)


def _rotary(
    batch: str = "B",
    table_batch: str = "1",
    halves: str = "Concat <axis = -1> (f, f)",
    slices: tuple[str, str] = ("0", "8"),
    dtype: str = "float",
) -> str:
    """q [B, 4, S, 16] rotated by cos/sin tables made from freqs [table_batch, S, 8]."""
    start, middle = slices
    return f"""<ir_version: 10, opset_import: ["" : 23]>
    g ({dtype}[{batch}, 4, S, 16] q, {dtype}[{table_batch}, S, 8] f) => ({dtype}[{batch}, 4, S, 16] y)
      <int64[1] zero = {{{start}}}, int64[1] mid = {{{middle}}}, int64[1] end = {{16}},
       int64[1] last = {{-1}}, int64[1] heads = {{1}}>
    {{
        emb = {halves}
        c3 = Cos (emb)
        s3 = Sin (emb)
        c = Unsqueeze (c3, heads)
        s = Unsqueeze (s3, heads)
        q1 = Slice (q, zero, mid, last)
        q2 = Slice (q, mid, end, last)
        n = Neg (q2)
        r = Concat <axis = -1> (n, q1)
        a = Mul (q, c)
        b = Mul (r, s)
        y = Add (a, b)
    }}"""


def _run(model):
    return rewrite(model, LIBRARY / "folding", FUSION, options=WITH_PASSES)


@pytest.mark.parametrize(
    ("table_batch", "rule"),
    [("1", "fuse_rotary_embedding"), ("B", "fuse_rotary_embedding_batched_tables")],
)
def test_rotate_half_becomes_rotary_embedding(table_batch, rule):
    model = build(_rotary(table_batch=table_batch))
    result = _run(model)
    assert fired(result)[rule] == 1
    assert "RotaryEmbedding" in [n.op_type for n in result.proto.graph.node]
    assert not {"Neg", "Split"} & {n.op_type for n in result.proto.graph.node}
    check_fired(model, result, dict(fired(result)), None, rtol=1e-5, atol=1e-5)


def test_tables_with_the_batch_of_q_take_no_expand_and_no_concat():
    # q [1, 4, S, 16], tables [1, S, 16] from freqs [1, S, 8]: RotaryEmbedding reads
    # Cos(freqs) and Sin(freqs) themselves, the halves' Concat and every Slice gone
    model = build(_rotary(batch="1", table_batch="1"))
    result = _run(model)
    assert fired(result)["fuse_rotary_embedding_batched_tables"] == 1
    ops = [n.op_type for n in result.proto.graph.node]
    assert sorted(ops) == ["Cos", "RotaryEmbedding", "Sin"]
    check_fired(model, result, dict(fired(result)), ops, rtol=1e-5, atol=1e-5)


def test_tables_whose_halves_differ_are_left_alone():
    # The table is not cat(f, f): RotaryEmbedding would read only its first half.
    text = _rotary(halves="Concat <axis = -1> (f, g)").replace(
        "float[1, S, 8] f)", "float[1, S, 8] f, float[1, S, 8] g)"
    )
    model = build(text)
    result = _run(model)
    assert "fuse_rotary_embedding" not in fired(result)
    check_fired(model, result, dict(fired(result)), None)


def test_slices_that_do_not_halve_are_left_alone():
    model = build(_rotary(slices=("0", "6")).replace("mid, end", "mid, end"))
    result = _run(model)
    assert "fuse_rotary_embedding" not in fired(result)


def test_below_opset_23_nothing_is_fused():
    model = build(
        _rotary().replace('"" : 23', '"" : 18').replace("ir_version: 10", "ir_version: 8")
    )
    result = rewriter.rewrite(model)
    assert "fuse_rotary_embedding" not in fired(result)


PARTIAL = """<ir_version: 10, opset_import: ["" : 23]>
    g (float[B, 4, S, 16] x, float[1, S, 4] f) => (float[B, 4, S, 16] y)
      <int64[1] zero = {0}, int64[1] quarter = {4}, int64[1] rot = {ROT}, int64[1] end = {16},
       int64[1] last = {-1}, int64[1] heads = {1}>
    {
        emb = Concat <axis = -1> (f, f)
        c3 = Cos (emb)
        s3 = Sin (emb)
        c = Unsqueeze (c3, heads)
        s = Unsqueeze (s3, heads)
        q = Slice (x, zero, rot, last)
        rest = Slice (x, rot, end, last)
        q1 = Slice (q, zero, quarter, last)
        q2 = Slice (q, quarter, rot, last)
        n = Neg (q2)
        r = Concat <axis = -1> (n, q1)
        a = Mul (q, c)
        b = Mul (r, s)
        rotated = Add (a, b)
        y = Concat <axis = -1> (rotated, rest)
    }"""


def test_partial_rotary_becomes_one_rotary_embedding_with_its_dim():
    # Phi / GPT-NeoX: the first 8 of 16 entries rotate, the other 8 pass through.
    model = build(PARTIAL.replace("{ROT}", "{8}"))
    result = _run(model)
    counts = fired(result)
    assert counts["fuse_rotary_embedding"] == 1
    assert counts["fuse_partial_rotary_embedding"] == 1
    nodes = [n for n in result.proto.graph.node if n.op_type == "RotaryEmbedding"]
    assert len(nodes) == 1
    assert nodes[0].input[0] == "x"
    assert [(a.name, a.i) for a in nodes[0].attribute] == [("rotary_embedding_dim", 8)]
    assert nodes[0].output[0] == "y"  # the pass-through Concat is gone
    # only the tables' batch and sequence are still read from the rotated slice's Shape
    assert "Neg" not in {n.op_type for n in result.proto.graph.node}
    check_fired(model, result, dict(counts), None, rtol=1e-5, atol=1e-5)


def test_a_rotation_whose_tables_are_not_its_slice_keeps_the_concat():
    # The rotated slice is not the one the Concat puts first: no partial rotary.
    text = PARTIAL.replace("{ROT}", "{8}").replace(
        "y = Concat <axis = -1> (rotated, rest)", "y = Concat <axis = -1> (rest, rotated)"
    )
    model = build(text)
    result = _run(model)
    assert "fuse_partial_rotary_embedding" not in fired(result)
    check_fired(model, result, dict(fired(result)), None, rtol=1e-5, atol=1e-5)
