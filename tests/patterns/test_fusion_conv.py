"""Rules of patterns/fusion/conv_batchnorm.rw, conv.rw and gemm.rw: each fires where it should
(count, op sequence, ir.verify, same outputs under onnxruntime) and not on a near miss."""

from __future__ import annotations

import numpy as np
import onnx.helper
import pytest

from tests.patterns.fusion_helpers import FUSION, build, check_fired, fired, rewrite

BN = FUSION / "conv_batchnorm.rw"
CONV = FUSION / "conv.rw"
GEMM = FUSION / "gemm.rw"


def _bn_arrays(channels: int, prefix: str = "") -> dict[str, tuple]:
    return {
        f"{prefix}scale": ((channels,), 0.5, 1.5),
        f"{prefix}shift": ((channels,), -1.0, 1.0),
        f"{prefix}mean": ((channels,), -1.0, 1.0),
        f"{prefix}var": ((channels,), 0.1, 2.0),
    }


# -- BatchNormalization into Conv ----------------------------------------------------------------

DSL_EXAMPLE = """
# patterns/fusion/conv_batchnorm.rw
# Fold an inference BatchNormalization into the Conv that feeds it.
rule fold_batchnorm_into_conv priority 10 {
  match {
    y = Conv <...> (x, w, b?) as conv
    z = BatchNormalization <epsilon = eps> (y, scale, shift, mean, var)
  }
  where {
    is_const(w, scale, shift, mean, var)
    b == none or is_const(b)
    uses(y) == 1
  }
  rewrite {
    let k  = scale / sqrt(var + eps)
    let w2 = w * reshape(k, [-1] + [1] * (rank(w) - 1))
    let b2 = (b ?? zeros_like(shift)) * k + shift - mean * k
    z = Conv <...conv> (x, w2, b2)
  }
}
"""


