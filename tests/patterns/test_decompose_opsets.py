"""Decompositions for `--target-opset` below an op's opset: LayerNormalization (17), Gelu (20),
RMSNormalization (23), Attention (23).

Each rule: a model where it fires while converting down (the result is at the target opset,
passes onnx's full checker and ir.verify, and computes what the original computes under
onnxruntime with graph optimizations off), and near misses where it must not: no target
opset, or an attribute combination it does not cover (then the version converter, which has
no adapter for the op, reports it).
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx.parser
import pytest

import ir
import rewriter
from tests.helpers import session, symbol_sizes
from tests.patterns.decompose_helpers import DECOMPOSE, checked, fired, loaded_rules, op_types

RNG_SEED = 0


def _model(text: str) -> onnx.ModelProto:
    model = onnx.parser.parse_model(text)
    onnx.checker.check_model(model, full_check=True)
    return model


def _feeds(model: onnx.ModelProto, seed: int = RNG_SEED) -> dict[str, np.ndarray]:
    """Random inputs: symbolic dims 2, 3, ... (one size per symbol); bool inputs ~70% true;
    `mask` floats carry -inf."""
    rng = np.random.default_rng(seed)
    sizes = symbol_sizes(model, 2)
    feeds = {}
    for vi in model.graph.input:
        tt = vi.type.tensor_type
        shape = [
            d.dim_value if d.HasField("dim_value") else sizes.get(d.dim_param, 2)
            for d in tt.shape.dim
        ]
        dtype = onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type)
        if dtype == np.bool_:
            feeds[vi.name] = rng.random(shape) < 0.7
        else:
            feeds[vi.name] = rng.standard_normal(shape).astype(dtype)
        if vi.name == "mask" and dtype != np.bool_:
            feeds[vi.name][rng.random(shape) < 0.3] = -np.inf
    return feeds


def _assert_same(original: onnx.ModelProto, rewritten: onnx.ModelProto, atol: float) -> None:
    for seed in range(3):
        feeds = _feeds(original, seed)
        expected = session(original).run(None, feeds)
        got = session(rewritten).run(None, feeds)
        for x, y in zip(expected, got, strict=True):
            assert x.dtype == y.dtype
            assert x.shape == y.shape
            np.testing.assert_allclose(
                y.astype(np.float64), x.astype(np.float64), rtol=1e-4, atol=atol
            )


def _decompose(model: onnx.ModelProto, target: int | None) -> rewriter.RewriteResult:
    return rewriter.rewrite(
        model, loaded_rules(DECOMPOSE), rewriter.RewriteOptions(target_opset=target)
    )


def _decomposition_rules(result: rewriter.RewriteResult) -> list[str]:
    return [name for name in fired(result) if name.startswith("decompose_")]


def _opset(proto: onnx.ModelProto) -> int:
    (version,) = [o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")]
    return version


def _header(opset: int) -> str:
    ir_version = 10 if opset >= 23 else 9
    return f'<ir_version: {ir_version}, opset_import: ["" : {opset}]>'


def _graph(inputs: str, outputs: str, node: str) -> str:
    """ONNX text of a one-node graph; `T` stands for the dtype `_build` fills in."""
    return f"g ({inputs}) => ({outputs}) {{ {node} }}"


# -- positive cases ----------------------------------------------------------------------------

LN_BIAS = _graph(
    "T[B, 3, 8] x, T[8] scale, T[8] bias",
    "T[B, 3, 8] y",
    "y = LayerNormalization <epsilon = 0.01> (x, scale, bias)",
)
LN_AXIS1 = _graph(
    "T[B, 3, 8] x, T[3, 8] scale", "T[B, 3, 8] y", "y = LayerNormalization <axis = 1> (x, scale)"
)
NORM_OPS = ["ReduceMean", "Sub", "Mul", "ReduceMean", "Add", "Sqrt", "Div"]

# (rule, source opset, body (T = dtype), dtype, target, expected ops, atol)
POSITIVE = [
    ("decompose_layer_normalization", 17, LN_BIAS, "float", 14, [*NORM_OPS, "Mul", "Add"], 1e-5),
    ("decompose_layer_normalization_no_bias", 17, LN_AXIS1, "float", 16, [*NORM_OPS, "Mul"], 1e-5),
    (
        "decompose_layer_normalization_axes_input",
        18,
        LN_BIAS,
        "float",
        14,
        [*NORM_OPS, "Mul", "Add"],
        1e-5,
    ),
    (
        "decompose_layer_normalization_no_bias_axes_input",
        18,
        LN_AXIS1,
        "float",
        16,
        [*NORM_OPS, "Mul"],
        1e-5,
    ),
    (
        "decompose_layer_normalization_in_float",
        17,
        LN_BIAS,
        "float16",
        14,
        ["Cast", *NORM_OPS, "Cast", "Mul", "Add"],
        2e-3,
    ),
    (
        "decompose_layer_normalization_in_float_no_bias",
        17,
        LN_AXIS1,
        "float16",
        15,
        ["Cast", *NORM_OPS, "Cast", "Mul"],
        2e-3,
    ),
    (
        "decompose_layer_normalization_in_float_axes_input",
        18,
        LN_BIAS,
        "float16",
        16,
        ["Cast", *NORM_OPS, "Cast", "Mul", "Add"],
        2e-3,
    ),
    (
        "decompose_layer_normalization_in_float_no_bias_axes_input",
        18,
        LN_AXIS1,
        "float16",
        14,
        ["Cast", *NORM_OPS, "Cast", "Mul"],
        2e-3,
    ),
    (
        "decompose_gelu",
        20,
        _graph("T[B, 3, 8] x", "T[B, 3, 8] y", "y = Gelu (x)"),
        "float",
        17,
        ["Mul", "Erf", "Add", "Mul", "Mul"],
        1e-6,
    ),
    (
        "decompose_gelu",
        20,
        _graph("T[B, 3, 8] x", "T[B, 3, 8] y", "y = Gelu (x)"),
        "float16",
        14,
        ["Mul", "Erf", "Add", "Mul", "Mul"],
        2e-3,
    ),
    (
        "decompose_gelu_tanh",
        20,
        _graph("T[B, 3, 8] x", "T[B, 3, 8] y", 'y = Gelu <approximate = "tanh"> (x)'),
        "float",
        19,
        ["Mul", "Mul", "Mul", "Add", "Mul", "Tanh", "Add", "Mul", "Mul"],
        1e-6,
    ),
    (
        "decompose_gelu_tanh",
        20,
        _graph("T[B, 3, 8] x", "T[B, 3, 8] y", 'y = Gelu <approximate = "tanh"> (x)'),
        "float16",
        14,
        ["Mul", "Mul", "Mul", "Add", "Mul", "Tanh", "Add", "Mul", "Mul"],
        2e-3,
    ),
    (
        "decompose_rms_normalization",
        23,
        _graph(
            "T[B, 3, 8] x, T[8] scale",
            "T[B, 3, 8] y",
            "y = RMSNormalization <epsilon = 0.01> (x, scale)",
        ),
        "float",
        17,
        ["Mul", "ReduceMean", "Add", "Sqrt", "Div", "Mul"],
        1e-5,
    ),
    (
        "decompose_rms_normalization",
        23,
        _graph(
            "T[B, 3, 8] x, T[3, 8] scale",
            "T[B, 3, 8] y",
            "y = RMSNormalization <axis = -2> (x, scale)",
        ),
        "float",
        22,
        ["Mul", "ReduceMean", "Add", "Sqrt", "Div", "Mul"],
        1e-5,
    ),
    (
        "decompose_rms_normalization_in_float",
        23,
        _graph("T[B, 3, 8] x, T[8] scale", "T[B, 3, 8] y", "y = RMSNormalization (x, scale)"),
        "float16",
        14,
        ["Cast", "Mul", "ReduceMean", "Add", "Sqrt", "Div", "Cast", "Mul"],
        2e-3,
    ),
]

ATTENTION_IO = "T[B, 2, 3, 4] q, T[B, 2, 5, 4] k, T[B, 2, 5, 6] v"
SCORES = ["Mul", "Mul", "Transpose", "MatMul"]
POSITIVE += [
    (
        "decompose_attention",
        23,
        _graph(f"{ATTENTION_IO}", "T[B, 2, 3, 6] y", "y = Attention (q, k, v)"),
        "float",
        17,
        [*SCORES, "Softmax", "MatMul"],
        1e-5,
    ),
    (
        "decompose_attention",
        23,
        _graph(f"{ATTENTION_IO}", "T[B, 2, 3, 6] y", "y = Attention <scale = 0.3> (q, k, v)"),
        "float16",
        14,
        [*SCORES, "Softmax", "MatMul"],
        2e-3,
    ),
    (
        "decompose_attention_with_mask",
        23,
        _graph(
            f"{ATTENTION_IO}, T[B, 1, 3, 5] mask",
            "T[B, 2, 3, 6] y",
            "y = Attention (q, k, v, mask)",
        ),
        "float",
        14,
        [*SCORES, "Equal", "Where", "Add", "Softmax", "IsInf", "Where", "MatMul"],
        1e-5,
    ),
    (
        "decompose_attention_with_bool_mask",
        23,
        _graph(
            f"{ATTENTION_IO}, bool[3, 5] mask",
            "T[B, 2, 3, 6] y",
            "y = Attention <scale = 0.5> (q, k, v, mask)",
        ),
        "float",
        18,
        [*SCORES, "Where", "Softmax", "Where", "MatMul"],
        1e-5,
    ),
    (
        "decompose_attention_causal",
        23,
        _graph(f"{ATTENTION_IO}", "T[B, 2, 3, 6] y", "y = Attention <is_causal = 1> (q, k, v)"),
        "float",
        17,
        [*SCORES, "Add", "Softmax", "MatMul"],
        1e-5,
    ),
]


def _build(opset: int, body: str, dtype: str) -> onnx.ModelProto:
    return _model(_header(opset) + "\n" + body.replace("T[", f"{dtype}["))


@pytest.mark.parametrize(
    ("rule", "opset", "body", "dtype", "target", "ops", "atol"),
    POSITIVE,
    ids=[f"{p[0]}-{p[3]}-{p[1]}to{p[4]}" for p in POSITIVE],
)
def test_rule_decomposes_for_a_lower_target(rule, opset, body, dtype, target, ops, atol):
    model = _build(opset, body, dtype)
    result = _decompose(model, target)
    proto = checked(result)
    assert _decomposition_rules(result) == [rule]
    assert _opset(proto) == target
    assert op_types(proto) == ops
    _assert_same(model, proto, atol)


def test_fully_masked_attention_rows_give_zeros_like_onnxruntime():
    body = _graph(
        f"{ATTENTION_IO}, bool[B, 1, 3, 5] mask", "T[B, 2, 3, 6] y", "y = Attention (q, k, v, mask)"
    )
    model = _build(23, body, "float")
    proto = checked(_decompose(model, 17))
    feeds = _feeds(model)
    feeds["mask"][:, :, 1, :] = False
    expected = session(model).run(None, feeds)[0]
    got = session(proto).run(None, feeds)[0]
    assert not np.isnan(got).any()
    assert np.all(got[:, :, 1, :] == 0)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


def test_causal_attention_is_decomposed_only_where_inputs_are_assumed_finite():
    # onnxruntime's kernel adds the dtype's lowest value (finite) at the masked positions, not
    # -inf: with key 0 at -inf, query 0's one visible score is -inf and the kernel averages
    # the later keys' values, where Softmax over the decomposition's -inf bias gives NaN.
    body = _graph(f"{ATTENTION_IO}", "T[B, 2, 3, 6] y", "y = Attention <is_causal = 1> (q, k, v)")
    model = _build(23, body, "float")
    result = _decompose(model, 17)
    proto = checked(result)
    assert [(e.rule, e.assumed) for e in result.trace.entries if e.kind == "rule"] == [
        ("decompose_attention_causal", ("finite",))
    ]
    feeds = _feeds(model)
    feeds["q"][..., 0] = np.abs(feeds["q"][..., 0]) + 0.5
    feeds["k"][:, :, 0, 0] = -np.inf
    expected = session(model).run(None, feeds)[0]
    got = session(proto).run(None, feeds)[0]
    assert np.isfinite(expected).all()
    assert np.isnan(got[:, :, 0]).all()
    np.testing.assert_allclose(got[:, :, 1:], expected[:, :, 1:], rtol=1e-4, atol=1e-5)
    # an exact run leaves the Attention to the converter, which has no adapter for it
    exact = rewriter.RewriteOptions(target_opset=17, exact=True)
    with pytest.raises(ir.ConversionError, match="No Previous Version of Attention"):
        rewriter.rewrite(model, loaded_rules(DECOMPOSE), exact)


# -- near misses -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rule", "opset", "body", "dtype", "target", "ops", "atol"),
    POSITIVE,
    ids=[f"{p[0]}-{p[3]}-{p[1]}" for p in POSITIVE],
)
def test_rule_does_not_fire_without_a_target_opset(rule, opset, body, dtype, target, ops, atol):
    model = _build(opset, body, dtype)
    result = _decompose(model, None)
    assert _decomposition_rules(result) == []
    skip_reasons = {s.rule: s.reason for s in result.trace.skips}
    assert "requires opset ai.onnx <" in skip_reasons[rule]
    assert op_types(checked(result)) == op_types(model)


# (what the near miss is, source opset, body, dtype, target, op left for the converter)
UNSUPPORTED = [
    (
        "LayerNormalization with its Mean output used",
        17,
        _graph(
            "T[B, 3, 8] x, T[8] s",
            "T[B, 3, 8] y, T[B, 3, 1] mu",
            "y, mu = LayerNormalization (x, s)",
        ),
        "float",
        16,
        "LayerNormalization",
    ),
    (
        "LayerNormalization computing in double",
        17,
        _graph(
            "T[B, 3, 8] x, T[8] s",
            "T[B, 3, 8] y",
            "y = LayerNormalization <stash_type = 11> (x, s)",
        ),
        "float",
        16,
        "LayerNormalization",
    ),
    (
        "RMSNormalization of double",
        23,
        _graph("T[B, 3, 8] x, T[8] s", "T[B, 3, 8] y", "y = RMSNormalization (x, s)"),
        "double",
        22,
        "RMSNormalization",
    ),
    (
        "grouped-query Attention",
        23,
        _graph(
            "T[B, 4, 3, 4] q, T[B, 2, 5, 4] k, T[B, 2, 5, 6] v",
            "T[B, 4, 3, 6] y",
            "y = Attention (q, k, v)",
        ),
        "float",
        22,
        "Attention",
    ),
    (
        "Attention with softcap",
        23,
        _graph(f"{ATTENTION_IO}", "T[B, 2, 3, 6] y", "y = Attention <softcap = 2.0> (q, k, v)"),
        "float",
        22,
        "Attention",
    ),
    (
        "Attention mask shorter than the keys (the op pads it)",
        23,
        _graph(f"{ATTENTION_IO}, T[3, 4] mask", "T[B, 2, 3, 6] y", "y = Attention (q, k, v, mask)"),
        "float",
        22,
        "Attention",
    ),
    (
        "causal Attention with a symbolic query length",
        23,
        _graph(
            "T[B, 2, S, 4] q, T[B, 2, S, 4] k, T[B, 2, S, 6] v",
            "T[B, 2, S, 6] y",
            "y = Attention <is_causal = 1> (q, k, v)",
        ),
        "float",
        22,
        "Attention",
    ),
    (
        "Attention with its present key/value outputs",
        23,
        _graph(
            f"{ATTENTION_IO}",
            "T[B, 2, 3, 6] y, T[B, 2, 5, 4] pk, T[B, 2, 5, 6] pv",
            "y, pk, pv = Attention (q, k, v)",
        ),
        "float",
        22,
        "Attention",
    ),
]


@pytest.mark.parametrize(
    ("what", "opset", "body", "dtype", "target", "op"), UNSUPPORTED, ids=[u[0] for u in UNSUPPORTED]
)
def test_unsupported_case_is_left_for_the_converter(what, opset, body, dtype, target, op):
    model = _build(opset, body, dtype)
    with pytest.raises(ir.ConversionError, match=f"No Previous Version of {op}"):
        _decompose(model, target)
    # the same model at its own opset: nothing fires and it still runs
    result = _decompose(model, None)
    assert _decomposition_rules(result) == []
    assert op in op_types(checked(result))


def test_layer_normalization_of_unknown_rank_is_left_for_the_converter():
    body = _graph("T[B, 3, 8] x, T[8] s", "T[B, 3, 8] y", "y = LayerNormalization (x, s)")
    model = _build(17, body, "float")
    model.graph.input[0].type.tensor_type.ClearField("shape")
    model.graph.output[0].type.tensor_type.ClearField("shape")
    with pytest.raises(ir.ConversionError, match="No Previous Version of LayerNormalization"):
        _decompose(model, 16)
