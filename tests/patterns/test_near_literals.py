"""Constants that are close to a rule's value but not equal to it are not taken for it.

Issue 16, class 6: `Pow(x, 1.0000009537)` is not x (NaN for negative x), `Pow(d, 2.00001)` is
no square (a LayerNormalization fused from it turns NaN rows finite), `Mul(x, 1.0000008)` is not
x (26 at x = 3e7). Pattern literals match exactly after rounding to the constant's dtype, and so
do the library's `where` comparisons (the exponent of a square, sqrt(2) in GELU, 1/6 in
HardSwish, 1/m in HardSigmoid). Each near miss runs through the default library and must keep
the original's outputs bit for bit (nothing fires); each exact form still fuses.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx.numpy_helper
import pytest

import rewriter
from tests.helpers import model_from_text, op_types, session


def _model(body: str, dtype: str = "float", opset: int = 23, inits: str = "") -> onnx.ModelProto:
    """The model in float; in float16 its inputs, outputs and float constants become float16."""
    header = f'<ir_version: 10, opset_import: ["" : {opset}]>'
    block = f"<{inits}>" if inits else ""
    model = model_from_text(
        f"{header}\ng (float[2, 4] x) => (float[2, 4] y) {block} {{\n{body}\n}}"
    )
    if dtype == "float16":
        _to_float16(model)
        onnx.checker.check_model(model, full_check=True)
    return model


def _to_float16(model: onnx.ModelProto) -> None:
    for info in (*model.graph.input, *model.graph.output):
        info.type.tensor_type.elem_type = onnx.TensorProto.FLOAT16
    for index, tensor in enumerate(model.graph.initializer):
        if tensor.data_type == onnx.TensorProto.FLOAT:
            array = onnx.numpy_helper.to_array(tensor).astype(np.float16)
            model.graph.initializer[index].CopyFrom(
                onnx.numpy_helper.from_array(array, tensor.name)
            )


def _feeds(dtype: str) -> dict[str, np.ndarray]:
    values = np.array([[-3e7, -1.5, -0.0, 0.25], [3e7, 2.0, -7.0, 1e-3]])
    if dtype == "float16":
        values = np.clip(values, -6e4, 6e4)
    return {"x": values.astype(np.float16 if dtype == "float16" else np.float32)}


def _outputs(model: onnx.ModelProto, dtype: str) -> list[np.ndarray]:
    return session(model).run(None, _feeds(dtype))


LAYER_NORM = """
    mu = ReduceMean <keepdims = 1> (x, axes)
    d = Sub (x, mu)
    sq = Pow (d, e)
    var = ReduceMean <keepdims = 1> (sq, axes)
    ve = Add (var, eps)
    sd = Sqrt (ve)
    y = Div (d, sd)
"""
RMS_NORM = """
    sq = Pow (x, e)
    ms = ReduceMean <keepdims = 1> (sq, axes)
    me = Add (ms, eps)
    rt = Sqrt (me)
    y = Div (x, rt)
"""
GELU = """
    u = {op} (x, c)
    r = Erf (u)
    h = Add (r, one)
    t = Mul (x, h)
    y = Mul (t, half)
"""
HARD_SWISH_RELU6 = """
    t = Add (x, three)
    r = Clip (t, zero, six)
    p = Mul (x, r)
    y = {op} (p, k)
"""


def _norm_inits(dtype: str, exponent: float) -> str:
    return f"int64[1] axes = {{-1}}, {dtype} e = {{{exponent!r}}}, {dtype} eps = {{1e-5}}"


def _gelu_inits(dtype: str, c: float) -> str:
    return f"{dtype} c = {{{c!r}}}, {dtype} one = {{1.0}}, {dtype} half = {{0.5}}"


def _swish_inits(dtype: str, k: float) -> str:
    return (
        f"{dtype} three = {{3.0}}, {dtype} zero = {{0.0}}, {dtype} six = {{6.0}}, "
        f"{dtype} k = {{{k!r}}}"
    )


NEAR_MISSES = [
    ("y = Pow (x, e)", "float e = {1.0000009537}"),
    ("y = Mul (x, k)", "float k = {1.0000008}"),
    ("y = Div (x, k)", "float k = {0.99999994}"),
    (LAYER_NORM, _norm_inits("float", 2.00001)),
    (LAYER_NORM, _norm_inits("float", 1.99999)),
    (RMS_NORM, _norm_inits("float", 2.00001)),
    (GELU.format(op="Div"), _gelu_inits("float", 1.41421)),
    (GELU.format(op="Mul"), _gelu_inits("float", 0.7071)),
    (HARD_SWISH_RELU6.format(op="Div"), _swish_inits("float", 6.0001)),
    (HARD_SWISH_RELU6.format(op="Mul"), _swish_inits("float", 0.1667)),
    ("h = HardSigmoid <alpha = 0.1667, beta = 0.5> (x)\n y = Mul (x, h)", ""),
    ("h = HardSigmoid <alpha = 0.16666667, beta = 0.50001> (x)\n y = Mul (x, h)", ""),
]


@pytest.mark.parametrize(("body", "inits"), NEAR_MISSES)
def test_a_near_constant_is_not_taken_for_the_rules_value(body: str, inits: str) -> None:
    model = _model(body, inits=inits)
    result = rewriter.rewrite(model)
    fused = {"LayerNormalization", "RMSNormalization", "Gelu", "HardSwish"}
    assert not fused & set(op_types(result.proto)), op_types(result.proto)
    for want, have in zip(_outputs(model, "float"), _outputs(result.proto, "float"), strict=True):
        np.testing.assert_array_equal(have, want)


EXACT = [
    (LAYER_NORM, _norm_inits("float", 2.0), "float", "LayerNormalization"),
    (LAYER_NORM, _norm_inits("float", 2.0), "float16", "LayerNormalization"),
    (RMS_NORM, _norm_inits("float", 2.0), "float", "RMSNormalization"),
    (GELU.format(op="Div"), _gelu_inits("float", 1.4142135623730951), "float", "Gelu"),
    (GELU.format(op="Div"), _gelu_inits("float", 1.4142135623730951), "float16", "Gelu"),
    (GELU.format(op="Mul"), _gelu_inits("float", 0.7071067811865476), "float", "Gelu"),
    (HARD_SWISH_RELU6.format(op="Div"), _swish_inits("float", 6.0), "float", "HardSwish"),
    (HARD_SWISH_RELU6.format(op="Mul"), _swish_inits("float", 1 / 6), "float", "HardSwish"),
    (HARD_SWISH_RELU6.format(op="Mul"), _swish_inits("float", 1 / 6), "float16", "HardSwish"),
]


@pytest.mark.parametrize(("body", "inits", "dtype", "op"), EXACT)
def test_the_exact_constant_still_fuses(body: str, inits: str, dtype: str, op: str) -> None:
    model = _model(body, dtype=dtype, inits=inits)
    result = rewriter.rewrite(model)
    assert op in op_types(result.proto)
    rtol = 1e-2 if dtype == "float16" else 1e-5
    for want, have in zip(_outputs(model, dtype), _outputs(result.proto, dtype), strict=True):
        np.testing.assert_allclose(have, want, rtol=rtol, atol=rtol)
