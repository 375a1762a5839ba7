"""Rules of patterns/ort (opt-in com.microsoft contrib fusions): positive tests checked against
onnxruntime's own kernels, near misses, and the BERT / GPT-2 exports."""

from __future__ import annotations

import collections

import numpy as np
import onnx
import onnx.helper
import onnx.numpy_helper
import onnx.parser
import onnx.printer
import pytest

import ir
import rewriter
from tests.helpers import assert_same_outputs
from tests.patterns.fusion_helpers import (
    MODELS,
    ORT_RULES,
    build,
    check_fired,
    default_library,
    fired,
    manifest_entry,
    rewrite,
    run_npz_samples,
)
from tests.patterns.test_fusion_activations import gelu_tanh_factored_model

SLN = ORT_RULES / "skip_layer_norm.rw"
GELU = ORT_RULES / "gelu.rw"
MHA = ORT_RULES / "attention.rw"
FOLDING = rewriter.library_path() / "folding"


def _ms(opset: int = 17, ms: bool = True) -> str:
    domains = f'"" : {opset}' + (', "com.microsoft" : 1' if ms else "")
    return f"<ir_version: 8, opset_import: [{domains}]>"


# -- SkipLayerNormalization -----------------------------------------------------------------------


def sln_model(
    bias: bool = False,
    keep_sum: bool = False,
    x_shape: str = "B, S, 8",
    skip_shape: str = "B, S, 8",
    axis: int = -1,
    ms: bool = True,
    epsilon: float | None = 0.001,
) -> object:
    lines = []
    source = "x"
    if bias:
        lines.append("t = Add (x, bias)")
        source = "t"
    lines.append(f"s = Add ({source}, skip)")
    eps = "" if epsilon is None else f", epsilon = {epsilon}"
    lines.append(f"y = LayerNormalization <axis = {axis}{eps}> (s, gamma, beta)")
    outputs = "float[B, S, 8] y"
    if keep_sum:
        lines.append("r = Add (s, y)")
        outputs = "float[B, S, 8] r"
    body = "\n            ".join(lines)
    norm = (8,) if axis == -1 else (3, 8)
    return build(
        f"""{_ms(ms=ms)}
        g (float[{x_shape}] x, float[{skip_shape}] skip) => ({outputs}) {{
            {body}
        }}""",
        gamma=(norm, 0.5, 1.5),
        beta=(norm, -0.5, 0.5),
        **({"bias": ((8,), -0.5, 0.5)} if bias else {}),
    )


@pytest.mark.parametrize(
    ("bias", "keep_sum", "rule", "ops"),
    [
        (False, False, "fuse_skip_layer_normalization", ["SkipLayerNormalization"]),
        (False, True, "fuse_skip_layer_normalization_keep_sum", ["SkipLayerNormalization", "Add"]),
        (True, False, "fuse_skip_layer_normalization_bias", ["SkipLayerNormalization"]),
        (
            True,
            True,
            "fuse_skip_layer_normalization_bias_keep_sum",
            ["SkipLayerNormalization", "Add"],
        ),
    ],
)
def test_fuse_skip_layer_normalization(bias, keep_sum, rule, ops):
    model = sln_model(bias, keep_sum)
    check_fired(model, rewrite(model, SLN), {rule: 1}, ops)


@pytest.mark.parametrize(
    ("x_shape", "skip_shape"), [("B, S, 8", "1, S, 8"), ("1, S, 8", "B, S, 8")]
)
def test_fuse_skip_layer_normalization_with_a_broadcast_skip(x_shape, skip_shape):
    # either operand order: the full-shaped one becomes `input`, the broadcast one `skip`
    model = sln_model(x_shape=x_shape, skip_shape=skip_shape)
    check_fired(
        model, rewrite(model, SLN), {"fuse_skip_layer_normalization": 1}, ["SkipLayerNormalization"]
    )


@pytest.mark.parametrize(
    "kwargs",
    [
        # both operands broadcast: neither has the sum's shape (onnxruntime would return the
        # input's shape, or reject the skip)
        {"x_shape": "B, 1, 8", "skip_shape": "1, S, 8"},
        {"x_shape": "B, S, 8", "skip_shape": "B, N, 8"},  # the sum's shape is not provable
        {"x_shape": "B, S, 8", "skip_shape": "B, S, 1"},  # onnxruntime wants skip's last dims
        {"axis": 1},  # normalizes two axes
        {"ms": False},  # the model does not import com.microsoft
    ],
)
def test_fuse_skip_layer_normalization_near_misses(kwargs):
    assert not fired(rewrite(sln_model(**kwargs), SLN))


SSLN = ORT_RULES / "skip_simplified_layer_norm.rw"


