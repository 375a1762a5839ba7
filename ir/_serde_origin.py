"""What lowering keeps of the messages a model was lifted from: beside the model, not in it.

Part of the serde layer. Lifting records, for each model, the ModelProto it read and, for every
graph and function it built, the message it came from and a snapshot of what was built from
it: the nodes in order with each node's plain fields, input tuple, attribute dict and metadata
dict; the graph's inputs, outputs, initializers and value_info; and each value's name, type,
doc string and metadata. The IR classes hold nothing of this: the records live in a table
keyed weakly by the model, and die with it.

Lowering compares the IR with the snapshot (`Changes`) and emits every part that did not
change since lifting as its original message: byte for byte, and without rebuilding it.

Why comparing is enough: the core replaces a node's input tuple, attribute dict and metadata
dict whenever it changes them (it never changes them in place), so a snapshot holds the very
containers the node had, and `is` finds every change made through the IR's methods. Plain
fields (strings, types) are compared by value. Nothing is marked when it changes, so there is
no bookkeeping to forget: a change the comparison misses would have to bypass the IR's API.

Cost: the snapshot is a handful of tuples per graph, with no object per node or value (the
collector walks every object a model is made of, so each one counts), and comparing an
untouched graph is a few passes at C speed over those tuples. The records keep the nodes and
values that lifting built alive as long as the model lives, even after a pass removes them.
"""

from __future__ import annotations

import dataclasses
import operator
import weakref
from collections.abc import Callable, Iterable, Iterator
from itertools import chain, compress
from typing import TYPE_CHECKING, Any

from ir._core import Attr, DeferredAttributes, Function, Graph, Model, Node, Tensor, Type, Value

if TYPE_CHECKING:
    import onnx

_OP_TYPE = operator.attrgetter("_op_type")
_DOMAIN = operator.attrgetter("_domain")
_OVERLOAD = operator.attrgetter("_overload")
_NODE_NAME = operator.attrgetter("_name")
_NODE_DOC = operator.attrgetter("_doc_string")
_INPUTS = operator.attrgetter("_inputs")
_ATTRIBUTES = operator.attrgetter("_attributes")
_NODE_METADATA = operator.attrgetter("_metadata_props")
_NAME = operator.attrgetter("_name")
_TYPE = operator.attrgetter("_type")
_DOC = operator.attrgetter("_doc_string")
_VALUE_METADATA = operator.attrgetter("_metadata_props")
_CONST = operator.attrgetter("_const_value")
_OUTPUTS = operator.attrgetter("_outputs")


@dataclasses.dataclass(frozen=True, slots=True, eq=False)
class GraphOrigin:
    """A lifted graph (or function body): its message and a snapshot of what was built.

    `proto` is a GraphProto, or the FunctionProto of a function body; node `i` of the
    snapshot was built from `proto.node[i]`, and value_info entry `i` described
    `value_info[i]` (None when it named nothing in scope).
    """

    proto: Any  # onnx.GraphProto | onnx.FunctionProto: both have node and value_info
    name: str
    doc_string: str
    metadata: dict[str, str]
    nodes: tuple[Node, ...]
    op_types: tuple[str, ...]
    domains: tuple[str, ...]
    overloads: tuple[str, ...]
    node_names: tuple[str, ...]
    node_docs: tuple[str, ...]
    node_inputs: tuple[tuple[Value | None, ...], ...]
    node_attributes: tuple[dict[str, Attr] | DeferredAttributes, ...]
    node_metadata: tuple[dict[str, str] | None, ...]
    with_subgraphs: tuple[int, ...]
    """Positions of the nodes whose attributes hold graphs."""
    inputs: tuple[Value, ...]
    outputs: tuple[Value, ...]
    initializer_names: tuple[str, ...]
    initializer_values: tuple[Value, ...]
    initializer_tensors: tuple[Tensor | None, ...]
    sparse_names: tuple[str, ...]
    sparse_values: tuple[Value, ...]
    value_info: tuple[Value | None, ...]
    deferred: DeferredSource | None
    """What the nodes given deferred attributes load them from."""
    positions: dict[Node, int] = dataclasses.field(default_factory=dict)
    """Node -> position in `nodes`, filled on first use (see `position`)."""

    def position(self, node: Node) -> int | None:
        """Where `node` was in the lifted graph, or None when lifting did not build it here."""
        positions = self.positions
        if not positions and self.nodes:
            positions.update((n, i) for i, n in enumerate(self.nodes))
        return positions.get(node)

    def lifted_attributes(self, position: int) -> dict[str, Attr] | None:
        """The attribute dict node `position` had once lifted (None: never loaded)."""
        attrs = self.node_attributes[position]
        if isinstance(attrs, DeferredSource):
            return attrs.loaded(self.nodes[position])
        return attrs if isinstance(attrs, dict) else None


