"""`lower_bound(v)`: element bounds carried from Shape/Size and constants through shape ops."""

from __future__ import annotations

import onnx.parser

import ir
from rewriter.engine import _facts


def _values() -> dict[str, ir.Value]:
    model = ir.from_onnx(
        onnx.parser.parse_model(
            """<ir_version: 8, opset_import: ["" : 17]>
            g (float[N, 4] x, int64[2] free) => (int64[3] c, int64[3] d, int64 n) {
                s = Shape (x)
                i = Constant <value = int64 {0}> ()
                g0 = Gather <axis = 0> (s, i)
                a = Constant <value = int64[1] {0}> ()
                u = Unsqueeze (g0, a)
                m = Constant <value = int64[2] {-1, 7}> ()
                c = Concat <axis = 0> (u, m)
                d = Concat <axis = 0> (u, free)
                n = Size (x)
            }"""
        )
    )
    return {v.name: v for v in model.graph.values()}


def test_sizes_are_never_negative_and_concat_takes_the_smallest_bound():
    values = _values()
    assert _facts.lower_bound(values["s"]) == 0
    assert _facts.lower_bound(values["g0"]) == 0
    assert _facts.lower_bound(values["u"]) == 0
    assert _facts.lower_bound(values["n"]) == 0
    assert _facts.lower_bound(values["m"]) == -1
    assert _facts.lower_bound(values["c"]) == -1


def test_a_graph_input_has_no_bound_and_neither_has_what_reads_it():
    values = _values()
    assert _facts.lower_bound(values["free"]) is None
    assert _facts.lower_bound(values["d"]) is None
