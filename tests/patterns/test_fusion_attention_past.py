"""fusion/attention_past.rw: a KV cache concatenated before an Attention becomes its past inputs
(outputs equal under onnxruntime), and the near misses it must leave alone."""

from __future__ import annotations

import pytest

from tests.patterns.fusion_helpers import FUSION, build, check_fired, fired, rewrite

PAST = FUSION / "attention_past.rw"


def _cached_attention(causal: int = 0, present_outputs: bool = False) -> object:
    """Q [2, 8, 4, 16] over keys and values [2, 8, P + 4, 16] made by Concat of a cache."""
    present = ", float[2, 8, T, 16] ck, float[2, 8, T, 16] cv" if present_outputs else ""
    return build(
        f"""<ir_version: 10, opset_import: ["" : 23]>
        g (float[2, 8, 4, 16] q, float[2, 8, 4, 16] k, float[2, 8, 4, 16] v,
           float[2, 8, P, 16] pk, float[2, 8, P, 16] pv)
          => (float[2, 8, 4, 16] y{present}) {{
            ck = Concat <axis = 2> (pk, k)
            cv = Concat <axis = 2> (pv, v)
            y = Attention <is_causal = {causal}> (q, ck, cv)
        }}"""
    )


@pytest.mark.parametrize("present_outputs", [False, True])
def test_kv_cache_becomes_attention_past(present_outputs):
    # with the concatenated cache read as outputs, Attention's present_key / value give them
    model = _cached_attention(present_outputs=present_outputs)
    result = rewrite(model, PAST)
    check_fired(model, result, {"fuse_kv_cache_into_attention": 1}, ["Attention"])
    node = result.proto.graph.node[0]
    assert [name.split("/")[0] for name in node.input[4:]] == ["pk", "pv"]


def test_kv_cache_near_miss_causal():
    # is_causal: the op aligns its triangle with the present keys
    assert not fired(rewrite(_cached_attention(causal=1), PAST))


def test_kv_cache_near_miss_concat_of_head_dims():
    # keys concatenated along the head size are no cache
    model = build(
        """<ir_version: 10, opset_import: ["" : 23]>
        g (float[2, 8, 4, 16] q, float[2, 8, 4, 8] k, float[2, 8, 4, 16] v,
           float[2, 8, 4, 8] pk) => (float[2, 8, 4, 16] y) {
            ck = Concat <axis = -1> (pk, k)
            y = Attention (q, ck, v)
        }"""
    )
    assert not fired(rewrite(model, PAST))