def ssln_model(bias: str = "", keep_sum: bool = False, stash_type: int = 1) -> object:
    """SimplifiedLayerNormalization (onnxruntime's op) of x + skip, a bias before or after."""
    lines = {
        "": ["s = Add (x, skip)"],
        "pre": ["t = Add (x, bias)", "s = Add (t, skip)"],
        "post": ["u = Add (x, skip)", "s = Add (u, bias)"],
    }[bias]
    lines.append(
        "y = SimplifiedLayerNormalization <axis = -1, epsilon = 0.001, "
        f"stash_type = {stash_type}> (s, gamma)"
    )
    outputs = "float[B, S, 8] y"
    if keep_sum:
        lines.append("r = Add (s, y)")
        outputs = "float[B, S, 8] r"
    body = "\n            ".join(lines)
    inputs = "float[B, S, 8] x, float[B, S, 8] skip" + (", float[8] bias" if bias else "")
    return build(
        f"""{_ms(opset=18)}
        g ({inputs}) => ({outputs}) {{
            {body}
        }}""",
        check=False,  # onnx has no SimplifiedLayerNormalization
        gamma=((8,), 0.5, 1.5),
    )


@pytest.mark.parametrize(
    ("bias", "keep_sum", "rule", "ops"),
    [
        (
            "",
            False,
            "fuse_skip_simplified_layer_normalization",
            ["SkipSimplifiedLayerNormalization"],
        ),
        (
            "",
            True,
            "fuse_skip_simplified_layer_normalization_keep_sum",
            ["SkipSimplifiedLayerNormalization", "Add"],
        ),
        (
            "pre",
            False,
            "fuse_skip_simplified_layer_normalization_bias",
            ["SkipSimplifiedLayerNormalization"],
        ),
        (
            "post",
            False,
            "fuse_skip_simplified_layer_normalization_post_bias",
            ["SkipSimplifiedLayerNormalization"],
        ),
    ],
)
def test_fuse_skip_simplified_layer_normalization(bias, keep_sum, rule, ops):
    # onnxscript's and onnxruntime's fusers write SimplifiedLayerNormalization after an RMSNorm's
    # residual Add; the bias, a graph input here, is read at run time
    model = ssln_model(bias, keep_sum)
    result = rewrite(model, SSLN)
    check_fired(model, result, {rule: 1}, ops)
    assert all(e.approximate for e in result.trace.entries if e.rule == rule)


def test_fuse_skip_simplified_layer_normalization_near_miss_statistics_in_double():
    # stash_type 11 asks for double statistics, which the fused kernel does not compute
    assert not fired(rewrite(ssln_model(stash_type=11), SSLN))


SIMPLIFIED = ORT_RULES / "simplified_layer_norm.rw"


def rms_model(
    opset: int = 18,
    scale_first: bool = False,
    reciprocal: bool = False,
    half: bool = False,
    ms: bool = True,
) -> onnx.ModelProto:
    """x / sqrt(mean(x^2) + eps) * scale written out, scale a graph input (LLaMA's RMSNorm)."""
    dtype = "float16" if half else "float"
    lines = ["xf = Cast <to = 1> (x)"] if half else []
    wide = "xf" if half else "x"
    lines += [
        f"sq = Pow ({wide}, two)",
        "ms = ReduceMean <keepdims = 1> (sq, axes)",
        "me = Add (ms, eps)",
        "rt = Sqrt (me)",
    ]
    if reciprocal:
        lines += ["r = Reciprocal (rt)", f"n = Mul ({wide}, r)"]
    else:
        lines.append(f"n = Div ({wide}, rt)")
    if half:
        lines.append("nh = Cast <to = 10> (n)")
    normalized = "nh" if half else "n"
    lines.append(
        f"y = Mul (scale, {normalized})" if scale_first else f"y = Mul ({normalized}, scale)"
    )
    body = "\n            ".join(lines)
    return build(
        f"""{_ms(opset=opset, ms=ms)}
        g ({dtype}[B, S, 16] x, {dtype}[16] scale) => ({dtype}[B, S, 16] y) {{
            {body}
        }}""",
        two=np.array(2.0, np.float32),
        axes=np.array([-1], np.int64),
        eps=np.array([1e-6], np.float32),
    )


@pytest.mark.parametrize(
    ("kwargs", "rules"),
    [
        ({}, {"fuse_simplified_layer_normalization": 1}),
        ({"scale_first": True}, {"fuse_simplified_layer_normalization": 1}),
        ({"reciprocal": True}, {"fuse_simplified_layer_normalization_reciprocal": 1}),
        (
            {"half": True},
            {
                "fuse_simplified_layer_normalization": 1,
                "fuse_simplified_layer_normalization_in_float": 1,
            },
        ),
    ],
)
def test_fuse_simplified_layer_normalization(kwargs, rules):
    # onnxscript's RMSNorm fusion below opset 23: onnxruntime's op in the default domain, the
    # scale (a graph input, either side of the Mul) read by the op
    model = rms_model(**kwargs)
    result = rewrite(model, SIMPLIFIED)
    counts = {**rules, "absorb_scale_input_into_simplified_layer_normalization": 1}
    tolerance = {"rtol": 2e-3, "atol": 2e-3} if kwargs.get("half") else {}
    check_fired(model, result, counts, ["SimplifiedLayerNormalization"], **tolerance)
    (node,) = result.proto.graph.node
    assert node.domain == ""
    assert {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}["stash_type"] == 1


