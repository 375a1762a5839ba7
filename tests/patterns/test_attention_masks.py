"""Attention masks and fully masked rows, fused and decomposed (issue 16, class 9).

Attention-23 gives zeros for a query row whose keys are all masked with -inf, where the
written-out Softmax gives NaN; onnxruntime's kernel also reads the dtype's lowest value as
-inf. So the default library fuses a float mask only when it provably holds no -inf, and the
decomposition for older opsets treats a lowest entry as -inf, as the kernel does. Each model is
compared under onnxruntime with the model it came from: NaN positions exactly, the rest within
float rounding.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx.helper as oh
import onnx.numpy_helper
import pytest

import rewriter
from tests.helpers import op_types, session
from tests.patterns.test_special_values import assert_same_values

LOWEST = np.finfo(np.float32).min
SHAPES = {"q": (2, 2, 3, 4), "k": (2, 2, 5, 4), "v": (2, 2, 5, 4)}


def _feeds(mask: np.ndarray | None = None, keep: np.ndarray | None = None) -> dict:
    rng = np.random.default_rng(0)
    feeds = {name: rng.standard_normal(shape).astype(np.float32) for name, shape in SHAPES.items()}
    if mask is not None:
        feeds["mask"] = mask
    if keep is not None:
        feeds["keep"] = keep
    return feeds


def _with_rows(fill: float) -> np.ndarray:
    """A [2, 1, 3, 5] mask of 0 and `fill`, the second sequence's last query row all `fill`."""
    rng = np.random.default_rng(1)
    mask = np.where(rng.random((2, 1, 3, 5)) > 0.4, 0.0, fill).astype(np.float32)
    mask[1, 0, 2, :] = fill
    return mask


def _written_out(mask_nodes: list, inputs: list, inits: list | None = None) -> onnx.ModelProto:
    """Softmax(Q K^T / 2 + mask) V at opset 23, the mask made by `mask_nodes`."""
    nodes = [
        *mask_nodes,
        oh.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
        oh.make_node("MatMul", ["q", "kt"], ["s"]),
        oh.make_node("Div", ["s", "two"], ["ss"]),
        oh.make_node("Add", ["ss", "mask"], ["a"]),
        oh.make_node("Softmax", ["a"], ["p"], axis=-1),
        oh.make_node("MatMul", ["p", "v"], ["y"]),
    ]
    tensors = [onnx.numpy_helper.from_array(np.float32(2.0), "two"), *(inits or [])]
    graph = oh.make_graph(
        nodes,
        "g",
        [
            *(oh.make_tensor_value_info(n, onnx.TensorProto.FLOAT, SHAPES[n]) for n in "qkv"),
            *inputs,
        ],
        [oh.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 2, 3, 4])],
        tensors,
    )
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 23)])
    onnx.checker.check_model(model, full_check=True)
    return model


def _mask_input() -> onnx.ValueInfoProto:
    return oh.make_tensor_value_info("mask", onnx.TensorProto.FLOAT, [2, 1, 3, 5])


def _keep_where(masked: float) -> tuple[list, list, list]:
    nodes = [oh.make_node("Where", ["keep", "zero", "masked"], ["mask"])]
    inputs = [oh.make_tensor_value_info("keep", onnx.TensorProto.BOOL, [2, 1, 3, 5])]
    inits = [
        onnx.numpy_helper.from_array(np.float32(0.0), "zero"),
        onnx.numpy_helper.from_array(np.float32(masked), "masked"),
    ]
    return nodes, inputs, inits


def _compare(original: onnx.ModelProto, rewritten: onnx.ModelProto, feeds: dict) -> None:
    (want,) = session(original).run(None, feeds)
    (have,) = session(rewritten).run(None, feeds)
    assert_same_values(want, have, 1e-4)


def test_a_mask_input_with_a_whole_row_of_minus_inf_keeps_its_nan_row() -> None:
    # the case: fused, that row became zeros
    model = _written_out([], [_mask_input()])
    result = rewriter.rewrite(model)
    assert "Attention" not in op_types(result.proto)
    feeds = _feeds(mask=_with_rows(-np.inf))
    _compare(model, result.proto, feeds)
    (want,) = session(model).run(None, feeds)
    assert np.isnan(want[1, :, 2]).all()


