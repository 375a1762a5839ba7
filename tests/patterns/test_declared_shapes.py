"""Declared shapes of computed values are no facts: the library on models that declare wrong ones.

onnxruntime checks the element types a model declares for computed values (value_info, graph
outputs) but not their shapes: it computes what the nodes compute, and for a graph output only
warns. Each model here declares a shape its graph does not compute for the inputs given; the
rewrite must compute what onnxruntime computes on the original. The same structures with the
shape read back from the graph, so that inference finds what the declaration says, still
simplify.
"""

from __future__ import annotations

import numpy as np
import pytest

import rewriter
from tests.helpers import model_from_text, op_types, session

_HEADER = '<ir_version: 8, opset_import: ["" : 18]>\n'

# name -> (model text, inputs that expose the declared shape as wrong)
LYING = {
    # the output declares x's dims; the second Reshape reads its shape from an input
    "reshape_chain_into_output": (
        """g (float[N, M] x, int64[2] s) => (float[N, M] y) <int64[1] m1 = {-1}> {
            t = Reshape (x, m1)
            y = Reshape (t, s)
        }""",
        {"x": np.arange(6, dtype=np.float32).reshape(2, 3), "s": np.array([3, 2])},
    ),
    # value_info says x is [N, M] (a 2-D input makes Flatten a no-op); it is 3-D
    "flatten_of_value_info": (
        """g (float[K] a, int64[S] s) => (float[N, M] y) <float[N, M] x> {
            x = Reshape (a, s)
            y = Flatten <axis = 1> (x)
        }""",
        {"a": np.arange(6, dtype=np.float32), "s": np.array([2, 3, 1])},
    ),
    # value_info gives b x's dims: the two dims read back are not one value
    "equal_dims_of_value_info": (
        """g (float[N, M] x, float[K] a, int64[2] s) => (int64 p, int64 q)
            <int64 zero = {0}, int64 one = {1}, float[N, M] b> {
            b = Reshape (a, s)
            sa = Shape (x)
            pa = Gather (sa, zero)
            p = Add (pa, one)
            sb = Shape (b)
            qb = Gather (sb, zero)
            q = Add (qb, one)
        }""",
        {
            "x": np.zeros((2, 3), np.float32),
            "a": np.arange(6, dtype=np.float32),
            "s": np.array([3, 2]),
        },
    ),
    # a static declared output dim: the Shape of the output is not [6]
    "shape_of_a_static_output": (
        """g (float[K] a, int64[1] s) => (float[6] y, int64[1] z) {
            y = Reshape (a, s)
            z = Shape (y)
        }""",
        {"a": np.arange(4, dtype=np.float32), "s": np.array([4])},
    ),
}


@pytest.mark.parametrize("name", sorted(LYING))
def test_a_wrong_declared_shape_does_not_change_what_the_rewrite_computes(name: str) -> None:
    text, feeds = LYING[name]
    model = model_from_text(_HEADER + text)
    result = rewriter.rewrite(model)
    expected = session(model).run(None, feeds)
    actual = session(result.proto).run(None, feeds)
    for want, got in zip(expected, actual, strict=True):
        assert got.shape == want.shape
        np.testing.assert_array_equal(got, want)
    # the declarations stay in the model as they were
    assert [o.type for o in result.proto.graph.output] == [o.type for o in model.graph.output]
    kept = {i.name: i.type for i in result.proto.graph.value_info}
    for info in model.graph.value_info:
        if info.name in kept:
            assert kept[info.name] == info.type


# name -> (model text, the op types left, inputs)
TRUTHFUL = {
    # the second Reshape reads x's shape back: inference gives y x's dims (the output is
    # then x itself, copied by an Identity)
    "reshape_chain_to_the_input_shape": (
        """g (float[N, M] x) => (float[N, M] y) <int64[1] m1 = {-1}> {
            t = Reshape (x, m1)
            s = Shape (x)
            y = Reshape (t, s)
        }""",
        ["Identity"],
        {"x": np.arange(6, dtype=np.float32).reshape(2, 3)},
    ),
    # x is a Relu of a 2-D input, declared so in value_info: Flatten keeps it
    "flatten_of_a_computed_2d_value": (
        """g (float[N, M] a) => (float[N, M] y) <float[N, M] x> {
            x = Relu (a)
            y = Flatten <axis = 1> (x)
        }""",
        ["Relu"],
        {"a": np.arange(-3, 3, dtype=np.float32).reshape(2, 3)},
    ),
    # b is a Relu of x: its first dim is x's, read back once
    "equal_dims_of_a_computed_value": (
        """g (float[N, M] x) => (int64 p, int64 q)
            <int64 zero = {0}, int64 one = {1}, float[N, M] b> {
            b = Relu (x)
            sa = Shape (x)
            pa = Gather (sa, zero)
            p = Add (pa, one)
            sb = Shape (b)
            qb = Gather (sb, zero)
            q = Mul (qb, pa)
        }""",
        ["Shape", "Gather", "Add", "Mul"],
        {"x": np.zeros((2, 3), np.float32)},
    ),
}


@pytest.mark.parametrize("name", sorted(TRUTHFUL))
def test_a_declared_shape_inference_confirms_still_lets_the_rules_fire(name: str) -> None:
    text, left, feeds = TRUTHFUL[name]
    model = model_from_text(_HEADER + text)
    result = rewriter.rewrite(model)
    assert op_types(result.proto) == left
    expected = session(model).run(None, feeds)
    actual = session(result.proto).run(None, feeds)
    for want, got in zip(expected, actual, strict=True):
        assert got.shape == want.shape
        np.testing.assert_array_equal(got, want)
