"""Graft one model onto another: B fed by A's values, through an optional adapter op.

`graft(a, b, connections)` moves B's graph into A's: each connected input of B reads an A
value (through the connection's adapter node when it has one), B's other inputs become inputs
of the result, B's initializers join A's (an initializer equal to one of A's in dtype, shape
and bytes is shared, not copied), and the result's outputs are B's plus the A values asked
for. Names of B that A already uses get a prefix; no other name changes. Both models must
import the same default-domain opset (convert one first: `convert_version`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np

from ir._core import (
    Function,
    Graph,
    Model,
    Node,
    NumpyTensor,
    Tensor,
    TensorType,
    Value,
    format_graph,
)
from ir._names import NameAllocator


class GraftError(ValueError):
    """The graft cannot be made: an unknown name, a clash that renaming cannot solve."""


@dataclasses.dataclass(frozen=True)
class Adapter:
    """The op a connection passes a value through (`Flatten`, `Transpose`, ...).

    `attributes` are the node's attributes as Python values. For `Reshape`, `shape` is the
    target shape (its second input); None takes B's input's declared shape, with `-1` for
    its one unknown dim.
    """

    op_type: str
    attributes: Mapping[str, object] = dataclasses.field(default_factory=dict)
    domain: str = ""
    shape: tuple[int, ...] | None = None


@dataclasses.dataclass(frozen=True)
class Connection:
    """B's input `b_input` reads A's value `a_output`, through `adapter` if there is one."""

    a_output: str
    b_input: str
    adapter: Adapter | None = None


def graft(
    a: Model,
    b: Model,
    connections: Sequence[Connection],
    *,
    keep_outputs: Sequence[str] = (),
    prefix: str = "b/",
) -> Model:
    """Make `a` the model that runs A, the adapters, then B (changes both; returns `a`).

    Args:
        a: the model whose values feed B (it becomes the result).
        b: the model fed (its graph is moved into `a`; do not use it afterwards).
        connections: which A value feeds which B input, and through what.
        keep_outputs: A values that stay outputs of the result (after B's outputs).
        prefix: put before a B name that A already uses (values, nodes, functions' names
            are kept: a function both define must be the same).

    Raises:
        GraftError: an unknown name, a B input connected twice, opsets or functions that
            differ, or a Reshape adapter without a shape it can take.
    """
    _check_opsets(a, b)
    sources = _main_values(a)
    feeds = [_a_value(sources, c.a_output) for c in connections]
    inputs = _b_inputs(b, connections)
    kept = [_a_value(sources, name) for name in keep_outputs]
    _rename_clashes(a, b, prefix)
    graph = a.graph
    names = NameAllocator(a)
    for feed, target, connection in zip(feeds, inputs, connections, strict=True):
        if connection.adapter is not None:
            feed = _adapt(graph, names, feed, target, connection.adapter)
        target.replace_all_uses_with(feed, replace_graph_outputs=True)
    _take_initializers(graph, b.graph)
    _take_sparse_initializers(graph, b.graph)
    _take_inputs(graph, b.graph, set(inputs))
    outputs = list(b.graph.outputs)
    _take_nodes(graph, b.graph)
    for index in reversed(range(len(graph.outputs))):
        graph.remove_output(index)
    for value in [*outputs, *kept]:
        graph.add_output(value)
    _take_functions(a, b)
    for domain, version in b.opset_imports.items():
        a.opset_imports.setdefault(domain, version)
    a.ir_version = max(a.ir_version, b.ir_version)
    for key, text in b.metadata_props.items():
        a.metadata_props.setdefault(key, text)
    return a


def _check_opsets(a: Model, b: Model) -> None:
    for domain, version in b.opset_imports.items():
        other = a.opset_imports.get(domain)
        if other is not None and other != version:
            shown = domain or "the default domain"
            raise GraftError(
                f"the models import different versions of {shown} ({other} and {version}): "
                "convert one first"
            )


def _main_values(model: Model) -> dict[str, Value]:
    return {value.name: value for value in model.graph.values() if value.name}


def _a_value(values: dict[str, Value], name: str) -> Value:
    value = values.get(name)
    if value is None:
        raise GraftError(f"the first model has no value named {name!r}")
    return value


def _b_inputs(b: Model, connections: Sequence[Connection]) -> list[Value]:
    by_name = {value.name: value for value in b.graph.inputs}
    found: list[Value] = []
    for connection in connections:
        value = by_name.get(connection.b_input)
        if value is None or value.is_initializer():
            names = ", ".join(v.name for v in b.graph.inputs if not v.is_initializer())
            raise GraftError(
                f"the second model has no graph input named {connection.b_input!r} "
                f"(its inputs: {names})"
            )
        if value in found:
            raise GraftError(f"input {connection.b_input!r} is connected twice")
        found.append(value)
    return found


def _rename_clashes(a: Model, b: Model, prefix: str) -> None:
    """Give B's values and nodes whose names A uses a prefixed name neither model uses.

    Only the main graphs and their subgraphs share a namespace; a function's body is a scope
    of its own (and a function both models define must be the same, names included).
    """
    taken = _names(a)
    free = _names(b) | taken
    for graph in b.graph.all_graphs():
        for value in list(graph.values()):
            if value.name in taken:
                value.name = _unique(prefix + value.name, free)
        for node in graph:
            if node.name in taken:
                node.name = _unique(prefix + node.name, free)


def _names(model: Model) -> set[str]:
    found: set[str] = set()
    for graph in model.graph.all_graphs():
        found.update(value.name for value in graph.values())
        found.update(node.name for node in graph if node.name)
    found.discard("")
    return found


def _unique(name: str, used: set[str]) -> str:
    candidate, number = name, 1
    while candidate in used:
        number += 1
        candidate = f"{name}_{number}"
    used.add(candidate)
    return candidate


def _adapt(
    graph: Graph, names: NameAllocator, feed: Value, target: Value, adapter: Adapter
) -> Value:
    """Append the adapter node reading `feed`; its output (typed as `target` if known)."""
    inputs = [feed]
    if adapter.op_type == "Reshape" and adapter.domain in ("", "ai.onnx"):
        shape = adapter.shape if adapter.shape is not None else _declared_shape(target)
        constant = Value(
            names.fresh(f"{target.name}_shape"),
            const_value=_int64_tensor(shape),
        )
        graph.add_initializer(constant)
        inputs.append(constant)
    output = Value(names.fresh(f"{target.name}_adapted"), type=target.type)
    node = Node(
        adapter.op_type,
        inputs,
        dict(adapter.attributes),
        domain=adapter.domain,
        name=names.fresh(f"adapter_{adapter.op_type}"),
        outputs=[output],
    )
    graph.append(node)
    return output


def _declared_shape(target: Value) -> tuple[int, ...]:
    kind = target.type
    if not isinstance(kind, TensorType) or kind.shape is None:
        raise GraftError(
            f"a Reshape adapter into {target.name!r} needs a shape: the input declares none"
        )
    dims = [d if isinstance(d, int) and d >= 0 else -1 for d in kind.shape]
    if dims.count(-1) > 1:
        raise GraftError(
            f"a Reshape adapter into {target.name!r} needs a shape: the input declares "
            f"{len(dims)} dims, {dims.count(-1)} of them unknown (give the shape)"
        )
    return tuple(dims)


def _int64_tensor(shape: Sequence[int]) -> Tensor:
    return NumpyTensor(np.array(list(shape), dtype=np.int64))


def _take_initializers(graph: Graph, other: Graph) -> None:
    """Move `other`'s initializers into `graph`, sharing those `graph` already holds."""
    by_kind: dict[tuple[int, tuple[int, ...]], list[Value]] = {}
    for value in graph.initializers.values():
        tensor = value.const_value
        if tensor is not None:
            by_kind.setdefault((int(tensor.dtype), tuple(tensor.shape)), []).append(value)
    for value in list(other.initializers.values()):
        tensor = value.const_value
        assert tensor is not None, f"initializer {value.name!r} lost its tensor"
        twin = next(
            (
                mine
                for mine in by_kind.get((int(tensor.dtype), tuple(tensor.shape)), [])
                if _same_bytes(mine.const_value, tensor)
            ),
            None,
        )
        if twin is None:
            twin = Value(value.name, type=value.type, const_value=tensor)
            graph.add_initializer(twin)
        value.replace_all_uses_with(twin, replace_graph_outputs=True)


def _take_sparse_initializers(graph: Graph, other: Graph) -> None:
    """Move `other`'s sparse initializers into `graph` (names were made distinct before)."""
    for value in list(other.sparse_initializers.values()):
        moved = Value(value.name, type=value.type, const_value=value.const_value)
        value.replace_all_uses_with(moved, replace_graph_outputs=True)
        graph.add_sparse_initializer(moved)


def _same_bytes(first: Tensor | None, second: Tensor) -> bool:
    # Bytes, not values: -0.0 and 0.0 differ, two NaNs with the same payload do not.
    return first is not None and first.numpy().tobytes() == second.numpy().tobytes()


def _take_inputs(graph: Graph, other: Graph, connected: set[Value]) -> None:
    """`other`'s inputs that are not connected become inputs of `graph`."""
    for value in list(other.inputs):
        if value in connected or value.is_initializer():
            continue
        moved = Value(value.name, type=value.type, doc_string=value.doc_string)
        value.replace_all_uses_with(moved, replace_graph_outputs=True)
        graph.add_input(moved)


def _take_nodes(graph: Graph, other: Graph) -> None:
    """Move `other`'s nodes, in order, to the end of `graph`, uses kept."""
    for node in list(other):
        reads = node.inputs
        other.remove(node, safe=False)
        node.set_inputs(reads)
        graph.append(node)
        # Removing dropped what the node's subgraphs read from enclosing graphs: read again.
        for sub in node.subgraphs():
            for inner in sub.all_nodes():
                inner.set_inputs(inner.inputs)


def _take_functions(a: Model, b: Model) -> None:
    for key, function in b.functions.items():
        mine: Function | None = a.functions.get(key)
        if mine is None:
            a.functions[key] = function
        elif not _same_function(mine, function):
            raise GraftError(
                f"both models define function {function.domain}.{function.name} differently"
            )


def _same_function(first: Function, second: Function) -> bool:
    return (
        first.attributes == second.attributes
        and first.opset_imports == second.opset_imports
        and format_graph(first.graph) == format_graph(second.graph)
    )
