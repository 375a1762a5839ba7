"""A journal of changes to a model, so that a series of changes can be taken back as a whole.

While a `Journal` is open on a model, every change made through the IR's methods to a node,
value or graph of that model first records, the first time that object changes, what it was
(copy on first write). `undo()` puts every recorded object back as it was when the journal
was opened: the same nodes in the same order, the same uses, names, types, outputs,
initializers and opset imports. Objects created while the journal is open are simply left out
again. Cost: one lookup per change, plus one copy of a graph's node order the first time a
node is removed from it, inserted in the middle or reordered (appending is recorded cheaply).

A journal also says what changed, for validating a change before keeping it: the nodes that
are new in a graph (`created_nodes`), and every node input and graph output that now holds
another value than before (`input_changes`, `output_changes`).

The journal knows nothing of what makes the changes (a rule, a pass); it only sees the IR.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from types import TracebackType

from ir._core import Graph, Model, Node, Value, _is_within, _outer_values


@dataclasses.dataclass(frozen=True, slots=True)
class InputChange:
    """Input `index` of `node` read `old` when the journal opened and reads `new` now."""

    node: Node
    index: int
    old: Value | None
    new: Value | None


@dataclasses.dataclass(frozen=True, slots=True)
class OutputChange:
    """Output `index` of `graph` was `old` when the journal opened and is `new` now."""

    graph: Graph
    index: int
    old: Value
    new: Value


class Journal:
    """Records what changes touch, so `undo()` can restore it (see the module docstring).

    Use as a context manager: `with ir.Journal(model) as journal: ...`. A graph belongs to
    one open journal at a time. By default every graph of the model is journaled (finding
    them all walks the model); `graphs` limits it to the ones a change can touch, such as a
    rewrite's graph and the graphs enclosing it (`scope_of`).
    """

    def __init__(self, model: Model, graphs: Iterable[Graph] | None = None) -> None:
        self._model = model
        self._scope = None if graphs is None else list(graphs)
        self._attached: list[Graph] = []
        self._nodes: dict[Node, tuple[object, ...]] = {}
        self._values: dict[Value, tuple[object, ...]] = {}
        self._graph_fields: dict[Graph, tuple[object, ...]] = {}
        self._graph_io: dict[Graph, tuple[list[Value], list[Value]]] = {}
        self._orders: dict[Graph, dict[Node, None]] = {}
        self._appended: dict[Graph, dict[Node, None]] = {}
        self._initializers: dict[Graph, tuple[dict[str, Value], dict[str, Value]]] = {}
        self._added_initializers: dict[Graph, dict[str, Value]] = {}
        self._model_state = (
            dict(model.opset_imports),
            dict(model.functions),
            model.graph,
            {key: dict(fn.opset_imports) for key, fn in model.functions.items()},
        )

    # opening and closing -------------------------------------------------------------------
    def __enter__(self) -> Journal:
        for graph in self._model.graphs() if self._scope is None else self._scope:
            if graph._journal is not None:
                raise RuntimeError(f"graph {graph.name!r} is already journaled")
            graph._journal = self
            self._attached.append(graph)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        for graph in self._attached:
            if graph._journal is self:
                graph._journal = None
        self._attached.clear()

    # recording (called by the IR before a change) --------------------------------------------
    def node(self, node: Node) -> None:
        """`node` is about to change: keep what it is now, the first time."""
        if node not in self._nodes:
            self._nodes[node] = (
                node._inputs,
                node._attributes,
                node._op_type,
                node._domain,
                node._overload,
                node._name,
                node._doc_string,
                node._metadata_props,
                node._graph,
            )

    def value(self, value: Value) -> None:
        """`value` is about to change (its uses included): keep what it is now, the first time."""
        if value not in self._values:
            self._values[value] = (
                value._name,
                value._type,
                value._const_value,
                value._graph,
                dict(value._uses),
                value._doc_string,
                None if value._metadata_props is None else dict(value._metadata_props),
            )

    def graph_fields(self, graph: Graph) -> None:
        """The graph's name, doc string, owner or metadata are about to change."""
        if graph not in self._graph_fields:
            self._graph_fields[graph] = (
                graph._name,
                graph._doc_string,
                graph._owner,
                dict(graph.metadata_props),
            )

    def graph_io(self, graph: Graph) -> None:
        """The graph's inputs or outputs are about to change."""
        if graph not in self._graph_io:
            self._graph_io[graph] = (list(graph._inputs), list(graph._outputs))

    def appended(self, graph: Graph, nodes: Iterator[Node] | dict[Node, None]) -> None:
        """`nodes`, new to the graph, are about to be appended to it."""
        if graph in self._orders:
            return  # the whole original order is kept already
        self._appended.setdefault(graph, {}).update(dict.fromkeys(nodes))

    def order(self, graph: Graph) -> None:
        """The graph's node order is about to change otherwise than by appending."""
        if graph not in self._orders:
            appended = self._appended.pop(graph, {})
            self._orders[graph] = {n: None for n in graph._nodes if n not in appended}

    def initializer_added(self, graph: Graph, value: Value) -> None:
        """`value` is about to become an initializer of the graph under a new name."""
        if graph in self._initializers or value.name in graph._initializers:
            self.initializers(graph)
            return
        self._added_initializers.setdefault(graph, {})[value.name] = value

    def initializers(self, graph: Graph) -> None:
        """The graph's initializers are about to change otherwise than by adding new ones."""
        if graph not in self._initializers:
            added = self._added_initializers.pop(graph, {})
            self._initializers[graph] = (
                {k: v for k, v in graph._initializers.items() if added.get(k) is not v},
                dict(graph._sparse_initializers),
            )

    # what changed ----------------------------------------------------------------------------
    def created_nodes(self) -> dict[Node, None]:
        """Nodes now in a journaled graph that were not in it when the journal opened."""
        found: dict[Node, None] = {}
        for graph, original in self._orders.items():
            found.update((n, None) for n in graph._nodes if n not in original)
        for graph, appended in self._appended.items():
            found.update((n, None) for n in appended if n._graph is graph)
        return found

    def input_changes(self) -> list[InputChange]:
        """Every input of a node that was in the model before and still is, that changed."""
        changes = []
        for node, state in self._nodes.items():
            if node._graph is None or state[8] is None:
                continue
            before = state[0]
            assert isinstance(before, tuple), "a node's inputs are a tuple"
            now = node._inputs
            for index in range(max(len(before), len(now))):
                old = before[index] if index < len(before) else None
                new = now[index] if index < len(now) else None
                if old is not new:
                    changes.append(InputChange(node, index, old, new))
        return changes

    def output_changes(self) -> list[OutputChange]:
        """Every graph output slot (present before and now) that holds another value."""
        changes = []
        for graph, (_, outputs) in self._graph_io.items():
            for index, (old, new) in enumerate(zip(outputs, graph._outputs, strict=False)):
                if old is not new:
                    changes.append(OutputChange(graph, index, old, new))
        return changes

    def graphs(self) -> list[Graph]:
        """The journaled graphs whose nodes, inputs, outputs or initializers changed."""
        changed: dict[Graph, None] = {}
        changed.update(dict.fromkeys(self._orders))
        changed.update(dict.fromkeys(self._appended))
        changed.update(dict.fromkeys(self._graph_io))
        changed.update(dict.fromkeys(self._initializers))
        changed.update(dict.fromkeys(self._added_initializers))
        for node, state in self._nodes.items():
            for graph in (node._graph, state[8]):
                if isinstance(graph, Graph):
                    changed[graph] = None
        return list(changed)

    def __bool__(self) -> bool:
        """True when anything was recorded."""
        return bool(
            self._nodes
            or self._values
            or self._graph_fields
            or self._graph_io
            or self._orders
            or self._appended
            or self._initializers
            or self._added_initializers
            or self._model_changed()
        )

    def _model_changed(self) -> bool:
        opsets, functions, graph, function_opsets = self._model_state
        model = self._model
        return (
            opsets != model.opset_imports
            or functions != model.functions
            or graph is not model.graph
            or any(
                function_opsets.get(key) != fn.opset_imports for key, fn in model.functions.items()
            )
        )

    # undo ------------------------------------------------------------------------------------
    def undo(self) -> None:
        """Put everything recorded back as it was when the journal opened; forget it all.

        Nodes added while the journal was open leave their graphs, and the values they read
        forget them (even uses made before the journal opened, as a node built detached and
        added later makes).
        """
        dropped: list[Node] = []
        for graph, original in self._orders.items():
            for node in graph._nodes:
                if node not in original and node not in self._nodes:
                    node._graph = None
                    dropped.append(node)
            graph._nodes = original
        for graph, appended in self._appended.items():
            for node in appended:
                if node._graph is graph:
                    del graph._nodes[node]
                    if node not in self._nodes:
                        node._graph = None
                        dropped.append(node)
        for graph, (inputs, outputs) in self._graph_io.items():
            graph._restore_io(inputs, outputs)
        for graph, (initializers, sparse) in self._initializers.items():
            graph._initializers = initializers
            graph._sparse_initializers = sparse
        for graph, added in self._added_initializers.items():
            for name, value in added.items():
                if graph._initializers.get(name) is value:
                    del graph._initializers[name]
        for graph, fields in self._graph_fields.items():
            graph._name, graph._doc_string, graph._owner, metadata = fields  # type: ignore[assignment]
            graph.metadata_props = metadata  # type: ignore[assignment]
        self._restore_nodes()
        self._restore_values()
        self._restore_model()
        for node in dropped:
            _forget_reads(node)
        self._forget()

    def _restore_nodes(self) -> None:
        for node, state in self._nodes.items():
            (
                node._inputs,
                node._attributes,
                node._op_type,
                node._domain,
                node._overload,
                node._name,
                node._doc_string,
                node._metadata_props,
                node._graph,
            ) = state  # type: ignore[assignment]

    def _restore_values(self) -> None:
        for value, state in self._values.items():
            (
                value._name,
                value._type,
                value._const_value,
                value._graph,
                value._uses,
                value._doc_string,
                value._metadata_props,
            ) = state  # type: ignore[assignment]

    def _restore_model(self) -> None:
        opsets, functions, graph, function_opsets = self._model_state
        model = self._model
        model.opset_imports.clear()
        model.opset_imports.update(opsets)
        model.functions.clear()
        model.functions.update(functions)
        model.graph = graph
        for key, fn in functions.items():
            fn.opset_imports.clear()
            fn.opset_imports.update(function_opsets[key])

    def _forget(self) -> None:
        self._nodes.clear()
        self._values.clear()
        self._graph_fields.clear()
        self._graph_io.clear()
        self._orders.clear()
        self._appended.clear()
        self._initializers.clear()
        self._added_initializers.clear()


def _forget_reads(node: Node) -> None:
    """The values `node` reads (inputs, and outer values its subgraphs read) forget it."""
    for value in node._inputs:
        if value is not None:
            value._uses.pop(node, None)
    for sub in node.subgraphs():
        for value in _outer_values(sub):
            for user in [
                u for u in value._uses if u._graph is not None and _is_within(u._graph, sub)
            ]:
                value._uses.pop(user, None)


def scope_of(graph: Graph) -> list[Graph]:
    """`graph` and every graph enclosing it, innermost first: what a change in it can touch.

    A node of `graph` may read values of the graphs around it, whose use lists then change.
    """
    found = [graph]
    owner = graph._owner
    while isinstance(owner, Node) and owner._graph is not None:
        found.append(owner._graph)
        owner = owner._graph._owner
    return found
