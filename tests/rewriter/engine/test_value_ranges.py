"""Value ranges (`rewriter.engine._ranges`) and the built-ins that read them."""

from __future__ import annotations

import math

import numpy as np
import onnx.parser
import pytest

import ir
from rewriter.engine import _ranges


def _values(text: str) -> dict[str, ir.Value]:
    model = ir.from_onnx(onnx.parser.parse_model(text))
    ir.infer_types(model)
    return {v.name: v for v in model.graph.values()}


SHAPES = """<ir_version: 8, opset_import: ["" : 17]>
g (float[N, 4] x, int64[2] free) => (int64[3] c, int64[3] d, int64 n) {
    s = Shape (x)
    i = Constant <value = int64 {0}> ()
    g0 = Gather <axis = 0> (s, i)
    a = Constant <value = int64[1] {0}> ()
    u = Unsqueeze (g0, a)
    m = Constant <value = int64[2] {-1, 7}> ()
    c = Concat <axis = 0> (u, m)
    d = Concat <axis = 0> (u, free)
    n = Size (x)
}"""


def test_sizes_are_never_negative_and_concat_takes_the_hull():
    values = _values(SHAPES)
    for name in ("s", "g0", "u", "n"):
        assert _ranges.value_range(values[name]).low == 0
    assert _ranges.value_range(values["m"]) == _ranges.ValueRange(-1, 7, False)
    assert _ranges.value_range(values["c"]).low == -1
    assert not _ranges.value_range(values["c"]).nan


def test_an_integer_input_holds_its_types_range_and_a_float_input_anything():
    values = _values(SHAPES)
    assert _ranges.value_range(values["free"]) == _ranges.ValueRange(
        float(np.iinfo(np.int64).min), float(np.iinfo(np.int64).max), False
    )
    assert _ranges.value_range(values["d"]).low == float(np.iinfo(np.int64).min)
    assert _ranges.value_range(values["x"]) == _ranges.UNBOUNDED


BERT_MASK = """<ir_version: 8, opset_import: ["" : 17]>
g (int64[B, S] mask, float[B, S] fmask) => (float[B, 1, 1, S] bias, float[B, 1, 1, S] fbias,
                                           float16[B, S] half) {
    axes = Constant <value = int64[2] {1, 2}> ()
    u = Unsqueeze (mask, axes)
    c = Cast <to = 1> (u)
    one = Constant <value = float {1.0}> ()
    keep = Sub (one, c)
    big = Constant <value = float {-10000.0}> ()
    bias = Mul (keep, big)
    fu = Unsqueeze (fmask, axes)
    fkeep = Sub (one, fu)
    fbias = Mul (fkeep, big)
    half = Cast <to = 10> (mask)
}"""


def test_berts_additive_mask_of_an_integer_mask_is_finite():
    values = _values(BERT_MASK)
    cast = _ranges.value_range(values["c"])
    assert cast.finite
    assert cast.low == pytest.approx(-9.223372e18)
    assert cast.low <= -(2.0**63)
    bias = _ranges.value_range(values["bias"])
    assert bias.finite
    assert bias.low <= -(2.0**63) * 10000
    assert bias.high >= 2.0**63 * 10000
    assert bias.low > -3.4e38


def test_a_float_mask_and_a_float16_cast_of_int64_are_not_finite():
    values = _values(BERT_MASK)
    assert not _ranges.value_range(values["fbias"]).finite
    half = _ranges.value_range(values["half"])
    assert half.low == -math.inf
    assert half.high == math.inf
    assert not half.nan


ARITHMETIC = """<ir_version: 8, opset_import: ["" : 17]>
g (float[N] x, int64[N] i) => (float[N] zx, float[N] root, float[N] inv, float[N] r,
                                float[N] q, int64[N] wrapped, float[N] p) {
    zero = Constant <value = float {0.0}> ()
    zx = Mul (x, zero)
    two = Constant <value = float {2.0}> ()
    sq = Pow (x, two)
    mean = ReduceMean <keepdims = 1> (sq)
    eps = Constant <value = float {1e-5}> ()
    ve = Add (mean, eps)
    root = Sqrt (ve)
    onef = Constant <value = float {1.0}> ()
    inv = Div (onef, root)
    r = Relu (x)
    f = Cast <to = 1> (i)
    q = Div (f, x)
    wrapped = Add (i, i)
    p = Softmax (r)
}"""


def test_zero_times_anything_may_be_nan():
    values = _values(ARITHMETIC)
    found = _ranges.value_range(values["zx"])
    assert found.nan
    assert found.low == 0
    assert found.high == 0


def test_rms_denominator_is_at_least_sqrt_epsilon_and_its_reciprocal_bounded():
    values = _values(ARITHMETIC)
    root = _ranges.value_range(values["root"])
    assert root.low == pytest.approx(math.sqrt(1e-5), rel=1e-5)
    assert root.low <= math.sqrt(1e-5)
    assert root.nan  # the square of a NaN input
    inv = _ranges.value_range(values["inv"])
    assert inv.low >= 0
    assert inv.high == pytest.approx(1 / math.sqrt(1e-5), rel=1e-5)


def test_relu_is_never_negative_and_softmax_of_unbounded_may_be_nan():
    values = _values(ARITHMETIC)
    assert _ranges.value_range(values["r"]).low == 0
    p = _ranges.value_range(values["p"])
    assert (p.low, p.high) == (0.0, 1.0)
    assert p.nan


def test_division_by_a_range_holding_zero_and_wrapping_integer_sums_are_unknown():
    values = _values(ARITHMETIC)
    assert not _ranges.value_range(values["q"]).finite
    info = np.iinfo(np.int64)
    assert _ranges.value_range(values["wrapped"]) == _ranges.ValueRange(
        float(info.min), float(info.max), False
    )
