"""Rules of patterns/fusion/cleanup.rw and the CastLike rule of conv.rw: the clean-ups that
close node-count gaps to the peer optimizers; each fires where it should and not on a near miss."""

from __future__ import annotations

import pytest

from rewriter.api import RewriteOptions
from rewriter.engine import DEFAULT_PIPELINE
from tests.patterns.fusion_helpers import FUSION, build, check_fired, fired, rewrite

CLEANUP = FUSION / "cleanup.rw"
# With the library's passes: constant folding and dead code elimination.
WITH_PIPELINE = RewriteOptions(passes=DEFAULT_PIPELINE)
CONV = FUSION / "conv.rw"


def test_constant_to_initializer():
    model = build(
        """<ir_version: 8, opset_import: ["" : 17]>
        g (float[N, 3] x) => (float[N, 3] y) {
            c = Constant <value = float[3] {1, 2, 3}> ()
            k = Constant <value_int = 2> ()
            y = Mul (x, c)
        }"""
    )
    result = rewrite(model, CLEANUP, options=WITH_PIPELINE)
    check_fired(model, result, {"constant_to_initializer": 2}, ["Mul"])
    assert len(result.proto.graph.initializer) == 1  # k had no use: dead code


def test_constant_to_initializer_keeps_a_graph_output_and_strings():
    model = build(
        """<ir_version: 8, opset_import: ["" : 17]>
        g (float[N, 3] x) => (float[3] c, string[2] s) {
            c = Constant <value = float[3] {1, 2, 3}> ()
            s = Constant <value_strings = ["a", "b"]> ()
        }"""
    )
    result = rewrite(model, CLEANUP)
    assert [o.name for o in result.proto.graph.output] == ["c", "s"]
    assert "s" in {o for n in result.proto.graph.node for o in n.output}  # the string stays a node


def _shape_model(body: str, x: str = "float[N, 5, 8] x", opset: int = 17) -> object:
    """`body` computes int64 `d` from x's shape; the model returns x * float(sum(d))."""
    return build(
        f"""<ir_version: 8, opset_import: ["" : {opset}]>
        g ({x}) => (float[N, 5, 8] y) {{
            {body}
            t = ReduceSum (d)
            f = Cast <to = 1> (t)
            y = Mul (x, f)
        }}"""
    )


@pytest.mark.parametrize("index", ["int64 {2}", "int64[1] {-2}"])
def test_fold_static_dim_of_shape(index):
    model = _shape_model(
        f"""s = Shape (x)
            i = Constant <value = {index}> ()
            d = Gather <axis = 0> (s, i)"""
    )
    result = rewrite(model, CLEANUP, options=WITH_PIPELINE)
    check_fired(
        model, result, {"fold_static_dim_of_shape": 1, "constant_to_initializer": 1}, ["Mul"]
    )


def test_fold_static_dim_of_shape_with_start():
    model = _shape_model(
        """s = Shape <start = 1> (x)
            i = Constant <value = int64 {1}> ()
            d = Gather <axis = 0> (s, i)"""
    )
    result = rewrite(model, CLEANUP, options=WITH_PIPELINE)
    check_fired(
        model, result, {"fold_static_dim_of_shape": 1, "constant_to_initializer": 1}, ["Mul"]
    )


def test_fold_static_dim_of_shape_near_miss_symbolic_dim():
    model = _shape_model(
        """s = Shape (x)
            i = Constant <value = int64 {0}> ()
            d = Gather <axis = 0> (s, i)"""
    )
    assert "fold_static_dim_of_shape" not in fired(rewrite(model, CLEANUP))


@pytest.mark.parametrize(("starts", "ends"), [("-1", "9223372036854775807"), ("1", "3")])
def test_fold_static_slice_of_shape(starts, ends):
    model = _shape_model(
        f"""s = Shape (x)
            a = Constant <value = int64[1] {{{starts}}}> ()
            b = Constant <value = int64[1] {{{ends}}}> ()
            d = Slice (s, a, b)"""
    )
    result = rewrite(model, CLEANUP, options=WITH_PIPELINE)
    check_fired(
        model, result, {"fold_static_slice_of_shape": 1, "constant_to_initializer": 2}, ["Mul"]
    )


@pytest.mark.parametrize(("starts", "ends", "steps"), [("0", "2", "1"), ("1", "3", "2")])
def test_fold_static_slice_of_shape_near_misses(starts, ends, steps):
    # a symbolic dim in the slice; a step of 2
    model = _shape_model(
        f"""s = Shape (x)
            a = Constant <value = int64[1] {{{starts}}}> ()
            b = Constant <value = int64[1] {{{ends}}}> ()
            ax = Constant <value = int64[1] {{0}}> ()
            st = Constant <value = int64[1] {{{steps}}}> ()
            d = Slice (s, a, b, ax, st)"""
    )
    assert "fold_static_slice_of_shape" not in fired(rewrite(model, CLEANUP))


def test_castlike_of_constant_to_cast():
    model = build(
        """<ir_version: 8, opset_import: ["" : 17]>
        g (float16[N, 3] x) => (float16[N, 3] y) {
            c = Constant <value = float {0.5}> ()
            h = CastLike (c, x)
            y = Mul (x, h)
        }"""
    )
    result = rewrite(model, CONV)
    check_fired(model, result, {"castlike_of_constant_to_cast": 1}, ["Constant", "Cast", "Mul"])


def test_castlike_of_a_computed_value_is_kept():
    model = build(
        """<ir_version: 8, opset_import: ["" : 17]>
        g (float[N, 3] x, float16[N, 3] like) => (float16[N, 3] y) {
            y = CastLike (x, like)
        }"""
    )
    assert not fired(rewrite(model, CONV))
