"""The prover's index algebra moves elements exactly where onnxruntime does."""

from __future__ import annotations

import numpy as np
import pytest

from tests.rewriter.prove._ort import assert_bitwise

X = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4) - 11.5


def ints(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.int64)


@pytest.mark.parametrize("perm", [None, [0, 1, 2], [2, 0, 1], [1, 2, 0], [0, 2, 1]])
def test_transpose(perm):
    assert_bitwise("Transpose", [X], {} if perm is None else {"perm": perm})


@pytest.mark.parametrize(
    "shape",
    [(24,), (4, 6), (-1, 4), (2, -1, 2), (0, 12), (0, 0, 4), (3, 8), (1, 24, 1), (2, 3, 2, 2)],
)
def test_reshape(shape):
    assert_bitwise("Reshape", [X, ints(*shape)])


def test_reshape_allowzero_keeps_an_empty_dim():
    empty = np.zeros((2, 0, 3), np.float32)
    assert_bitwise("Reshape", [empty, ints(0, 3, 2)], {"allowzero": 1})


@pytest.mark.parametrize("axis", [0, 1, 2, 3, -1])
def test_flatten(axis):
    assert_bitwise("Flatten", [X], {"axis": axis})


@pytest.mark.parametrize("axes", [[0], [-1], [1, 3], [0, 4]])
def test_unsqueeze(axes):
    assert_bitwise("Unsqueeze", [X, ints(*axes)])


@pytest.mark.parametrize("axes", [[1], [-1], [1, 3], [-3]])
def test_squeeze(axes):
    y = X.reshape(2, 1, 12, 1)
    assert_bitwise("Squeeze", [y, ints(*axes)])


def test_squeeze_without_axes_drops_every_dim_of_one():
    assert_bitwise("Squeeze", [X.reshape(1, 2, 1, 12)])


@pytest.mark.parametrize(
    ("starts", "ends", "axes", "steps"),
    [
        ([0], [1], [0], None),
        ([1], [100], [1], None),
        ([-3], [-1], [2], None),
        ([0, 1], [2, 3], [0, 2], [1, 2]),
        ([-1], [-100], [2], [-1]),
        ([3], [0], [2], [-2]),
        ([2], [1], [1], None),
        ([0], [9223372036854775807], [-1], [3]),
        ([-9223372036854775807], [2], [0], None),
        ([5], [-5], [2], [-1]),
    ],
)
def test_slice_clamps_like_onnx(starts, ends, axes, steps):
    inputs = [X, ints(*starts), ints(*ends), ints(*axes)]
    if steps is not None:
        inputs.append(ints(*steps))
    assert_bitwise("Slice", inputs)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_concat(axis):
    other = np.flip(X, axis=axis).copy()
    part = np.take(other, [0], axis=axis)
    assert_bitwise("Concat", [X, part, other], {"axis": axis})


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_gather_with_negative_indices(axis):
    size = X.shape[axis]
    indices = ints(0, size - 1, -1, -size).reshape(2, 2)
    assert_bitwise("Gather", [X, indices], {"axis": axis})
    assert_bitwise("Gather", [X, np.array(-1, np.int64)], {"axis": axis})


def test_gather_with_int32_indices():
    assert_bitwise("Gather", [X, np.array([2, -3], np.int32)], {"axis": 1})


@pytest.mark.parametrize("shape", [(2, 3, 4), (3, 1), (1, 1, 1, 1), (2, 2, 3, 4), (4,)])
def test_expand(shape):
    y = X[:, :1, :] if len(shape) != 2 else X[0, :, :1]
    assert_bitwise("Expand", [np.ascontiguousarray(y), ints(*shape)])


@pytest.mark.parametrize(("start", "end"), [(None, None), (1, None), (-2, None), (0, -1), (2, 1)])
def test_shape_and_size(start, end):
    attributes = {k: v for k, v in (("start", start), ("end", end)) if v is not None}
    assert_bitwise("Shape", [X], attributes)
    assert_bitwise("Size", [X])