def test_a_constant_scale_goes_into_simplified_layer_normalization():
    model = rms_model()
    scale = onnx.numpy_helper.from_array(np.linspace(0.5, 1.5, 16, dtype=np.float32), "scale")
    del model.graph.input[1]
    model.graph.initializer.append(scale)
    result = rewrite(model, SIMPLIFIED)
    counts = {
        "fuse_simplified_layer_normalization": 1,
        "absorb_mul_into_simplified_layer_normalization": 1,
    }
    check_fired(model, result, counts, ["SimplifiedLayerNormalization"])


@pytest.mark.parametrize("kwargs", [{"opset": 23}, {"ms": False}])
def test_simplified_layer_normalization_near_misses(kwargs):
    # from opset 23 onnx's RMSNormalization is the op (fusion/rms_norm.rw); without the
    # com.microsoft import the model is not declared onnxruntime's, and onnxruntime's own op
    # in the default domain is written only for such models
    assert not fired(rewrite(rms_model(**kwargs), SIMPLIFIED))


def test_only_rules_for_onnxruntime_write_its_default_domain_ops(tmp_path):
    rules = tmp_path / "rms.rw"
    rules.write_text(
        "rule to_sln: y = Relu (x) => y = SimplifiedLayerNormalization <axis = -1> (x, ones([16]))\n"
    )
    model = rms_model()
    result = rewrite(model, rules)
    assert not fired(result)
    assert any("emits `SimplifiedLayerNormalization`" in s.reason for s in result.trace.skips)


def test_an_omitted_epsilon_becomes_explicit():
    # LayerNormalization's default epsilon is 1e-5, SkipLayerNormalization's 1e-12
    model = sln_model(epsilon=None)
    result = rewrite(model, SLN)
    check_fired(model, result, {"fuse_skip_layer_normalization": 1}, ["SkipLayerNormalization"])
    (node,) = result.proto.graph.node
    (epsilon,) = node.attribute
    assert epsilon.name == "epsilon"
    assert epsilon.f == pytest.approx(1e-5)


@pytest.mark.parametrize(
    ("attributes", "post_bias", "rule"),
    [
        ("<axis = -1>", False, "fuse_skip_layer_normalization"),
        # onnxruntime's GPT-2 generators omit the axis too: its default is the last
        ("", False, "fuse_skip_layer_normalization"),
        ("", True, "fuse_skip_layer_normalization_post_bias"),
    ],
)
def test_onnxruntimes_layer_normalization_below_opset_17_keeps_its_epsilon(
    attributes, post_bias, rule
):
    # onnxruntime registers LayerNormalization in the default domain below 17 (its generators
    # write it at 16); an omitted epsilon is its default 1e-5 there too
    normalized = "s"
    post = ""
    if post_bias:
        normalized = "t"
        post = "t = Add (s, bias)"
    model = onnx.parser.parse_model(
        f"""{_ms(16)}
        g (float[B, S, 8] x, float[B, S, 8] skip) => (float[B, S, 8] y) {{
            s = Add (x, skip)
            {post}
            y = LayerNormalization {attributes} ({normalized}, gamma, beta)
        }}"""
    )
    rng = np.random.default_rng(0)
    for name in ("gamma", "beta", "bias"):
        array = rng.uniform(0.5, 1.5, 8).astype(np.float32)
        model.graph.initializer.append(onnx.numpy_helper.from_array(array, name))
    result = rewrite(model, ORT_RULES / "skip_norm_bias.rw" if post_bias else SLN)
    assert dict(fired(result)) == {rule: 1}
    (node,) = result.proto.graph.node
    (epsilon,) = node.attribute
    assert epsilon.f == pytest.approx(1e-5)
    assert_same_outputs(model, result.proto, rtol=1e-4, atol=1e-5)


def test_absorb_affine_ops_into_skip_layer_normalization():
    model = build(
        f"""{_ms()}
        g (float[B, S, 8] x, float[B, S, 8] skip) => (float[B, S, 8] y) {{
            one = Constant <value = float[8] {{1, 1, 1, 1, 1, 1, 1, 1}}> ()
            n = com.microsoft.SkipLayerNormalization <epsilon = 0.001> (x, skip, one)
            m = Mul (n, gamma)
            y = Add (beta, m)
        }}""",
        gamma=((8,), 0.5, 1.5),
        beta=((8,), -0.5, 0.5),
    )
    result = rewrite(model, SLN)
    counts = {
        "absorb_mul_into_skip_layer_normalization": 1,
        "absorb_add_into_skip_layer_normalization": 1,
    }
    check_fired(model, result, counts, ["SkipLayerNormalization"])


