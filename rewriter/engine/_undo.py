"""An undo log: the graph mutations of one rewrite, each recorded with what reverses it.

The builder commits a rewrite through an `UndoLog`: every change to the model goes through
one of its methods, which makes the change and remembers how to take it back. If the
rewritten region then fails validation, `undo()` restores the model as it was before the
rewrite (same nodes in the same order, same uses, names, outputs and initializers), so one
bad rewrite is rolled back without replaying the run. Removing what a rewrite left unused is
not logged: it happens after validation, when the rewrite is final (see `_commit`).
"""

from __future__ import annotations

from collections.abc import Callable

import ir


class UndoLog:
    """Mutations of one rewrite, in order, each with its inverse."""

    __slots__ = ("_inverses",)

    def __init__(self) -> None:
        self._inverses: list[Callable[[], None]] = []

    def __len__(self) -> int:
        return len(self._inverses)

    def undo(self) -> None:
        """Reverse every recorded mutation, last first; the log is empty afterwards."""
        while self._inverses:
            self._inverses.pop()()

    # mutations -----------------------------------------------------------------------------

    def add_opset(self, model: ir.Model, domain: str, version: int) -> None:
        """Import `domain` at `version` (when the model does not import it yet)."""
        if domain in model.opset_imports:
            return
        model.opset_imports[domain] = version

        def forget() -> None:
            del model.opset_imports[domain]

        self._inverses.append(forget)

    def add_initializer(self, graph: ir.Graph, value: ir.Value) -> None:
        """Register a new initializer."""
        graph.add_initializer(value)

        def take_back() -> None:
            graph.remove_initializer(value.name)

        self._inverses.append(take_back)

    def append_node(self, graph: ir.Graph, node: ir.Node) -> None:
        """Add a detached node at the end of `graph`."""
        graph.append(node)
        self._inverses.append(lambda: _take_out(graph, node))

    def replace_input(self, node: ir.Node, index: int, value: ir.Value | None) -> None:
        """Make input `index` of `node` read `value`."""
        old = node.inputs[index]
        node.replace_input_with(index, value)
        self._inverses.append(lambda: node.replace_input_with(index, old))

    def set_output(self, graph: ir.Graph, index: int, value: ir.Value) -> None:
        """Make graph output `index` hold `value`."""
        old = graph.outputs[index]
        graph.set_output(index, value)
        self._inverses.append(lambda: graph.set_output(index, old))

    def set_type(self, value: ir.Value, new_type: ir.Type | None) -> None:
        """Declare the type of `value`."""
        old = value.type
        value.type = new_type
        self._inverses.append(lambda: setattr(value, "type", old))


def _take_out(graph: ir.Graph, node: ir.Node) -> None:
    """Remove a node this rewrite added; the values it read lose those uses."""
    graph.remove(node, safe=False)
