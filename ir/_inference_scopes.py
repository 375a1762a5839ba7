"""The model as shape inference sees it: one proto whose every value has a unique name.

onnx's inference keys what it finds by value name, across the main graph and every subgraph:
two If branches that both name a value `q` (as exporters write them), or a branch value named
like a main-graph value, get one another's types. So inference runs on a lowered copy in which
every value a subgraph defines is renamed to a name used nowhere else, and each name of the
copy maps back to the IR `Value` it stands for. Function bodies are not renamed and nothing is
read back from them: their values are typed per call site or, here, not at all.

The copy also differs from the model in ways that keep facts sound (see `prepare`):
initializers that are also graph inputs are left out (a caller may feed another value), and
the declared shapes of computed values (value_info, graph and subgraph outputs) are left out:
onnx's inference would keep them as they are, while onnxruntime computes what the nodes compute
and only warns where a graph output's shape differs from its declaration (`ir.fact_type`).
Sparse initializers become graph inputs of their dense type: onnx types them as sparse
tensors, which no op's inference accepts, while runtimes compute with the dense tensor. A main
graph whose nodes are out of order (onnxruntime runs such models, and its fusion tests build
them) gets its nodes in topological order: onnx's inference reads them in the order given and
leaves a node untyped whose input comes from a later one.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import onnx
import onnx.helper

from ir._core import Graph, Model, Node, Value, topological_order
from ir._serde import to_onnx


@dataclasses.dataclass(frozen=True, slots=True)
class PreparedModel:
    """A lowered copy of a model for inference, and how its names map back.

    `nested` says whether the main graph holds subgraphs; `values` maps every name of
    `proto`'s main graph and subgraphs to its IR value;
    `declared_symbols` holds every `dim_param` of the declared types that are facts (the
    inputs of every graph), and `elsewhere_symbols` those the model writes anywhere but in
    the main graph's output types;
    `output_types` holds the main graph's declared output types (left out of `proto`), by
    output index.
    """

    proto: onnx.ModelProto
    nested: bool
    values: dict[str, Value]
    declared_symbols: frozenset[str]
    elsewhere_symbols: frozenset[str]
    output_types: dict[int, onnx.TypeProto]


def prepare(model: Model) -> PreparedModel:
    """Lower `model` for inference (weights left out), with unique names per scope."""
    proto = to_onnx(model, weights=False)
    _sort_main_graph(proto.graph, model.graph)
    for graph in _graphs_in(proto.graph):
        _sparse_as_dense_inputs(graph)
    _hide_overridable_values(proto.graph)
    nested = _has_subgraphs(proto.graph)
    graphs = list(_graphs_in(proto.graph)) if nested else [proto.graph]
    elsewhere = frozenset(_symbols_in(graphs, main_outputs=False))
    outputs = _forget_computed_shapes(graphs)
    # Only the inputs' symbols are left, the ones that are facts: a value_info symbol (one an
    # exporter copied from onnx's inference, `unk__6`) must not pass for one when onnx's
    # inference invents the same name again.
    symbols = frozenset(_symbols_in(graphs, main_outputs=True))
    if nested:
        values: dict[str, Value] = {}
        taken = set(_names_in(graphs))
        fresh = _fresh_names(taken)
        _rename_scope(proto.graph, model.graph, {}, values, fresh, is_main=True)
    else:
        values = {v.name: v for v in model.graph.values()}
    return PreparedModel(proto, nested, values, symbols, elsewhere, outputs)


def _sort_main_graph(proto: onnx.GraphProto, graph: Graph) -> None:
    """Put `proto`'s nodes (lowered from `graph`, in its order) in topological order."""
    nodes = list(graph)
    order = topological_order(graph)
    if order == nodes or len(proto.node) != len(nodes):
        return
    messages = list(proto.node)
    if any(
        list(message.output) != [value.name for value in node.outputs]
        for message, node in zip(messages, nodes, strict=True)
    ):
        return
    position = {node: index for index, node in enumerate(nodes)}
    del proto.node[:]
    proto.node.extend(messages[position[node]] for node in order)


# A domain onnx knows nothing of: a node moved there gets no inference (see `hide_nodes`).
HIDDEN_DOMAIN = "ir.hidden"