# -- Gelu / BiasGelu / FastGelu -------------------------------------------------------------------


def gelu_model(
    form: str, bias_shape: tuple[int, ...] | None = None, opset: int = 17, ms: bool = True
) -> object:
    lines = []
    x = "x"
    if bias_shape is not None:
        lines.append("xb = Add (b, x)")
        x = "xb"
    erf_tail = [
        "e = Erf (u)",
        "one = Constant <value = float {1.0}> ()",
        "h = Add (e, one)",
        "half = Constant <value = float {0.5}> ()",
    ]
    tanh_tail = [
        "three = Constant <value = float {3.0}> ()",
        f"x3 = Pow ({x}, three)",
        "k = Constant <value = float {0.044715}> ()",
        "s = Mul (x3, k)",
        f"a = Add ({x}, s)",
        "c = Constant <value = float {0.7978846}> ()",
        "v = Mul (a, c)",
        "th = Tanh (v)",
        "one = Constant <value = float {1.0}> ()",
        "h = Add (th, one)",
        "half = Constant <value = float {0.5}> ()",
    ]
    sqrt2 = "c = Constant <value = float {1.4142135}> ()"
    forms = {
        "erf_mul_last": [
            sqrt2,
            f"u = Div ({x}, c)",
            *erf_tail,
            f"t = Mul ({x}, h)",
            "y = Mul (t, half)",
        ],
        "erf_half_x": [
            sqrt2,
            f"u = Div ({x}, c)",
            *erf_tail,
            f"t = Mul ({x}, half)",
            "y = Mul (t, h)",
        ],
        "erf_half_h": [
            sqrt2,
            f"u = Div ({x}, c)",
            *erf_tail,
            "t = Mul (h, half)",
            f"y = Mul ({x}, t)",
        ],
        "tanh_half_x": [*tanh_tail, f"t = Mul ({x}, half)", "y = Mul (t, h)"],
        "tanh_mul_last": [*tanh_tail, f"t = Mul ({x}, h)", "y = Mul (t, half)"],
        "onnx_gelu": [f"y = Gelu ({x})"],
        "onnx_gelu_tanh": [f'y = Gelu <approximate = "tanh"> ({x})'],
    }
    lines += forms[form]
    body = "\n            ".join(lines)
    return build(
        f"""{_ms(opset, ms)}
        g (float[B, 6] x) => (float[B, 6] y) {{
            {body}
        }}""",
        **({"b": (bias_shape, -0.5, 0.5)} if bias_shape is not None else {}),
    )


@pytest.mark.parametrize(
    ("form", "opset", "rule", "op"),
    [
        ("erf_mul_last", 17, "ort_gelu_erf_mul_last", "Gelu"),
        ("erf_half_x", 17, "ort_gelu_erf_half_x", "Gelu"),
        ("erf_half_h", 17, "ort_gelu_erf_half_h", "Gelu"),
        ("tanh_half_x", 17, "ort_fast_gelu_half_x", "FastGelu"),
        ("tanh_mul_last", 17, "ort_fast_gelu_mul_last", "FastGelu"),
        ("onnx_gelu", 20, "ort_gelu_from_onnx_gelu", "Gelu"),
        ("onnx_gelu_tanh", 20, "ort_fast_gelu_from_onnx_gelu", "FastGelu"),
    ],
)
def test_ort_gelu_forms(form, opset, rule, op):
    model = gelu_model(form, opset=opset)
    check_fired(model, rewrite(model, GELU), {rule: 1}, [op])


@pytest.mark.parametrize("opset", [17, 20])
def test_ort_fast_gelu_factored(opset):
    # HF's FastGELUActivation and Megatron's fast gelu: x * c * (1 + a * x * x) inside the tanh
    model = gelu_tanh_factored_model(opset=opset, ms=True)
    result = rewrite(model, GELU)
    check_fired(model, result, {"ort_fast_gelu_factored_half_x": 1}, ["FastGelu"])


@pytest.mark.parametrize("kwargs", [{"c3": 0.05}, {"inner": "xx_a"}, {"ms": False}])
def test_ort_fast_gelu_factored_near_misses(kwargs):
    assert not fired(rewrite(gelu_tanh_factored_model(opset=17, **kwargs), GELU))


