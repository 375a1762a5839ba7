"""A literal in a pattern matches a constant or attribute exactly, in the constant's dtype."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

import rewriter
from rewriter.engine._literals import attribute_matches, constant_matches
from tests.helpers import model_from_text, op_types, session


def _mul_by(constant: str) -> onnx.ModelProto:
    return model_from_text(
        f"""
        <ir_version: 9, opset_import: ["" : 18]>
        g (float[3] x) => (float[3] y) {{
            c = Constant <value = float[1] {{{constant}}}> ()
            y = Mul (x, c)
        }}
        """
    )


def test_the_library_leaves_a_multiplication_by_almost_one_alone():
    # x * 1.0000008 is not x: at x = 3e7 the difference is 26.
    model = _mul_by("1.0000008")
    result = rewriter.rewrite(model)
    assert "Mul" in op_types(result.proto)
    feed = {"x": np.array([3e7, -1.5, 0.0], np.float32)}
    expected = session(model).run(None, feed)[0]
    np.testing.assert_array_equal(session(result.proto).run(None, feed)[0], expected)
    assert expected[0] - feed["x"][0] == pytest.approx(24.0, abs=4.0)


def test_the_library_removes_a_multiplication_by_exactly_one():
    result = rewriter.rewrite(_mul_by("1.0"))
    assert "Mul" not in op_types(result.proto)


@pytest.mark.parametrize(
    ("array", "literal", "matches"),
    [
        (np.array([1.0000008], np.float32), 1.0, False),
        (np.array([1.0, 1.0], np.float32), 1, True),
        (np.array(0.1, np.float16), 0.1, True),  # the float16 nearest to 0.1 is that literal
        (np.array(0.1, np.float32), 0.1, True),
        (np.array(0.1, np.float64), 0.1, True),
        (np.array(0.1, np.float16), 0.10001, False),
        (np.array([2], np.int64), 2.0, True),
        (np.array([2], np.int64), 2.5, False),  # no integer equals 2.5
        (np.array([255], np.uint8), 255, True),
        (np.array([0], np.uint8), 256, False),  # out of range, not wrapped to 0
        (np.array([True]), 1, True),
        (np.array([True]), 2, False),
        (np.array([], np.float32), 0.0, False),  # an empty constant holds no such element
        (np.array([1, -1], np.int64), [1, -1], True),
        (np.array([[1, -1]], np.int64), [1, -1], False),  # a list matches a 1-D constant
        (np.array([0.5, 2.0], np.float32), [0.5, 2.0], True),
        (np.array([0.5, 2.0000002], np.float32), [0.5, 2.0], False),
    ],
)
def test_constant_matching_is_exact_in_the_constants_dtype(array, literal, matches):
    assert constant_matches(array, literal) is matches


@pytest.mark.parametrize(
    ("actual", "literal", "matches"),
    [
        (float(np.float32(0.2)), 0.2, True),  # FLOAT attributes are float32
        (float(np.float32(0.2000001)), 0.2, False),
        (1e-5, 1e-5, True),
        (-1, -1, True),
        (1, 1.0, True),
        (1, 1.5, False),
        ([1.0, 0.5], [1.0, 0.5], True),
        ("NOTSET", "NOTSET", True),
    ],
)
def test_attribute_matching_is_exact_in_float32(actual, literal, matches):
    assert attribute_matches(actual, literal) is matches


def test_differently_named_dims_are_not_known_to_differ(tmp_path):
    # `!=` on two symbolic dims is unknown (both could be 3 at run time): the rule stays put.
    from tests.helpers import run_rules

    model = model_from_text(
        """<ir_version: 8, opset_import: ["" : 17]>
        g (float[N, 3] a, float[M, 3] b) => (float[N, 3] y) { y = Sub (a, b) }"""
    )
    rules = "rule r: y = Sub (a, b) => y = a where shape(a)[0] != shape(b)[0]\n"
    result = run_rules(model, rules, tmp_path)
    assert "Sub" in op_types(result.proto)