def hide_nodes(prepared: PreparedModel, nodes: Mapping[Node, None]) -> None:
    """Keep onnx's inference from typing `nodes` and the values computed from them.

    Each of `nodes` moves to a domain onnx does not know, so its outputs get no type (and
    nothing computed from them gets dims: the declared ones are left out by `prepare`).
    """
    values = prepared.values
    graphs = _graphs_in(prepared.proto.graph) if prepared.nested else (prepared.proto.graph,)
    for graph in graphs:
        for node in graph.node:
            value = next((values.get(name) for name in node.output if name), None)
            if value is not None and value.producer() in nodes:
                node.domain = HIDDEN_DOMAIN
    prepared.proto.opset_import.append(onnx.helper.make_opsetid(HIDDEN_DOMAIN, 1))


def types_by_value(inferred: onnx.ModelProto, prepared: PreparedModel) -> dict[Value, Any]:
    """The TypeProto onnx's inference gives each value (main graph and subgraphs)."""
    found: dict[Value, Any] = {}
    values = prepared.values
    graphs = _graphs_in(inferred.graph) if prepared.nested else (inferred.graph,)
    for graph in graphs:
        for infos in (graph.input, graph.value_info, graph.output):
            for info in infos:
                value = values.get(info.name)
                if value is not None and value not in found:
                    found[value] = info.type
    return found


# ---------------------------------------------------------------------------------------------


def _forget_computed_shapes(graphs: Sequence[onnx.GraphProto]) -> dict[int, onnx.TypeProto]:
    """Leave out the declared shapes of computed values; returns the main graph's output types.

    A value_info entry or a graph output (of the main graph, `graphs[0]`, or a subgraph)
    keeps its element type, which onnxruntime checks when it loads the model, and loses its
    shape, which it does not: it computes what the nodes compute, and for a graph output only
    warns where that differs from the declaration. onnx's inference would keep a declared
    shape as it is (and value_info dims an exporter wrote from an earlier inference, `unk__12`,
    as names), so the shapes inferred here are the ones the nodes compute from the inputs.
    Graph inputs keep their shapes: a caller must feed what they declare.
    """
    saved: dict[int, onnx.TypeProto] = {}
    for position, graph in enumerate(graphs):
        # value_info may describe an initializer too: its tensor is the fact (onnx's
        # inference reads a shapeless entry for it as a tensor of unknown shape)
        given = {t.name for t in graph.initializer} | {i.name for i in graph.input}
        for info in graph.value_info:
            if info.name not in given:
                _forget_shape(info.type)
        for index, output in enumerate(graph.output):
            if position == 0 and output.type.HasField("tensor_type"):
                saved[index] = onnx.TypeProto()
                saved[index].CopyFrom(output.type)
            _forget_shape(output.type)
    return saved


def _forget_shape(type_proto: onnx.TypeProto) -> None:
    """Clear the shapes of the tensor types in `type_proto` (a sequence's elements too)."""
    kind = type_proto.WhichOneof("value")
    if kind in ("tensor_type", "sparse_tensor_type"):
        getattr(type_proto, kind).ClearField("shape")
    elif kind in ("sequence_type", "optional_type"):
        _forget_shape(getattr(type_proto, kind).elem_type)
    elif kind == "map_type":
        _forget_shape(type_proto.map_type.value_type)


def _hide_overridable_values(graph: onnx.GraphProto) -> None:
    """Leave out the data of initializers that are also graph inputs (IR 3 lists every one).

    Such an initializer is only a default a caller may override, so a fact must hold for
    whatever is fed there: inference gets its type, not its value (a Reshape whose shape is
    such an input has an output shape of unknown dims, not the default's).
    """
    inputs = {info.name for info in graph.input}
    kept = [t for t in graph.initializer if t.name not in inputs]
    if len(kept) != len(graph.initializer):
        del graph.initializer[:]
        graph.initializer.extend(kept)


def _sparse_as_dense_inputs(graph: onnx.GraphProto) -> None:
    """Each sparse initializer as a graph input of its dense type (no data is read)."""
    for sparse in graph.sparse_initializer:
        graph.input.append(
            onnx.helper.make_tensor_value_info(
                sparse.values.name, sparse.values.data_type, list(sparse.dims)
            )
        )
    del graph.sparse_initializer[:]


