"""Removing a node that holds subgraphs drops the subgraphs' uses of outer values."""

from __future__ import annotations

import ir
from tests.helpers import model_from_text


def test_removing_an_if_drops_its_branches_uses_of_outer_values():
    model = ir.from_onnx(
        model_from_text(
            """<ir_version: 8, opset_import: ["" : 17]>
            g (bool c, float[4] x) => (float[4] z) {
                y = If (c) <
                    then_branch = t () => (float[4] a) { a = Relu (x) },
                    else_branch = e () => (float[4] b) { b = Neg (x) }
                >
                z = Relu (x)
            }"""
        )
    )
    x = model.graph.inputs[1]
    assert len(x.uses) == 3  # the two branches and z
    model.graph.remove(model.graph.nodes[0])
    assert [use.node.op_type for use in x.uses] == ["Relu"]
    ir.verify(model)
