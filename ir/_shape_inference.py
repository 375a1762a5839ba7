"""Shape facts for a whole model: onnx's inference first, then a symbolic walk over the gaps.

`infer_types(model)` lowers the model once (`_inference_scopes.prepare`: unique names per
scope, weights left out) and runs onnx's C++ inference with data propagation. When that
leaves every value read with known dims (numbers, or symbols the model declares), its types
are the facts and nothing else runs: a static model costs one onnx call. Otherwise a walk
visits each graph's nodes producers first and applies this package's shape rules
(`_shape_ops_*`), which keep dims as symbolic expressions (`_symbolic_dims`) and follow shape
values (`Shape -> Gather -> Concat -> Reshape`) element by element. Where a rule has no answer,
onnx's is kept.

Symbols onnx invents (`unk__N`) are names for dims it could not compute; onnx gives one to
several tensors only where their dims are equal. So once the walk knows what one of them
stands for, it substitutes that everywhere. Not so inside a sequence's (or optional's)
element type: there one symbol stands for the dims of every element, equal or not, and
`SequenceAt` hands it to each element it reads. Such a symbol is no fact: the walk reads it as
an unknown dim. Symbols the model declares are never merged with one another: two different
symbols are two possibly different sizes.

Where onnx's inference and onnxruntime compute different output dims (`_shape_disputes`:
pooling with `ceil_mode`, Resize by scales, ...), onnx's answer is no fact: such a node is
hidden from the whole-model inference (its op moved to a domain onnx does not know), and the
values computed from it are typed node by node from the walk's own facts.

The declared shapes of computed values (value_info, graph outputs) are no facts (`fact_type`):
inference runs without them (`_inference_scopes.prepare`), so every dim of a computed value
is one its nodes compute from the inputs' declared shapes and the constants.

Facts belong to values: each is recorded on its IR `Value` (`value.meta["inferred_type"]`),
per graph; function bodies get none beyond their declared types. Invariants: a fact holds for
every input the model accepts; inference never changes the model (only value metadata); the
same model gives the same facts.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import onnx
import onnx.checker
import onnx.shape_inference

from ir import _shape_ops_elementwise, _shape_ops_nn, _shape_ops_tensor
from ir._contrib_ops import find_contrib_op
from ir._core import (
    Dim,
    Function,
    Graph,
    Model,
    Node,
    TensorType,
    Type,
    Value,
    topological_order,
)
from ir._enums import DataType
from ir._infer import (
    INFERRED,
    ONNX_INFERENCE_ERRORS,
    NodeInferenceError,
    SharedInferredType,
    fact_type,
    infer_node_types,
    lift_inferred_type,
)
from ir._inference_scopes import (
    PreparedModel,
    hide_nodes,
    prepare,
    types_by_value,
)
from ir._runtime_ops import find_runtime_op, runtime_op_names
from ir._schemas import find_schema
from ir._shape_disputes import has_disputed_dims
from ir._shape_facts import OutputFacts, RuleTable, Shape, ShapeData, broadcast_bounds
from ir._shape_ops_elementwise import BROADCASTING_OPS
from ir._shape_ops_tensor import tensor_data
from ir._symbolic_dims import DimExpr, assume_at_most, const, from_dim, symbol, to_dim

logger = logging.getLogger(__name__)

RULES: RuleTable = {
    **_shape_ops_elementwise.RULES,
    **_shape_ops_tensor.RULES,
    **_shape_ops_nn.RULES,
}
_DEFAULT_DOMAINS = ("", "ai.onnx")
_NOTHING = OutputFacts()
_RUNTIME_OP_NAMES = runtime_op_names()
# Ops whose onnx inference gives wrong dims when an input dim is symbolic: Attention (23) with
# a past key and value gives the total sequence length as 0. Their outputs keep only onnx's
# rank unless every input dim is a number.
_WRONG_ON_SYMBOLS = frozenset({"Attention"})
# Element types this IR names (a damaged model may carry any number).
_KNOWN_DTYPES = frozenset(int(t) for t in DataType if t != DataType.UNDEFINED)


def infer_types(model: Model) -> int:
    """Infer shapes and dtypes over the whole model and record them as facts.

    Returns the number of values that gained a fact. When onnx's inference fails on the
    model, the walk types each node with onnx's per-node inference instead; a node that
    cannot be typed leaves its outputs without facts (a rule never fires on an unknown fact).
    The body of a model-local function gets facts when every call of it is typed alike
    (`_infer_function_bodies`).
    """
    return _infer_graphs(model) + _infer_function_bodies(model)


def _infer_graphs(model: Model) -> int:
    """`infer_types` of the main graph and its subgraphs."""
    prepared = prepare(model)
    disputed = _disputed_nodes(model)
    downstream = _computed_from(disputed)
    if disputed:
        hide_nodes(prepared, disputed)
    inferred = _onnx_inference(prepared.proto)
    onnx_types = types_by_value(inferred, prepared) if inferred is not None else {}
    if inferred is not None and not disputed:
        shared = _SharedTypes()
        if not _has_gaps(model, onnx_types, prepared.declared_symbols, shared):
            return _record_onnx_types(onnx_types, shared)
    walk = _Walk(model, onnx_types, prepared.declared_symbols, per_node=inferred is None)
    walk.downstream = downstream
    walk.typed_by_node = _computed_from(_runtime_nodes(model))
    walk.run()
    return walk.record(prepared)


def _infer_function_bodies(model: Model) -> int:
    """Facts for the values of model-local function bodies, from their call sites.

    A body is typed when every node that calls it (in any graph, other bodies included) gives
    it inputs of one and the same known type; the facts then hold for every call. A function
    with attributes is left alone (its body's attribute references differ per call), and so
    is one whose calls disagree or are not typed. Bodies whose calls sit in other bodies are
    typed once those are.
    """
    pending = [f for f in model.functions.values() if not f.attributes]
    if not pending:
        return 0
    # Every call, found in one pass over the model (a body's calls are read as it gets typed).
    calls: dict[tuple[str, str, str], list[Node]] = {}
    for graph in model.graphs():
        for node in graph:
            calls.setdefault((node.domain, node.op_type, node.overload), []).append(node)
    gained = 0
    progress = True
    while pending and progress:
        progress = False
        for function in list(pending):
            inputs = _call_site_types(function, calls.get(function.identifier, []))
            if inputs is None:
                continue
            pending.remove(function)
            progress = True
            walk = _Walk(model, {}, frozenset(), per_node=True, opsets=function.opset_imports)
            walk.seed_types(dict(zip(function.graph.inputs, inputs, strict=True)))
            walk.walk(function.graph)
            gained += walk.record_body()
    return gained


def _call_site_types(function: Function, calls: Sequence[Node]) -> list[TensorType] | None:
    """The one input type list every call of `function` gives it; None when there is none."""
    found: list[TensorType] | None = None
    arity = len(function.graph.inputs)
    for node in calls:
        if len(node.inputs) != arity or any(v is None for v in node.inputs):
            return None
        types = [fact_type(v) for v in node.inputs if v is not None]
        if not all(isinstance(t, TensorType) and t.shape is not None for t in types):
            return None
        typed = [t for t in types if isinstance(t, TensorType)]
        if found is not None and typed != found:
            return None
        found = typed
    return found


def _disputed_nodes(model: Model) -> dict[Node, None]:
    """The nodes whose output dims onnx's inference may get wrong (see `_shape_disputes`)."""
    found: dict[Node, None] = {}
    for graph in _inferred_graphs(model):
        for node in graph:
            if has_disputed_dims(node):
                found[node] = None
    return found


def _runtime_nodes(model: Model) -> dict[Node, None]:
    """The nodes of ops only onnxruntime defines that this package can type.

    Those are the ops onnxruntime runs in the default domain at the model's opset (see
    `_runtime_ops`) and the ops of its own domain that it types as a standard op (see
    `_contrib_ops`). onnx's inference types neither them nor anything computed from them:
    the walk types those values node by node, the runtime ops from their tables.
    """
    opsets = model.opset_imports
    opset = opsets.get("", opsets.get("ai.onnx"))
    found: dict[Node, None] = {}
    for graph in _inferred_graphs(model):
        for node in graph:
            if _is_runtime_node(node, opset) or (
                node.domain in opsets and find_contrib_op(node.op_type, node.domain) is not None
            ):
                found[node] = None
    return found


def _is_runtime_node(node: Node, opset: int | None) -> bool:
    """Whether `node` is an op onnxruntime runs in the default domain where onnx has none."""
    return (
        opset is not None
        and node.op_type in _RUNTIME_OP_NAMES
        and find_schema(node.op_type, node.domain, opset) is None
        and find_runtime_op(node.op_type, node.domain, opset) is not None
    )


def _computed_from(nodes: Iterable[Node]) -> dict[Value, None]:
    """Every value computed from the outputs of `nodes` (through uses and subgraph owners)."""
    found: dict[Value, None] = {}
    pending = [value for node in nodes for value in node.outputs]
    while pending:
        value = pending.pop()
        if value in found:
            continue
        found[value] = None
        for user in value.users():
            pending.extend(user.outputs)
            pending.extend(_owner_outputs(user))
        if value.is_graph_output():
            graph = value.graph
            owner = graph.owner if graph is not None else None
            if isinstance(owner, Node):
                pending.extend(owner.outputs)
    return found


def _owner_outputs(node: Node) -> tuple[Value, ...]:
    """The outputs of the nodes that hold `node`'s graph (a value read inside a body)."""
    found: list[Value] = []
    graph = node.graph
    while graph is not None:
        owner = graph.owner
        if not isinstance(owner, Node):
            break
        found.extend(owner.outputs)
        graph = owner.graph
    return tuple(found)


def _onnx_inference(proto: onnx.ModelProto) -> onnx.ModelProto | None:
    try:
        return onnx.shape_inference.infer_shapes(proto, data_prop=True)
    except ONNX_INFERENCE_ERRORS as exc:
        logger.info("onnx's shape inference failed (typing node by node): %s", exc)
        return None


def _inferred_graphs(model: Model) -> Iterator[Graph]:
    """The graphs that get facts: the main graph and its subgraphs, not function bodies."""
    return model.graph.all_graphs()


# the fast path: onnx's types as they are ------------------------------------------------------


class _SharedTypes:
    """onnx's inferred TypeProtos by content: each distinct type is looked at once.

    The values of repeated layers have equal types; whether a type's dims are all known and
    the record a value's fact is kept in (`SharedInferredType`) are per distinct type.
    """

    __slots__ = ("_known", "_records")

    def __init__(self) -> None:
        self._known: dict[bytes, bool] = {}
        self._records: dict[bytes, SharedInferredType] = {}

    def dims_known(self, type_proto: Any, declared: frozenset[str]) -> bool:
        key = type_proto.SerializeToString()
        found = self._known.get(key)
        if found is None:
            found = self._known[key] = _dims_known(type_proto, declared)
        return found

    def record(self, type_proto: Any) -> SharedInferredType:
        key = type_proto.SerializeToString()
        found = self._records.get(key)
        if found is None:
            found = self._records[key] = SharedInferredType(type_proto)
        return found


def _has_gaps(
    model: Model, types: dict[Value, Any], declared: frozenset[str], shared: _SharedTypes
) -> bool:
    """True when a value something reads has a dim onnx could not compute or had to invent."""
    for graph in _inferred_graphs(model):
        for node in graph:
            if node.op_type in _WRONG_ON_SYMBOLS:
                return True
            for value in node.outputs:
                if not value.is_used():
                    continue  # an output nothing reads (Dropout's mask) asks no question
                found = types.get(value)
                if found is None or not shared.dims_known(found, declared):
                    return True
    return False


def _dims_known(type_proto: Any, declared: frozenset[str]) -> bool:
    kind = type_proto.WhichOneof("value")
    if kind != "tensor_type":
        return kind is not None
    tensor = type_proto.tensor_type
    return tensor.HasField("shape") and all(
        d.HasField("dim_value") or d.dim_param in declared for d in tensor.shape.dim
    )


def _record_onnx_types(types: dict[Value, Any], shared: _SharedTypes) -> int:
    """Record onnx's types as the facts (no value read has a dim onnx invented).

    Kept as onnx's TypeProtos, one shared record per distinct type: `fact_type` lifts a
    record when a rule first asks about a value it describes.
    """
    gained = 0
    for value, type_proto in types.items():
        if value.producer() is None and _declares_every_dim(value):
            continue  # a graph input's declared type is the fact
        value.meta[INFERRED] = shared.record(type_proto)
        gained += 1
    return gained


def _declares_every_dim(value: Value) -> bool:
    """Whether the value's declared type leaves onnx's no dim to add (a rank, every dim named).

    A graph output declared `float` with no shape, or `float[?, 4]`, is typed by onnx's
    inference all the same: the combination is the fact (`fact_type`).
    """
    declared = value.type
    if declared is None:
        return False
    if not isinstance(declared, TensorType):
        return True
    return declared.shape is not None and all(
        isinstance(d, str) or (isinstance(d, int) and d >= 0) for d in declared.shape
    )


def _proto_dim(dim: Any) -> DimExpr | None:
    if dim.HasField("dim_value"):
        return const(dim.dim_value) if dim.dim_value >= 0 else None
    return symbol(dim.dim_param) if dim.dim_param else None


# Output symbols. An exporter names the dims of the main graph's outputs itself ("time_out");
# inference runs with them cleared (see `_inference_scopes`). Where the dim it finds there is
# no number and no symbol the model declares, the facts print it with the declared name, so
# `shape(y) == shape(x)` holds for the last node. Only for a name the model uses nowhere but
# in output types, and gives one dim: a name shared with an input is a claim, not a fact.


def _output_aliases(
    model: Model, prepared: PreparedModel, dims_of: Callable[[Value], Shape | None]
) -> dict[str, str]:
    """Printed dim -> the declared output symbol it is shown as."""
    chosen: dict[str, str] = {}
    refused: dict[str, None] = {}
    for index, declared_type in prepared.output_types.items():
        if index >= len(model.graph.outputs):
            continue
        found = dims_of(model.graph.outputs[index])
        declared = declared_type.tensor_type.shape.dim
        if found is None or len(found) != len(declared):
            continue
        for declared_dim, dim in zip(declared, found, strict=True):
            name = declared_dim.dim_param
            if not name or name in prepared.elsewhere_symbols or dim is None:
                continue
            if dim.as_int() is not None:
                continue
            own = dim.as_symbol()
            if own is not None and own in prepared.declared_symbols:
                continue  # a dim the model names keeps its name
            text = str(dim)
            if chosen.get(name, text) != text:
                refused[name] = None
            chosen.setdefault(name, text)
    aliases: dict[str, str] = {}
    for name, text in chosen.items():
        if name not in refused:
            aliases.setdefault(text, name)
    return aliases


# the walk -------------------------------------------------------------------------------------


class _Walk:
    """One symbolic pass over the main graph and its subgraphs, producers first.

    Implements `ShapeFacts` for the rules. `substitution` binds symbols onnx invented to what
    they stand for; it is kept resolved (no bound symbol occurs in a bound expression).
    """

    def __init__(
        self,
        model: Model,
        onnx_types: dict[Value, Any],
        declared: frozenset[str],
        *,
        per_node: bool,
        opsets: Mapping[str, int] | None = None,
    ) -> None:
        self.model = model
        # The opsets the walked graphs import: the model's, or a function body's own.
        self.opset_imports = dict(model.opset_imports if opsets is None else opsets)
        self.onnx_types = onnx_types
        self.declared = declared
        self.per_node = per_node
        self.shapes: dict[Value, Shape | None] = {}
        self.elements: dict[Value, ShapeData] = {}
        self.dtypes: dict[Value, DataType] = {}
        self.substitution: dict[str, DimExpr] = {}
        # Values computed from a node with disputed dims: onnx's inference did not see them
        # (typed node by node here).
        self.downstream: dict[Value, None] = {}
        # Values computed from an op only onnxruntime defines (onnx's inference stops there):
        # typed node by node.
        self.typed_by_node: dict[Value, None] = {}
        # Bounds (x, c): x <= c on every run, implied by a broadcast of the main graph that
        # fails otherwise (`broadcast_bounds`); the recorded facts are simplified under them.
        self.bounds: dict[tuple[DimExpr, int], None] = {}
        self.invented: dict[str, None] = {}
        self.untrusted = _container_symbols(onnx_types.values(), declared)
        self.printed: dict[str, DimExpr] = {}
        # `_resolved` results while `substitution` stays the same (most dims repeat).
        self.resolved: dict[DimExpr, DimExpr] = {}
        opsets_used = self.opset_imports
        self.default_opset = opsets_used.get("", opsets_used.get("ai.onnx", 0))

    # ShapeFacts --------------------------------------------------------------------------------
    def shape(self, value: Value | None) -> Shape | None:
        if value is None:
            return None
        if value not in self.shapes:
            self._seed(value)
        return self.shapes.get(value)

    def data(self, value: Value | None) -> ShapeData | None:
        if value is None:
            return None
        if value not in self.shapes:
            self._seed(value)
        return self.elements.get(value)

    def opset(self) -> int:
        return self.default_opset

    def dtype(self, value: Value | None) -> DataType:
        return DataType.UNDEFINED if value is None else self._dtype(value)

    # walking -----------------------------------------------------------------------------------
    def run(self) -> None:
        """Walk the main graph (and, at each node that holds them, its subgraphs)."""
        self._walk_graph(self.model.graph)

    def walk(self, graph: Graph) -> None:
        """Walk `graph` (a function body), its inputs typed by `seed_types` first."""
        self._walk_graph(graph)

    def seed_types(self, types: Mapping[Value, TensorType]) -> None:
        """Take `types` as the facts of these values (a function body's inputs)."""
        for value, found in types.items():
            dims = None if found.shape is None else tuple(self._parse(d) for d in found.shape)
            self.shapes[value] = dims
            self.dtypes[value] = found.dtype

    def _walk_graph(self, graph: Graph) -> None:
        for value in graph.inputs:
            if value not in self.shapes:  # inputs seeded with their facts keep them
                self._seed(value)
        for value in graph.initializers.values():
            self._seed(value)
        for node in topological_order(graph):
            for sub in node.subgraphs():
                self._walk_graph(sub)
            self._infer_node(node)

    def _seed(self, value: Value) -> None:
        """Facts of a value no node of the walk produces: input, initializer, outer value."""
        declared = _declared_shape(value)
        self.shapes[value] = self._unify(declared, self._onnx_shape(value))
        tensor = value.const_value
        if tensor is not None and not value.is_graph_input():
            self.shapes[value] = tuple(const(d) for d in tensor.shape)
            data = tensor_data(tensor)
            if data is not None:
                self.elements[value] = data

    def _infer_node(self, node: Node) -> None:
        rule = RULES.get(node.op_type) if node.domain in _DEFAULT_DOMAINS else None
        found: Sequence[OutputFacts] = ()
        if rule is not None:
            found = rule(node, self) or ()
        hidden = any(
            value in self.downstream or value in self.typed_by_node for value in node.outputs
        )
        per_node = self._node_inference(node) if self.per_node or hidden else ()
        distrusted = has_disputed_dims(node) or (
            node.op_type in _WRONG_ON_SYMBOLS and not self._static_inputs(node)
        )
        if distrusted:
            per_node = [None if p is None else (None,) * len(p) for p in per_node]
        for index, value in enumerate(node.outputs):
            mine = found[index] if index < len(found) else _NOTHING
            theirs = self._onnx_shape(value)
            if index < len(per_node) and per_node[index] is not None:
                theirs = self._unify(per_node[index], theirs)
            if distrusted and theirs is not None:
                theirs = (None,) * len(theirs)
            self.shapes[value] = self._unify(mine.shape, theirs)
            if mine.data is not None and self._may_hold_elements(value):
                self.elements[value] = mine.data
        if node.op_type in BROADCASTING_OPS and node.graph is self.model.graph:
            shapes = [self.shape(value) for value in node.inputs if value is not None]
            self.bounds.update(dict.fromkeys(broadcast_bounds(shapes)))

    def _static_inputs(self, node: Node) -> bool:
        """True when every input of `node` has a known rank and numeric dims."""
        for value in node.inputs:
            if value is None:
                continue
            shape = self.shape(value)
            if shape is None or any(d is None or d.as_int() is None for d in shape):
                return False
        return True

    def _may_hold_elements(self, value: Value) -> bool:
        dtype = self._dtype(value)
        return dtype == DataType.UNDEFINED or dtype.is_integer or dtype == DataType.BOOL

    # onnx's answers ----------------------------------------------------------------------------
    def _onnx_shape(self, value: Value) -> Shape | None:
        found = self.onnx_types.get(value)
        if found is None or found.WhichOneof("value") != "tensor_type":
            return None
        tensor = found.tensor_type
        if not tensor.HasField("shape"):
            return None
        dims: list[DimExpr | None] = []
        for dim in tensor.shape.dim:
            if dim.dim_param in self.untrusted:
                dims.append(None)
                continue
            if dim.dim_param and dim.dim_param not in self.declared:
                self.invented[dim.dim_param] = None
            dims.append(self._resolved(_proto_dim(dim)))
        return tuple(dims)

    def _node_inference(self, node: Node) -> list[Shape | None]:
        """Output shapes from onnx's per-node inference (and their dtypes, recorded)."""
        try:
            types = infer_node_types(node, self.opset_imports, self._type_for_onnx)
        except NodeInferenceError as exc:
            logger.debug("no facts for the outputs of %s: %s", node.op_type, exc)
            return []
        if types is None:
            return []
        shapes: list[Shape | None] = []
        for value, found in zip(node.outputs, types, strict=False):
            if not isinstance(found, TensorType):
                shapes.append(None)
                continue
            self.dtypes[value] = found.dtype
            dims = None if found.shape is None else tuple(self._parse(d) for d in found.shape)
            shapes.append(dims)
        return shapes

    def _type_for_onnx(self, value: Value) -> Type | None:
        """What per-node inference is told of an input: its dtype and its dims as text."""
        dtype = self._dtype(value)
        if dtype == DataType.UNDEFINED:
            return None
        shape = self.shape(value)
        if shape is None:
            return TensorType(dtype)
        dims: list[Dim] = []
        for dim in shape:
            final = self._resolved(dim)
            printed = to_dim(final)
            if isinstance(printed, str) and final is not None:
                self.printed[printed] = final
            dims.append(printed)
        return TensorType(dtype, tuple(dims))

    def _parse(self, dim: Dim) -> DimExpr | None:
        if isinstance(dim, str):
            return self._resolved(self.printed.get(dim) or symbol(dim))
        return from_dim(dim)

    def _dtype(self, value: Value) -> DataType:
        found = self.onnx_types.get(value)
        elem_type = _elem_type(found) if found is not None else 0
        if elem_type in _KNOWN_DTYPES:
            return DataType(elem_type)
        declared = value.dtype
        if declared is not None:
            return declared
        return self.dtypes.get(value, DataType.UNDEFINED)

    # unification -------------------------------------------------------------------------------
    def _unify(self, mine: Shape | None, theirs: Shape | None) -> Shape | None:
        """One shape from two facts about the same value (onnx's wins on a rank conflict)."""
        if theirs is None:
            return mine
        if mine is None or len(mine) != len(theirs):
            return theirs
        return tuple(self._unify_dim(a, b) for a, b in zip(mine, theirs, strict=True))

    def _unify_dim(self, mine: DimExpr | None, theirs: DimExpr | None) -> DimExpr | None:
        if mine is None:
            return theirs
        if theirs is None or mine == theirs:
            return mine
        if theirs.as_int() is not None:
            self._learn(mine, theirs)
            return theirs
        if mine.as_int() is not None:
            self._learn(theirs, mine)
            return mine
        if self._invented_symbol(theirs) is not None:
            self._learn(theirs, mine)
            return mine
        if self._invented_symbol(mine) is not None:
            self._learn(mine, theirs)
            return theirs
        # Two expressions for one dim: keep onnx's when it is written in declared symbols.
        return mine if self._mentions_invented(theirs) else theirs

    def _invented_symbol(self, dim: DimExpr) -> str | None:
        name = dim.as_symbol()
        return name if name is not None and name in self.invented else None

    def _mentions_invented(self, dim: DimExpr) -> bool:
        return any(s in self.invented for s in dim.symbols())

    def _learn(self, dim: DimExpr, value: DimExpr) -> None:
        """Bind `dim` to `value` when `dim` is a symbol onnx invented."""
        name = self._invented_symbol(dim)
        if name is None or name in self.substitution:
            return
        bound = value.substitute(self.substitution)
        if name in bound.symbols():
            return
        for key, expr in self.substitution.items():
            self.substitution[key] = expr.substitute({name: bound})
        self.substitution[name] = bound
        self.resolved.clear()

    def _resolved(self, dim: DimExpr | None) -> DimExpr | None:
        if dim is None or not self.substitution:
            return dim
        found = self.resolved.get(dim)
        if found is None:
            found = dim.substitute(self.substitution)
            self.resolved[dim] = found
        return found

    # recording ---------------------------------------------------------------------------------
    def record(self, prepared: PreparedModel) -> int:
        """Record the facts found on the values; returns how many values gained one."""
        aliases = _output_aliases(self.model, prepared, self._final_exprs)
        gained = 0
        for value, shape in self.shapes.items():
            if value.producer() is None and value not in self.onnx_types:
                continue  # an initializer: its tensor is the fact
            fact = self._fact(value, shape, aliases)
            if fact is None or _declared_covers(value, fact):
                continue
            value.meta[INFERRED] = fact
            gained += 1
        return gained

    def record_body(self) -> int:
        """Record the facts found on a function body's values; returns how many gained one."""
        gained = 0
        for value, shape in self.shapes.items():
            fact = self._fact(value, shape, {})
            if fact is None or _declared_covers(value, fact):
                continue
            value.meta[INFERRED] = fact
            gained += 1
        return gained

    def _final_exprs(self, value: Value) -> Shape | None:
        shape = self.shapes.get(value)
        return None if shape is None else tuple(self._final(d) for d in shape)

    def _final(self, dim: DimExpr | None) -> DimExpr | None:
        """`dim` as recorded: resolved, and simplified under the model's bounds."""
        final = self._resolved(dim)
        if final is None:
            return None
        for bound, limit in self.bounds:
            final = assume_at_most(final, bound, limit)
        return final

    def _fact(self, value: Value, shape: Shape | None, aliases: dict[str, str]) -> Type | None:
        found = self.onnx_types.get(value)
        if found is not None and found.WhichOneof("value") not in (None, "tensor_type"):
            return lift_inferred_type(found)  # a sequence, map or optional: onnx's as it is
        dtype = self._dtype(value)
        if shape is None:
            return TensorType(dtype) if dtype != DataType.UNDEFINED else None
        dims: list[Dim] = []
        for dim in shape:
            printed = to_dim(self._final(dim))
            dims.append(aliases.get(printed, printed) if isinstance(printed, str) else printed)
        return TensorType(dtype, tuple(dims))


def _container_symbols(types: Iterable[Any], declared: frozenset[str]) -> frozenset[str]:
    """Invented symbols in the element types of sequences, optionals and maps."""
    found: dict[str, None] = {}
    for type_proto in types:
        if type_proto.WhichOneof("value") in ("sequence_type", "optional_type", "map_type"):
            _collect_dim_params(type_proto, found)
    return frozenset(s for s in found if s not in declared)


def _collect_dim_params(type_proto: Any, found: dict[str, None]) -> None:
    kind = type_proto.WhichOneof("value")
    if kind in ("tensor_type", "sparse_tensor_type"):
        for dim in getattr(type_proto, kind).shape.dim:
            if dim.dim_param:
                found[dim.dim_param] = None
    elif kind in ("sequence_type", "optional_type"):
        _collect_dim_params(getattr(type_proto, kind).elem_type, found)
    elif kind == "map_type":
        _collect_dim_params(type_proto.map_type.value_type, found)


def _elem_type(type_proto: Any) -> int:
    """The element type of a tensor TypeProto (0 for other types and when unset)."""
    if type_proto.WhichOneof("value") != "tensor_type":
        return 0
    return int(type_proto.tensor_type.elem_type)


def _declared_shape(value: Value) -> Shape | None:
    declared = value.type
    if not isinstance(declared, TensorType) or declared.shape is None:
        return None
    return tuple(from_dim(d) for d in declared.shape)


def _names_a_found_number(declared: Sequence[Dim], found: Sequence[Dim] | None) -> bool:
    """True when some dim is declared as a symbol where the facts found a number."""
    if found is None or len(found) != len(declared):
        return False
    return any(
        isinstance(d, str) and isinstance(f, int) for d, f in zip(declared, found, strict=True)
    )


def _declared_covers(value: Value, fact: Type) -> bool:
    """True when the value's declared type already says all `fact` says.

    Only a value no node computes has a declared type that is a fact (`fact_type`).
    """
    declared = value.type
    if declared is None or value.producer() is not None:
        return False
    if not isinstance(declared, TensorType) or not isinstance(fact, TensorType):
        return True
    if declared.shape is None:
        return fact.shape is None
    # A number found for a dim the model only names (an exporter's output symbol) is news:
    # `merge_types` keeps the declared symbol elsewhere and takes the number here.
    if _names_a_found_number(declared.shape, fact.shape):
        return False
    return all(
        isinstance(d, str) or (isinstance(d, int) and d >= 0) for d in declared.shape
    ) and bool(declared.dtype)
