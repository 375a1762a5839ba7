"""Folds whose constants meet NaN, infinities or subnormals (issue 16, class 8).

A rewrite may fold constants only when the result is what the unfused graph computes for every
value those constants can meet: `Conv(x, w) * inf` is +-inf where the sum is not 0 but
`Conv(x, w * inf)` is NaN wherever a zero weight is met; a float16 weight product that underflows
to a subnormal loses most of its digits; onnxruntime's Max and Min propagate a NaN bound and
its Clip ignores one. Each model runs through the default library and is compared with the
original under onnxruntime on inputs with special values: NaN positions and infinities exactly,
finite values within float rounding.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx.helper as oh
import onnx.numpy_helper
import pytest

import rewriter
from tests.helpers import op_types, session

FLOAT = onnx.TensorProto.FLOAT
FLOAT16 = onnx.TensorProto.FLOAT16
SPECIAL = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -2.5, 3e-3]


def _model(nodes, inits, x_shape, y_shape, elem=FLOAT, opset=17) -> onnx.ModelProto:
    dtype = np.float16 if elem == FLOAT16 else np.float32
    tensors = [
        onnx.numpy_helper.from_array(
            np.asarray(v, dtype if np.asarray(v).dtype.kind == "f" else None), k
        )
        for k, v in inits.items()
    ]
    graph = oh.make_graph(
        nodes,
        "g",
        [oh.make_tensor_value_info("x", elem, x_shape)],
        [oh.make_tensor_value_info("y", elem, y_shape)],
        tensors,
    )
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", opset)])
    onnx.checker.check_model(model, full_check=True)
    return model


def _inputs(shape, dtype) -> list[np.ndarray]:
    """Ordinary inputs, and inputs holding NaN, infinities, signed zeros, large and tiny values."""
    rng = np.random.default_rng(0)
    count = int(np.prod(shape))
    plain = rng.standard_normal(count)
    special = np.resize(np.array(SPECIAL), count)
    ones = np.ones(count)
    return [
        a.reshape(shape).astype(dtype) for a in (plain, special, ones, rng.permutation(special))
    ]


def assert_same_values(want: np.ndarray, have: np.ndarray, rtol: float) -> None:
    """NaN positions and infinities exactly; finite values within float rounding."""
    assert want.shape == have.shape
    assert want.dtype == have.dtype
    np.testing.assert_array_equal(np.isnan(have), np.isnan(want))
    np.testing.assert_array_equal(np.isposinf(have), np.isposinf(want))
    np.testing.assert_array_equal(np.isneginf(have), np.isneginf(want))
    finite = np.isfinite(want)
    np.testing.assert_allclose(
        have[finite].astype(np.float64), want[finite].astype(np.float64), rtol=rtol, atol=rtol
    )


def _check(model: onnx.ModelProto, x_shape, dtype=np.float32, target_opset=None) -> list[str]:
    options = rewriter.RewriteOptions(target_opset=target_opset)
    result = rewriter.rewrite(model, None, options)
    rtol = 1e-2 if dtype == np.float16 else 1e-5
    for x in _inputs(x_shape, dtype):
        (want,) = session(model).run(None, {"x": x})
        (have,) = session(result.proto).run(None, {"x": x})
        assert_same_values(want, have, rtol)
    return op_types(result.proto)


def _conv_times(scale, weights, elem=FLOAT) -> onnx.ModelProto:
    nodes = [oh.make_node("Conv", ["x", "w"], ["c"]), oh.make_node("Mul", ["c", "s"], ["y"])]
    inits = {
        "w": np.asarray(weights).reshape(2, 1, 2, 1),
        "s": np.asarray(scale).reshape(1, 2, 1, 1),
    }
    return _model(nodes, inits, [1, 1, 3, 2], [1, 2, 2, 2], elem)


@pytest.mark.parametrize(
    "scale",
    [[np.inf, 1.0], [-np.inf, 2.0], [np.nan, 1.0]],
)
def test_an_infinite_or_nan_scale_is_not_folded_into_conv_weights(scale) -> None:
    # the case: a zero weight times +inf is NaN, Conv(x, w) * inf is +-inf
    ops = _check(_conv_times(scale, [0.0, 1.0, 2.0, 0.0]), [1, 1, 3, 2])
    assert ops == ["Conv", "Mul"]


def test_a_finite_scale_is_still_folded_into_conv_weights() -> None:
    assert _check(_conv_times([2.0, -0.5], [0.0, 1.0, 2.0, 0.0]), [1, 1, 3, 2]) == ["Conv"]


@pytest.mark.parametrize(("weight", "scale"), [(1e-4, 1e-4), (3e-3, 1e-3), (6e-5, 0.5)])
def test_a_float16_weight_product_that_underflows_is_not_folded(weight, scale) -> None:
    model = _conv_times([scale, 1.0], [weight, 1.0, 1.0, 1.0], FLOAT16)
    ops = _check(model, [1, 1, 3, 2], np.float16)
    assert ops == ["Conv", "Mul"]


def _batchnorm(stats: dict, elem=FLOAT, eps: float = 1e-5) -> onnx.ModelProto:
    nodes = [
        oh.make_node("Conv", ["x", "w"], ["c"]),
        oh.make_node(
            "BatchNormalization", ["c", "scale", "shift", "mean", "var"], ["y"], epsilon=eps
        ),
    ]
    inits = {"w": np.array([1.0, 0.0, -1.0, 2.0]).reshape(2, 1, 2, 1), **stats}
    return _model(nodes, inits, [1, 1, 3, 2], [1, 2, 2, 2], elem)


FINITE_STATS = {
    "scale": [1.0, 2.0],
    "shift": [0.5, -0.5],
    "mean": [0.1, 0.2],
    "var": [1.0, 4.0],
}


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("scale", [np.inf, 1.0]),
        ("mean", [np.inf, 0.0]),
        ("shift", [-np.inf, 0.0]),
        ("var", [np.nan, 1.0]),
    ],
)
def test_batchnorm_with_special_statistics_is_not_folded(name, value) -> None:
    stats = {**FINITE_STATS, name: value}
    assert _check(_batchnorm(stats), [1, 1, 3, 2]) == ["Conv", "BatchNormalization"]


def test_batchnorm_with_zero_variance_and_epsilon_is_not_folded() -> None:
    stats = {**FINITE_STATS, "var": [0.0, 1.0]}
    assert _check(_batchnorm(stats, eps=0.0), [1, 1, 3, 2]) == ["Conv", "BatchNormalization"]


def test_batchnorm_with_finite_statistics_is_still_folded() -> None:
    assert _check(_batchnorm(FINITE_STATS), [1, 1, 3, 2]) == ["Conv"]


def _two_bounds(first: str, second: str, lo, hi, opset=17) -> onnx.ModelProto:
    names = {"Max": "lo", "Min": "hi"}
    nodes = [
        oh.make_node(first, ["x", names[first]], ["t"]),
        oh.make_node(second, ["t", names[second]], ["y"]),
    ]
    return _model(nodes, {"lo": np.float32(lo), "hi": np.float32(hi)}, [8], [8], opset=opset)


@pytest.mark.parametrize(("lo", "hi"), [(np.nan, 1.0), (0.0, np.nan), (np.nan, np.nan)])
@pytest.mark.parametrize(("first", "second"), [("Max", "Min"), ("Min", "Max")])
def test_max_min_with_a_nan_bound_stays_max_min(first, second, lo, hi) -> None:
    ops = _check(_two_bounds(first, second, lo, hi), [8])
    assert "Clip" not in ops


@pytest.mark.parametrize(("first", "second"), [("Max", "Min"), ("Min", "Max")])
def test_max_min_with_number_bounds_becomes_clip(first, second) -> None:
    assert _check(_two_bounds(first, second, -1.0, np.inf), [8]) == ["Clip"]


@pytest.mark.parametrize(("lo", "hi"), [(np.nan, 1.0), (-1.0, np.nan)])
def test_clip_and_relu_with_a_nan_bound_stay_apart(lo, hi) -> None:
    clip_relu = [oh.make_node("Clip", ["x", "lo", "hi"], ["t"]), oh.make_node("Relu", ["t"], ["y"])]
    relu_clip = [oh.make_node("Relu", ["x"], ["t"]), oh.make_node("Clip", ["t", "lo", "hi"], ["y"])]
    for nodes in (clip_relu, relu_clip):
        model = _model(nodes, {"lo": np.float32(lo), "hi": np.float32(hi)}, [8], [8])
        assert len(_check(model, [8])) == 2


def test_layer_normalization_scaled_by_infinity_keeps_its_mul() -> None:
    nodes = [
        oh.make_node("LayerNormalization", ["x", "s", "b"], ["n"], axis=-1),
        oh.make_node("Mul", ["n", "g"], ["y"]),
    ]
    inits = {
        "s": [1.0, 2.0, 1.0, 1.0],
        "b": [0.5, -0.5, 0.0, 1.0],
        "g": [np.inf, 1.0, -np.inf, 2.0],
    }
    model = _model(nodes, inits, [2, 4], [2, 4], opset=17)
    assert _check(model, [2, 4]) == ["LayerNormalization", "Mul"]


@pytest.mark.parametrize("b", [np.nan, np.inf])
def test_hard_sigmoid_is_not_fused_from_a_special_offset(b) -> None:
    nodes = [
        oh.make_node("Mul", ["x", "a"], ["u"]),
        oh.make_node("Add", ["u", "b"], ["t"]),
        oh.make_node("Clip", ["t", "lo", "hi"], ["y"]),
    ]
    inits = {"a": np.float32(0.2), "b": np.float32(b), "lo": np.float32(0.0), "hi": np.float32(1.0)}
    model = _model(nodes, inits, [8], [8])
    assert "HardSigmoid" not in _check(model, [8])


def test_cast_of_a_nan_fill_to_an_integer_is_not_folded() -> None:
    nodes = [
        oh.make_node(
            "ConstantOfShape",
            ["shape"],
            ["c"],
            value=onnx.numpy_helper.from_array(np.array([np.nan], np.float32)),
        ),
        oh.make_node("Cast", ["c"], ["i"], to=onnx.TensorProto.INT64),
        oh.make_node("Cast", ["i"], ["f"], to=FLOAT),
        oh.make_node("Add", ["x", "f"], ["y"]),
    ]
    model = _model(nodes, {"shape": np.array([8], np.int64)}, [8], [8])
    result = rewriter.rewrite(model)
    fills = [
        onnx.numpy_helper.to_array(a.t)
        for n in result.proto.graph.node
        if n.op_type == "ConstantOfShape"
        for a in n.attribute
    ]
    assert all(f.dtype.kind == "f" for f in fills)
