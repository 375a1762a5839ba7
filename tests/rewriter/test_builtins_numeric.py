"""Numeric edge cases of the `where`/`let` built-ins (rewriter._builtins)."""

from __future__ import annotations

import numpy as np

from rewriter import _builtins as builtins


def test_all_close_does_not_overflow_in_a_narrow_dtype() -> None:
    # In float16, 3.4e38 becomes inf and numpy's |a - b| <= atol + rtol * |b| holds (inf <= inf).
    k = np.array(-1.0224609375, np.float16)
    assert builtins.all_close(None, k, 3.4028234663852886e38, 1e-6, 0.0) is False
    assert builtins.all_close(None, np.array(6.0, np.float16), 6.0) is True
    assert builtins.all_close(None, np.array(np.inf, np.float32), np.inf) is True


def test_min_max_of_several_tensors_of_different_shapes() -> None:
    reducer = builtins.BUILTINS["min"]
    a = np.array([3.0], np.float32)
    b = np.array(2.0, np.float32)
    result = reducer(None, a, b)
    assert result == 2.0
    assert result.dtype == np.float32
    assert reducer(None, [1, 5, 3]) == 1
    assert reducer(None, 4, 2) == 2


def test_sort_and_setdiff_give_plain_int_lists() -> None:
    assert builtins.sort(None, np.array([3, 1, 2])) == [1, 2, 3]
    assert builtins.sort(None, [2.5, -1.0]) == [-1.0, 2.5]
    assert builtins.setdiff(None, [0, 1, 2, 3, 4], np.array([3, 1])) == [0, 2, 4]
    assert builtins.setdiff(None, [0, 1], [0, 1]) == []
    assert all(type(v) is int for v in builtins.setdiff(None, np.arange(4), [2]))
