"""The tolerance policy: exact where it must be, never loose enough to pass a wrong rewrite."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from rewriter.verification import Tolerance, default_tolerance
from rewriter.verification._compare import EXACT, compare_arrays, tolerance_for

F32 = default_tolerance(np.dtype(np.float32))


@pytest.mark.parametrize(
    ("dtype", "expected"),
    [
        (np.float32, Tolerance(1e-4, 1e-5)),
        (np.float64, Tolerance(1e-7, 1e-9)),
        (np.float16, Tolerance(1e-2, 1e-3)),
        (ml_dtypes.bfloat16, Tolerance(5e-2, 1e-2)),
        (np.complex64, Tolerance(1e-4, 1e-5)),
        (np.int64, EXACT),
        (np.int8, EXACT),
        (np.uint8, EXACT),
        (np.bool_, EXACT),
        (np.str_, EXACT),
    ],
)
def test_default_tolerance_per_dtype(dtype, expected):
    assert default_tolerance(np.dtype(dtype)) == expected


def test_user_tolerance_overrides_floats_only():
    assert tolerance_for(np.dtype(np.float32), 0.1, None) == Tolerance(0.1, 1e-5)
    assert tolerance_for(np.dtype(np.float16), None, 0.5) == Tolerance(1e-2, 0.5)
    assert tolerance_for(np.dtype(np.int32), 0.1, 0.1) == EXACT


def test_tolerance_prints_compactly():
    assert str(Tolerance(1e-4, 1e-5)) == "rtol=1e-4 atol=1e-5"
    assert str(Tolerance(0.05, 0.01)) == "rtol=0.05 atol=0.01"
    assert str(EXACT) == "exact"


def test_identical_floats_pass_with_zero_error():
    x = np.linspace(-3, 3, 12, dtype=np.float32)
    result = compare_arrays(x, x.copy(), F32)
    assert result.ok
    assert result.max_abs_err == 0.0
    assert result.mismatched == 0


def test_rounding_noise_passes():
    x = np.linspace(-3, 3, 12, dtype=np.float32)
    noisy = x * np.float32(1 + 3e-7)
    assert compare_arrays(x, noisy, F32).ok


def test_nan_in_the_same_positions_is_equal():
    x = np.array([1.0, np.nan, 3.0], dtype=np.float32)
    assert compare_arrays(x, x.copy(), F32).ok


def test_nan_in_other_positions_is_a_mismatch():
    expected = np.array([1.0, np.nan, 3.0], dtype=np.float32)
    actual = np.array([1.0, 2.0, np.nan], dtype=np.float32)
    result = compare_arrays(expected, actual, F32)
    assert not result.ok
    assert result.mismatched == 2
    assert "NaN/inf positions differ" in result.reason
    assert result.max_abs_err == np.inf


@pytest.mark.parametrize(
    ("expected", "actual", "ok"),
    [
        (np.inf, np.inf, True),
        (-np.inf, -np.inf, True),
        (np.inf, -np.inf, False),
        (np.inf, 3.4e38, False),
        (0.0, -0.0, True),
    ],
)
def test_infinities_must_match_exactly(expected, actual, ok):
    e = np.array([expected, 1.0], dtype=np.float32)
    a = np.array([actual, 1.0], dtype=np.float32)
    assert compare_arrays(e, a, F32).ok is ok


def test_shape_mismatch_is_reported_even_with_same_size():
    x = np.zeros((2, 3), dtype=np.float32)
    result = compare_arrays(x, x.reshape(3, 2), F32)
    assert not result.ok
    assert "shape (3, 2) != (2, 3)" in result.reason


def test_dtype_mismatch_is_reported():
    x = np.zeros(3, dtype=np.float32)
    result = compare_arrays(x, x.astype(np.float64), F32)
    assert not result.ok
    assert "dtype float64 != float32" in result.reason


def test_integers_are_exact():
    x = np.array([1, 2, 3], dtype=np.int64)
    assert compare_arrays(x, x.copy(), EXACT).ok
    result = compare_arrays(x, x + np.array([0, 1, 0]), EXACT)
    assert not result.ok
    assert result.mismatched == 1
    assert result.max_abs_err == 1.0


def test_booleans_and_strings_are_exact():
    b = np.array([True, False])
    assert not compare_arrays(b, ~b, EXACT).ok
    s = np.array(["a", "b"], dtype=object)
    assert compare_arrays(s, s.copy(), EXACT).ok
    assert not compare_arrays(s, np.array(["a", "c"], dtype=object), EXACT).ok


def test_large_outputs_tolerate_cancellation_noise_near_zero():
    # An output of magnitude 1e3 with an element that cancels to ~0: float32 rounding leaves
    # ~1e-4 absolute noise there, which the output-scaled atol (1e-5 * 1e3) absorbs.
    expected = np.array([1000.0, -1000.0, 0.0], dtype=np.float32)
    actual = np.array([1000.0, -1000.0, 6e-5], dtype=np.float32)
    assert compare_arrays(expected, actual, F32).ok


def test_scale_safeguard_does_not_hide_an_error_proportional_to_the_values():
    expected = np.array([1000.0, -1000.0, 0.5], dtype=np.float32)
    assert not compare_arrays(expected, expected * 2, F32).ok
    assert not compare_arrays(expected, expected + 0.5, F32).ok


def test_sequences_compare_element_by_element():
    a = [np.zeros(2, np.float32), np.ones(3, np.float32)]
    assert compare_arrays(a, [x.copy() for x in a], F32).ok
    assert not compare_arrays(a, a[:1], F32).ok
    assert not compare_arrays(a, [a[0], a[1] * 3], F32).ok


finite_float32 = hnp.arrays(
    np.float32,
    hnp.array_shapes(min_dims=1, max_dims=3, max_side=5),
    elements=st.floats(-1e6, 1e6, width=32),
)


@given(finite_float32)
def test_x_times_two_never_passes_for_x(x):
    if not np.any(x != 0):
        return
    assert not compare_arrays(x, x * np.float32(2), F32).ok


@given(finite_float32)
def test_abs_never_passes_for_relu_when_an_element_is_negative(x):
    relu = np.maximum(x, np.float32(0))
    if not np.any(x < 0):
        assert compare_arrays(relu, np.abs(x), F32).ok
        return
    # Abs(x) - Relu(x) = 2|x| at negative x; caught unless every negative is a denormal-ish
    # speck far below the output's own scale.
    specks = np.abs(x[x < 0]) <= 1e-5 * max(1.0, float(np.abs(relu).max()))
    assert compare_arrays(relu, np.abs(x), F32).ok is bool(np.all(specks))


@given(finite_float32)
def test_one_ulp_of_noise_always_passes(x):
    noisy = np.nextafter(x, np.float32(np.inf))
    assert compare_arrays(x, noisy, F32).ok
