"""Putting a built rewrite into the graph: `commit` (under a journal), then `finish`.

`commit` adds the initializers and nodes, moves the uses of each replaced value to its
replacement and points graph outputs at it (adding an Identity where the replacement cannot
take the output's name), while the caller holds an `ir.Journal` open on the model, so the
whole commit can be undone. Once the region has passed validation, `finish` removes the
matched nodes left without uses (with the constants only they read) and gives moved graph
outputs their names back: steps that cannot make a valid region invalid, so they run after
the journal is closed (removing a node then costs nothing to record).
"""

from __future__ import annotations

import dataclasses

import ir
from rewriter.engine._matcher import Match
from rewriter.engine._pending import RULE_TAG, SOURCE_TAG, Applied, Pending


@dataclasses.dataclass(frozen=True, slots=True)
class Staged:
    """A rewrite in the graph but not finished: what `finish` still has to do."""

    matched: tuple[ir.Node, ...]
    neighbours: tuple[ir.Node, ...]
    renames: tuple[tuple[ir.Value, ir.Value, str], ...]


def commit(model: ir.Model, match: Match, pending: Pending, names: ir.NameAllocator) -> Staged:
    """Put `pending` into `match.graph` (the caller's journal can undo all of it).

    The new nodes are added, every use of a replaced value moves to its replacement and the
    graph outputs follow. Removing what became dead and renaming is left to `finish`: those
    steps cannot make the region invalid, so they happen once the rewrite has passed
    validation, without an undo record.
    """
    graph = match.graph
    for domain, version in pending.new_opsets.items():
        model.opset_imports.setdefault(domain, version)
    for value in pending.initializers:
        graph.add_initializer(value)
    graph.extend(pending.nodes)
    matched = tuple([n for n in match.nodes if n is not None])
    keep = {*matched, *pending.nodes}
    neighbours: dict[ir.Node, None] = {}
    for old, new in pending.replacements:
        for use in old.uses:
            if use.node not in keep:
                use.node.replace_input_with(use.index, new)
                neighbours[use.node] = None
    renames = []
    for old, new in pending.replacements:
        rename = _move_graph_outputs(graph, old, new, pending, match, names)
        if rename is not None:
            renames.append(rename)
    return Staged(matched, tuple(neighbours), tuple(renames))


def finish(graph: ir.Graph, pending: Pending, staged: Staged, names: ir.NameAllocator) -> Applied:
    """Remove what the rewrite left unused and give moved graph outputs their names back.

    Matched nodes left without uses go, with the Constant nodes and initializers only they
    read. Returns what the rewrite did.
    """
    removed, read = _remove_dead(graph, staged.matched)
    _drop_unused_initializers(graph, read)
    lost_uses: dict[ir.Node, None] = {}
    for node in removed:
        for value in node.inputs:
            producer = value.producer() if value is not None else None
            if producer is not None and producer.graph is graph:
                lost_uses[producer] = None
    for old, target, name in staged.renames:
        if old.graph is not None:
            old.name = names.fresh(f"{name}/replaced")
        target.name = name
    neighbours = dict.fromkeys(staged.neighbours)
    for node in pending.nodes:
        for value in node.inputs:
            producer = value.producer() if value is not None else None
            if producer is not None:
                neighbours[producer] = None
        for out in node.outputs:
            for user in out.users():
                neighbours[user] = None
    return Applied(
        staged.matched, tuple(pending.nodes), removed, tuple(neighbours), tuple(lost_uses)
    )


def _drop_unused_initializers(graph: ir.Graph, values: list[ir.Value]) -> None:
    """Remove the initializers among `values` that nothing reads any more."""
    for value in values:
        if value.producer() is not None or value.is_used():
            continue
        if value.is_initializer() and value.graph is graph and not value.is_graph_input():
            graph.remove_initializer(value.name)


def _move_graph_outputs(
    graph: ir.Graph,
    old: ir.Value,
    new: ir.Value,
    pending: Pending,
    match: Match,
    names: ir.NameAllocator,
) -> tuple[ir.Value, ir.Value, str] | None:
    """Point graph outputs held by `old` at `new`; returns the renaming still to do."""
    if not graph.is_output(old):
        return None
    slots = [i for i, v in enumerate(graph.outputs) if v is old]
    if not slots:
        return None
    name = old.name
    target = new
    if not can_take_output_name(new, graph):
        identity_out = ir.Value(names.fresh(f"{name}/identity"))
        identity = ir.Node(
            "Identity", [new], outputs=[identity_out], name=names.fresh(f"{name}/Identity")
        )
        identity.set_metadata(RULE_TAG, match.rule.name)
        identity.set_metadata(SOURCE_TAG, match.rule.location)
        graph.append(identity)
        pending.nodes.append(identity)
        t = ir.fact_type(new)
        if t is not None:
            ir.record_inferred_type(identity_out, t)
        target = identity_out
    for i in slots:
        graph.set_output(i, target)
    if old.type is not None and target.type is None:
        ir.take_declared_type(target, old)
    return (old, target, name)


def can_take_output_name(value: ir.Value, graph: ir.Graph) -> bool:
    """Whether `value` can become a graph output of `graph` under the output's name.

    A node output or an initializer of `graph` itself can (renaming it renames it for its
    readers too; an initializer may be a graph output); a graph input, a value of an outer
    scope or another output cannot keep its own name and the output's: those need an Identity.
    """
    if value.is_graph_output() or value.is_graph_input():
        return False
    if value.producer() is not None:
        return True
    return value.is_initializer() and value.graph is graph


def _remove_dead(
    graph: ir.Graph, matched: tuple[ir.Node, ...]
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
            # A removed node has left the graph; one with a used output stays.
            if node.graph is not graph or any(out.is_used() for out in node.outputs):
                continue
            inputs = [v for v in node.inputs if v is not None]
            graph.remove(node, safe=False)  # checked just above
            removed.append(node)
            progress = True
            _drop_orphan_constant_nodes(graph, inputs)
            read.extend(inputs)
    return tuple(removed), read


def _drop_orphan_constant_nodes(graph: ir.Graph, values: list[ir.Value]) -> None:
    for value in values:
        producer = value.producer()
        if (
            producer is not None
            and producer.op_type == "Constant"
            and producer.graph is graph
            and not value.is_used()
        ):
            graph.remove(producer, safe=False)  # its only output is unused
