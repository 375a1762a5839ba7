"""The prover's elementwise semantics equals onnxruntime's CPU kernels bit for bit.

Each op runs on onnxruntime (optimizations off) and on the semantics (z3 evaluating the same
constant inputs) over NaN, infinities, signed zeros, subnormals, the dtype's extremes and
ordinary values (every pair of them for binary ops); outputs must have the same bits, NaN
matching NaN. Where onnxruntime has no kernel for a type, the case is skipped.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.rewriter.prove._ort import FLOATS, assert_bitwise, pairs, special_values

INTEGERS = (np.int32, np.int64, np.int8, np.uint8)


def _ints(dtype) -> np.ndarray:
    info = np.iinfo(dtype)
    values = [0, 1, 2, 3, 7, -1, -2, -7, int(info.max), int(info.min), int(info.min) + 1]
    return np.array([v for v in values if info.min <= v <= info.max], dtype=dtype)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
def test_binary_float_ops(op, dtype):
    a, b = pairs(special_values(dtype))
    assert_bitwise(op, [a, b])


# Min and Max of +0 and -0 give either zero in onnxruntime, by code path (its vectorized
# kernels and its scalar ones differ, and float16 differs from float32): zeros are compared as
# numbers there. NaN propagation and every other value are bit for bit.


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", ["Max", "Min"])
def test_min_max_propagate_nan(op, dtype):
    a, b = pairs(special_values(dtype))
    assert_bitwise(op, [a, b], zero_sign=False)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", ["Max", "Min"])
def test_three_operand_min_max_fold_from_the_left(op, dtype):
    values = special_values(dtype)[:8]
    a, b = pairs(values)
    assert_bitwise(op, [a, b, a[::-1].copy()], zero_sign=False)


@pytest.mark.parametrize("dtype", FLOATS)
def test_broadcast_scalar_operands(dtype):
    values = special_values(dtype)
    for scalar in (np.array(0.0, dtype), np.array(-0.0, dtype), np.array(np.nan, dtype)):
        assert_bitwise("Max", [values, scalar], zero_sign=False)
        assert_bitwise("Min", [scalar, values], zero_sign=False)
        assert_bitwise("Sub", [values, scalar])
    assert_bitwise("Add", [values.reshape(-1, 1), values[:4].reshape(1, 4)])


@pytest.mark.parametrize("dtype", INTEGERS)
@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Max", "Min"])
def test_binary_integer_ops_wrap(op, dtype):
    a, b = pairs(_ints(dtype))
    assert_bitwise(op, [a, b])


@pytest.mark.parametrize("dtype", INTEGERS)
def test_integer_division_truncates_toward_zero(dtype):
    a, b = pairs(_ints(dtype))
    info = np.iinfo(dtype)
    # onnxruntime traps on a zero divisor and on the most negative value by -1: poison there
    trapping = (b == 0) | ((a == info.min) & (b == -1)) if info.min < 0 else b == 0
    assert_bitwise("Div", [a[~trapping], b[~trapping]])


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize(
    "op", ["Neg", "Abs", "Reciprocal", "Sqrt", "Floor", "Ceil", "Round", "Sign"]
)
def test_unary_float_ops(op, dtype):
    assert_bitwise(op, [special_values(dtype)])


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.int8])
@pytest.mark.parametrize("op", ["Neg", "Abs", "Relu", "Sign"])
def test_unary_integer_ops(op, dtype):
    assert_bitwise(op, [_ints(dtype)])


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize(
    ("op", "attributes"),
    [
        ("Relu", {}),
        ("LeakyRelu", {}),
        ("LeakyRelu", {"alpha": 0.3}),
        ("HardSigmoid", {}),
        ("HardSigmoid", {"alpha": 0.1, "beta": 0.6}),
        ("HardSwish", {}),
        ("Identity", {}),
        ("IsNaN", {}),
        ("IsInf", {}),
        ("IsInf", {"detect_negative": 0}),
    ],
)
def test_activations(op, attributes, dtype):
    values = special_values(dtype)
    ordinary = np.linspace(-8, 8, 33).astype(dtype)
    assert_bitwise(op, [np.concatenate([values, ordinary])], attributes)


@pytest.mark.parametrize("dtype", FLOATS)
def test_prelu_with_a_broadcast_slope(dtype):
    values = special_values(dtype)
    x = np.stack([values, -values])
    slope = np.array([[0.25], [-2.0]], dtype)
    assert_bitwise("PRelu", [x, slope])
    a, b = pairs(values[:10])
    assert_bitwise("PRelu", [a, b])


@pytest.mark.parametrize("dtype", FLOATS)
def test_clip_with_bounds_nan_bounds_and_no_bounds(dtype):
    values = special_values(dtype)
    for low, high in ((-0.5, 0.5), (-0.0, 0.0), (np.nan, 1.0), (0.0, np.nan), (2.0, -2.0)):
        assert_bitwise("Clip", [values, np.array(low, dtype), np.array(high, dtype)])
    assert_bitwise("Clip", [values, None, np.array(0.0, dtype)])
    assert_bitwise("Clip", [values])


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8])
def test_clip_integers(dtype):
    assert_bitwise("Clip", [_ints(dtype), np.array(1, dtype), np.array(7, dtype)])


@pytest.mark.parametrize("dtype", [*FLOATS, np.int32, np.int64, np.uint8])
@pytest.mark.parametrize("op", ["Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual"])
def test_comparisons(op, dtype):
    values = special_values(dtype) if np.dtype(dtype).kind == "f" else _ints(dtype)
    a, b = pairs(values)
    assert_bitwise(op, [a, b])


def test_logic_and_where():
    a, b = pairs(np.array([False, True]))
    for op in ("And", "Or", "Xor", "Equal"):
        assert_bitwise(op, [a, b])
    assert_bitwise("Not", [a])
    values = special_values(np.float32)
    condition = np.arange(values.size) % 3 == 0
    assert_bitwise("Where", [condition, values, values[::-1].copy()])
    # a broadcast scalar -0 comes out +0 from onnxruntime's scalar path: zeros as numbers
    grid = [condition.reshape(-1, 1), values[:4], np.array(-0.0, np.float32)]
    assert_bitwise("Where", grid, zero_sign=False)


CAST_TYPES = (np.float32, np.float64, np.float16, np.int8, np.int32, np.int64, np.uint8, bool)


@pytest.mark.parametrize("source", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("target", CAST_TYPES)
def test_cast_from_floats(source, target):
    import onnx.helper

    values = np.concatenate(
        [special_values(source), np.array([2.7, -2.7, 255.5, 127.9, -128.9, 65504, 65520], source)]
    )
    to = onnx.helper.np_dtype_to_tensor_dtype(np.dtype(target))
    # out-of-range float-to-integer casts are poison (onnxruntime gives what the CPU gives)
    assert_bitwise("Cast", [values], {"to": to}, allow_poison=np.dtype(target).kind in "iu")


@pytest.mark.parametrize("source", [np.int8, np.int32, np.int64, np.uint8, bool])
@pytest.mark.parametrize("target", CAST_TYPES)
def test_cast_from_integers_and_bool(source, target):
    import onnx.helper

    values = np.array([False, True]) if source is bool else _ints(source)
    to = onnx.helper.np_dtype_to_tensor_dtype(np.dtype(target))
    assert_bitwise("Cast", [values], {"to": to})
