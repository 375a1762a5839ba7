"""Unit tests of the IR core: building graphs, the mutation API and use-def links."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.parser
import pytest

import ir
from tests.ir._roundtrip import assert_roundtrip_exact


def _tensor(dtype: ir.DataType = ir.DataType.FLOAT, shape: tuple[int, ...] = (2,)) -> ir.Type:
    return ir.TensorType(dtype, shape)


def _chain() -> tuple[ir.Graph, ir.Value, ir.Node, ir.Node]:
    """x -> Relu -> a -> Neg -> y (graph output)."""
    x = ir.Value("x", _tensor())
    relu = ir.Node("Relu", [x], outputs=["a"])
    neg = ir.Node("Neg", [relu.outputs[0]], outputs=["y"])
    graph = ir.Graph([x], [neg.outputs[0]], [relu, neg], name="chain")
    return graph, x, relu, neg


def _uses_are_symmetric(graph: ir.Graph) -> None:
    for g in graph.all_graphs():
        for node in g:
            for i, value in enumerate(node.inputs):
                if value is not None:
                    assert ir.Use(node, i) in value.uses
        for value in g.values():
            for use in value.uses:
                assert use.node.inputs[use.index] is value


# ---------------------------------------------------------------------------------------------
# Building and use-def links


def test_new_node_registers_its_uses_immediately() -> None:
    x = ir.Value("x")
    node = ir.Node("Add", [x, x], outputs=["y"])
    assert x.uses == (ir.Use(node, 0), ir.Use(node, 1))
    assert x.users() == (node,)
    assert x.num_uses() == 2
    assert node.outputs[0].producer() is node
    assert node.outputs[0].index == 0


def test_built_graph_verifies_and_knows_ownership() -> None:
    graph, x, relu, neg = _chain()
    ir.verify(graph)
    assert relu.graph is graph
    assert x.graph is graph
    assert x.is_graph_input()
    assert neg.outputs[0].is_graph_output()
    assert list(graph) == [relu, neg]
    assert relu in graph
    assert len(graph) == 2


def test_omitted_optional_input_is_none_and_has_no_use() -> None:
    x = ir.Value("x")
    node = ir.Node("Clip", [x, None, None], outputs=["y"])
    assert node.inputs == (x, None, None)
    assert x.uses == (ir.Use(node, 0),)


def test_node_from_attribute_mapping_infers_kinds() -> None:
    node = ir.Node(
        "Foo",
        [],
        {"i": 3, "f": 1.5, "s": "text", "ints": [1, 2], "floats": [1.0, 2], "strs": ["a"]},
        domain="custom",
    )
    kinds = {name: attr.type for name, attr in node.attributes.items()}
    assert kinds == {
        "i": ir.AttrType.INT,
        "f": ir.AttrType.FLOAT,
        "s": ir.AttrType.STRING,
        "ints": ir.AttrType.INTS,
        "floats": ir.AttrType.FLOATS,
        "strs": ir.AttrType.STRINGS,
    }
    assert node.attribute("ints") == (1, 2)
    assert node.attribute("missing", 7) == 7


def test_a_value_cannot_be_produced_twice() -> None:
    node = ir.Node("Relu", [], outputs=["y"])
    with pytest.raises(ValueError, match="already defined"):
        ir.Node("Neg", [], outputs=[node.outputs[0]])


def test_structural_fields_refuse_assignment_and_name_the_method() -> None:
    node = ir.Node("Relu", [ir.Value("x")])
    with pytest.raises(AttributeError, match="replace_input_with"):
        node.inputs = ()
    with pytest.raises(AttributeError, match="outputs"):
        node.outputs = ()
    attr = ir.attr_int("axis", 1)
    with pytest.raises(AttributeError, match="set_attribute"):
        attr.value = 2


def test_attributes_view_is_read_only() -> None:
    node = ir.Node("Foo", [], [ir.attr_int("a", 1)])
    with pytest.raises(TypeError):
        node.attributes["b"] = ir.attr_int("b", 2)  # type: ignore[index]
    node.set_attribute(ir.attr_int("b", 2))
    node.remove_attribute("a")
    assert list(node.attributes) == ["b"]


# ---------------------------------------------------------------------------------------------
# Mutation


def test_append_adds_a_detached_node_at_the_end() -> None:
    graph, _, _, neg = _chain()
    extra = ir.Node("Abs", [neg.outputs[0]], outputs=["z"])
    graph.append(extra)
    assert graph.nodes[-1] is extra
    assert extra.graph is graph
    ir.verify(graph)


def test_append_refuses_a_node_of_another_graph() -> None:
    graph, _, relu, _ = _chain()
    other, *_ = _chain()
    with pytest.raises(ValueError, match="already belongs"):
        other.append(relu)
    assert relu.graph is graph


def test_insert_before_and_after_keep_the_rest_in_order() -> None:
    graph, x, relu, neg = _chain()
    first = ir.Node("Identity", [x], outputs=["i0"])
    middle = ir.Node("Identity", [x], outputs=["i1"])
    graph.insert_before(relu, [first])
    graph.insert_after(relu, [middle])
    assert list(graph) == [first, relu, middle, neg]
    ir.verify(graph)


def test_graph_output_membership_follows_every_output_change() -> None:
    graph, _x, relu, neg = _chain()
    a, y = relu.outputs[0], neg.outputs[0]
    graph.add_output(y)  # y fills two slots
    graph.set_output(0, a)
    assert a.is_graph_output()
    assert y.is_graph_output()
    graph.remove_output(1)
    assert not y.is_graph_output()
    assert graph.is_output(a)
    assert not graph.is_output(y)
    graph.set_output(0, y)
    assert y.is_graph_output()
    assert not a.is_graph_output()
    assert graph.outputs == (y,)


def test_remove_refuses_a_node_whose_output_is_used() -> None:
    graph, _, relu, neg = _chain()
    with pytest.raises(ValueError, match="still used by"):
        graph.remove(relu)
    assert relu.graph is graph
    assert relu.outputs[0].uses == (ir.Use(neg, 0),)
    ir.verify(graph)


def test_remove_refuses_a_node_producing_a_graph_output() -> None:
    graph, _, _, neg = _chain()
    with pytest.raises(ValueError, match="graph output"):
        graph.remove(neg)
    assert neg in graph


def test_remove_unused_node_drops_its_uses() -> None:
    graph, x, relu, _ = _chain()
    dead = ir.Node("Abs", [x], outputs=["dead"])
    graph.append(dead)
    graph.remove(dead)
    assert dead.graph is None
    assert x.uses == (ir.Use(relu, 0),)
    ir.verify(graph)


def test_unsafe_remove_then_verify_reports_the_dangling_use() -> None:
    graph, _, relu, _ = _chain()
    graph.remove(relu, safe=False)
    with pytest.raises(ir.GraphStructureError, match="not defined in scope"):
        ir.verify(graph)


def test_replace_input_with_moves_the_use() -> None:
    graph, x, relu, neg = _chain()
    neg.replace_input_with(0, x)
    assert neg.inputs == (x,)
    assert relu.outputs[0].uses == ()
    assert set(x.uses) == {ir.Use(relu, 0), ir.Use(neg, 0)}
    ir.verify(graph)
    with pytest.raises(IndexError):
        neg.replace_input_with(3, x)


def test_set_inputs_and_append_input_keep_uses_right() -> None:
    graph, x, relu, neg = _chain()
    a = relu.outputs[0]
    neg.set_inputs([a, x])
    neg.append_input(None)
    neg.append_input(a)
    assert neg.inputs == (a, x, None, a)
    assert a.uses == (ir.Use(neg, 0), ir.Use(neg, 3))
    neg.set_inputs([x])
    assert len(a.uses) == 0
    ir.verify(graph)


def test_replace_all_uses_with_moves_every_use_but_keeps_graph_outputs() -> None:
    graph, x, relu, neg = _chain()
    a = relu.outputs[0]
    other = ir.Node("Abs", [a], outputs=["b"])
    graph.append(other)
    graph.add_output(a)
    a.replace_all_uses_with(x)
    assert a.uses == ()
    assert neg.inputs == (x,)
    assert other.inputs == (x,)
    assert graph.outputs[1] is a
    ir.verify(graph)
    _uses_are_symmetric(graph)


def test_replace_all_uses_with_can_swap_graph_outputs() -> None:
    graph, _, relu, neg = _chain()
    y = neg.outputs[0]
    replacement = ir.Node("Abs", [relu.outputs[0]], outputs=["y2"])
    graph.append(replacement)
    y.replace_all_uses_with(replacement.outputs[0], replace_graph_outputs=True)
    assert graph.outputs == (replacement.outputs[0],)
    graph.remove(neg)
    ir.verify(graph)
    lowered = ir.to_onnx(ir.Model(graph))
    assert [o.name for o in lowered.graph.output] == ["y2"]


def test_replace_all_uses_with_itself_is_refused() -> None:
    _, x, _, _ = _chain()
    with pytest.raises(ValueError, match="itself"):
        x.replace_all_uses_with(x)


def test_replace_all_uses_reaches_into_subgraphs() -> None:
    model = ir.from_onnx(_if_model())
    graph = model.graph
    t = next(n for n in graph if n.op_type == "Neg").outputs[0]
    x = graph.inputs[0]
    inner_users = [u.node for u in t.uses if u.node.graph is not graph]
    assert inner_users, "the If branch should read the outer value t"
    t.replace_all_uses_with(x)
    for node in inner_users:
        assert x in node.inputs
    assert t.uses == ()
    ir.verify(model)
    lowered = ir.to_onnx(model)
    then_branch = next(a.g for a in lowered.graph.node[-1].attribute if a.name == "then_branch")
    assert list(then_branch.node[0].input) == ["x"]


def test_rename_value_updates_every_reference_on_lowering() -> None:
    model = ir.from_onnx(_if_model())
    t = next(n for n in model.graph if n.op_type == "Neg").outputs[0]
    t.name = "renamed"
    lowered = ir.to_onnx(model)
    assert "renamed" in lowered.graph.node[0].output
    text = str(lowered)
    assert '"t"' not in text
    onnx.checker.check_model(lowered, full_check=True)


def test_rename_initializer_keeps_the_registry_in_step() -> None:
    model = ir.from_onnx(_initializer_model())
    w = model.graph.initializers["w"]
    w.name = "weights"
    assert list(model.graph.initializers) == ["weights"]
    lowered = ir.to_onnx(model)
    assert [t.name for t in lowered.graph.initializer] == ["weights"]
    assert list(lowered.graph.node[0].input) == ["x", "weights"]
    ir.verify(model)


def test_rename_to_an_existing_initializer_name_is_refused() -> None:
    model = ir.from_onnx(_initializer_model(extra=True))
    with pytest.raises(ValueError, match="already exists"):
        model.graph.initializers["w"].name = "w2"


# ---------------------------------------------------------------------------------------------
# Models used above


def _if_model() -> onnx.ModelProto:
    return onnx.parser.parse_model(
        """
        <ir_version: 10, opset_import: ["" : 18]>
        main (float[2] x, bool c) => (float[2] y) {
            t = Neg (x)
            y = If (c) <
                then_branch = g1 () => (float[2] a) { a = Abs (t) },
                else_branch = g2 () => (float[2] b) { b = Relu (t) }
            >
        }
        """
    )


def _initializer_model(extra: bool = False) -> onnx.ModelProto:
    extra_init = ", float[2] w2 = {3.0, 4.0}" if extra else ""
    return onnx.parser.parse_model(
        f"""
        <ir_version: 10, opset_import: ["" : 18]>
        main (float[2] x) => (float[2] y)
        <float[2] w = {{1.0, 2.0}}{extra_init}> {{
            y = Add (x, w)
        }}
        """
    )


def test_example_models_round_trip() -> None:
    assert_roundtrip_exact(_if_model())
    assert_roundtrip_exact(_initializer_model(extra=True))
    assert np.array_equal(
        ir.from_onnx(_initializer_model()).graph.initializers["w"].const_value.numpy(),  # type: ignore[union-attr]
        np.array([1.0, 2.0], np.float32),
    )