@pytest.mark.parametrize(
    ("form", "opset", "rules", "op"),
    [
        ("erf_mul_last", 17, {"ort_gelu_erf_mul_last": 1, "ort_bias_gelu": 1}, "BiasGelu"),
        ("onnx_gelu", 20, {"ort_gelu_from_onnx_gelu": 1, "ort_bias_gelu": 1}, "BiasGelu"),
        ("tanh_half_x", 17, {"ort_fast_gelu_half_x": 1, "ort_bias_fast_gelu": 1}, "FastGelu"),
        (
            "onnx_gelu_tanh",
            20,
            {"ort_fast_gelu_from_onnx_gelu": 1, "ort_bias_fast_gelu": 1},
            "FastGelu",
        ),
    ],
)
def test_ort_bias_gelu(form, opset, rules, op):
    model = gelu_model(form, bias_shape=(6,), opset=opset)
    result = rewrite(model, GELU)
    check_fired(model, result, rules, [op])
    assert len(result.proto.graph.node[0].input) == 2


@pytest.mark.parametrize("bias_shape", [(1, 6), (1,)])
def test_ort_bias_gelu_near_misses_keep_the_add(bias_shape):
    # a 2-D bias, or a single element that BiasGelu would not broadcast
    model = gelu_model("erf_mul_last", bias_shape=bias_shape)
    result = rewrite(model, GELU)
    check_fired(model, result, {"ort_gelu_erf_mul_last": 1}, ["Add", "Gelu"])


def test_ort_bias_gelu_into_an_output_declared_with_a_stale_rank():
    # the declared output type says [10] where the graph computes [10, 10] (as in one of
    # onnxscript's tests); the fused op keeps what the graph computes, as the Gelu did
    model = onnx.parser.parse_model(
        """<ir_version: 10, opset_import: ["" : 20, "com.microsoft" : 1]>
        g (float[10, 10] x, float[10] b) => (float[10] y) {
            t = Add (x, b)
            y = Gelu (t)
        }"""
    )
    result = rewrite(model, GELU)
    check_fired(model, result, {"ort_gelu_from_onnx_gelu": 1, "ort_bias_gelu": 1}, ["BiasGelu"])


def test_ort_gelu_near_miss_double():
    # onnxruntime's CPU kernels take float only
    model = gelu_model("onnx_gelu", opset=20)
    text = onnx.printer.to_text(model).replace("float", "double")
    assert not fired(rewrite(onnx.parser.parse_model(text), GELU))


def test_ort_gelu_needs_the_com_microsoft_import():
    result = rewrite(gelu_model("erf_mul_last", ms=False), GELU)
    assert not fired(result)
    assert any("com.microsoft" in skip.reason for skip in result.trace.skips)


# -- MultiHeadAttention ---------------------------------------------------------------------------


def mha_model(
    opset: int = 17,
    mask: bool = True,
    split: str = "2, 3, 2, 4",
    kv_split: str = "2, 5, 2, 4",
    axis: int = -1,
    kv_len: int = 5,
) -> object:
    add_mask = "a = Add (ss, mask)" if mask else ""
    scores = "a" if mask else "ss"
    inputs = f"float[2, 3, 8] q, float[2, {kv_len}, 8] k, float[2, {kv_len}, 8] v"
    if mask:
        inputs += f", float[2, 1, 1, {kv_len}] mask"
    return build(
        f"""{_ms(opset)}
        g ({inputs}) => (float[2, 3, 8] y) {{
            qs = Constant <value = int64[4] {{{split}}}> ()
            ks = Constant <value = int64[4] {{{kv_split}}}> ()
            os = Constant <value = int64[3] {{2, 3, 8}}> ()
            qr = Reshape (q, qs)
            qh = Transpose <perm = [0, 2, 1, 3]> (qr)
            kr = Reshape (k, ks)
            kt = Transpose <perm = [0, 2, 3, 1]> (kr)
            vr = Reshape (v, ks)
            vh = Transpose <perm = [0, 2, 1, 3]> (vr)
            s = MatMul (qh, kt)
            c = Constant <value = float {{2.0}}> ()
            ss = Div (s, c)
            {add_mask}
            p = Softmax <axis = {axis}> ({scores})
            o = MatMul (p, vh)
            ot = Transpose <perm = [0, 2, 1, 3]> (o)
            y = Reshape (ot, os)
        }}"""
    )


@pytest.mark.parametrize(
    ("opset", "rule", "ops"),
    [
        (
            17,
            "fuse_multi_head_attention",
            ["Shape", "Shape", "Concat", "Expand", "MultiHeadAttention"],
        ),
        (
            14,
            "fuse_multi_head_attention_before_opset_15",
            ["Shape", "Gather", "Shape", "Gather", "Concat", "Expand", "MultiHeadAttention"],
        ),
    ],
)
def test_fuse_multi_head_attention(opset, rule, ops):
    model = mha_model(opset)
    result = rewrite(model, MHA)
    check_fired(model, result, {rule: 1}, None)
    assert [n.op_type for n in result.proto.graph.node if n.op_type != "Constant"] == ops


