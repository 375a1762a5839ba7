"""Rewrites stay valid on empty tensors (issue 16, class 5).

Reshape's -1 stands for the size divided by the other dims, which is undefined when they
multiply to 0: onnxruntime rejects `Reshape(x[0, 3, 4], [0, -1])`, while `Flatten(x, 1)`
returns a (0, 12) tensor. Each model runs through the default library and is compared with the
original under onnxruntime at sizes that make some dim 0 (and at ordinary sizes).
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest

import rewriter
from tests.helpers import model_from_text, op_types, session


def _assert_same_at(original: onnx.ModelProto, rewritten: onnx.ModelProto, feeds: dict) -> None:
    expected = session(original).run(None, feeds)
    got = session(rewritten).run(None, feeds)
    for want, have in zip(expected, got, strict=True):
        assert want.shape == have.shape
        assert want.dtype == have.dtype
        np.testing.assert_array_equal(have, want)


FLATTEN = """<ir_version: 8, opset_import: ["" : 17]>
g (float[N, 3, 4] x) => (float[N, 12] y) {
    f = Flatten <axis = 1> (x)
    y = Relu (f)
}"""

FLATTEN_SYMBOLIC_TAIL = """<ir_version: 8, opset_import: ["" : 17]>
g (float[2, M, 4] x) => (float[2, ?] y) {
    f = Flatten <axis = 1> (x)
    y = Relu (f)
}"""

FLATTEN_THEN_MATMUL = """<ir_version: 8, opset_import: ["" : 17]>
g (float[N, 3, 1, 1] x) => (float[N, 2] y) <float[3, 2] w = {1, 2, 3, 4, 5, 6}, float[2] b = {1, -1}> {
    f = Flatten <axis = 1> (x)
    m = MatMul (f, w)
    y = Add (m, b)
}"""

COMPUTED_RESHAPE = """<ir_version: 8, opset_import: ["" : 17]>
g (float[N, M, 6] x) => (float[N, ?] y) <int64[1] zero = {0}, int64[1] one = {1}, int64[1] two = {2}, int64[1] six = {6}> {
    s = Shape (x)
    n = Slice (s, zero, one)
    m = Slice (s, one, two)
    k = Mul (m, six)
    t = Concat <axis = 0> (n, k)
    y = Reshape (x, t)
}"""

COMPUTED_RESHAPE_MERGED = """<ir_version: 8, opset_import: ["" : 17]>
g (float[N, M, 6] x) => (float[?, 6] y) <int64[1] zero = {0}, int64[1] one = {1}, int64[1] two = {2}, int64[1] six = {6}> {
    s = Shape (x)
    n = Slice (s, zero, one)
    m = Slice (s, one, two)
    k = Mul (n, m)
    t = Concat <axis = 0> (k, six)
    y = Reshape (x, t)
}"""


@pytest.mark.parametrize(
    ("text", "shapes"),
    [
        (FLATTEN, [(0, 3, 4), (2, 3, 4)]),
        (FLATTEN_SYMBOLIC_TAIL, [(2, 0, 4), (2, 5, 4)]),
        (FLATTEN_THEN_MATMUL, [(0, 3, 1, 1), (4, 3, 1, 1)]),
        (COMPUTED_RESHAPE, [(0, 5, 6), (3, 0, 6), (3, 5, 6)]),
        # (3, 0, 6) makes the computed shape [0, 6] copy the 3: the original fails there
        (COMPUTED_RESHAPE_MERGED, [(0, 5, 6), (3, 5, 6)]),
    ],
)
def test_rewritten_model_computes_the_same_on_empty_tensors(text: str, shapes: list) -> None:
    original = model_from_text(text)
    result = rewriter.rewrite(original)
    for shape in shapes:
        feeds = {"x": np.arange(np.prod(shape), dtype=np.float32).reshape(shape)}
        _assert_same_at(original, result.proto, feeds)


def test_flatten_with_static_trailing_dims_becomes_a_reshape_to_minus_one_and_k() -> None:
    result = rewriter.rewrite(model_from_text(FLATTEN))
    assert op_types(result.proto) == ["Reshape", "Relu"]
    shape_input = result.proto.graph.node[0].input[1]
    (tensor,) = [t for t in result.proto.graph.initializer if t.name == shape_input]
    assert onnx.numpy_helper.to_array(tensor).tolist() == [-1, 12]
