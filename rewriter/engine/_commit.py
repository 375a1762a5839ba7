"""Putting a built rewrite into the graph, every change through an undo log.

Initializers and nodes are added, the uses of each replaced value move to its replacement,
graph outputs keep their names (the replacement takes the name, or an Identity is added
where it cannot), and matched nodes left without uses are removed with the Constant nodes
only they read. Initializers only they read are returned, to be dropped once the rewrite
has passed validation (that last step needs no undo).
"""

from __future__ import annotations

import ir
from rewriter.engine._matcher import Match
from rewriter.engine._pending import RULE_TAG, SOURCE_TAG, Applied, Pending
from rewriter.engine._undo import UndoLog


def commit(
    model: ir.Model, match: Match, pending: Pending, names: ir.NameAllocator, log: UndoLog
) -> tuple[Applied, list[ir.Value]]:
    """Apply `pending` to `match.graph`; returns what changed and initializers left unused."""
    graph = match.graph
    for domain, version in pending.new_opsets.items():
        log.add_opset(model, domain, version)
    for value in pending.initializers:
        log.add_initializer(graph, value)
    for node in pending.nodes:
        log.append_node(graph, node)
    matched = tuple(n for n in match.nodes if n is not None)
    keep = set(matched) | set(pending.nodes)
    neighbours: dict[ir.Node, None] = {}
    for old, new in pending.replacements:
        for use in old.uses:
            if use.node not in keep:
                log.replace_input(use.node, use.index, new)
                neighbours[use.node] = None
    renames = [
        _move_graph_outputs(graph, old, new, pending, match, names, log)
        for old, new in pending.replacements
    ]
    removed, unused = _remove_dead(graph, matched, log)
    lost_uses: dict[ir.Node, None] = {}
    for node in removed:
        for read in node.inputs:
            producer = read.producer() if read is not None else None
            if producer is not None and producer.graph is graph:
                lost_uses[producer] = None
    for rename in renames:
        if rename is not None:
            old, target, name = rename
            if old.graph is not None:
                log.rename(old, names.fresh(f"{name}/replaced"))
            log.rename(target, name)
    for node in pending.nodes:
        for read in node.inputs:
            producer = read.producer() if read is not None else None
            if producer is not None:
                neighbours[producer] = None
        for out in node.outputs:
            for user in out.users():
                neighbours[user] = None
    applied = Applied(matched, tuple(pending.nodes), removed, tuple(neighbours), tuple(lost_uses))
    return applied, unused


def drop_unused_initializers(graph: ir.Graph, values: list[ir.Value]) -> None:
    """Remove the initializers among `values` that nothing reads any more."""
    for value in values:
        if value.num_uses() or value.is_graph_output():
            continue
        if value.is_initializer() and not value.is_graph_input() and value.graph is graph:
            graph.remove_initializer(value.name)


def _move_graph_outputs(
    graph: ir.Graph,
    old: ir.Value,
    new: ir.Value,
    pending: Pending,
    match: Match,
    names: ir.NameAllocator,
    log: UndoLog,
) -> tuple[ir.Value, ir.Value, str] | None:
    """Point graph outputs held by `old` at `new`; returns the renaming still to do."""
    slots = [i for i, v in enumerate(graph.outputs) if v is old]
    if not slots:
        return None
    name = old.name
    # `new` can take the output's name if it is a node output that is not itself a graph
    # output; otherwise (a graph input, an initializer, another output) add an Identity.
    renamable = new.producer() is not None and not new.is_graph_output()
    target = new
    if not renamable:
        identity_out = ir.Value(names.fresh(f"{name}/identity"))
        identity = ir.Node(
            "Identity", [new], outputs=[identity_out], name=names.fresh(f"{name}/Identity")
        )
        identity.set_metadata(RULE_TAG, match.rule.name)
        identity.set_metadata(SOURCE_TAG, match.rule.location)
        log.append_node(graph, identity)
        pending.nodes.append(identity)
        t = ir.fact_type(new)
        if t is not None:
            ir.record_inferred_type(identity_out, t)
        target = identity_out
    for i in slots:
        log.set_output(graph, i, target)
    if old.type is not None and target.type is None:
        log.set_type(target, old.type)
    return (old, target, name)


def _remove_dead(
    graph: ir.Graph, matched: tuple[ir.Node, ...], log: UndoLog
) -> tuple[tuple[ir.Node, ...], list[ir.Value]]:
    """Remove matched nodes left without uses, then Constant nodes only they read.

    Returns the removed matched nodes and the values they read (the initializers among them
    may have lost their last use).
    """
    removed: list[ir.Node] = []
    read: list[ir.Value] = []
    progress = True
    alive = [n for n in matched if n.graph is graph]
    while progress:
        progress = False
        for node in reversed(alive):
            if node in removed:
                continue
            if any(out.num_uses() or out.is_graph_output() for out in node.outputs):
                continue
            inputs = [v for v in node.inputs if v is not None]
            log.remove_node(graph, node)
            removed.append(node)
            progress = True
            _drop_orphan_constant_nodes(graph, inputs, log)
            read.extend(inputs)
    return tuple(removed), read


def _drop_orphan_constant_nodes(graph: ir.Graph, values: list[ir.Value], log: UndoLog) -> None:
    for value in values:
        if value.num_uses() or value.is_graph_output():
            continue
        producer = value.producer()
        if producer is not None and producer.op_type == "Constant" and producer.graph is graph:
            log.remove_node(graph, producer)
