"""Numeric edge cases of the `where`/`let` built-ins (rewriter.engine._builtins)."""

from __future__ import annotations

import numpy as np
import pytest

from rewriter.engine import BUILTINS, EvalError


def call(name, *args):
    return BUILTINS[name].implementation(None, *args)


def test_all_close_does_not_overflow_in_a_narrow_dtype() -> None:
    # In float16, 3.4e38 becomes inf and numpy's |a - b| <= atol + rtol * |b| holds (inf <= inf).
    k = np.array(-1.0224609375, np.float16)
    assert call("all_close", k, 3.4028234663852886e38, 1e-6, 0.0) is False
    assert call("all_close", np.array(6.0, np.float16), 6.0) is True
    assert call("all_close", np.array(np.inf, np.float32), np.inf) is True


def test_min_max_of_several_tensors_of_different_shapes() -> None:
    a = np.array([3.0], np.float32)
    b = np.array(2.0, np.float32)
    result = call("min", a, b)
    assert result == 2.0
    assert result.dtype == np.float32
    assert call("min", [1, 5, 3]) == 1
    assert call("min", 4, 2) == 2


def test_sort_and_setdiff_give_plain_int_lists() -> None:
    assert call("sort", np.array([3, 1, 2])) == [1, 2, 3]
    assert call("sort", [2.5, -1.0]) == [-1.0, 2.5]
    assert call("setdiff", [0, 1, 2, 3, 4], np.array([3, 1])) == [0, 2, 4]
    assert call("setdiff", [0, 1], [0, 1]) == []
    assert all(type(v) is int for v in call("setdiff", np.arange(4), [2]))


@pytest.mark.parametrize(
    ("dtype", "lowest", "above"),
    [
        # the constants patterns/fusion/attention.rw used to spell out per dtype
        ("float", -3.4028234663852886e38, -3.4028232635611926e38),
        ("float16", -65504.0, -65472.0),
        ("bfloat16", -3.3895313892515355e38, -3.3762391092936863e38),
        ("double", -1.7976931348623157e308, -1.7976931348623155e308),
    ],
)
def test_lowest_and_the_next_value_above_it(dtype, lowest, above) -> None:
    assert call("lowest", dtype) == lowest
    assert call("next_after", lowest, 0.0, dtype) == above


def test_lowest_of_integers_and_next_after_elementwise() -> None:
    assert call("lowest", "int8") == -128
    assert call("lowest", "uint16") == 0
    result = call("next_after", np.array([1.0, -1.0]), 2.0, "float16")
    assert result.dtype == np.float16
    assert result.tolist() == [1.0009765625, -0.99951171875]


@pytest.mark.parametrize(("name", "args"), [("lowest", ("bool",)), ("next_after", (1, 2, "int64"))])
def test_lowest_and_next_after_refuse_dtypes_without_them(name, args) -> None:
    with pytest.raises(EvalError):
        call(name, *args)
