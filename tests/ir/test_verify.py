"""`ir.verify` accepts well-formed IR and names the first broken invariant otherwise.

Most breakages cannot be made through the public mutation API (that is its point), so the
tests below break the private state directly, as a buggy pass inside the IR would.
"""

from __future__ import annotations

from collections.abc import Callable

import onnx.parser
import pytest

import ir


def _graph() -> tuple[ir.Graph, ir.Value, ir.Node, ir.Node]:
    """x -> Relu -> a -> Neg -> y."""
    x = ir.Value("x", ir.TensorType(ir.DataType.FLOAT, (2,)))
    relu = ir.Node("Relu", [x], outputs=["a"], name="relu")
    neg = ir.Node("Neg", [relu.outputs[0]], outputs=["y"], name="neg")
    graph = ir.Graph([x], [neg.outputs[0]], [relu, neg], name="g")
    return graph, x, relu, neg


def test_well_formed_graph_and_lifted_model_pass() -> None:
    graph, *_ = _graph()
    ir.verify(graph)
    model = ir.from_onnx(
        onnx.parser.parse_model(
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
    )
    ir.verify(model)
    then_branch = model.graph.nodes[1].attribute("then_branch")
    assert isinstance(then_branch, ir.Graph)
    ir.verify(then_branch)  # a subgraph alone: outer values resolve through its owner


def _stale_use(graph: ir.Graph, x: ir.Value, relu: ir.Node, neg: ir.Node) -> None:
    x._uses[neg] = 1  # neg reads x at input 0, says x


def _missing_use(graph: ir.Graph, x: ir.Value, relu: ir.Node, neg: ir.Node) -> None:
    del x._uses[relu]


def _value_from_another_graph(graph: ir.Graph, x: ir.Value, relu: ir.Node, neg: ir.Node) -> None:
    other, *_ = _graph()
    neg.replace_input_with(0, other.inputs[0])


def _not_owned(graph: ir.Graph, x: ir.Value, relu: ir.Node, neg: ir.Node) -> None:
    neg._graph = None


def _output_points_elsewhere(graph: ir.Graph, x: ir.Value, relu: ir.Node, neg: ir.Node) -> None:
    relu.outputs[0]._index = 3


def _defined_twice(graph: ir.Graph, x: ir.Value, relu: ir.Node, neg: ir.Node) -> None:
    graph.append(ir.Node("Abs", [x], outputs=["a"]))


def _undefined_output(graph: ir.Graph, x: ir.Value, relu: ir.Node, neg: ir.Node) -> None:
    graph.add_output(ir.Value("ghost"))


def _detached_user(graph: ir.Graph, x: ir.Value, relu: ir.Node, neg: ir.Node) -> None:
    ir.Node("Abs", [x], outputs=["floating"])


def _unsafely_removed_producer(graph: ir.Graph, x: ir.Value, relu: ir.Node, neg: ir.Node) -> None:
    graph.remove(relu, safe=False)


def _cycle(graph: ir.Graph, x: ir.Value, relu: ir.Node, neg: ir.Node) -> None:
    relu.replace_input_with(0, neg.outputs[0])


def _inconsistent_initializer(graph: ir.Graph, x: ir.Value, relu: ir.Node, neg: ir.Node) -> None:
    w = ir.Value("w", const_value=ir.NumpyTensor([1.0, 2.0]))
    graph.add_initializer(w)
    w._name = "w_renamed_behind_the_registry"


def _foreign_input(graph: ir.Graph, x: ir.Value, relu: ir.Node, neg: ir.Node) -> None:
    other, *_ = _graph()
    graph._inputs.append(other.inputs[0])


def _subgraph_with_wrong_owner(graph: ir.Graph, x: ir.Value, relu: ir.Node, neg: ir.Node) -> None:
    body = ir.Graph([], [], [], name="body")
    node = ir.Node("If", [x], [ir.attr_graph("then_branch", body)], outputs=["z"])
    graph.append(node)
    body._owner = None


_BREAKAGES: dict[str, tuple[Callable[..., None], str]] = {
    "stale use": (_stale_use, "stale use of 'x'"),
    "missing use": (_missing_use, "reads 'x' but is not in its uses"),
    "value from another graph": (_value_from_another_graph, "reads 'x', which is not defined"),
    "node not owned": (_not_owned, "listed but not owned"),
    "output index": (_output_points_elsewhere, "does not point back"),
    "defined twice": (_defined_twice, "value 'a' is defined twice"),
    "undefined output": (_undefined_output, "output 'ghost' is not defined"),
    "detached user": (_detached_user, "used by detached"),
    "removed producer": (_unsafely_removed_producer, "reads 'a', which is not defined"),
    "cycle": (_cycle, "cycle in graph 'g'"),
    "initializer registry": (_inconsistent_initializer, "initializer 'w' is registered"),
    "foreign input": (_foreign_input, "input 'x' is not owned"),
    "subgraph owner": (_subgraph_with_wrong_owner, "subgraph 'body' .* has the wrong owner"),
}


@pytest.mark.parametrize("name", list(_BREAKAGES))
def test_verify_reports_the_broken_invariant(name: str) -> None:
    breakage, message = _BREAKAGES[name]
    graph, x, relu, neg = _graph()
    breakage(graph, x, relu, neg)
    with pytest.raises(ir.GraphStructureError, match=message):
        ir.verify(graph)


def test_verify_checks_functions_and_model_graphs() -> None:
    graph, *_ = _graph()
    fn_graph, fx, frelu, fneg = _graph()
    fn = ir.Function("local", "f", fn_graph)
    model = ir.Model(graph, functions=[fn])
    ir.verify(model)
    ir.verify(fn)
    _stale_use(fn_graph, fx, frelu, fneg)
    with pytest.raises(ir.GraphStructureError, match="stale use"):
        ir.verify(model)


def test_unnamed_value_read_by_a_node_is_refused_by_verify_and_lowering() -> None:
    # ONNX reads an empty input name as an absent input: lowering it would disconnect Neg.
    graph, x, relu, neg = _graph()
    unnamed = ir.Node("Abs", [x], name="abs")  # outputs left unnamed
    graph.insert_after(relu, [unnamed])
    neg.replace_input_with(0, unnamed.outputs[0])
    with pytest.raises(ir.GraphStructureError, match="reads an unnamed value"):
        ir.verify(graph)
    model = ir.Model(graph, opset_imports={"": 18}, ir_version=10)
    with pytest.raises(ValueError, match="reads an unnamed value"):
        ir.to_onnx(model)


def test_unnamed_graph_output_is_refused_by_verify_and_lowering() -> None:
    graph, x, _, _ = _graph()
    unnamed = ir.Node("Abs", [x], name="abs")
    graph.append(unnamed)
    graph.add_output(unnamed.outputs[0])
    with pytest.raises(ir.GraphStructureError, match="graph output has no name"):
        ir.verify(graph)
    with pytest.raises(ValueError, match="unnamed output"):
        ir.to_onnx(ir.Model(graph, opset_imports={"": 18}, ir_version=10))
