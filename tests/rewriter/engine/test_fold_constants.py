"""A folded value is what onnxruntime computes for the node, with the dtype it declares."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

import rewriter
from rewriter import rules
from tests.helpers import model_from_text, session


def _model(body: str, inputs: str, output: str) -> str:
    return f"""<ir_version: 8, opset_import: ["" : 18]>
    g ({inputs}) => ({output}) {{
        {body}
    }}"""


# Each model computes `t` from constants only and combines it with the graph input `x`, so
# `t` is folded into a constant (it is not a graph output); the result must be what
# onnxruntime computes for the original.
CASES = {
    "log_softmax_far_from_max": (
        "c = Constant <value = float[3] {0.0, -1000.0, 5.0}> ()\n t = LogSoftmax (c)\n"
        " y = Add (t, x)",
        "float[3] x",
        "float[3] y",
    ),
    "cast_large_float_to_string": (
        "c = Constant <value = float[3] {16777216.0, 0.1, 1e20}> ()\n"
        " t = Cast <to = 8> (c)\n y = Concat <axis = 0> (t, x)",
        "string[1] x",
        "string[4] y",
    ),
    "reduce_max_with_nan": (
        "c = Constant <value = float[4] {1.0, nan, 3.0, -2.0}> ()\n"
        " t = ReduceMax <keepdims = 1> (c)\n y = Add (t, x)",
        "float[1] x",
        "float[1] y",
    ),
    "reduce_min_with_nan": (
        "c = Constant <value = float[4] {1.0, nan, 3.0, -2.0}> ()\n"
        " t = ReduceMin <keepdims = 1> (c)\n y = Add (t, x)",
        "float[1] x",
        "float[1] y",
    ),
    "argmax_with_nan": (
        "c = Constant <value = float[4] {1.0, nan, 3.0, -2.0}> ()\n"
        " t = ArgMax <keepdims = 1> (c)\n y = Add (t, x)",
        "int64[1] x",
        "int64[1] y",
    ),
    "argmin_with_nan": (
        "c = Constant <value = float[4] {1.0, nan, 3.0, -2.0}> ()\n"
        " t = ArgMin <keepdims = 1> (c)\n y = Add (t, x)",
        "int64[1] x",
        "int64[1] y",
    ),
    "hardmax_with_nan": (
        "c = Constant <value = float[1, 4] {1.0, nan, 3.0, -2.0}> ()\n"
        " t = Hardmax (c)\n y = Add (t, x)",
        "float[1, 4] x",
        "float[1, 4] y",
    ),
    "int64_pow": (
        "b = Constant <value = int64[1] {3}> ()\n e = Constant <value = int64[1] {39}> ()\n"
        " t = Pow (b, e)\n y = Add (t, x)",
        "int64[1] x",
        "int64[1] y",
    ),
    # Integers wrap in onnxruntime where the facts' element arithmetic would not: 65536 *
    # 65536 is 0 in uint32 (so / 65536 is 0), -1 cast to uint32 is 4294967295.
    "uint32_product_wraps": (
        "c = Constant <value = int64[1] {65536}> ()\n u = Cast <to = 12> (c)\n"
        " p = Mul (u, u)\n q = Div (p, u)\n t = Cast <to = 7> (q)\n y = Add (t, x)",
        "int64[1] x",
        "int64[1] y",
    ),
    "int32_product_wraps": (
        "c = Constant <value = int32[1] {65536}> ()\n p = Mul (c, c)\n t = Div (p, c)\n"
        " y = Add (t, x)",
        "int32[1] x",
        "int32[1] y",
    ),
    "negative_cast_to_uint32": (
        "c = Constant <value = int64[1] {-1}> ()\n u = Cast <to = 12> (c)\n"
        " t = Cast <to = 7> (u)\n y = Add (t, x)",
        "int64[1] x",
        "int64[1] y",
    ),
    "large_cast_to_int32": (
        "c = Constant <value = int64[1] {5000000000}> ()\n t = Cast <to = 6> (c)\n y = Add (t, x)",
        "int32[1] x",
        "int32[1] y",
    ),
    "reduce_sum_square_int32": (
        "c = Constant <value = int32[3] {1, 2, 3}> ()\n"
        " t = ReduceSumSquare <keepdims = 1> (c)\n y = Add (t, x)",
        "int32[1] x",
        "int32[1] y",
    ),
}


def _feed(model):
    feeds = {}
    for info in model.graph.input:
        dtype = onnx.helper.tensor_dtype_to_np_dtype(info.type.tensor_type.elem_type)
        shape = [d.dim_value for d in info.type.tensor_type.shape.dim]
        if dtype.kind == "O":
            feeds[info.name] = np.array(["x"] * int(np.prod(shape)), dtype=object).reshape(shape)
        else:
            feeds[info.name] = np.ones(shape, dtype=dtype)
    return feeds


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_fold_computes_what_onnxruntime_computes(name):
    body, inputs, output = CASES[name]
    model = model_from_text(_model(body, inputs, output))
    result = rewriter.rewrite(model)
    feed = _feed(model)
    expected = session(model).run(None, feed)
    got = session(result.proto).run(None, feed)
    for want, have in zip(expected, got, strict=True):
        assert have.dtype == want.dtype
        assert have.shape == want.shape
        if want.dtype == object:
            assert have.tolist() == want.tolist()
        else:
            np.testing.assert_array_equal(have, want)


def test_a_shape_element_cast_to_an_unsigned_type_wraps_as_in_onnxruntime(caplog):
    # x's second dim minus 4 is -1: cast to uint32 and back it is 4294967295, not -1 (the
    # facts follow the element through Sub and the Casts; they must not fold it to -1). Nor
    # may a pass fail on a number its integer type cannot hold.
    model, result = _folds_only(
        "s = Shape <start = 1> (x)\n c = Constant <value = int64[1] {4}> ()\n d = Sub (s, c)\n"
        " u = Cast <to = 12> (d)\n t = Cast <to = 7> (u)\n"
        " e = Constant <value = int64[1] {4294967296}> ()\n p = Mul (e, e)\n"
        " f = Add (t, p)\n y = Add (f, z)",
        "float[N, 3] x, int64[1] z",
        "int64[1] y",
    )
    assert "failed and was undone" not in caplog.text
    feed = {"x": np.ones((2, 3), np.float32), "z": np.array([1], np.int64)}
    np.testing.assert_array_equal(
        session(result.proto).run(None, feed)[0], session(model).run(None, feed)[0]
    )


@pytest.mark.parametrize("end", [2**31 - 1, 2**63 - 1])
def test_a_reversing_slice_to_int_max_keeps_what_onnxruntime_keeps(end):
    # onnxruntime reads an end of INT32_MAX / INT64_MAX as "to the end" in the step's direction:
    # x[-1:INT_MAX:-1] of 3 rows keeps all 3 reversed, where onnx's inference (clamping the end
    # to the last index) says 0 rows; and a start below -size with a negative step is clamped
    # to 0, so it keeps element 0 where Python's slicing keeps nothing.
    model, result = _folds_only(
        f"st = Constant <value = int64[1] {{-1}}> ()\n en = Constant <value = int64[1] {{{end}}}> ()\n"
        " ax = Constant <value = int64[1] {0}> ()\n sp = Constant <value = int64[1] {-1}> ()\n"
        " r = Slice (x, st, en, ax, sp)\n z = Shape (r)\n"
        " s = Shape (x)\n lo = Constant <value = int64[1] {-9}> ()\n"
        " f = Slice (s, lo, lo, ax, sp)\n w = Concat <axis = 0> (z, f)",
        "float[3, 7] x",
        "int64[3] w",
    )
    feed = {"x": np.arange(21, dtype=np.float32).reshape(3, 7)}
    np.testing.assert_array_equal(
        session(result.proto).run(None, feed)[0], session(model).run(None, feed)[0]
    )


@pytest.mark.parametrize("dtype", [7, 6])
def test_a_product_of_shape_elements_folds_as_onnxruntime_computes_it(dtype, caplog):
    # onnxruntime's int64 ReduceProd rounds past 2**53 ((2**31 - 1) ** 2 ends in ...608, not
    # ...609); an int32 product wraps. Followed exactly, the facts folded another number, or
    # failed the pass on one int32 cannot hold.
    model, result = _folds_only(
        "s = Shape (x)\n c = Constant <value = int64[1] {2147483647}> ()\n m = Max (s, c)\n"
        f" t = Cast <to = {dtype}> (m)\n p = ReduceProd <keepdims = 0> (t)\n"
        " q = Cast <to = 7> (p)\n one = Constant <value = int64[1] {1}> ()\n"
        " y = Reshape (q, one)",
        "float[1, 1] x",
        "int64[1] y",
    )
    assert "failed and was undone" not in caplog.text
    feed = {"x": np.ones((1, 1), np.float32)}
    np.testing.assert_array_equal(
        session(result.proto).run(None, feed)[0], session(model).run(None, feed)[0]
    )


def test_a_constant_split_into_a_sequence_is_not_folded_into_a_tensor():
    model = model_from_text(
        """<ir_version: 8, opset_import: ["" : 18]>
    g (float[1] x) => (float[2] y) {
        c = Constant <value = float[4] {1.0, 2.0, 3.0, 4.0}> ()
        two = Constant <value = int64[2] {2, 2}> ()
        zero = Constant <value = int64 {0}> ()
        s = SplitToSequence <axis = 0> (c, two)
        y = SequenceAt (s, zero)
    }"""
    )
    result = rewriter.rewrite(model)
    onnx.checker.check_model(result.proto, full_check=True)
    feed = {"x": np.array([0.5], np.float32)}
    np.testing.assert_array_equal(
        session(result.proto).run(None, feed)[0], session(model).run(None, feed)[0]
    )


def _folds_only(body: str, inputs: str, output: str):
    model = model_from_text(_model(body, inputs, output))
    # No rules: only the default pipeline (constant folding, dead code) runs.
    return model, rewriter.rewrite(model, rules.RuleSet(()))


def test_an_integer_value_the_facts_know_folds_although_its_inputs_are_not_constants():
    # The head size an attention block reads back from a tensor whose batch is dynamic,
    # through a permuted shape (a Transpose moved past the Shape), then 1 / sqrt of it.
    model, result = _folds_only(
        "s = Shape (x)\n p = Constant <value = int64[3] {0, 2, 1}> ()\n g = Gather (s, p)\n"
        " b = Constant <value = int64[1] {-1}> ()\n e = Constant <value = int64[1] {9}> ()\n"
        " t = Slice (g, b, e)\n f = Cast <to = 1> (t)\n r = Sqrt (f)\n y = Div (x, r)",
        "float[N, 4, 3] x",
        "float[N, 4, 3] y",
    )
    assert [n.op_type for n in result.proto.graph.node] == ["Div"]
    feed = {"x": np.arange(24, dtype=np.float32).reshape(2, 4, 3)}
    np.testing.assert_array_equal(
        session(result.proto).run(None, feed)[0], session(model).run(None, feed)[0]
    )


def test_an_integer_value_with_a_dynamic_element_is_not_folded():
    _, result = _folds_only(
        "s = Shape (x)\n p = Constant <value = int64[3] {1, 2, 0}> ()\n g = Gather (s, p)\n"
        " b = Constant <value = int64[1] {-1}> ()\n e = Constant <value = int64[1] {9}> ()\n"
        " t = Slice (g, b, e)\n f = Cast <to = 1> (t)\n y = Div (x, f)",
        "float[N, 4, 3] x",
        "float[N, 4, 3] y",
    )
    computed = [n.op_type for n in result.proto.graph.node if n.op_type != "Constant"]
    assert computed == ["Shape", "Gather", "Slice", "Cast", "Div"]


def test_a_comparison_of_shape_values_the_facts_know_folds():
    # An exported Expand target: Where(Equal(shape, -1), ones, shape), with a dynamic batch
    # (never -1) and a fixed 4 (not -1 either): the condition folds to false everywhere.
    model, result = _folds_only(
        "s = Shape (x)\n m = Constant <value = int64[2] {-1, -1}> ()\n q = Equal (s, m)\n"
        " z = Shape (s)\n o = ConstantOfShape <value = int64[1] {1}> (z)\n"
        " w = Where (q, o, s)\n y = Expand (x, w)",
        "float[N, 4] x",
        "float[N, 4] y",
    )
    computed = [n.op_type for n in result.proto.graph.node if n.op_type != "Constant"]
    assert computed == ["Shape", "Where", "Expand"]
    (condition,) = [
        t for t in result.proto.graph.initializer if t.data_type == onnx.TensorProto.BOOL
    ]
    assert onnx.numpy_helper.to_array(condition).tolist() == [False, False]
    feed = {"x": np.arange(8, dtype=np.float32).reshape(2, 4)}
    np.testing.assert_array_equal(
        session(result.proto).run(None, feed)[0], session(model).run(None, feed)[0]
    )


def test_a_comparison_whose_result_the_facts_do_not_know_is_not_folded():
    _, result = _folds_only(
        "s = Shape (x)\n m = Constant <value = int64[2] {3, 4}> ()\n q = Equal (s, m)\n"
        " w = Where (q, s, s)\n y = Reshape (x, w)",
        "float[N, 4] x",
        "float[N, 4] y",
    )
    assert "Equal" in [n.op_type for n in result.proto.graph.node]
