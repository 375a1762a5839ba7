"""`ir.fact_type` remembers its combination of declared and inferred types, never stale."""

from __future__ import annotations

import ir
from ir import _infer

FLOAT = ir.DataType.FLOAT


def _computed(declared: ir.TensorType) -> ir.Value:
    """A value a Relu computes, with a declared type."""
    x = ir.Value("x", type=ir.TensorType(FLOAT, ("N", 4)))
    node = ir.Node("Relu", [x], outputs=[ir.Value("y", type=declared)])
    return node.outputs[0]


def test_a_replaced_inferred_type_is_read_again():
    value = _computed(ir.TensorType(FLOAT, ("N", None)))
    value.meta[_infer.INFERRED] = ir.TensorType(FLOAT, (None, 4))
    assert ir.fact_type(value) == ir.TensorType(FLOAT, ("N", 4))
    value.meta[_infer.INFERRED] = ir.TensorType(FLOAT, (None, 5))
    assert ir.fact_type(value) == ir.TensorType(FLOAT, ("N", 5))


def test_a_replaced_declared_type_is_read_again():
    value = _computed(ir.TensorType(FLOAT, ("N", None)))
    value.meta[_infer.INFERRED] = ir.TensorType(FLOAT, (None, 4))
    assert ir.fact_type(value) == ir.TensorType(FLOAT, ("N", 4))
    value.type = ir.TensorType(FLOAT, ("M", None))
    assert ir.fact_type(value) == ir.TensorType(FLOAT, ("M", 4))


def test_flags_set_after_a_first_answer_count():
    value = _computed(ir.TensorType(FLOAT, ("N", 4)))
    value.meta[_infer.INFERRED] = ir.TensorType(FLOAT, (None, None))
    assert ir.fact_type(value) == ir.TensorType(FLOAT, ("N", 4))
    value.meta[_infer.UNSURE_DECLARED_DIMS] = True
    assert ir.fact_type(value) == ir.TensorType(FLOAT, (None, None))
    value.meta[_infer.DECLARED_RANK_WRONG] = True
    value.meta[_infer.INFERRED] = ir.TensorType(FLOAT)
    assert ir.fact_type(value) == ir.TensorType(FLOAT)


def test_dims_inference_invented_are_no_facts_of_a_computed_value():
    invented = ir.TensorType(FLOAT, ("unk__3", 4))
    value = _computed(invented)
    value.meta[_infer.INFERRED] = ir.TensorType(FLOAT, (None, 4))
    assert ir.fact_type(value) == ir.TensorType(FLOAT, (None, 4))
    graph_input = ir.Value("z", type=invented)
    graph_input.meta[_infer.INFERRED] = ir.TensorType(FLOAT, (None, 4))
    assert ir.fact_type(graph_input) == invented