class DeferredSource(DeferredAttributes):
    """The attributes of a lifted graph's nodes, lifted from their messages when first asked.

    One per graph, bound to the graph's origin once lifting is done. `lift` turns a node's
    AttributeProtos into Attrs (it keeps nothing of the lifter but the model's folder). The
    dict handed to each node is kept, so lowering can tell an untouched node (which still
    holds it) from one whose attributes were set since.
    """

    __slots__ = ("_lift", "_loaded", "_origin")

    def __init__(self, lift: Callable[[Any], dict[str, Attr]]) -> None:
        self._lift = lift
        self._origin: GraphOrigin | None = None
        self._loaded: dict[Node, dict[str, Attr]] = {}

    def bind(self, origin: GraphOrigin) -> None:
        """Name the origin of the graph whose nodes were given this source (once)."""
        self._origin = origin

    def attribute_protos(self, node: Node) -> Any:
        """The AttributeProtos of `node` (a repeated field of its NodeProto)."""
        origin = self._origin
        assert origin is not None, "a deferred source is bound once its graph is lifted"
        position = origin.position(node)
        assert position is not None, f"{node!r} was not lifted with this source"
        return origin.proto.node[position].attribute

    def load(self, node: Node) -> dict[str, Attr]:
        """Lift the attributes of `node` (once; later calls return the same dict)."""
        loaded = self._loaded.get(node)
        if loaded is None:
            loaded = self._lift(self.attribute_protos(node))
            self._loaded[node] = loaded
        return loaded

    def loaded(self, node: Node) -> dict[str, Attr] | None:
        """The dict `load` gave `node`, or None when it was never asked for."""
        return self._loaded.get(node)


@dataclasses.dataclass(frozen=True, slots=True, eq=False)
class FunctionOrigin:
    """A lifted function: its message and the attribute defaults built from it, in order."""

    proto: Any  # onnx.FunctionProto
    attribute_defaults: tuple[Attr, ...]


@dataclasses.dataclass(frozen=True, slots=True, eq=False)
class ModelOrigin:
    """A lifted model: its message, its graphs' and functions' origins and its values.

    The value snapshot covers every value lifting defined, in any graph or function body;
    `unknown_element_types` keeps the element-type codes onnx does not define that graph
    inputs and outputs declared (their types say UNDEFINED), for `validate_model` to report.
    """

    proto: Any  # onnx.ModelProto
    graphs: dict[Graph, GraphOrigin]
    functions: dict[Function, FunctionOrigin]
    values: tuple[Value, ...]
    value_names: tuple[str, ...]
    value_types: tuple[Type | None, ...]
    value_docs: tuple[str, ...]
    value_metadata: tuple[dict[str, str] | None, ...]
    unknown_element_types: dict[Value, int]


def snapshot_graph(
    graph: Graph,
    proto: onnx.GraphProto | onnx.FunctionProto,
    value_info: Iterable[Value | None],
    deferred: DeferredSource | None,
    with_subgraphs: Iterable[int],
) -> GraphOrigin:
    """The origin of a graph just lifted from `proto` (call before anything changes it).

    `with_subgraphs` are the positions of the nodes that were given graph attributes.
    """
    nodes = tuple(graph._nodes)
    attributes = tuple(map(_ATTRIBUTES, nodes))
    initializers = tuple(graph._initializers.values())
    origin = GraphOrigin(
        proto=proto,
        name=graph._name,
        doc_string=graph._doc_string,
        metadata=dict(graph.metadata_props),
        nodes=nodes,
        op_types=tuple(map(_OP_TYPE, nodes)),
        domains=tuple(map(_DOMAIN, nodes)),
        overloads=tuple(map(_OVERLOAD, nodes)),
        node_names=tuple(map(_NODE_NAME, nodes)),
        node_docs=tuple(map(_NODE_DOC, nodes)),
        node_inputs=tuple(map(_INPUTS, nodes)),
        node_attributes=attributes,
        node_metadata=tuple(map(_NODE_METADATA, nodes)),
        with_subgraphs=tuple(with_subgraphs),
        inputs=tuple(graph._inputs),
        outputs=tuple(graph._outputs),
        initializer_names=tuple(graph._initializers),
        initializer_values=initializers,
        initializer_tensors=tuple(map(_CONST, initializers)),
        sparse_names=tuple(graph._sparse_initializers),
        sparse_values=tuple(graph._sparse_initializers.values()),
        value_info=tuple(value_info),
        deferred=deferred,
    )
    if deferred is not None:
        deferred.bind(origin)
    return origin


def defined_values(graph: Graph) -> Iterator[Value]:
    """The values `graph` defines (an initializer that is also an input comes twice)."""
    return chain(
        graph._inputs,
        graph._initializers.values(),
        graph._sparse_initializers.values(),
        chain.from_iterable(map(_OUTPUTS, graph._nodes)),
    )