def test_fuse_multi_head_attention_no_mask():
    model = mha_model(mask=False)
    result = rewrite(model, MHA)
    check_fired(model, result, {"fuse_multi_head_attention_no_mask": 1}, None)
    assert [n.op_type for n in result.proto.graph.node if n.op_type != "Constant"] == [
        "MultiHeadAttention"
    ]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"split": "3, 2, 2, 4", "kv_split": "3, 2, 2, 4", "kv_len": 3, "mask": False},
        {"axis": 2},
        {"opset": 14, "axis": 2},
    ],
)
def test_fuse_multi_head_attention_near_misses(kwargs):
    # the reshapes swap batch and sequence (attention then runs over the batch); the Softmax
    # runs over the query axis
    assert not fired(rewrite(mha_model(**kwargs), MHA))


def bert_attention_model(
    qk: int = 8,
    v: int = 8,
    equal_weights: bool = False,
    same_input: bool = True,
    float_mask: bool = False,
) -> object:
    """BERT's self-attention block: Q, K, V projections of x, heads, additive mask from m.

    With `equal_weights` the three projections have equal weights and biases (onnxruntime's
    generators fill every weight with ones), which common subexpressions later merge.
    """
    heads = 2
    k_input = "x" if same_input else "x2"
    projections = [
        "q = MatMul (x, wq)",
        "qb = Add (q, bq)",
        f"k = MatMul ({k_input}, wk)",
        "kb = Add (k, bk)",
        "v = MatMul (x, wv)",
        "vb = Add (v, bv)",
    ]
    body = "\n            ".join(
        [
            *projections,
            f"qs = Constant <value = int64[4] {{0, 0, {heads}, {qk // heads}}}> ()",
            f"vs = Constant <value = int64[4] {{0, 0, {heads}, {v // heads}}}> ()",
            "qr = Reshape (qb, qs)",
            "qh = Transpose <perm = [0, 2, 1, 3]> (qr)",
            "kr = Reshape (kb, qs)",
            "kt = Transpose <perm = [0, 2, 3, 1]> (kr)",
            "vr = Reshape (vb, vs)",
            "vh = Transpose <perm = [0, 2, 1, 3]> (vr)",
            "s = MatMul (qh, kt)",
            "c = Constant <value = float {2.0}> ()",
            "ss = Div (s, c)",
            "axes = Constant <value = int64[2] {1, 2}> ()",
            "u = Unsqueeze (m, axes)",
            "mf = Cast <to = 1> (u)",
            "one = Constant <value = float {1.0}> ()",
            "keep = Sub (one, mf)",
            "big = Constant <value = float {-10000.0}> ()",
            "mask = Mul (keep, big)",
            "a = Add (ss, mask)",
            "pr = Softmax <axis = 3> (a)",
            "o = MatMul (pr, vh)",
            "ot = Transpose <perm = [0, 2, 1, 3]> (o)",
            f"os = Constant <value = int64[3] {{0, 0, {v}}}> ()",
            "y = Reshape (ot, os)",
        ]
    )
    mask_type = "float" if float_mask else "int64"
    extra = "" if same_input else ", float[B, S, 8] x2"
    arrays: dict[str, object] = {
        "wq": ((8, qk), -0.5, 0.5),
        "bq": ((qk,), -0.5, 0.5),
        "wk": ((8, qk), -0.5, 0.5),
        "bk": ((qk,), -0.5, 0.5),
        "wv": ((8, v), -0.5, 0.5),
        "bv": ((v,), -0.5, 0.5),
    }
    if equal_weights:
        rng = np.random.default_rng(3)
        weight = rng.uniform(-0.5, 0.5, (8, qk)).astype(np.float32)
        bias = rng.uniform(-0.5, 0.5, qk).astype(np.float32)
        arrays = {"wq": weight, "bq": bias, "wk": weight, "bk": bias, "wv": weight, "bv": bias}
    return build(
        f"""{_ms(17)}
        g (float[B, S, 8] x, {mask_type}[B, S] m{extra}) => (float[B, S, {v}] y) {{
            {body}
        }}""",
        **arrays,
    )


