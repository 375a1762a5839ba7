"""`inline_constant_ifs` and `flatten_concats`, and graph outputs that become initializers."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.parser

import ir
import rewriter
from rewriter.engine._structure import (
    FlattenConcatsOptions,
    InlineConstantIfsOptions,
    flatten_concats,
    inline_constant_ifs,
)
from tests.helpers import random_feeds, session


def _same_outputs(original: onnx.ModelProto, result: onnx.ModelProto) -> None:
    onnx.checker.check_model(result, full_check=True)
    a, b = session(original), session(result)
    assert [o.name for o in a.get_outputs()] == [o.name for o in b.get_outputs()]
    for seed in range(3):
        feeds = random_feeds(original, seed)
        for x, y in zip(a.run(None, feeds), b.run(None, feeds), strict=True):
            np.testing.assert_array_equal(x, y)


def _inline(text: str) -> tuple[onnx.ModelProto, onnx.ModelProto, int]:
    proto = onnx.parser.parse_model(text)
    model = ir.from_onnx(proto)
    result = inline_constant_ifs(model, InlineConstantIfsOptions())
    ir.verify(model)
    return proto, ir.to_onnx(model), result.count


_IF = """<ir_version: 8, opset_import: ["" : 13]>
g (float[5] a) => (float[5] result, float[5] after) {{
    cond = Constant <value = bool {{{cond}}}> ()
    result = If (cond) <
        then_branch = then_g () => (float[5] c) <float[5] d = {{1, 2, 3, 4, 5}}> {{
            b = Sin (a)
            c = Add (b, d)
        }},
        else_branch = else_g () => (float[5] e) {{
            e = Identity (a)
        }}
    >
    after = Relu (result)
}}"""


def test_the_then_branch_replaces_the_if():
    proto, result, count = _inline(_IF.format(cond=1))
    assert count == 1
    assert [n.op_type for n in result.graph.node] == ["Constant", "Sin", "Add", "Relu"]
    assert [o.name for o in result.graph.output] == ["result", "after"]
    assert len(result.graph.initializer) == 1  # the branch's `d`, now the graph's
    _same_outputs(proto, result)


def test_the_else_branch_replaces_the_if():
    proto, result, count = _inline(_IF.format(cond=0))
    assert count == 1
    assert [n.op_type for n in result.graph.node] == ["Constant", "Identity", "Relu"]
    _same_outputs(proto, result)


def test_a_branch_returning_an_outer_value_keeps_the_output_name_with_an_identity():
    # the else branch returns the graph input `a` itself: an input cannot also be named
    # `result`, so a copy holds that output
    proto, result, _ = _inline(
        """<ir_version: 8, opset_import: ["" : 13]>
        g (float[5] a) => (float[5] result) {
            cond = Constant <value = bool {0}> ()
            result = If (cond) <
                then_branch = then_g () => (float[5] c) { c = Sin (a) },
                else_branch = else_g () => (float[5] a2) { a2 = Identity (a) }
            >
        }"""
    )
    assert [n.op_type for n in result.graph.node] == ["Constant", "Identity"]
    _same_outputs(proto, result)


def test_a_computed_condition_keeps_the_if():
    _, result, count = _inline(
        """<ir_version: 8, opset_import: ["" : 13]>
        g (float[5] a, bool c) => (float[5] result) {
            result = If (c) <
                then_branch = then_g () => (float[5] x) { x = Sin (a) },
                else_branch = else_g () => (float[5] y) { y = Cos (a) }
            >
        }"""
    )
    assert count == 0
    assert [n.op_type for n in result.graph.node] == ["If"]


def test_nested_constant_ifs_and_ifs_in_loop_bodies_are_inlined():
    proto, result, count = _inline(
        """<ir_version: 8, opset_import: ["" : 13]>
        g (float[5] a) => (float[5] outer, float[5] looped) {
            t = Constant <value = bool {1}> ()
            outer = If (t) <
                then_branch = then_g () => (float[5] r) {
                    f = Constant <value = bool {0}> ()
                    r = If (f) <
                        then_branch = tt () => (float[5] p) { p = Sin (a) },
                        else_branch = te () => (float[5] q) { q = Cos (a) }
                    >
                },
                else_branch = else_g () => (float[5] s) { s = Neg (a) }
            >
            n = Constant <value = int64 {2}> ()
            looped = Loop (n, t, a) <
                body = body (int64 i, bool c, float[5] v) => (bool c2, float[5] w) {
                    c2 = Identity (c)
                    w = If (c) <
                        then_branch = lt () => (float[5] w1) { w1 = Relu (v) },
                        else_branch = le () => (float[5] w2) { w2 = Neg (v) }
                    >
                }
            >
        }"""
    )
    assert count == 2  # the outer If and the one it held (`c` in the loop body is an input)
    assert [n.op_type for n in result.graph.node] == [
        "Constant",
        "Constant",
        "Cos",
        "Constant",
        "Loop",
    ]
    _same_outputs(proto, result)


def _flatten(text: str) -> tuple[onnx.ModelProto, onnx.ModelProto, int]:
    proto = onnx.parser.parse_model(text)
    model = ir.from_onnx(proto)
    ir.infer_types(model)
    result = flatten_concats(model, FlattenConcatsOptions())
    ir.verify(model)
    return proto, ir.to_onnx(model), result.count


def test_concats_on_the_same_axis_flatten_at_any_position():
    proto, result, count = _flatten(
        """<ir_version: 8, opset_import: ["" : 13]>
        g (float[2, 3] a, float[4, 3] b, float[2, 3] c, float[1, 3] d, float[1, 3] e)
            => (float[10, 3] z) {
            x = Concat <axis = 0> (a, b)
            y = Concat <axis = -2> (d, e)
            z = Concat <axis = 0> (c, x, y)
        }"""
    )
    assert count == 2
    (node,) = result.graph.node
    assert list(node.input) == ["c", "a", "b", "d", "e"]
    _same_outputs(proto, result)


def test_a_run_keeps_a_flattening_whose_inputs_have_other_static_sizes():
    # onnxoptimizer's test_fuse_concats: the spliced inputs take other positions with other
    # sizes than the inner Concat's output had; the run's check of the pass judges the
    # Concat whole (its output type from its new inputs), not input by input.
    proto = onnx.parser.parse_model(
        """<ir_version: 8, opset_import: ["" : 13]>
        g (float[2, 3, 4] a, float[4, 3, 4] b, float[2, 3, 4] c, float[4, 3, 4] d,
           float[2, 3, 4] e, float[4, 3, 4] f, float[4, 3, 4] g) => (float[22, 3, 4] z) {
            x = Concat <axis = 0> (a, b, c)
            y = Concat <axis = 0> (d, e, f)
            z = Concat <axis = 0> (x, g, y)
        }"""
    )
    result = rewriter.rewrite(proto)
    assert not result.trace.warnings
    (node,) = result.proto.graph.node
    assert list(node.input) == ["a", "b", "c", "g", "d", "e", "f"]
    _same_outputs(proto, result.proto)


def test_concats_on_other_axes_or_with_other_readers_stay():
    proto, result, count = _flatten(
        """<ir_version: 8, opset_import: ["" : 13]>
        g (float[2, 3] a, float[2, 3] b, float[2, 6] c) => (float[4, 6] z, float[2, 6] x) {
            x = Concat <axis = 1> (a, b)
            w = Concat <axis = 0> (a, b)
            v = Concat <axis = 1> (w, w)
            z = Concat <axis = 0> (x, c)
            u = Concat <axis = 0> (v, v)
        }"""
    )
    assert count == 0
    assert result.graph.node == proto.graph.node


def test_the_default_library_inlines_a_constant_if_and_names_constant_outputs():
    # the condition is computed from constants (folded first); the output that ends up a
    # constant becomes an initializer under the output's own name, with no Identity
    proto = onnx.parser.parse_model(
        """<ir_version: 8, opset_import: ["" : 13]>
        g (float[5] a) => (float[5] result, float[2] k) {
            one = Constant <value = float {1}> ()
            two = Constant <value = float {2}> ()
            cond = Less (one, two)
            result = If (cond) <
                then_branch = then_g () => (float[5] c) { c = Sin (a) },
                else_branch = else_g () => (float[5] e) { e = Cos (a) }
            >
            k = Constant <value = float[2] {3, 4}> ()
        }"""
    )
    result = rewriter.rewrite(proto).proto
    assert [n.op_type for n in result.graph.node] == ["Sin"]
    assert [i.name for i in result.graph.initializer] == ["k"]
    _same_outputs(proto, result)
