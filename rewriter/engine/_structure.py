"""Passes over node structure that a rule cannot write: If branches and Concat input lists.

* `inline_constant_ifs`: an `If` whose condition is a constant runs one branch, always: that
  branch's nodes move into the enclosing graph in the If's place (its initializers become
  the graph's), and the If's outputs become the branch's outputs. Exporters leave such Ifs
  where a Python condition was traced as a tensor (`if x.shape[0] > 1`), and constant
  folding makes more of them.
* `flatten_concats`: `Concat(a, Concat(b, c), d)` on one axis is `Concat(a, b, c, d)`; a
  rule's match names a fixed number of inputs, so it cannot splice the inner list in at any
  position.

Both only move nodes and values: the results are bit for bit those of the original.
"""

from __future__ import annotations

import dataclasses

import numpy as np

import ir
from rewriter.engine import _facts, _trace
from rewriter.engine._commit import can_take_output_name
from rewriter.engine._pass import NO_CONTEXT, ChangeLog, PassContext, PassResult

_STANDARD = ("", "ai.onnx")


@dataclasses.dataclass(frozen=True, slots=True)
class InlineConstantIfsOptions:
    """Options of `pass inline_constant_ifs` (none)."""


@dataclasses.dataclass(frozen=True, slots=True)
class FlattenConcatsOptions:
    """Options of `pass flatten_concats` (none)."""


# ---------------------------------------------------------------------------------------------
# If with a constant condition


def inline_constant_ifs(
    model: ir.Model, options: InlineConstantIfsOptions, context: PassContext = NO_CONTEXT
) -> PassResult:
    """Replace each If whose condition is a constant by the branch it always takes."""
    inlined = 0
    touched: dict[ir.Node, None] = {}
    log = ChangeLog()
    names = ir.NameAllocator(model)
    changed = True
    while changed:  # a taken branch may hold further constant Ifs, now in the outer graph
        changed = False
        for graph in list(model.graphs()):
            for node in list(graph):
                if node.graph is graph and _inline(model, graph, node, names, log, touched):
                    inlined += 1
                    changed = True
    return PassResult(
        "inline_constant_ifs",
        inlined > 0,
        tuple(n for n in touched if n.graph),
        inlined,
        log.changes(),
    )


def _taken_branch(node: ir.Node) -> ir.Graph | None:
    """The branch an If always takes, or None when its condition is not a known constant."""
    if node.op_type != "If" or node.domain not in _STANDARD or not node.inputs:
        return None
    cond = node.inputs[0]
    array = _facts.const_array(cond) if cond is not None else None
    if array is None or array.size != 1:
        return None
    taken = bool(np.asarray(array).reshape(-1)[0])
    branch = node.attribute("then_branch" if taken else "else_branch")
    if not isinstance(branch, ir.Graph) or branch.inputs:
        return None
    if len(branch.outputs) != len(node.outputs) or branch.sparse_initializers:
        return None
    return branch