@pytest.mark.parametrize(
    ("kwargs", "rules"),
    [
        ({}, {"ort_attention_from_projections": 1}),
        ({"qk": 12, "v": 8}, {"ort_attention_from_projections": 1}),
        ({"qk": 8, "v": 12}, {"ort_attention_from_projections": 1}),
        ({"equal_weights": True}, {"ort_attention_from_projections": 1}),
    ],
)
def test_ort_attention_packs_the_projections(kwargs, rules):
    model = bert_attention_model(**kwargs)
    result = rewrite(model, MHA, FOLDING)
    assert {r: n for r, n in fired(result).items() if "attention" in r} == rules
    ir.verify(result.model)
    ops = [n.op_type for n in result.proto.graph.node]
    assert ops.count("Attention") == 1
    assert "MultiHeadAttention" not in ops
    assert "MatMul" not in ops
    assert_same_outputs(model, result.proto, rtol=1e-4, atol=1e-5)
    (node,) = (n for n in result.proto.graph.node if n.op_type == "Attention")
    sizes = next(a.ints for a in node.attribute if a.name == "qkv_hidden_sizes")
    assert list(sizes) == [kwargs.get("qk", 8), kwargs.get("qk", 8), kwargs.get("v", 8)]


def packed_mha_model(cuts: tuple[int, int, int, int] = (0, 16, 32, 48), steps: bool = False):
    """MultiHeadAttention of three Slices of one packed projection x W (W, bias graph inputs)."""
    first, second, third, end = cuts
    step = ", one" if steps else ""
    return build(
        f"""{_ms(opset=17)}
        g (float[B, S, 8] x, float[8, 48] w, float[48] b) => (float[B, S, {end - third}] y) {{
            p = MatMul (x, w)
            q = Slice (p, c{first}, c{second}, last{step})
            k = Slice (p, c{second}, c{third}, last{step})
            v = Slice (p, c{third}, c{end}, last{step})
            y = com.microsoft.MultiHeadAttention <num_heads = 2> (q, k, v, b)
        }}""",
        check=False,  # onnx has no schema for com.microsoft ops
        **{f"c{n}": np.array([n], np.int64) for n in sorted({first, second, third, end})},
        last=np.array([-1], np.int64),
        one=np.array([1], np.int64),
    )


@pytest.mark.parametrize("steps", [False, True])
def test_ort_attention_from_packed_projection(steps):
    # onnxscript's packed-QKV fusion: Attention projects x with the packed weight and adds
    # the packed bias to the three parts, as the Slices and MultiHeadAttention did
    model = packed_mha_model(steps=steps)
    result = rewrite(model, MHA)
    check_fired(model, result, {"ort_attention_from_packed_projection": 1}, ["Attention"])
    (node,) = result.proto.graph.node
    sizes = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    assert sizes["qkv_hidden_sizes"] == [16, 16, 16]


@pytest.mark.parametrize("cuts", [(0, 16, 24, 48), (0, 16, 32, 40), (0, 16, 33, 48)])
def test_ort_attention_from_packed_projection_near_misses(cuts):
    # Q and K of different widths (Attention requires one), V short of the weight's last
    # columns, a gap between K and V: no Attention computes that
    model = packed_mha_model(cuts)
    assert not fired(rewrite(model, MHA))


def packed_mha_past_model(
    past_order: tuple[int, int] = (0, 1), present_order: str = "uk, uv", split: bool = False
):
    """The packed projection's MultiHeadAttention with a past cut from onnxruntime's packed
    [2, B, heads, P, head_size] cache (two Slices of axis 0, or one Split) and the present
    packed back (Unsqueeze at 0, Concat on axis 0), as onnxscript's attention test writes it.
    `past_order` gives the cache entries read as past key and value."""
    key_at, value_at = past_order
    if split:
        cut = "k5, v5 = Split <axis = 0> (past)"
    else:
        cut = f"""k5 = Slice (past, c{key_at}, c{key_at + 1}, zero)
            v5 = Slice (past, c{value_at}, c{value_at + 1}, zero)"""
    return build(
        f"""{_ms(opset=17)}
        g (float[B, S, 8] x, float[8, 48] w, float[48] b, float[2, B, 2, P, 8] past)
            => (float[B, S, 16] y, float[2, B, 2, T, 8] present) {{
            p = MatMul (x, w)
            q = Slice (p, c0, c16, last)
            k = Slice (p, c16, c32, last)
            v = Slice (p, c32, c48, last)
            {cut}
            pk = Squeeze (k5, zero)
            pv = Squeeze (v5, zero)
            y, prk, prv = com.microsoft.MultiHeadAttention <num_heads = 2> (q, k, v, b, , , pk, pv)
            uk = Unsqueeze (prk, zero)
            uv = Unsqueeze (prv, zero)
            present = Concat <axis = 0> ({present_order})
        }}""",
        check=False,  # onnx has no schema for com.microsoft ops
        **{f"c{n}": np.array([n], np.int64) for n in (0, 1, 2, 16, 32, 48)},
        zero=np.array([0], np.int64),
        last=np.array([-1], np.int64),
    )


