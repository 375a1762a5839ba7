"""Ops written before onnxruntime's contrib ops that the ops take as inputs or attributes:
a query scale and projection biases into MultiHeadAttention (ort/mha_inputs.rw), a bias added
after the skip into SkipLayerNormalization (ort/skip_norm_bias.rw), a bias that is no constant
into BiasGelu (ort/gelu.rw). Each checked against onnxruntime's kernels, with near misses."""

from __future__ import annotations

import numpy as np
import pytest

from rewriter.api import RewriteOptions
from rewriter.engine import DEFAULT_PIPELINE
from tests.patterns.fusion_helpers import ORT_RULES, build, check_fired, fired, rewrite

MHA_INPUTS = ORT_RULES / "mha_inputs.rw"
SKIP_BIAS = ORT_RULES / "skip_norm_bias.rw"
GELU = ORT_RULES / "gelu.rw"
FAST_GELU_FORMS = ORT_RULES / "fast_gelu_forms.rw"
HEADER = '<ir_version: 8, opset_import: ["" : 18, "com.microsoft" : 1]>'
QKV = "float[B, S, 16] q, float[B, S, 16] k, float[B, S, 16] v"


def _mha_model(body: str, inputs: str = QKV, **arrays: object) -> object:
    return build(f"{HEADER}\ng ({inputs}) => (float[B, S, 16] y) {{\n{body}\n}}", **arrays)


# -- MultiHeadAttention's scale ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("scale_attr", "c", "scale"), [("", 2.0, 1.0), (", scale = 0.5", 0.25, 0.125)]
)
def test_query_scale_goes_into_the_mha_scale(scale_attr, c, scale):
    # without the attribute the scale is 1 / sqrt(head_size) = 1 / sqrt(4)
    model = _mha_model(
        "qs = Mul (q, c)\n"
        f"y = com.microsoft.MultiHeadAttention <num_heads = 4{scale_attr}> (qs, k, v)",
        c=np.float32(c),
    )
    result = rewrite(model, MHA_INPUTS)
    check_fired(model, result, {"absorb_query_scale_into_mha": 1}, ["MultiHeadAttention"])
    attrs = {a.name: a for a in result.proto.graph.node[0].attribute}
    assert attrs["scale"].f == scale
    assert result.trace.entries[0].assumed


def test_query_scale_stays_where_a_bias_is_added_before_it():
    # MultiHeadAttention adds its bias to the scaled query: (q * c) + b is no (q + b) * c
    model = _mha_model(
        "qs = Mul (q, c)\ny = com.microsoft.MultiHeadAttention <num_heads = 4> (qs, k, v, bias)",
        c=np.float32(2.0),
        bias=((48,), -1.0, 1.0),
    )
    assert not fired(rewrite(model, MHA_INPUTS))


# -- MultiHeadAttention's packed bias --------------------------------------------------------


@pytest.mark.parametrize(
    "added", [("q", "k", "v"), ("k",), ("q", "k"), ("v",)], ids=lambda a: "+".join(a)
)
def test_projection_biases_go_into_the_packed_bias(added):
    # biases that are graph inputs: the packed bias is a Concat of them and zeros
    inputs = QKV + "".join(f", float[16] b{name}" for name in added)
    lines = [f"{name}b = Add ({name}, b{name})" for name in added]
    operands = [f"{name}b" if name in added else name for name in "qkv"]
    lines.append(f"y = com.microsoft.MultiHeadAttention <num_heads = 4> ({', '.join(operands)})")
    model = _mha_model("\n".join(lines), inputs)
    result = rewrite(model, MHA_INPUTS)
    counts = fired(result)
    assert sum(counts.values()) == len(added), counts
    check_fired(model, result, dict(counts), ["Concat", "MultiHeadAttention"])


def test_constant_biases_become_one_constant_packed_bias():
    model = _mha_model(
        "qb = Add (q, bq)\n kb = Add (k, bk)\n vb = Add (v, bv)\n"
        "y = com.microsoft.MultiHeadAttention <num_heads = 4> (qb, kb, vb)",
        bq=((16,), -1.0, 1.0),
        bk=((16,), -1.0, 1.0),
        bv=((16,), -1.0, 1.0),
    )
    # the library's passes fold the Concat of the three constant biases
    result = rewrite(model, MHA_INPUTS, options=RewriteOptions(passes=DEFAULT_PIPELINE))
    check_fired(model, result, dict(fired(result)), ["MultiHeadAttention"])
    assert len(result.proto.graph.node[0].input) == 4


