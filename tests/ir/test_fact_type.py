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


def _graph_input(declared: ir.TensorType) -> ir.Value:
    """A value no node computes (a graph input), with a declared type."""
    return ir.Value("z", type=declared)


def test_a_replaced_inferred_type_is_read_again():
    value = _graph_input(ir.TensorType(FLOAT, ("N", None)))
    value.meta[_infer.INFERRED] = ir.TensorType(FLOAT, (None, 4))
    assert ir.fact_type(value) == ir.TensorType(FLOAT, ("N", 4))
    value.meta[_infer.INFERRED] = ir.TensorType(FLOAT, (None, 5))
    assert ir.fact_type(value) == ir.TensorType(FLOAT, ("N", 5))


def test_a_replaced_declared_type_is_read_again():
    value = _graph_input(ir.TensorType(FLOAT, ("N", None)))
    value.meta[_infer.INFERRED] = ir.TensorType(FLOAT, (None, 4))
    assert ir.fact_type(value) == ir.TensorType(FLOAT, ("N", 4))
    value.type = ir.TensorType(FLOAT, ("M", None))
    assert ir.fact_type(value) == ir.TensorType(FLOAT, ("M", 4))


def test_the_declared_shape_of_a_computed_value_is_no_fact():
    value = _computed(ir.TensorType(FLOAT, ("N", 4)))
    assert ir.fact_type(value) == ir.TensorType(FLOAT)
    value.meta[_infer.INFERRED] = ir.TensorType(ir.DataType.UNDEFINED, (None, None))
    assert ir.fact_type(value) == ir.TensorType(FLOAT, (None, None))
    value.meta[_infer.INFERRED] = ir.TensorType(FLOAT, ("N", 4))
    assert ir.fact_type(value) == ir.TensorType(FLOAT, ("N", 4))


def test_a_graph_input_keeps_every_declared_dim():
    declared = ir.TensorType(FLOAT, ("unk__3", 4))
    value = _graph_input(declared)
    value.meta[_infer.INFERRED] = ir.TensorType(FLOAT, (None, 4))
    assert ir.fact_type(value) == declared


def test_a_computed_sequence_keeps_only_its_element_type():
    value = _computed(ir.TensorType(FLOAT))
    value.type = ir.SequenceType(ir.TensorType(FLOAT, ("N", 4)))
    assert ir.fact_type(value) == ir.SequenceType(ir.TensorType(FLOAT))