@pytest.mark.parametrize(
    ("split", "rule"),
    [
        (False, "ort_attention_from_packed_projection_with_past"),
        (True, "ort_attention_from_packed_projection_with_split_past"),
    ],
)
def test_ort_attention_from_packed_projection_with_past(split, rule):
    # onnxscript's attention_with_past fusion: Attention reads onnxruntime's packed cache as
    # its `past` and writes the packed `present`, as the Slices, Squeezes, MultiHeadAttention,
    # Unsqueezes and Concat did
    model = packed_mha_past_model(split=split)
    result = rewrite(model, MHA)
    check_fired(model, result, {rule: 1}, ["Attention"])
    (node,) = result.proto.graph.node
    assert list(node.input) == ["x", "w", "b", "", "past"]
    assert list(node.output) == ["y", "present"]


@pytest.mark.parametrize(
    ("past_order", "present_order"), [((1, 0), "uk, uv"), ((0, 1), "uv, uk"), ((0, 0), "uk, uv")]
)
def test_ort_attention_with_past_near_misses(past_order, present_order):
    # the cache's entries read as value and key, the present packed value first, the key's
    # entry read twice: Attention's past and present hold the key first, the value second
    model = packed_mha_past_model(past_order, present_order)
    result = rewrite(model, MHA)
    assert "Attention" not in [n.op_type for n in result.proto.graph.node]


def test_ort_attention_near_miss_keeps_mha_when_k_projects_another_input():
    model = bert_attention_model(same_input=False)
    result = rewrite(model, MHA, FOLDING)
    ops = [n.op_type for n in result.proto.graph.node]
    assert "MultiHeadAttention" in ops
    assert "Attention" not in ops
    assert_same_outputs(model, result.proto, rtol=1e-4, atol=1e-5)


# -- exported models ------------------------------------------------------------------------------


def _with_ms(name: str) -> onnx.ModelProto:
    path = MODELS / f"{name}.onnx"
    if not path.exists():
        pytest.skip(f"{name}.onnx is not in tests/models")
    model = onnx.load(path)
    model.opset_import.append(onnx.helper.make_opsetid("com.microsoft", 1))
    return model


def _contrib_ops(proto: onnx.ModelProto) -> collections.Counter[str]:
    return collections.Counter(n.op_type for n in proto.graph.node if n.domain == "com.microsoft")


def test_bert_ts17_gets_onnxruntime_fusions():
    result = rewriter.rewrite(_with_ms("bert_ts17"), [ORT_RULES])
    ir.verify(result.model)
    proto = result.proto
    # Attention with the Q, K, V projections packed, as onnxruntime's optimizer writes it: the
    # shape facts relate the mask's dims, [batch, 1, 1, sequence], to the projections' through
    # the exporter's Shape/Gather/Concat/Reshape chains
    # and the embeddings' LayerNorm too: its position embeddings, cut from a table of 128 rows,
    # are as long as the sequence, since the Add of the token embeddings fails otherwise
    assert _contrib_ops(proto) == {
        "SkipLayerNormalization": 13,
        "BiasGelu": 6,
        "Attention": 6,
    }
    assert collections.Counter(n.op_type for n in proto.graph.node)["LayerNormalization"] == 0
    run_npz_samples("bert_ts17", proto)


def test_bert_dynamo18_after_the_default_library_gets_every_onnxruntime_fusion():
    result = rewriter.rewrite(_with_ms("bert_dynamo18"), [*default_library(), ORT_RULES])
    ir.verify(result.model)
    proto = result.proto
    expected = manifest_entry("bert_dynamo18")["expected"]
    ops = _contrib_ops(proto)
    # the dynamo export transposes each projection's weight (too big to fold) before its
    # MatMul: those become FusedMatMul(transB = 1), the attention scores' MatMul does not
    fused_matmuls = ops.pop("FusedMatMul")
    assert ops == {
        "SkipLayerNormalization": expected["layernorm"],
        "BiasGelu": expected["gelu"],
        "MultiHeadAttention": expected["attention"],
    }
    assert fused_matmuls == 6 * expected["attention"]
    transposed = {n.output[0] for n in proto.graph.node if n.op_type == "Transpose"}
    matmuls = [n for n in proto.graph.node if n.op_type == "MatMul"]
    assert not [n.name for n in matmuls if transposed & set(n.input)]
    run_npz_samples("bert_dynamo18", proto)


def test_gpt2_ts17_gets_fast_gelu_and_skip_layer_norm():
    result = rewriter.rewrite(_with_ms("gpt2_ts17"), [ORT_RULES])
    ir.verify(result.model)
    ops = _contrib_ops(result.proto)
    assert ops["FastGelu"] == 4
    assert ops["SkipLayerNormalization"] >= 4
    run_npz_samples("gpt2_ts17", result.proto)


def test_ort_rules_do_nothing_without_the_com_microsoft_import():
    path = MODELS / "bert_ts17.onnx"
    result = rewriter.rewrite(str(path), [ORT_RULES])
    assert not fired(result)