@pytest.mark.parametrize(
    ("inputs", "body"),
    [
        pytest.param(
            QKV + ", float[1, 1, 16] b",
            "qb = Add (q, b)\ny = com.microsoft.MultiHeadAttention <num_heads = 4> (qb, k, v)",
            id="a 3-D bias",
        ),
        pytest.param(
            QKV + ", float[B, S, 16] b",
            "qb = Add (q, b)\ny = com.microsoft.MultiHeadAttention <num_heads = 4> (qb, k, v)",
            id="an Add of two activations",
        ),
    ],
)
def test_projection_bias_near_misses(inputs, body):
    assert not fired(rewrite(_mha_model(body, inputs), MHA_INPUTS))


# -- SkipLayerNormalization with a bias after the skip -----------------------------------------


def _post_bias_model(bias: str = "float[16] bias", keep_sum: bool = False) -> object:
    outputs = "float[2, 8, 16] y" + (", float[2, 8, 16] t" if keep_sum else "")
    return build(
        f"""<ir_version: 8, opset_import: ["" : 18, "com.microsoft" : 1]>
        g (float[2, 8, 16] x, float[2, 8, 16] skip, {bias}) => ({outputs}) {{
            s = Add (x, skip)
            t = Add (s, bias)
            y = LayerNormalization <axis = -1, epsilon = 1e-6> (t, gamma, beta)
        }}""",
        gamma=((16,), 0.5, 1.5),
        beta=((16,), -0.5, 0.5),
    )


@pytest.mark.parametrize(
    ("keep_sum", "rule"),
    [
        (False, "fuse_skip_layer_normalization_post_bias"),
        (True, "fuse_skip_layer_normalization_post_bias_keep_sum"),
    ],
)
def test_bias_after_the_skip_goes_into_skip_layer_normalization(keep_sum, rule):
    model = _post_bias_model(keep_sum=keep_sum)
    result = rewrite(model, SKIP_BIAS)
    check_fired(model, result, {rule: 1}, ["SkipLayerNormalization"])


def test_bias_after_the_skip_near_miss_of_another_width():
    # a [2, 8, 16] "bias" is another activation: SkipLayerNormalization's bias is 1-D (the sum
    # x + skip is then the input, the "bias" the skip: skip_layer_norm.rw's plain rule)
    model = _post_bias_model(bias="float[2, 8, 16] bias")
    result = rewrite(model, SKIP_BIAS)
    assert dict(fired(result)) == {"fuse_skip_layer_normalization": 1}


# -- BiasGelu with a bias that is no constant ------------------------------------------------


@pytest.mark.parametrize("bias_shape", ["[10]", "[1, 10]"])
def test_bias_gelu_takes_a_bias_input(bias_shape):
    model = build(
        f"""<ir_version: 8, opset_import: ["" : 20, "com.microsoft" : 1]>
        g (float[4, 10] x, float{bias_shape} b) => (float[4, 10] y) {{
            t = Add (x, b)
            y = Gelu (t)
        }}"""
    )
    result = rewrite(model, GELU)
    if bias_shape == "[10]":
        check_fired(model, result, {"ort_gelu_from_onnx_gelu": 1, "ort_bias_gelu": 1}, ["BiasGelu"])
    else:  # a 2-D bias: BiasGelu takes a 1-D one only
        check_fired(model, result, {"ort_gelu_from_onnx_gelu": 1}, ["Add", "Gelu"])


# -- FastGelu with the 0.5 on the bracket ---------------------------------------------------


def _tanh_gelu(half: float) -> object:
    return build(
        f"""<ir_version: 8, opset_import: ["" : 18, "com.microsoft" : 1]>
        g (float[4, 10] x) => (float[4, 10] y) {{
            three = Constant <value = int64 {{3}}> ()
            x3 = Pow (x, three)
            k = Constant <value = float {{0.044715}}> ()
            s = Mul (k, x3)
            a = Add (x, s)
            r = Constant <value = float {{0.7978845608}}> ()
            v = Mul (r, a)
            th = Tanh (v)
            one = Constant <value = float {{1.0}}> ()
            h = Add (th, one)
            half = Constant <value = float {{{half}}}> ()
            t = Mul (half, h)
            y = Mul (x, t)
        }}"""
    )


def test_fast_gelu_with_the_half_on_the_bracket():
    model = _tanh_gelu(0.5)
    result = rewrite(model, FAST_GELU_FORMS)
    check_fired(model, result, {"ort_fast_gelu_half_h": 1}, ["FastGelu"])


def test_fast_gelu_with_the_half_on_the_bracket_near_miss():
    # 0.49 times the bracket is no GELU
    assert not fired(rewrite(_tanh_gelu(0.49), FAST_GELU_FORMS))