def snapshot_model(
    proto: onnx.ModelProto,
    graphs: dict[Graph, GraphOrigin],
    functions: dict[Function, FunctionOrigin],
    unknown_element_types: dict[Value, int],
) -> ModelOrigin:
    """The origin of a model just lifted from `proto` (its graphs' origins already made)."""
    values = tuple(chain.from_iterable(defined_values(graph) for graph in graphs))
    return ModelOrigin(
        proto=proto,
        graphs=graphs,
        functions=functions,
        values=values,
        value_names=tuple(map(_NAME, values)),
        value_types=tuple(map(_TYPE, values)),
        value_docs=tuple(map(_DOC, values)),
        value_metadata=_copy_metadata(values),
        unknown_element_types=unknown_element_types,
    )


def _copy_metadata(values: tuple[Value, ...]) -> tuple[dict[str, str] | None, ...]:
    """Each value's metadata as a copy (a value's metadata dict is changed in place)."""
    metadata = tuple(map(_VALUE_METADATA, values))
    if not any(metadata):
        return (None,) * len(metadata)  # nothing to copy (the usual case)
    return tuple(dict(m) if m else None for m in metadata)


_ORIGINS: weakref.WeakKeyDictionary[Model, ModelOrigin] = weakref.WeakKeyDictionary()


def remember(model: Model, origin: ModelOrigin) -> None:
    """Keep `origin` for as long as `model` lives."""
    _ORIGINS[model] = origin


def origin_of(model: Model) -> ModelOrigin | None:
    """What lifting recorded for `model` (None for a model built through the API)."""
    return _ORIGINS.get(model)


def forget(model: Model) -> None:
    """Drop what lifting recorded for `model`: lowering then builds every message anew."""
    _ORIGINS.pop(model, None)


