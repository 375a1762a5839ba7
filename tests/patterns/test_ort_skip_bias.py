"""A bias Add before a SkipLayerNormalization without one becomes its bias input.

onnxruntime's own optimizer leaves that form (Whisper's decoder: the attention's output
projection MatMul, its bias Add, then the SkipLayerNormalization it fused); checked against
onnxruntime on the fused and the original model.
"""

from __future__ import annotations

import pytest

from tests.patterns.fusion_helpers import ORT_RULES, build, check_fired, rewrite

SLN = ORT_RULES / "skip_layer_norm.rw"


def _model(*, on_skip: bool, keep_sum: bool, bias_shape: tuple[int, ...] = (8,)) -> object:
    summands = "(x, t, gamma, beta)" if on_skip else "(t, x, gamma, beta)"
    outputs = "y, _m, _v, total" if keep_sum else "y"
    declared = "float[B, S, 8] y, float[B, S, 8] total" if keep_sum else "float[B, S, 8] y"
    return build(
        f"""<ir_version: 8, opset_import: ["" : 17, "com.microsoft" : 1]>
        g (float[B, S, 8] x, float[B, S, 8] h) => ({declared}) {{
            p = MatMul (h, w)
            t = Add (p, bias)
            {outputs} = com.microsoft.SkipLayerNormalization <epsilon = 1e-5> {summands}
        }}""",
        check=False,
        w=((8, 8), -0.5, 0.5),
        bias=(bias_shape, -0.5, 0.5),
        gamma=((8,), 0.5, 1.5),
        beta=((8,), -0.5, 0.5),
    )


@pytest.mark.parametrize("on_skip", [False, True])
@pytest.mark.parametrize("keep_sum", [False, True])
def test_the_bias_becomes_the_fifth_input(on_skip, keep_sum):
    original = _model(on_skip=on_skip, keep_sum=keep_sum)
    result = rewrite(original, SLN)
    rule = "absorb_skip_bias" if on_skip else "absorb_bias"
    name = f"{rule}_into_skip_layer_normalization" + ("_keep_sum" if keep_sum else "")
    check_fired(original, result, {name: 1}, ["MatMul", "SkipLayerNormalization"])
    (sln,) = [n for n in result.proto.graph.node if n.op_type == "SkipLayerNormalization"]
    assert sln.input[4] == "bias"


def test_a_bias_that_is_not_one_per_hidden_unit_stays():
    original = _model(on_skip=False, keep_sum=False, bias_shape=(1, 8))
    assert not rewrite(original, SLN).trace.entries