def _graphs_in(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    """`graph` and every graph nested in its nodes' attributes, depth first."""
    yield graph
    for node in graph.node:
        for attr in node.attribute:
            if attr.HasField("g"):
                yield from _graphs_in(attr.g)
            for sub in attr.graphs:
                yield from _graphs_in(sub)


def _has_subgraphs(graph: onnx.GraphProto) -> bool:
    return any(attr.HasField("g") or attr.graphs for node in graph.node for attr in node.attribute)


def _symbols_in(graphs: Sequence[onnx.GraphProto], *, main_outputs: bool) -> Iterator[str]:
    """The dim_params of the declared types of `graphs`.

    The first graph is the main graph; its outputs' dims are included only if asked.
    """
    for index, sub in enumerate(graphs):
        outputs = sub.output if main_outputs or index else ()
        for info in (*sub.input, *outputs, *sub.value_info):
            if info.type.HasField("tensor_type"):
                for dim in info.type.tensor_type.shape.dim:
                    if dim.dim_param:
                        yield dim.dim_param


def _names_in(graphs: Sequence[onnx.GraphProto]) -> Iterator[str]:
    for sub in graphs:
        for info in (*sub.input, *sub.output, *sub.value_info):
            yield info.name
        for tensor in sub.initializer:
            yield tensor.name
        for node in sub.node:
            yield from node.input
            yield from node.output


def _fresh_names(taken: set[str]) -> Iterator[str]:
    """`scoped__1`, `scoped__2`, ...: names no value of the model has."""
    for index in itertools.count(1):
        name = f"scoped__{index}"
        if name not in taken:
            yield name


def _rename_scope(
    graph: onnx.GraphProto,
    ir_graph: Graph,
    outer: dict[str, str],
    values: dict[str, Value],
    fresh: Iterator[str],
    *,
    is_main: bool,
) -> None:
    """Give every value `graph` defines a unique name, and record the IR value of each.

    The main graph keeps its own names; references are rewritten to the names in scope.
    """
    defined = {v.name: v for v in ir_graph.values()}
    scope = dict(outer)
    definitions = [info.name for info in graph.input]
    definitions += [t.name for t in graph.initializer]
    definitions += [t.values.name for t in graph.sparse_initializer]
    definitions += [name for node in graph.node for name in node.output if name]
    for name in definitions:
        unique = name if is_main else next(fresh)
        scope[name] = unique
        value = defined.get(name)
        if value is not None:
            values[unique] = value
    for info in (*graph.input, *graph.output, *graph.value_info):
        info.name = scope.get(info.name, info.name)
    for tensor in graph.initializer:
        tensor.name = scope.get(tensor.name, tensor.name)
    for sparse in graph.sparse_initializer:
        sparse.values.name = scope.get(sparse.values.name, sparse.values.name)
    owners = _owners_by_outputs(ir_graph)
    for node in graph.node:
        node.input[:] = [scope.get(name, name) if name else name for name in node.input]
        original_outputs = tuple(node.output)
        node.output[:] = [scope.get(name, name) if name else name for name in node.output]
        owner = owners.get(original_outputs)
        for attr in node.attribute:
            subgraphs = [attr.g] if attr.HasField("g") else list(attr.graphs)
            ir_subgraphs = _ir_subgraphs(owner, attr.name)
            for sub, ir_sub in zip(subgraphs, ir_subgraphs, strict=False):
                _rename_scope(sub, ir_sub, scope, values, fresh, is_main=False)


def _owners_by_outputs(graph: Graph) -> dict[tuple[str, ...], Node]:
    """Nodes holding subgraphs, by the names of their outputs (unique within a graph)."""
    return {
        tuple(v.name for v in node.outputs): node
        for node in graph
        if node.outputs and any(True for _ in node.subgraphs())
    }


def _ir_subgraphs(owner: Node | None, attr_name: str) -> tuple[Graph, ...]:
    if owner is None:
        return ()
    attr = owner.attributes.get(attr_name)
    return attr.graphs() if attr is not None else ()