@pytest.mark.parametrize("fill", [-np.inf, LOWEST, -1e4])
def test_a_constant_mask_fuses_only_without_minus_inf(fill) -> None:
    mask = _with_rows(fill)
    model = _written_out([], [], [onnx.numpy_helper.from_array(mask, "mask")])
    result = rewriter.rewrite(model)
    assert ("Attention" in op_types(result.proto)) == np.isfinite(fill)
    _compare(model, result.proto, _feeds())


@pytest.mark.parametrize(("masked", "fuses"), [(LOWEST, True), (-1e9, True), (-np.inf, False)])
def test_a_mask_from_where_keep_fuses_when_its_masked_value_is_finite(masked, fuses) -> None:
    nodes, inputs, inits = _keep_where(masked)
    model = _written_out(nodes, inputs, inits)
    result = rewriter.rewrite(model)
    assert ("Attention" in op_types(result.proto)) == fuses
    keep = _with_rows(1.0) == 0.0  # the second sequence's last row keeps no key
    _compare(model, result.proto, _feeds(keep=keep))


def _additive_mask(dtype: int) -> tuple[list, list, list]:
    """BERT's additive mask `(1 - Cast(m)) * -10000` of an input m of `dtype`, [2, 1, 3, 5]."""
    nodes = [
        oh.make_node("Cast", ["m"], ["mf"], to=onnx.TensorProto.FLOAT),
        oh.make_node("Sub", ["one", "mf"], ["keep"]),
        oh.make_node("Mul", ["keep", "minus"], ["mask"]),
    ]
    inputs = [oh.make_tensor_value_info("m", dtype, [2, 1, 3, 5])]
    inits = [
        onnx.numpy_helper.from_array(np.float32(1.0), "one"),
        onnx.numpy_helper.from_array(np.float32(-10000.0), "minus"),
    ]
    return nodes, inputs, inits


@pytest.mark.parametrize(
    ("dtype", "fuses"), [(onnx.TensorProto.INT64, True), (onnx.TensorProto.FLOAT, False)]
)
def test_berts_additive_mask_fuses_when_it_comes_from_integers(dtype, fuses) -> None:
    # Cast of an int64 is within +-9.3e18, so the mask is within +-9.3e22: no -inf; a float
    # input through the same ops may hold -inf and a whole row of it
    nodes, inputs, inits = _additive_mask(dtype)
    model = _written_out(nodes, inputs, inits)
    result = rewriter.rewrite(model)
    assert ("Attention" in op_types(result.proto)) == fuses
    rng = np.random.default_rng(2)
    m = rng.integers(-3, 4, (2, 1, 3, 5)).astype(onnx.helper.tensor_dtype_to_np_dtype(dtype))
    m[1, 0, 2, :] = 0  # a row whose keys are all masked
    _compare(model, result.proto, _feeds() | {"m": m})
    if dtype == onnx.TensorProto.FLOAT:
        m[0, 0, 0, :] = np.inf  # (1 - inf) * -1e4 = +inf; -inf makes a NaN row
        _compare(model, result.proto, _feeds() | {"m": m})


def test_the_relaxed_rules_fuse_a_mask_input() -> None:
    model = _written_out([], [_mask_input()])
    library = rewriter.library_path()
    result = rewriter.rewrite(model, [library, library / "relaxed"])
    assert "Attention" in op_types(result.proto)
    _compare(model, result.proto, _feeds(mask=_with_rows(-1e4)))


def _attention_op(scale: float = 0.5) -> onnx.ModelProto:
    graph = oh.make_graph(
        [oh.make_node("Attention", ["q", "k", "v", "mask"], ["y"], scale=scale)],
        "g",
        [
            *(oh.make_tensor_value_info(n, onnx.TensorProto.FLOAT, SHAPES[n]) for n in "qkv"),
            _mask_input(),
        ],
        [oh.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 2, 3, 4])],
    )
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 23)])


@pytest.mark.parametrize("fill", [LOWEST, -np.inf, -1e4])
def test_the_decomposition_reads_the_lowest_float_as_onnxruntimes_kernel_does(fill) -> None:
    model = _attention_op()
    result = rewriter.rewrite(model, None, rewriter.RewriteOptions(target_opset=22))
    assert "Attention" not in op_types(result.proto)
    mask = _with_rows(fill)
    mask[0, 0, 0, :2] = LOWEST  # a row partly at the lowest value, partly not
    _compare(model, result.proto, _feeds(mask=mask))
    if fill != -1e4:
        (want,) = session(model).run(None, _feeds(mask=mask))
        assert (want[1, :, 2] == 0).all()  # onnxruntime: a fully masked row gives zeros