def _inline(
    model: ir.Model,
    graph: ir.Graph,
    node: ir.Node,
    names: ir.NameAllocator,
    log: ChangeLog,
    touched: dict[ir.Node, None],
) -> bool:
    branch = _taken_branch(node)
    if branch is None:
        return False
    if branch.initializers and not _facts.can_hold_initializers(graph, model):
        return False  # a function body holds no initializers
    moved_values: dict[ir.Value, ir.Value] = {}
    for value in list(branch.initializers.values()):
        assert value.const_value is not None, "an initializer holds a tensor"
        copy = ir.Value(names.fresh(value.name), type=value.type, const_value=value.const_value)
        graph.add_initializer(copy)
        log.created(graph, _trace.value_label(copy))
        value.replace_all_uses_with(copy)
        moved_values[value] = copy
    results = [moved_values.get(v, v) for v in branch.outputs]
    moved = list(branch)
    for inner in moved:
        _move_node(branch, inner)
    graph.insert_before(node, moved)
    for inner in moved:
        log.created(graph, _trace.distinct_label(inner))
        touched[inner] = None
    renames: list[tuple[ir.Value, str]] = []
    for out, result in zip(node.outputs, results, strict=True):
        for use in out.uses:
            touched[use.node] = None
        if not out.is_graph_output():
            out.replace_all_uses_with(result)
            continue
        target = result
        if not can_take_output_name(result, graph):
            target = ir.Value(names.fresh(f"{out.name}/identity"), type=out.type)
            copy_node = ir.Node(
                "Identity", [result], outputs=[target], name=names.fresh(f"{out.name}/Identity")
            )
            graph.insert_before(node, [copy_node])
            log.created(graph, _trace.distinct_label(copy_node))
            touched[copy_node] = None
        elif target.type is None:
            target.type = out.type
        out.replace_all_uses_with(target, replace_graph_outputs=True)
        renames.append((target, out.name))
    for out in node.outputs:
        out.name = names.fresh(f"{out.name}/inlined")
    log.removed(graph, _trace.distinct_label(node))
    graph.remove(node, safe=False)
    for value, name in renames:
        value.name = name  # the name readers of the graph's outputs know
    return True


def _move_node(branch: ir.Graph, node: ir.Node) -> None:
    """Take `node` out of `branch` with its uses intact, ready to join another graph.

    `Graph.remove` drops the node's uses of its inputs (and its subgraphs' uses of outer
    values); they are put back, since the node keeps reading the same values elsewhere.
    """
    inputs = node.inputs
    branch.remove(node, safe=False)
    node.set_inputs(inputs)
    for sub in node.subgraphs():
        for inner in sub.all_nodes():
            inner.set_inputs(inner.inputs)


# ---------------------------------------------------------------------------------------------
# Concat of Concat


def flatten_concats(
    model: ir.Model, options: FlattenConcatsOptions, context: PassContext = NO_CONTEXT
) -> PassResult:
    """Splice the inputs of a Concat read only by a Concat on the same axis into the reader."""
    removed = 0
    touched: dict[ir.Node, None] = {}
    log = ChangeLog()
    for graph in list(model.graphs()):
        for node in list(graph):
            if node.graph is not graph or not _is_concat(node):
                continue
            while _splice_one(graph, node, log, touched):
                removed += 1
    return PassResult(
        "flatten_concats",
        removed > 0,
        tuple(n for n in touched if n.graph),
        removed,
        log.changes(),
    )


def _is_concat(node: ir.Node) -> bool:
    return node.op_type == "Concat" and node.domain in _STANDARD


def _axis(node: ir.Node) -> int | None:
    """The Concat's axis counted from the front, None when the rank is needed but unknown."""
    axis = node.attribute("axis")
    if not isinstance(axis, int):
        return None
    if axis >= 0:
        return axis
    shape = _facts.shape_of(node.outputs[0])
    return axis + len(shape) if shape is not None else None


def _splice_one(
    graph: ir.Graph, node: ir.Node, log: ChangeLog, touched: dict[ir.Node, None]
) -> bool:
    """Splice one inner Concat into `node`; False when there is none to splice."""
    axis = _axis(node)
    if axis is None:
        return False
    for index, value in enumerate(node.inputs):
        inner = value.producer() if value is not None else None
        if inner is None or inner.graph is not graph or not _is_concat(inner):
            continue
        if value is None or _facts.count_uses(value) != 1 or _axis(inner) != axis:
            continue
        spliced = [*node.inputs[:index], *inner.inputs, *node.inputs[index + 1 :]]
        node.set_inputs(spliced)
        log.removed(graph, _trace.distinct_label(inner))
        log.created(graph, _trace.distinct_label(node))
        graph.remove(inner)
        touched[node] = None
        for read in inner.inputs:
            producer = read.producer() if read is not None else None
            if producer is not None:
                touched[producer] = None
        return True
    return False
