"""`verify`: checks the IR's structural invariants (a debugging and testing aid).

Checked: node and value ownership, use-def symmetry in both directions, that every value a
node reads is defined in its graph or an enclosing one (or is a graph input/initializer),
that graph outputs are defined, that no value is defined twice, that every value a node reads
or the graph outputs has a name (an empty name means an absent value in ONNX), and that the
graph is acyclic.
"""

from __future__ import annotations

from ir._core import Function, Graph, GraphStructureError, Model, Node, Value, topological_order


def verify(target: Model | Graph | Function) -> None:
    """Raise GraphStructureError describing the first broken invariant, if any."""
    if isinstance(target, Model):
        _verify_graph(target.graph, ())
        for fn in target.functions.values():
            _verify_graph(fn.graph, ())
    elif isinstance(target, Function):
        _verify_graph(target.graph, ())
    else:
        _verify_graph(target, _enclosing(target))


def _enclosing(graph: Graph) -> tuple[Graph, ...]:
    chain: list[Graph] = []
    owner = graph.owner
    while isinstance(owner, Node) and owner.graph is not None:
        chain.append(owner.graph)
        owner = owner.graph.owner
    return tuple(chain)


def _fail(graph: Graph, message: str) -> GraphStructureError:
    return GraphStructureError(f"graph {graph.name!r}: {message}")


def _verify_graph(graph: Graph, outer: tuple[Graph, ...]) -> None:
    defined: dict[Value, None] = {}
    names: dict[str, Value] = {}

    def define(value: Value, what: str) -> None:
        if value in defined:
            return
        if value.name and value.name in names and names[value.name] is not value:
            raise _fail(graph, f"value {value.name!r} is defined twice ({what})")
        defined[value] = None
        if value.name:
            names[value.name] = value

    for value in graph.inputs:
        if value.graph is not graph:
            raise _fail(graph, f"input {value.name!r} is not owned by this graph")
        define(value, "graph input")
    for name, value in graph.initializers.items():
        if value.name != name or value.graph is not graph:
            raise _fail(graph, f"initializer {name!r} is registered inconsistently")
        define(value, "initializer")
    for value in graph.sparse_initializers.values():
        define(value, "sparse initializer")
    for node in graph:
        if node.graph is not graph:
            raise _fail(graph, f"{node!r} is listed but not owned by the graph")
        for i, out in enumerate(node.outputs):
            if out.producer() is not node or out.index != i:
                raise _fail(graph, f"output {i} of {node!r} does not point back to it")
            define(out, f"output of {node!r}")
    for node in graph:
        for i, read in enumerate(node.inputs):
            if read is None:
                continue
            if not read.name:
                raise _fail(graph, f"{node!r} reads an unnamed value (input {i}): name it")
            if not read._uses.get(node, 0) >> i & 1:
                raise _fail(graph, f"{node!r} reads {read.name!r} but is not in its uses")
            if read not in defined and not _defined_outside(read, outer):
                raise _fail(graph, f"{node!r} reads {read.name!r}, which is not defined in scope")
        for sub in node.subgraphs():
            if sub.owner is not node:
                raise _fail(graph, f"subgraph {sub.name!r} of {node!r} has the wrong owner")
            _verify_graph(sub, (graph, *outer))
    for value in defined:
        for use in value.uses:
            node = use.node
            if node.graph is None:
                raise _fail(graph, f"{value.name!r} is used by detached {node!r}")
            if use.index >= len(node.inputs) or node.inputs[use.index] is not value:
                raise _fail(graph, f"stale use of {value.name!r} by {node!r}")
    for value in graph.outputs:
        if not value.name:
            raise _fail(graph, "a graph output has no name")
        if value not in defined and not _defined_outside(value, outer):
            raise _fail(graph, f"output {value.name!r} is not defined")
    topological_order(graph)


def _defined_outside(value: Value, outer: tuple[Graph, ...]) -> bool:
    owner = value.graph
    return owner is not None and any(owner is g for g in outer)
