"""`ir.Journal`: changes made while it is open are reported, and undone exactly."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnx.parser
import pytest

import ir

MODELS = Path(__file__).resolve().parents[1] / "models"

TEXT = """
<ir_version: 10, opset_import: ["" : 18]>
main (float[2] x, bool c) => (float[2] y, float[2] z) {
    t = Neg (x)
    u = Relu (t)
    y = If (c) <
        then_branch = g1 () => (float[2] a) { a = Abs (u) },
        else_branch = g2 () => (float[2] b) { b = Relu (t) }
    >
    z = Add (u, x)
}
"""


def _model() -> ir.Model:
    return ir.from_onnx(onnx.parser.parse_model(TEXT))


def _fingerprint(model: ir.Model) -> bytes:
    """Everything about the model, use lists included, as bytes."""
    uses = [
        (value.name, [(user.name, index) for user, index in value.uses])
        for graph in model.graphs()
        for value in graph.values()
    ]
    return ir.to_onnx(model).SerializeToString() + repr(uses).encode()


def _mutate(model: ir.Model) -> None:
    """A bit of every kind of change a pass makes."""
    graph = model.graph
    neg, relu, branch, add = graph.nodes
    one = ir.Value("one", ir.TensorType(ir.DataType.FLOAT, ()))
    one.const_value = ir.NumpyTensor(np.array(1.0, dtype=np.float32), "one")
    graph.add_initializer(one)
    mul = ir.Node("Mul", [neg.outputs[0], one], outputs=["m"], name="mul")
    graph.append(mul)
    relu.replace_input_with(0, mul.outputs[0])
    add.set_inputs([relu.outputs[0], relu.outputs[0]])
    add.set_attribute(ir.attr_int("unused", 1))
    add.name = "renamed"
    relu.outputs[0].name = "u2"
    x = graph.inputs[0]
    x.type = ir.TensorType(ir.DataType.FLOAT, (3,))
    graph.set_output(1, relu.outputs[0])
    inner = next(iter(branch.subgraphs()))
    abs_node = inner.nodes[0]
    abs_node.replace_input_with(0, x)
    graph.insert_before(relu, [ir.Node("Identity", [x], outputs=["i"], name="id")])
    model.opset_imports["com.example"] = 1
    graph.remove(add)
    graph.sort()


def test_undo_restores_the_model_exactly() -> None:
    model = _model()
    before = _fingerprint(model)
    with ir.Journal(model) as journal:
        _mutate(model)
        assert journal
        assert _fingerprint(model) != before
        journal.undo()
    assert _fingerprint(model) == before
    ir.verify(model.graph)


def test_undo_restores_which_values_are_graph_outputs() -> None:
    # The graph answers `is_graph_output` from a count of output slots: undo recounts them.
    model = _model()
    graph = model.graph
    y, z = graph.outputs
    t = graph.nodes[0].outputs[0]
    with ir.Journal(model) as journal:
        graph.set_output(1, t)
        graph.add_output(t)
        graph.remove_output(0)
        assert t.is_graph_output()
        assert not y.is_graph_output()
        assert not z.is_graph_output()
        journal.undo()
    assert graph.outputs == (y, z)
    assert y.is_graph_output()
    assert z.is_graph_output()
    assert not t.is_graph_output()
    assert graph.is_output(z)
    assert not graph.is_output(t)
    graph.remove_output(1)  # the recount is right: z leaves, y stays
    assert not z.is_graph_output()
    assert y.is_graph_output()


def test_undo_restores_which_values_are_graph_inputs() -> None:
    # The graph answers `is_graph_input` from a set of its inputs: undo makes it again.
    model = _model()
    graph = model.graph
    x, c = graph.inputs
    extra = ir.Value("extra", ir.TensorType(ir.DataType.FLOAT, (2,)))
    with ir.Journal(model) as journal:
        graph.add_input(extra)
        graph.remove_input(extra)
        graph.add_input(extra)
        assert extra.is_graph_input()
        journal.undo()
    assert graph.inputs == (x, c)
    assert x.is_graph_input()
    assert not extra.is_graph_input()
    graph.add_input(extra)  # not refused as an input already there
    assert extra.is_graph_input()


def test_a_closed_journal_records_nothing_more() -> None:
    model = _model()
    with ir.Journal(model) as journal:
        pass
    assert not journal
    model.graph.nodes[0].name = "after"
    assert not journal


def test_changes_are_reported_for_validation() -> None:
    model = _model()
    graph = model.graph
    neg, relu, _, add = graph.nodes
    with ir.Journal(model) as journal:
        mul = ir.Node("Mul", [neg.outputs[0], neg.outputs[0]], outputs=["m"])
        graph.append(mul)
        relu.replace_input_with(0, mul.outputs[0])
        graph.set_output(1, relu.outputs[0])
        assert list(journal.created_nodes()) == [mul]
        (change,) = journal.input_changes()
        assert (change.node, change.index, change.old, change.new) == (
            relu,
            0,
            neg.outputs[0],
            mul.outputs[0],
        )
        (output,) = journal.output_changes()
        assert (output.index, output.old, output.new) == (1, add.outputs[0], relu.outputs[0])
        assert journal.graphs() == [graph]
        journal.undo()
    assert mul.graph is None
    assert relu.inputs[0] is neg.outputs[0]


def test_one_graph_takes_one_open_journal() -> None:
    model = _model()
    with ir.Journal(model), pytest.raises(RuntimeError, match="already journaled"):
        ir.Journal(model).__enter__()


def test_undoing_every_standard_pass_on_bert_gives_back_the_same_model() -> None:
    from rewriter.engine import BUILTIN_PASSES, PassContext

    model = ir.load(MODELS / "bert_ts14.onnx")
    ir.infer_types(model)
    before = _fingerprint(model)
    for definition in BUILTIN_PASSES.values():
        with ir.Journal(model) as journal:
            result = definition.run(model, definition.make_options({}), PassContext())
            if result.changed:
                assert journal, definition.name
            journal.undo()
        assert _fingerprint(model) == before, definition.name
        ir.verify(model.graph)