class Changes:
    """What of a lifted model changed since lifting, as one lowering sees it.

    Built at the start of a lowering (the IR must not change while it is used): values whose
    name, type, doc string or metadata differ from the snapshot are found at once, graphs are
    judged on first question and the verdict kept.
    """

    __slots__ = ("_affected", "_changed", "_renamed", "_verdicts", "origin")

    def __init__(self, origin: ModelOrigin) -> None:
        self.origin = origin
        self._changed: dict[Value, None] = {}
        self._renamed: dict[Value, None] = {}
        self._verdicts: dict[Graph, bool] = {}
        values = origin.values
        self._collect(values, map(_NAME, values), origin.value_names, self._renamed)
        self._changed.update(self._renamed)
        self._collect(values, map(_TYPE, values), origin.value_types, self._changed)
        self._collect(values, map(_DOC, values), origin.value_docs, self._changed)
        self._collect(values, map(_VALUE_METADATA, values), origin.value_metadata, self._changed)
        # A renamed or retyped value changes the graph defining it (its value_info) and the
        # graphs of the nodes reading it (their inputs name it).
        affected: dict[Graph | None, None] = {}
        for value in self._changed:
            affected[value.graph] = None
            for user in value._uses:
                affected[user._graph] = None
        self._affected = affected

    @staticmethod
    def _collect(
        values: tuple[Value, ...],
        current: Iterable[object],
        recorded: tuple[object, ...],
        into: dict[Value, None],
    ) -> None:
        """Add to `into` the values whose `current` item differs from the `recorded` one."""
        now = tuple(current)
        if now == recorded:
            return
        for value, new, old in zip(values, now, recorded, strict=True):
            # `or None`: an empty metadata dict is no metadata.
            if new is not old and (new or None) != (old or None):
                into[value] = None

    def value_unchanged(self, value: Value) -> bool:
        """Whether a lifted value still has its name, type, doc string and metadata."""
        return value not in self._changed

    def graph_unchanged(self, graph: Graph) -> bool:
        """Whether `graph` (and every graph nested in it) is exactly as lifted."""
        verdict = self._verdicts.get(graph)
        if verdict is None:
            origin = self.origin.graphs.get(graph)
            verdict = origin is not None and self._graph_unchanged(graph, origin)
            self._verdicts[graph] = verdict
        return verdict

    def _graph_unchanged(self, graph: Graph, origin: GraphOrigin) -> bool:
        return (
            not self.values_changed_in(graph, origin)
            and graph._name == origin.name
            and graph._doc_string == origin.doc_string
            and graph.metadata_props == origin.metadata
            and tuple(graph._inputs) == origin.inputs
            and tuple(graph._outputs) == origin.outputs
            and self.initializers_unchanged(graph, origin)
            and self._nodes_unchanged(graph, origin)
        )

    def values_changed_in(self, graph: Graph, origin: GraphOrigin) -> bool:
        """Whether a value `graph` defines, reads or describes changed since lifting."""
        changed = self._changed
        if not changed:
            return False
        return graph in self._affected or any(
            v in changed for v in chain(origin.inputs, origin.outputs, origin.value_info)
        )

    @staticmethod
    def initializers_unchanged(graph: Graph, origin: GraphOrigin) -> bool:
        """Whether the graph's initializers and sparse initializers are still the lifted ones."""
        return (
            tuple(graph._initializers) == origin.initializer_names
            and _same(graph._initializers.values(), origin.initializer_values)
            and _same(map(_CONST, origin.initializer_values), origin.initializer_tensors)
            and tuple(graph._sparse_initializers) == origin.sparse_names
            and _same(graph._sparse_initializers.values(), origin.sparse_values)
        )

    def changed_positions(self, graph: Graph, origin: GraphOrigin) -> list[int] | None:
        """The positions of the nodes that changed, in order.

        None unless the graph's nodes are still the lifted ones in the lifted order. Each
        field is compared for every node at once (at C speed), and only the nodes that differ
        somewhere are looked at closely.
        """
        nodes = tuple(graph._nodes)
        if nodes != origin.nodes:
            return None
        count = len(nodes)
        if self._renamed:
            # A renamed value changes its producer and its readers: look at every node.
            return [i for i in range(count) if not self.node_unchanged(nodes[i], origin, i)]
        suspects = set(origin.with_subgraphs)
        for getter, recorded, compare in (
            (_OP_TYPE, origin.op_types, operator.eq),
            (_DOMAIN, origin.domains, operator.eq),
            (_OVERLOAD, origin.overloads, operator.eq),
            (_NODE_NAME, origin.node_names, operator.eq),
            (_NODE_DOC, origin.node_docs, operator.eq),
            (_INPUTS, origin.node_inputs, operator.eq),
            (_NODE_METADATA, origin.node_metadata, operator.is_),
            (_ATTRIBUTES, origin.node_attributes, operator.is_),
        ):
            current = tuple(map(getter, nodes))
            if all(map(compare, current, recorded)):
                continue
            suspects.update(
                compress(range(count), map(operator.not_, map(compare, current, recorded)))
            )
        return [i for i in sorted(suspects) if not self.node_unchanged(nodes[i], origin, i)]

    def _nodes_unchanged(self, graph: Graph, origin: GraphOrigin) -> bool:
        nodes = tuple(graph._nodes)
        if nodes != origin.nodes:
            return False
        if (
            tuple(map(_OP_TYPE, nodes)) != origin.op_types
            or tuple(map(_DOMAIN, nodes)) != origin.domains
            or tuple(map(_OVERLOAD, nodes)) != origin.overloads
            or tuple(map(_NODE_NAME, nodes)) != origin.node_names
            or tuple(map(_NODE_DOC, nodes)) != origin.node_docs
            or tuple(map(_INPUTS, nodes)) != origin.node_inputs
        ):
            return False
        if not _same(map(_NODE_METADATA, nodes), origin.node_metadata):
            return False
        if not _same(map(_ATTRIBUTES, nodes), origin.node_attributes):
            # Nodes whose deferred attributes were loaded hold the loaded dict: look closer.
            for i, node in enumerate(nodes):
                if not self._attributes_unchanged(node, origin, i):
                    return False
        return all(
            self.graph_unchanged(sub) for i in origin.with_subgraphs for sub in nodes[i].subgraphs()
        )

    def node_unchanged(self, node: Node, origin: GraphOrigin, position: int) -> bool:
        """Whether `node`, built from `origin.proto.node[position]`, is exactly as lifted."""
        attributes = node._attributes
        if (
            node._inputs != origin.node_inputs[position]
            or node._name != origin.node_names[position]
            or node._op_type != origin.op_types[position]
            or node._domain != origin.domains[position]
            or node._overload != origin.overloads[position]
            or node._doc_string != origin.node_docs[position]
            or node._metadata_props is not origin.node_metadata[position]
            or (
                attributes is not origin.node_attributes[position]
                and not self._attributes_unchanged(node, origin, position)
            )
        ):
            return False
        renamed = self._renamed
        if renamed and any(v in renamed for v in chain(node._inputs, node._outputs)):
            return False
        if type(attributes) is dict and attributes:
            return all(self.graph_unchanged(sub) for sub in node.subgraphs())
        return True

    @staticmethod
    def _attributes_unchanged(node: Node, origin: GraphOrigin, position: int) -> bool:
        current = node._attributes
        lifted = origin.node_attributes[position]
        if current is lifted:
            return True
        return isinstance(lifted, DeferredSource) and lifted.loaded(node) is current


def _same(items: Iterable[object], recorded: tuple[object, ...]) -> bool:
    """Whether `items` are the very objects of `recorded`, in order."""
    items = tuple(items)
    return len(items) == len(recorded) and all(map(operator.is_, items, recorded))
