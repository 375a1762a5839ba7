"""Validation of the region a committed rewrite touched (the rest of the graph is as it was).

The builder has already checked every new node against its schema and the types of every
replacement; what remains can only be seen in the graph: every value a new or redirected
node reads must still be defined and visible from that node's graph (produced by a node in
it or in an enclosing graph, or an input or initializer of one), and every output of the
graph must still be defined in it.
"""

from __future__ import annotations

from collections.abc import Sequence

import ir


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
