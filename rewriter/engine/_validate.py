"""Validation of what a committed rewrite or a pass changed (the rest is as it was).

For a rule's rewrite the builder has already checked every new node against its schema and
the types of every replacement; what remains can only be seen in the graph (`find_problem`):
every value a new or redirected node reads must still be defined and visible from that node's
graph (produced by a node in it or in an enclosing graph, or an input or initializer of one),
and every output of the graph must still be defined in it. A pass changes the model directly,
so its changes get all of those checks at once, read off the journal it ran under
(`find_change_problem`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import ir
from rewriter.engine._pending import RewriteRejectedError
from rewriter.engine._typecheck import check_compatible


def find_problem(
    graph: ir.Graph, created: Sequence[ir.Node], redirected: Sequence[ir.Node]
) -> str | None:
    """Why the graph around a committed rewrite is not a valid model (None when it is).

    `created` are the rewrite's new nodes, `redirected` the nodes that now read its values.
    """
    for node in (*created, *redirected):
        if node.graph is None:
            continue
        for value in node.inputs:
            if value is not None and not _visible_from(value, node.graph):
                return f"{_label(node)} reads `{value.name}`, which is not defined where it is"
    for value in graph.outputs:
        if not _defined_in(value, graph):
            return f"graph output `{value.name}` is no longer computed in its graph"
    return None


def _defined_in(value: ir.Value, graph: ir.Graph) -> bool:
    producer = value.producer()
    if producer is not None:
        return producer.graph is graph
    # An input or (sparse) initializer: it belongs to the graph that registered it.
    return value.graph is graph


def _visible_from(value: ir.Value, graph: ir.Graph) -> bool:
    """True when `value` is defined in `graph` or in a graph enclosing it."""
    scope: ir.Graph | None = graph
    while scope is not None:
        if _defined_in(value, scope):
            return True
        scope = _enclosing(scope)
    return False


def _enclosing(graph: ir.Graph) -> ir.Graph | None:
    owner = graph.owner
    return owner.graph if isinstance(owner, ir.Node) else None


def _label(node: ir.Node) -> str:
    return f"{node.name or '<unnamed>'} ({node.op_type})"


def find_change_problem(journal: ir.Journal, model: ir.Model) -> str | None:
    """Why the changes `journal` recorded do not leave a valid model (None when they do).

    A built-in pass is held to what a rule's rewrite is held to, whatever it changed: every
    node it added or rewired reads values defined where it is, graph outputs are still
    computed, no cycle appeared, a value that took another's place in a node input or a graph
    output has no contradicting dtype, rank or static dims, and every added node (and every
    node whose input list changed length) passes onnx's per-node inference with outputs that
    agree with the types recorded on them.
    Graphs the changes took out of the model (an inlined branch) are not judged.
    """
    opsets = model.opset_imports
    live = dict.fromkeys(model.graphs())
    created = journal.created_nodes()
    changes = journal.input_changes()
    rewired = dict.fromkeys(change.node for change in changes)
    for graph in journal.graphs():
        if graph not in live:
            continue
        new = [node for node in created if node.graph is graph]
        moved = [node for node in rewired if node.graph is graph]
        problem = find_problem(graph, new, moved)
        if problem is not None:
            return problem
        try:
            ir.topological_order(graph)
        except ir.GraphStructureError as exc:
            return str(exc)
    # A node whose input list grew or shrank (a Concat with another Concat's inputs spliced
    # in) has no value standing in another's place: the node is judged whole instead, its
    # outputs against what onnx's inference gives from its new inputs.
    resized = dict.fromkeys(
        change.node for change in changes if (change.old is None) != (change.new is None)
    )
    for change in changes:
        if change.node.graph not in live or change.node in resized:
            continue
        if change.old is not None and change.new is not None:
            problem = _replacement_problem(change.old, change.new)
            if problem is not None:
                return f"{_label(change.node)} input {change.index}: {problem}"
    for node in resized:
        if node.graph in live:
            problem = _ill_typed(node, opsets)
            if problem is not None:
                return problem
    for output in journal.output_changes():
        problem = _replacement_problem(output.old, output.new)
        if problem is not None:
            return f"graph output {output.index}: {problem}"
    for node in created:
        if node.graph not in live:
            continue
        problem = _ill_typed(node, opsets)
        if problem is not None:
            return problem
    return None


def _replacement_problem(old: ir.Value, new: ir.Value) -> str | None:
    """Why `new` cannot stand where `old` stood (contradicting known types), or None."""
    try:
        check_compatible(old, new)
    except RewriteRejectedError as exc:
        return str(exc)
    return None


def _ill_typed(node: ir.Node, opsets: Mapping[str, int]) -> str | None:
    """Why onnx's per-node inference refuses `node`, or its outputs' types contradict it.

    A node with an input of unknown type is not judged: there is nothing to infer from.
    """
    if node.graph is None:
        return None
    for value in node.inputs:
        unknown = value is not None and value.name and ir.fact_type(value) is None
        if unknown and value is not None and value.const_value is None:
            return None
    try:
        inferred = ir.infer_node_types(node, opsets)
    except ir.NodeInferenceError as exc:
        return f"{_label(node)} is ill-typed: {exc}"
    if inferred is None:
        return None
    for out, found in zip(node.outputs, inferred, strict=False):
        if found is None or not out.name:
            continue
        stand_in = ir.Value(f"{out.name} (inferred)", found)
        problem = _replacement_problem(out, stand_in)
        if problem is not None:
            return f"{_label(node)}: {problem}"
    return None