def _conv_bn(bias: bool = True, group: int = 1, opset: int = 14, extra_use: bool = False) -> object:
    b = ", b" if bias else ""
    out = ", float[N, 6, 6, 6] y" if extra_use else ""
    return build(
        f"""<ir_version: 8, opset_import: ["" : {opset}]>
        g (float[N, 4, 8, 8] x) => (float[N, 6, 6, 6] z{out}) {{
            y = Conv <group = {group}, kernel_shape = [3, 3]> (x, w{b})
            z = BatchNormalization <epsilon = 0.001> (y, scale, shift, mean, var)
        }}""",
        w=((6, 4 // group, 3, 3), -1.0, 1.0),
        **({"b": ((6,), -1.0, 1.0)} if bias else {}),
        **_bn_arrays(6),
    )


@pytest.mark.parametrize(("bias", "group"), [(True, 1), (False, 1), (True, 2)])
def test_fold_batchnorm_into_conv(bias, group):
    model = _conv_bn(bias, group)
    check_fired(model, rewrite(model, BN), {"fold_batchnorm_into_conv": 1}, ["Conv"])


def test_dsl_example_rule_works_as_written(tmp_path):
    path = tmp_path / "conv_batchnorm.rw"
    path.write_text(DSL_EXAMPLE)
    for model in (_conv_bn(True), _conv_bn(False, opset=9)):
        check_fired(model, rewrite(model, path), {"fold_batchnorm_into_conv": 1}, ["Conv"])


def test_fold_batchnorm_into_conv_near_misses():
    # the Conv output is also a graph output: folding would change it
    assert not fired(rewrite(_conv_bn(extra_use=True), BN))
    # a BatchNormalization in training mode uses batch statistics
    model = _conv_bn()
    model.graph.node[1].attribute.append(onnx.helper.make_attribute("training_mode", 1))
    assert not fired(rewrite(model, BN))
    # the scale is a graph input, not a constant
    text = """<ir_version: 8, opset_import: ["" : 14]>
        g (float[N, 4, 8, 8] x, float[6] scale) => (float[N, 6, 6, 6] z) {
            y = Conv <kernel_shape = [3, 3]> (x, w)
            z = BatchNormalization (y, scale, shift, mean, var)
        }"""
    arrays = _bn_arrays(6)
    del arrays["scale"]
    assert not fired(rewrite(build(text, w=((6, 4, 3, 3), -1, 1), **arrays), BN))


# -- BatchNormalization into ConvTranspose -------------------------------------------------------


def _conv_transpose_bn(group: int, bias: bool = True, c_in: int = 4, c_out: int = 6) -> object:
    b = ", b" if bias else ""
    return build(
        f"""<ir_version: 8, opset_import: ["" : 14]>
        g (float[N, {c_in}, 5, 5] x) => (float[N, {c_out}, 7, 7] z) {{
            y = ConvTranspose <group = {group}, kernel_shape = [3, 3]> (x, w{b})
            z = BatchNormalization <epsilon = 0.00001> (y, scale, shift, mean, var)
        }}""",
        w=((c_in, c_out // group, 3, 3), -1.0, 1.0),
        **({"b": ((c_out,), -1.0, 1.0)} if bias else {}),
        **_bn_arrays(c_out),
    )


@pytest.mark.parametrize(("group", "bias"), [(1, True), (1, False), (2, True)])
def test_fold_batchnorm_into_conv_transpose(group, bias):
    model = _conv_transpose_bn(group, bias)
    check_fired(
        model, rewrite(model, BN), {"fold_batchnorm_into_conv_transpose": 1}, ["ConvTranspose"]
    )


def test_fold_batchnorm_into_conv_transpose_with_groups_of_several_rows():
    # 2 groups of 3 input channels each, 2 output channels per group: scaling along axis 0
    # (like Conv) or ignoring the groups would both give wrong outputs here.
    model = _conv_transpose_bn(2, True, c_in=6, c_out=4)
    check_fired(
        model, rewrite(model, BN), {"fold_batchnorm_into_conv_transpose": 1}, ["ConvTranspose"]
    )


def test_fold_batchnorm_into_conv_transpose_near_miss():
    text = """<ir_version: 8, opset_import: ["" : 14]>
        g (float[N, 4, 5, 5] x, float[4, 6, 3, 3] w) => (float[N, 6, 7, 7] z) {
            y = ConvTranspose <kernel_shape = [3, 3]> (x, w)
            z = BatchNormalization (y, scale, shift, mean, var)
        }"""
    assert not fired(rewrite(build(text, **_bn_arrays(6)), BN))  # weights are an input


# -- BatchNormalization into Gemm / MatMul -------------------------------------------------------


@pytest.mark.parametrize(
    ("trans_b", "with_c", "beta"), [(0, True, 1.0), (1, True, 0.5), (1, False, 1.0)]
)
def test_fold_batchnorm_into_gemm(trans_b, with_c, beta):
    shape = (6, 5) if trans_b else (5, 6)
    c = ", c" if with_c else ""
    model = build(
        f"""<ir_version: 8, opset_import: ["" : 14]>
        g (float[N, 5] a) => (float[N, 6] z) {{
            y = Gemm <transB = {trans_b}, alpha = 0.75, beta = {beta}> (a, bw{c})
            z = BatchNormalization <epsilon = 0.01> (y, scale, shift, mean, var)
        }}""",
        bw=(shape, -1.0, 1.0),
        **({"c": ((6,), -1.0, 1.0)} if with_c else {}),
        **_bn_arrays(6),
    )
    check_fired(model, rewrite(model, BN), {"fold_batchnorm_into_gemm": 1}, ["Gemm"])


def test_fold_batchnorm_into_matmul():
    model = build(
        """<ir_version: 8, opset_import: ["" : 14]>
        g (float[N, 5] a) => (float[N, 6] z) {
            y = MatMul (a, w)
            z = BatchNormalization (y, scale, shift, mean, var)
        }""",
        w=((5, 6), -1.0, 1.0),
        **_bn_arrays(6),
    )
    check_fired(model, rewrite(model, BN), {"fold_batchnorm_into_matmul": 1}, ["MatMul", "Add"])


def test_fold_batchnorm_into_matmul_add_prefers_the_larger_fusion():
    model = build(
        """<ir_version: 8, opset_import: ["" : 14]>
        g (float[N, 5] a) => (float[N, 6] z) {
            y = MatMul (a, w)
            t = Add (b, y)
            z = BatchNormalization (t, scale, shift, mean, var)
        }""",
        w=((5, 6), -1.0, 1.0),
        b=((6,), -1.0, 1.0),
        **_bn_arrays(6),
    )
    check_fired(model, rewrite(model, BN), {"fold_batchnorm_into_matmul_add": 1}, ["MatMul", "Add"])
    # with gemm.rw too, MatMul + Add becomes a Gemm first (the Add is visited before the
    # BatchNormalization) and the BatchNormalization then folds into the Gemm
    result = rewrite(model, BN, GEMM)
    check_fired(model, result, {"matmul_add_to_gemm": 1, "fold_batchnorm_into_gemm": 1}, ["Gemm"])


def test_fold_batchnorm_into_matmul_near_miss_on_3d_activation():
    # BatchNormalization normalizes axis 1 (the sequence here), not MatMul's output columns
    model = build(
        """<ir_version: 8, opset_import: ["" : 14]>
        g (float[N, 6, 5] a) => (float[N, 6, 6] z) {
            y = MatMul (a, w)
            z = BatchNormalization (y, scale, shift, mean, var)
        }""",
        w=((5, 6), -1.0, 1.0),
        **_bn_arrays(6),
    )
    assert not fired(rewrite(model, BN))


# -- Mul / Add into BatchNormalization -------------------------------------------------------------


def _shared_conv_bn_then(op: str, const_shape: tuple[int, ...], opset: int = 14) -> object:
    """Conv -> BN -> op(const), the Conv also read by a Relu (so BN cannot fold into it)."""
    return build(
        f"""<ir_version: 8, opset_import: ["" : {opset}]>
        g (float[N, 4, 8, 8] x) => (float[N, 6, 6, 6] z, float[N, 6, 6, 6] r) {{
            y = Conv <kernel_shape = [3, 3]> (x, w)
            n = BatchNormalization <epsilon = 0.001> (y, scale, shift, mean, var)
            z = {op} (n, c)
            r = Relu (y)
        }}""",
        w=((6, 4, 3, 3), -1.0, 1.0),
        c=(const_shape, -1.5, 1.5),
        **_bn_arrays(6),
    )


@pytest.mark.parametrize("const_shape", [(1, 6, 1, 1), (6, 1, 1), (), (1,)])
@pytest.mark.parametrize("op", ["Mul", "Add"])
def test_fold_mul_and_add_into_batchnorm(op, const_shape):
    model = _shared_conv_bn_then(op, const_shape)
    rule = "fold_mul_into_batchnorm" if op == "Mul" else "fold_add_into_batchnorm"
    check_fired(model, rewrite(model, BN), {rule: 1}, ["Conv", "Relu", "BatchNormalization"])


def test_batchnorm_scale_layer_folds_whole():
    """Caffe's BatchNorm + Scale (Mul then Add) after a Conv with other readers: one BN left."""
    model = build(
        """<ir_version: 8, opset_import: ["" : 9]>
        g (float[N, 4, 8, 8] x) => (float[N, 6, 6, 6] z, float[N, 6, 6, 6] r) {
            y = Conv <kernel_shape = [3, 3]> (x, w)
            n = BatchNormalization <epsilon = 0.00001> (y, scale, shift, mean, var)
            m = Mul (n, s)
            z = Add (m, c)
            r = Relu (y)
        }""",
        w=((6, 4, 3, 3), -1.0, 1.0),
        s=((6, 1, 1), -2.0, 2.0),
        c=((6, 1, 1), -1.0, 1.0),
        **_bn_arrays(6),
    )
    result = rewrite(model, BN)
    check_fired(
        model,
        result,
        {"fold_mul_into_batchnorm": 1, "fold_add_into_batchnorm": 1},
        ["Conv", "Relu", "BatchNormalization"],
    )


@pytest.mark.parametrize("op", ["Mul", "Add"])
@pytest.mark.parametrize("const_shape", [(1, 6, 6, 1), (1, 1, 1, 6), (6,), (1, 1, 6, 1, 1)])
def test_mul_add_into_batchnorm_near_misses_broadcast_along_other_axes(op, const_shape):
    out = "float[N, 6, 6, 6] z" if len(const_shape) <= 4 else "float[1, N, 6, 6, 6] z"
    model = build(
        f"""<ir_version: 8, opset_import: ["" : 14]>
        g (float[N, 6, 6, 6] x) => ({out}) {{
            n = BatchNormalization (x, scale, shift, mean, var)
            z = {op} (n, c)
        }}""",
        c=(const_shape, 0.5, 1.5),
        **_bn_arrays(6),
    )
    assert not fired(rewrite(model, BN))


def test_mul_into_batchnorm_near_miss_when_the_bn_output_has_another_use():
    model = build(
        """<ir_version: 8, opset_import: ["" : 14]>
        g (float[N, 6, 6, 6] x) => (float[N, 6, 6, 6] z, float[N, 6, 6, 6] n) {
            n = BatchNormalization (x, scale, shift, mean, var)
            z = Mul (n, c)
        }""",
        c=((6, 1, 1), 0.5, 1.5),
        **_bn_arrays(6),
    )
    assert not fired(rewrite(model, BN))


def test_mul_into_batchnorm_near_miss_on_a_non_constant_scale():
    model = build(
        """<ir_version: 8, opset_import: ["" : 14]>
        g (float[N, 6, 6, 6] x, float[6, 1, 1] c) => (float[N, 6, 6, 6] z) {
            n = BatchNormalization (x, scale, shift, mean, var)
            z = Mul (n, c)
        }""",
        **_bn_arrays(6),
    )
    assert not fired(rewrite(model, BN))


# -- Conv + Add / Mul ------------------------------------------------------------------------------


def _conv_then(op: str, const_shape: tuple[int, ...], bias: bool = True, c_out: int = 6) -> object:
    b = ", b" if bias else ""
    return build(
        f"""<ir_version: 8, opset_import: ["" : 14]>
        g (float[N, 4, 8, 8] x) => (float[N, {c_out}, 8, 8] z) {{
            y = Conv <kernel_shape = [3, 3], pads = [1, 1, 1, 1]> (x, w{b})
            z = {op} (c, y)
        }}""",
        w=((c_out, 4, 3, 3), -1.0, 1.0),
        c=(const_shape, 0.5, 1.5),
        **({"b": ((c_out,), -1.0, 1.0)} if bias else {}),
    )


@pytest.mark.parametrize(
    ("const_shape", "bias"), [((1, 6, 1, 1), True), ((6, 1, 1), False), ((1,), True), ((), False)]
)
def test_fold_add_into_conv_bias(const_shape, bias):
    model = _conv_then("Add", const_shape, bias)
    check_fired(model, rewrite(model, CONV), {"fold_add_into_conv_bias": 1}, ["Conv"])


@pytest.mark.parametrize(
    ("const_shape", "bias"), [((1, 6, 1, 1), True), ((6, 1, 1), False), ((), True)]
)
def test_fold_mul_into_conv_weights(const_shape, bias):
    model = _conv_then("Mul", const_shape, bias)
    check_fired(model, rewrite(model, CONV), {"fold_mul_into_conv_weights": 1}, ["Conv"])


def _mul_then_conv(const_shape: tuple[int, ...], bias: bool = True) -> object:
    b = ", b" if bias else ""
    return build(
        f"""<ir_version: 8, opset_import: ["" : 14]>
        g (float[N, 4, 8, 8] x) => (float[N, 6, 8, 8] z) {{
            t = Mul (x, c)
            z = Conv <kernel_shape = [3, 3], pads = [1, 1, 1, 1]> (t, w{b})
        }}""",
        w=((6, 4, 3, 3), -1.0, 1.0),
        c=(const_shape, 0.5, 1.5),
        **({"b": ((6,), -1.0, 1.0)} if bias else {}),
    )


@pytest.mark.parametrize(("const_shape", "bias"), [((), True), ((1,), False), ((1, 1, 1, 1), True)])
def test_fold_input_mul_into_conv_weights(const_shape, bias):
    model = _mul_then_conv(const_shape, bias)
    check_fired(model, rewrite(model, CONV), {"fold_input_mul_into_conv_weights": 1}, ["Conv"])


def test_fold_input_mul_into_conv_weights_near_miss_per_channel_scale():
    # a scale per input channel would scale the weights' second axis, not done here
    assert not fired(rewrite(_mul_then_conv((1, 4, 1, 1)), CONV))


def _conv_transpose_then_add(const_shape: tuple[int, ...], group: int = 1, bias: bool = True):
    b = ", b" if bias else ""
    return build(
        f"""<ir_version: 8, opset_import: ["" : 14]>
        g (float[N, 4, 5, 5] x) => (float[N, 6, 10, 10] z) {{
            y = ConvTranspose <kernel_shape = [2, 2], strides = [2, 2], group = {group}> (x, w{b})
            z = Add (y, c)
        }}""",
        w=((4, 6 // group, 2, 2), -1.0, 1.0),
        c=(const_shape, 0.5, 1.5),
        **({"b": ((6,), -1.0, 1.0)} if bias else {}),
    )


@pytest.mark.parametrize(
    ("const_shape", "group", "bias"),
    [((1, 6, 1, 1), 1, True), ((6, 1, 1), 2, False), ((1, 1, 1, 1), 1, False), ((), 2, True)],
)
def test_fold_add_into_conv_transpose_bias(const_shape, group, bias):
    model = _conv_transpose_then_add(const_shape, group, bias)
    check_fired(
        model, rewrite(model, CONV), {"fold_add_into_conv_transpose_bias": 1}, ["ConvTranspose"]
    )


def test_fold_add_into_conv_transpose_bias_near_miss_along_a_spatial_axis():
    assert not fired(rewrite(_conv_transpose_then_add((1, 1, 1, 10)), CONV))


@pytest.mark.parametrize("op", ["Add", "Mul"])
@pytest.mark.parametrize("const_shape", [(1, 6, 8, 1), (1, 1, 1, 8), (6,), (1, 1, 6, 1, 1)])
def test_conv_add_mul_near_misses_broadcast_along_other_axes(op, const_shape):
    text_out = "float[N, 6, 8, 8] z" if len(const_shape) <= 4 else "float[1, N, 6, 8, 8] z"
    if const_shape == (6,):
        # [6] broadcasts along the last (spatial) axis of size 8: use 8 channels and a 6-wide image
        model = build(
            """<ir_version: 8, opset_import: ["" : 14]>
            g (float[N, 4, 6, 6] x) => (float[N, 8, 6, 6] z) {
                y = Conv <kernel_shape = [3, 3], pads = [1, 1, 1, 1]> (x, w)
                z = OP (y, c)
            }""".replace("OP", op),
            w=((8, 4, 3, 3), -1.0, 1.0),
            c=((6,), 0.5, 1.5),
        )
    else:
        model = build(
            f"""<ir_version: 8, opset_import: ["" : 14]>
            g (float[N, 4, 8, 8] x) => ({text_out}) {{
                y = Conv <kernel_shape = [3, 3], pads = [1, 1, 1, 1]> (x, w)
                z = {op} (y, c)
            }}""",
            w=((6, 4, 3, 3), -1.0, 1.0),
            c=(const_shape, 0.5, 1.5),
        )
    assert not fired(rewrite(model, CONV))


def test_conv_add_near_miss_when_the_conv_output_has_another_use():
    model = build(
        """<ir_version: 8, opset_import: ["" : 14]>
        g (float[N, 4, 8, 8] x) => (float[N, 6, 8, 8] z, float[N, 6, 8, 8] r) {
            y = Conv <kernel_shape = [3, 3], pads = [1, 1, 1, 1]> (x, w)
            z = Add (y, c)
            r = Relu (y)
        }""",
        w=((6, 4, 3, 3), -1.0, 1.0),
        c=((1, 6, 1, 1), 0.5, 1.5),
    )
    assert not fired(rewrite(model, CONV))


# -- Pad into Conv ---------------------------------------------------------------------------------


def _pad_conv(
    pads: list[int],
    opset: int = 14,
    value: float = 0.0,
    mode: str = "constant",
    conv_pads: str = "pads = [1, 0, 1, 0], ",
    auto_pad: str = "",
) -> object:
    h = 8 + pads[2] + pads[6]
    w = 8 + pads[3] + pads[7]
    out_h = h + (2 if "pads" in conv_pads else 0) - 2
    out_w = w - 2
    if "SAME" in auto_pad:
        out_h, out_w = h, w
    if opset >= 11:
        pad_line = f"""pv = Constant <value = int64[8] {{{", ".join(map(str, pads))}}}> ()
            cv = Constant <value = float {{{value}}}> ()
            p = Pad <mode = "{mode}"> (x, pv, cv)"""
    else:
        pad_line = f"""p = Pad <mode = "{mode}", pads = [{", ".join(map(str, pads))}], value = {value}> (x)"""
    return build(
        f"""<ir_version: 7, opset_import: ["" : {opset}]>
        g (float[N, 4, 8, 8] x) => (float[N, 6, {out_h}, {out_w}] y) {{
            {pad_line}
            y = Conv <{conv_pads}{auto_pad}kernel_shape = [3, 3]> (p, w, b)
        }}""",
        w=((6, 4, 3, 3), -1.0, 1.0),
        b=((6,), -1.0, 1.0),
    )


@pytest.mark.parametrize("opset", [14, 18])
def test_fold_pad_into_conv(opset):
    model = _pad_conv([0, 0, 1, 2, 0, 0, 3, 0], opset)
    check_fired(model, rewrite(model, CONV), {"fold_pad_into_conv": 1}, ["Conv"])


@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER", "VALID"])
def test_fold_pad_into_conv_with_auto_pad(auto_pad):
    # the Conv's own padding is made explicit for the padded input's static dims first
    model = _pad_conv([0, 0, 1, 2, 0, 0, 3, 0], conv_pads="", auto_pad=f'auto_pad = "{auto_pad}", ')
    result = rewrite(model, CONV)
    check_fired(model, result, {"fold_pad_into_conv": 1}, ["Conv"])
    attrs = {a.name: a for a in result.proto.graph.node[0].attribute}
    assert attrs["auto_pad"].s == b"NOTSET"


@pytest.mark.parametrize("conv_pads", ["", "pads = [1, 0, 1, 0], "])
def test_fold_pad_attribute_into_conv(conv_pads):
    # with the Conv's own pads the two lists add elementwise (a list + list bug concatenated them)
    model = _pad_conv([0, 0, 1, 2, 0, 0, 3, 0], opset=10, conv_pads=conv_pads)
    check_fired(model, rewrite(model, CONV), {"fold_pad_attribute_into_conv": 1}, ["Conv"])


@pytest.mark.parametrize(
    "kwargs",
    [
        {"pads": [0, 1, 1, 1, 0, 0, 1, 1]},  # pads the channel axis
        {"pads": [0, 0, 1, 1, 0, 0, 1, 1], "value": 1.0},  # pads with ones
        {"pads": [0, 0, 1, 1, 0, 0, 1, 1], "mode": "reflect"},
        {"pads": [0, 0, 1, 1, 0, 0, 1, 1], "opset": 10, "value": 2.0, "conv_pads": ""},
    ],
)
def test_fold_pad_into_conv_near_misses(kwargs):
    assert not fired(rewrite(_pad_conv(**kwargs), CONV))


def test_fold_pad_into_conv_near_miss_negative_pads():
    model = build(
        """<ir_version: 8, opset_import: ["" : 14]>
        g (float[N, 4, 8, 8] x) => (float[N, 6, 5, 6] y) {
            pv = Constant <value = int64[8] {0, 0, -1, 0, 0, 0, 0, 0}> ()
            p = Pad (x, pv)
            y = Conv <kernel_shape = [3, 3]> (p, w)
        }""",
        w=((6, 4, 3, 3), -1.0, 1.0),
    )
    assert not fired(rewrite(model, CONV))


def _pad_axes_conv(pads: list[int], axes: list[int]) -> object:
    """Pad (opset 18, with `axes`) of a [N, 4, 8, 8] input, then a 3x3 Conv."""
    full = [0] * 8
    for i, axis in enumerate(axes):
        full[axis % 4] = pads[i]
        full[axis % 4 + 4] = pads[i + len(axes)]
    h = 8 + full[2] + full[6] - 2
    w = 8 + full[3] + full[7] - 2
    channels = 4 + full[1] + full[5]
    return build(
        f"""<ir_version: 8, opset_import: ["" : 18]>
        g (float[N, 4, 8, 8] x) => (float[N, 6, {h}, {w}] y) {{
            pv = Constant <value = int64[{len(pads)}] {{{", ".join(map(str, pads))}}}> ()
            ax = Constant <value = int64[{len(axes)}] {{{", ".join(map(str, axes))}}}> ()
            p = Pad (x, pv, , ax)
            y = Conv <kernel_shape = [3, 3]> (p, w)
        }}""",
        w=((6, channels, 3, 3), -1.0, 1.0),
    )


@pytest.mark.parametrize(
    ("pads", "axes"), [([1, 2, 3, 0], [-2, 3]), ([0, 2, 2, 0, 2, 2], [1, -2, -1])]
)
def test_fold_pad_with_axes_into_conv(pads, axes):
    model = _pad_axes_conv(pads, axes)
    check_fired(model, rewrite(model, CONV), {"fold_pad_into_conv": 1}, ["Conv"])


def test_fold_pad_with_axes_into_conv_near_miss_channel_axis():
    # axis 1 is the channels: Conv cannot pad them
    assert not fired(rewrite(_pad_axes_conv([1, 1], [1]), CONV))


def _pad_conv_integer(pad_value: str, zero_point: str) -> object:
    """Pad of a uint8 [N, 3, 6, 6] input by `pad_value` (a name, or "" for the default 0),
    then ConvInteger with `zero_point` as its x_zero_point ("" for none)."""
    pad_inputs = f"x, pv, {pad_value}" if pad_value else "x, pv"
    conv_inputs = f"p, w, {zero_point}" if zero_point else "p, w"
    return build(
        f"""<ir_version: 8, opset_import: ["" : 18]>
        g (uint8[N, 3, 6, 6] x) => (int32[N, 2, 8, 10] y) {{
            pv = Constant <value = int64[8] {{0, 0, 1, 2, 0, 0, 2, 3}}> ()
            cv = Constant <value = uint8 {{7}}> ()
            zero = Constant <value = uint8 {{0}}> ()
            xz = Constant <value = uint8 {{7}}> ()
            p = Pad ({pad_inputs})
            y = ConvInteger <kernel_shape = [3, 3], pads = [1, 1, 0, 0]> ({conv_inputs})
        }}""",
        w=np.arange(54, dtype=np.uint8).reshape(2, 3, 3, 3) % 11,
    )


@pytest.mark.parametrize(("pad_value", "zero_point"), [("", ""), ("zero", ""), ("cv", "xz")])
def test_fold_pad_into_conv_integer(pad_value, zero_point):
    # ConvInteger pads with its x_zero_point: a Pad of that value (0 without one) goes in
    model = _pad_conv_integer(pad_value, zero_point)
    check_fired(
        model, rewrite(model, CONV), {"fold_pad_into_conv_integer": 1}, None, rtol=0, atol=0
    )
    assert [
        n.op_type for n in rewrite(model, CONV).proto.graph.node if n.op_type != "Constant"
    ] == ["ConvInteger"]


@pytest.mark.parametrize(("pad_value", "zero_point"), [("cv", ""), ("zero", "xz")])
def test_fold_pad_into_conv_integer_near_miss_other_value(pad_value, zero_point):
    # the Pad writes another value than the zero point ConvInteger pads with
    assert not fired(rewrite(_pad_conv_integer(pad_value, zero_point), CONV))


# -- MatMul + Add -> Gemm --------------------------------------------------------------------------


@pytest.mark.parametrize("bias_shape", [(6,), (1, 6)])
def test_matmul_add_to_gemm(bias_shape):
    model = build(
        """<ir_version: 8, opset_import: ["" : 14]>
        g (float[N, 5] a) => (float[N, 6] z) {
            y = MatMul (a, w)
            z = Add (c, y)
        }""",
        w=((5, 6), -1.0, 1.0),
        c=(bias_shape, -1.0, 1.0),
    )
    check_fired(model, rewrite(model, GEMM), {"matmul_add_to_gemm": 1}, ["Gemm"])


@pytest.mark.parametrize(
    ("a_shape", "bias_shape", "out_shape"),
    [("N, 3, 5", "6", "N, 3, 6"), ("N, 5", "3, 6", "3, 6")],
)
def test_matmul_add_to_gemm_near_misses(a_shape, bias_shape, out_shape):
    # a 3-D activation; a constant bias that is not a row vector
    model = build(
        f"""<ir_version: 8, opset_import: ["" : 14]>
        g (float[{a_shape}] a) => (float[{out_shape}] z) {{
            y = MatMul (a, w)
            z = Add (y, c)
        }}""",
        w=((5, 6), -1.0, 1.0),
        c=(tuple(int(d) for d in bias_shape.split(",")), -1.0, 1.0),
    )
    assert not fired(rewrite(model, GEMM))


@pytest.mark.parametrize("bias_shape", ["N, 6", "6", "1, 6", "N, 1"])
def test_matmul_add_to_gemm_computed_bias(bias_shape):
    # onnxoptimizer's fuse_matmul_add_bias_into_gemm: a, B and the bias are graph inputs
    model = build(
        f"""<ir_version: 8, opset_import: ["" : 14]>
        g (float[N, 5] a, float[5, 6] b, float[{bias_shape}] c) => (float[N, 6] z) {{
            y = MatMul (a, b)
            z = Add (c, y)
        }}"""
    )
    check_fired(model, rewrite(model, GEMM), {"matmul_add_to_gemm_computed_bias": 1}, ["Gemm"])


@pytest.mark.parametrize(
    ("a_shape", "bias_shape", "out_shape"),
    [("1, 5", "M, 6", "M, 6"), ("N, 5", "N, 2, 6", "N, 2, 6"), ("N, 3, 5", "6", "N, 3, 6")],
)
def test_matmul_add_to_gemm_computed_bias_near_misses(a_shape, bias_shape, out_shape):
    # the bias grows the product (Gemm's C broadcasts one way only); a 3-D bias; 3-D a
    model = build(
        f"""<ir_version: 8, opset_import: ["" : 14]>
        g (float[{a_shape}] a, float[5, 6] b, float[{bias_shape}] c) => (float[{out_shape}] z) {{
            y = MatMul (a, b)
            z = Add (y, c)
        }}"""
    )
    assert not fired(rewrite(model, GEMM))


def test_results_are_deterministic():
    model = _conv_bn()
    first = rewrite(model, BN).proto.SerializeToString()
    assert first == rewrite(model, BN).proto.SerializeToString()


# -- generated (ConstantOfShape) weights, kept compact -------------------------------------------


def _splat_conv_bn(convs: int = 1, then: str = "") -> object:
    """x -> Conv(x, ConstantOfShape([6, 4, 3, 3], 0.02)) -> BN, `convs` times on one splat."""
    lines = [
        "s = Constant <value = int64[4] {6, 4, 3, 3}> ()",
        "w = ConstantOfShape <value = float[1] {0.02}> (s)",
    ]
    outputs = []
    for i in range(convs):
        lines += [
            f"y{i} = Conv <kernel_shape = [3, 3], pads = [1, 1, 1, 1]> (x, w)",
            f"z{i} = BatchNormalization <epsilon = 0.001> (y{i}, scale, shift, mean, var)",
        ]
        outputs.append(f"float[N, 6, 8, 8] z{i}")
    body = "\n            ".join(lines)
    return build(
        f"""<ir_version: 8, opset_import: ["" : 14]>
        g (float[N, 4, 8, 8] x) => ({", ".join(outputs)}) {{
            {body}{then}
        }}""",
        **_bn_arrays(6),
    )


def test_fold_batchnorm_into_conv_with_splat_weights_keeps_them_compact():
    model = _splat_conv_bn()
    result = rewrite(model, BN)
    check_fired(
        model, result, {"fold_batchnorm_into_conv_splat_weights": 1}, ["Constant", "Expand", "Conv"]
    )
    # the file holds one number per output channel, not the 6 x 4 x 3 x 3 kernel
    sizes = sorted(int(onnx.numpy_helper.to_array(t).size) for t in result.proto.graph.initializer)
    assert sizes == [6, 6]  # the column and the bias (the shape stays a Constant node)


def test_fold_batchnorm_into_convs_sharing_splat_weights():
    model = _splat_conv_bn(convs=2)
    result = rewrite(model, BN)
    counts = {
        "fold_batchnorm_into_conv_shared_splat_weights": 1,
        "fold_batchnorm_into_conv_splat_weights": 1,
    }
    check_fired(model, result, counts, ["Constant", "Expand", "Conv", "Expand", "Conv"])


def test_mul_and_add_after_the_folded_conv_go_into_column_and_bias():
    # Caffe's BatchNorm + Scale (light_inception_v2): the Scale's Mul and Add follow the
    # folded BatchNormalization
    body = """
            m = Constant <value = float[6, 1, 1] {0.5, 1.5, -2, 3, 0.25, 1}> ()
            a = Constant <value = float[6, 1, 1] {1, -1, 2, 0, 0.5, 3}> ()
            u = Mul (z0, m)
            v = Add (u, a)"""
    model = _splat_conv_bn(then=body)
    model.graph.output[0].name = "v"
    result = rewrite(model, BN, CONV)
    counts = {
        "fold_batchnorm_into_conv_splat_weights": 1,
        "fold_mul_into_conv_expanded_weights": 1,
        "fold_add_into_conv_bias": 1,
    }
    check_fired(model, result, counts, ["Constant", "Expand", "Conv"])


def test_splat_weights_near_misses():
    # the Conv output has another reader
    model = _splat_conv_bn(then="\n            r = Relu (y0)")
    model.graph.output.append(onnx.helper.make_tensor_value_info("r", 1, None))
    assert not fired(rewrite(model, BN))
    # a column that varies along another axis than the output channels
    col = build(
        """<ir_version: 8, opset_import: ["" : 14]>
        g (float[N, 4, 8, 8] x) => (float[N, 6, 6, 6] z) {
            s = Constant <value = int64[4] {6, 4, 3, 3}> ()
            c = Constant <value = float[1, 4, 1, 1] {1, 2, 3, 4}> ()
            w = Expand (c, s)
            y = Conv <kernel_shape = [3, 3]> (x, w)
            k = Constant <value = float[6, 1, 1] {1, 2, 3, 4, 5, 6}> ()
            z = Mul (y, k)
        }"""
    )
    assert not fired(rewrite(col, CONV))


# -- a constant added to a Conv's input ----------------------------------------------------------

AFFINE = FUSION / "conv_affine.rw"


def _add_then_conv(conv_attrs: str = "", c: float = 3.0) -> object:
    return build(
        f"""<ir_version: 8, opset_import: ["" : 17]>
        g (float[N, 3, 8, 8] x) => (float[N, 4, 6, 6] y) {{
            t = Add (x, c)
            y = Conv <kernel_shape = [3, 3]{conv_attrs}> (t, w, b)
        }}""",
        w=((4, 3, 3, 3), -1.0, 1.0),
        b=((4,), -1.0, 1.0),
        c=np.float32(c),
    )


@pytest.mark.parametrize("conv_attrs", ["", ", pads = [0, 0, 0, 0]", ', auto_pad = "VALID"'])
def test_add_before_an_unpadded_conv_goes_into_its_bias(conv_attrs):
    model = _add_then_conv(conv_attrs)
    result = rewrite(model, AFFINE)
    check_fired(model, result, {"fold_add_into_conv_input": 1}, ["Conv"])
    assert result.trace.entries[0].assumed


def test_add_before_a_padded_conv_stays():
    # the padded border sees 0, not x + c
    model = build(
        """<ir_version: 8, opset_import: ["" : 17]>
        g (float[N, 3, 8, 8] x) => (float[N, 4, 8, 8] y) {
            t = Add (x, c)
            y = Conv <kernel_shape = [3, 3], pads = [1, 1, 1, 1]> (t, w, b)
        }""",
        w=((4, 3, 3, 3), -1.0, 1.0),
        b=((4,), -1.0, 1.0),
        c=np.float32(3.0),
    )
    assert not fired(rewrite(model, AFFINE))
