"""Cut a subgraph out of a model: exactly the nodes between some values and others.

`extract(model, inputs, outputs)` changes `model` in place into the model that computes
`outputs` from `inputs`: the main-graph nodes on a path from the inputs to the outputs (and
those computing from constants alone), the initializers those nodes read, the functions they
call. Inputs and outputs carry the types the model declares or its facts know. External
tensors stay external: nothing is read here.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence

from ir._core import Function, Graph, Model, Node, Value
from ir._infer import fact_type


class ExtractError(ValueError):
    """The requested subgraph does not exist.

    A name is unknown or given twice, or an output depends on a value that is neither among
    the inputs nor computable from constants. `argument` names the argument of `extract` the
    problem is with (`inputs` or `outputs`), `problem` says it; `str()` reads
    `inputs: the main graph has no value named 'x'`.
    """

    def __init__(self, argument: str, problem: str) -> None:
        self.argument = argument
        self.problem = problem
        super().__init__(f"{argument}: {problem}")


def extract(model: Model, inputs: Sequence[str], outputs: Sequence[str]) -> Model:
    """Make `model` the model computing `outputs` from `inputs` (in place; returns it).

    Args:
        model: the model to cut (changed in place: pass a copy to keep the original).
        inputs: names of main-graph values that become the graph inputs, in this order.
        outputs: names of main-graph values that become the graph outputs, in this order.

    Raises:
        ExtractError: a name is not a value of the main graph, a name is given twice, or an
            output depends on a graph input or value that is not among `inputs` (the
            message names that value and the node that reads it).
    """
    graph = model.graph
    by_name = {value.name: value for value in graph.values() if value.name}
    sources = _resolve(by_name, inputs, "inputs")
    targets = _resolve(by_name, outputs, "outputs")
    kept = _nodes_between(graph, sources, targets)
    types = {id(value): fact_type(value) for value in (*sources, *targets)}
    new_inputs = [_as_graph_input(graph, value) for value in sources]
    for node in reversed(list(graph)):
        if node not in kept:
            graph.remove(node, safe=False)
    for index in reversed(range(len(graph.outputs))):
        graph.remove_output(index)
    renamed = {id(old): new for old, new in zip(sources, new_inputs, strict=True)}
    for value in targets:
        graph.add_output(renamed.get(id(value), value))
    for value in list(graph.inputs):
        if value not in new_inputs and not value.is_initializer():
            graph.remove_input(value)
    for value in list(graph.inputs):
        if value.is_initializer() and not value.uses and not value.is_graph_output():
            graph.remove_input(value)
    for index, value in enumerate(new_inputs):
        if value not in graph.inputs:
            graph.insert_input(index, value)
    for name, value in list(graph.initializers.items()):
        if not value.uses and not value.is_graph_output() and not value.is_graph_input():
            graph.remove_initializer(name)
    for name, value in list(graph.sparse_initializers.items()):
        if not value.uses and not value.is_graph_output():
            graph.remove_sparse_initializer(name)
    for old, new in zip(sources, new_inputs, strict=True):
        new.type = types[id(old)] or new.type
    for value in targets:
        known = types[id(value)]
        if known is not None and value.type is None:
            value.type = known
    _keep_used_functions(model)
    return model


def _resolve(by_name: dict[str, Value], names: Sequence[str], argument: str) -> list[Value]:
    found: list[Value] = []
    for name in names:
        value = by_name.get(name)
        if value is None:
            close = difflib.get_close_matches(name, list(by_name), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ExtractError(argument, f"the main graph has no value named {name!r}{hint}")
        if value in found:
            raise ExtractError(argument, f"{name!r} is given twice")
        found.append(value)
    return found


def _nodes_between(graph: Graph, sources: list[Value], targets: list[Value]) -> set[Node]:
    """The nodes computing `targets` from `sources` and constants; refuses other inputs."""
    stop = set(sources)
    kept: set[Node] = set()
    # Each value with the value whose producer reads it (None for a target): the way back
    # from a graph input that is not among the sources, for the error message.
    pending: list[tuple[Value, Value | None]] = [(value, None) for value in targets]
    parent: dict[Value, Value | None] = {}
    while pending:
        value, reader = pending.pop()
        if value in parent or value in stop:
            continue
        parent[value] = reader
        node = value.producer()
        if node is None:
            if value.is_initializer() or value.is_sparse_initializer() or value.graph is not graph:
                continue  # a constant, or an outer-scope value (not in the main graph)
            raise ExtractError("inputs", _elsewhere(graph, value, parent, stop))
        kept.add(node)
        for read in node.reads():
            pending.append((read, value))
    return kept


def _elsewhere(
    graph: Graph, origin: Value, parent: dict[Value, Value | None], sources: set[Value]
) -> str:
    """Say where an output's computation leaves the part of the graph the sources feed."""
    path = [origin]
    while (up := parent[path[-1]]) is not None:
        path.append(up)
    fed = _downstream(graph, sources)
    # The last value on the way from `origin` towards the output that the sources do not
    # feed: the one the cut would have to take from elsewhere.
    boundary = next(i for i in range(len(path) - 1, -1, -1) if path[i] not in fed)
    value = path[boundary]
    source = "" if value is origin else f" (it is computed from graph input {origin.name!r})"
    if boundary == len(path) - 1:
        return (
            f"output {value.name!r} does not depend on the inputs at all{source}: give inputs "
            "that it is computed from"
        )
    reader = path[boundary + 1].producer()
    return (
        f"node {_label(reader)} reads {value.name!r}, which the inputs do not feed{source}: "
        f"add {value.name!r} to the inputs, or choose outputs that only depend on them"
    )


def _downstream(graph: Graph, sources: set[Value]) -> set[Value]:
    """The values of `graph` computed (in part) from `sources`, the sources included."""
    fed = set(sources)
    for node in graph:
        if any(value in fed for value in node.reads()):
            fed.update(node.outputs)
    return fed


def _as_graph_input(graph: Graph, value: Value) -> Value:
    """`value` as a graph input: itself if it is one, else a new input taking over its uses.

    The new input takes the name; the old value (computed by a node that goes away, or an
    initializer) gets out of its way.
    """
    if value.is_graph_input() and not value.is_initializer():
        return value
    replacement = Value(type=value.type)
    value.replace_all_uses_with(replacement)
    name = value.name
    value.name = _free_name(graph, name)
    replacement.name = name
    return replacement


def _free_name(graph: Graph, stem: str) -> str:
    used = {value.name for value in graph.values()}
    number = 1
    while f"{stem}__cut{number}" in used:
        number += 1
    return f"{stem}__cut{number}"


def _keep_used_functions(model: Model) -> None:
    """Drop the model-local functions no kept node calls (directly or through functions)."""
    called: set[tuple[str, str, str]] = set()
    pending: list[Node] = list(model.graph.all_nodes())
    while pending:
        node = pending.pop()
        key = (node.domain, node.op_type, node.overload)
        function: Function | None = model.functions.get(key)
        if function is None or key in called:
            continue
        called.add(key)
        pending.extend(function.graph.all_nodes())
    for key in [k for k in model.functions if k not in called]:
        del model.functions[key]


def _label(node: Node | None) -> str:
    if node is None:
        return "?"
    return repr(node.name) if node.name else f"{node.op_type} (computing {node.outputs[0].name!r})"
