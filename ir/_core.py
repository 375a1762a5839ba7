"""The IR core: Model, Graph, Node, Value, attributes, types and tensors.

This module never imports onnx and knows nothing of how models are stored: lifting and
lowering (`_serde`) build and read these objects through the same constructors and methods
as any pass. Invariants it keeps:

* Use-def symmetry: `value.uses` holds `Use(node, i)` exactly when `node.inputs[i] is value`,
  for every node that has not been detached. Inputs change only through `Node` methods.
  (A value keeps its uses as user node -> bit mask of input positions.)
* Ownership: a node belongs to at most one graph; a value is produced by at most one node or
  is an input/initializer of one graph.
* Snapshots are references: a node's inputs, attributes and metadata are held in containers
  that are replaced, never changed in place, when the node changes. Keeping a reference to
  one is a snapshot of it, and `is` tells whether it changed since (lowering uses this to
  emit untouched nodes as they were read).
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, NamedTuple, TypeAlias, TypeVar, Union

import numpy as np

from ir._enums import AttrType, DataType

if TYPE_CHECKING:
    import numpy.typing as npt

    from ir._journal import Journal


class IRError(Exception):
    """Base class of errors about a model's contents (bad input, not misuse of the API)."""


class ModelLoadError(IRError):
    """A model file or protobuf could not be turned into an IR model."""


class ExternalDataError(IRError):
    """An external-data reference is unsafe or cannot be resolved."""


class GraphStructureError(IRError):
    """The graph violates a structural rule (cycle, undefined value, duplicate definition)."""


# ---------------------------------------------------------------------------------------------
# Types


Dim: TypeAlias = int | str | None
"""A dimension: an int (static), a str (named symbolic dim) or None (unknown)."""


@dataclasses.dataclass(frozen=True, slots=True)
class TensorType:
    """A dense tensor type; `shape is None` means the rank is unknown."""

    dtype: DataType
    shape: tuple[Dim, ...] | None = None
    denotation: str = ""
    dim_denotations: tuple[str, ...] | None = None

    def __str__(self) -> str:
        if self.shape is None:
            return f"{self.dtype.onnx_name}[?]"
        dims = ",".join("?" if d is None else str(d) for d in self.shape)
        return f"{self.dtype.onnx_name}[{dims}]"


@dataclasses.dataclass(frozen=True, slots=True)
class SparseTensorType:
    """A sparse tensor type."""

    dtype: DataType
    shape: tuple[Dim, ...] | None = None
    denotation: str = ""
    dim_denotations: tuple[str, ...] | None = None

    def __str__(self) -> str:
        return f"sparse_{TensorType(self.dtype, self.shape)}"


@dataclasses.dataclass(frozen=True, slots=True)
class SequenceType:
    """A sequence of elements of one type (`elem` None when the proto leaves it unset)."""

    elem: Type | None
    denotation: str = ""

    def __str__(self) -> str:
        return f"seq({self.elem})"


@dataclasses.dataclass(frozen=True, slots=True)
class MapType:
    """A map from a scalar key type to a value type."""

    key: DataType
    value: Type | None
    denotation: str = ""

    def __str__(self) -> str:
        return f"map({self.key.onnx_name},{self.value})"


@dataclasses.dataclass(frozen=True, slots=True)
class OptionalType:
    """An optional of a tensor or sequence type."""

    elem: Type | None
    denotation: str = ""

    def __str__(self) -> str:
        return f"optional({self.elem})"


@dataclasses.dataclass(frozen=True, slots=True)
class OpaqueType:
    """An opaque type, named by domain and name."""

    domain: str = ""
    name: str = ""
    denotation: str = ""

    def __str__(self) -> str:
        return f"opaque({self.domain}.{self.name})"


@dataclasses.dataclass(frozen=True, slots=True)
class UnsetType:
    """A TypeProto with no value field set (only a denotation, or nothing at all)."""

    denotation: str = ""

    def __str__(self) -> str:
        return "?"


Type: TypeAlias = (
    TensorType | SparseTensorType | SequenceType | MapType | OptionalType | OpaqueType | UnsetType
)


# ---------------------------------------------------------------------------------------------
# Tensors


class Tensor(abc.ABC):
    """A constant tensor. Subclasses decide where the bytes live and read them only on demand."""

    __slots__ = ()

    @property
    @abc.abstractmethod
    def name(self) -> str:
        """The tensor's own name (for initializers, kept equal to the value's name)."""

    @property
    @abc.abstractmethod
    def dtype(self) -> DataType:
        """Element type."""

    @property
    @abc.abstractmethod
    def shape(self) -> tuple[int, ...]:
        """Static shape."""

    @abc.abstractmethod
    def numpy(self) -> npt.NDArray[np.generic]:
        """The values as a numpy array (read, decoded or memory-mapped on first call)."""

    @property
    def size(self) -> int:
        """Number of elements."""
        total = 1
        for d in self.shape:
            total *= d
        return total

    @property
    def nbytes(self) -> int:
        """Bytes the elements occupy (packed for sub-byte types; 0 for strings)."""
        return (self.size * self.dtype.bitwidth + 7) // 8

    @property
    def is_external(self) -> bool:
        """True when the bytes live in an external-data file."""
        return False

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, {self.dtype.onnx_name}, {self.shape})"


class NumpyTensor(Tensor):
    """A tensor held as a numpy array (what rewrites create)."""

    __slots__ = ("_array", "_dtype", "_name", "doc_string")

    def __init__(
        self,
        array: npt.ArrayLike,
        name: str = "",
        dtype: DataType | None = None,
        doc_string: str = "",
    ) -> None:
        arr = np.asarray(array)
        self._array = arr
        self._dtype = dtype if dtype is not None else DataType.from_numpy(arr.dtype)
        self._name = name
        self.doc_string = doc_string

    @property
    def name(self) -> str:
        return self._name

    @property
    def dtype(self) -> DataType:
        return self._dtype

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(int(d) for d in self._array.shape)

    def numpy(self) -> npt.NDArray[np.generic]:
        return self._array

    def renamed(self, name: str) -> NumpyTensor:
        """The same data under another name (no copy)."""
        return NumpyTensor(self._array, name, self._dtype, self.doc_string)


# ---------------------------------------------------------------------------------------------
# Attributes

AttrValue: TypeAlias = Union[
    float,
    int,
    str,
    bytes,
    Tensor,
    "Graph",
    Type,
    tuple[float, ...],
    tuple[int, ...],
    tuple[str | bytes, ...],
    tuple[Tensor, ...],
    tuple["Graph", ...],
    tuple[Type, ...],
    None,
]
"""The value of an attribute; which member is used is given by its `AttrType`."""


class Attr:
    """A named, typed attribute value (immutable once built).

    STRING values are `str` when they decode as UTF-8 and `bytes` otherwise. A reference to a
    function attribute (`ref_attr_name`) has value None.
    """

    __slots__ = ("doc_string", "name", "ref_attr_name", "type", "value")

    name: str
    type: AttrType
    value: AttrValue
    ref_attr_name: str
    doc_string: str

    def __init__(
        self,
        name: str,
        type: AttrType,
        value: AttrValue,
        ref_attr_name: str = "",
        doc_string: str = "",
    ) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "type", type if type.__class__ is AttrType else AttrType(type))
        object.__setattr__(self, "value", value)
        object.__setattr__(self, "ref_attr_name", ref_attr_name)
        object.__setattr__(self, "doc_string", doc_string)

    def __setattr__(self, key: str, value: object) -> None:
        raise AttributeError("Attr is immutable; build a new Attr and use Node.set_attribute")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Attr):
            return NotImplemented
        return (
            self.name == other.name
            and self.type == other.type
            and self.ref_attr_name == other.ref_attr_name
            and _attr_values_equal(self.value, other.value)
        )

    def __hash__(self) -> int:
        return hash((self.name, self.type))

    def __repr__(self) -> str:
        if self.ref_attr_name:
            return f"Attr({self.name!r}, {self.type.name}, @{self.ref_attr_name})"
        return f"Attr({self.name!r}, {self.type.name}, {self.value!r})"

    @property
    def is_graph(self) -> bool:
        """True for GRAPH and GRAPHS attributes."""
        return self.type in (AttrType.GRAPH, AttrType.GRAPHS)

    def graphs(self) -> tuple[Graph, ...]:
        """The subgraphs this attribute holds (empty for non-graph attributes)."""
        if self.type == AttrType.GRAPH and isinstance(self.value, Graph):
            return (self.value,)
        if self.type == AttrType.GRAPHS and isinstance(self.value, tuple):
            return tuple(g for g in self.value if isinstance(g, Graph))
        return ()


def _attr_values_equal(a: AttrValue, b: AttrValue) -> bool:
    if isinstance(a, Tensor) or isinstance(b, Tensor):
        if not (isinstance(a, Tensor) and isinstance(b, Tensor)):
            return False
        return (
            a.dtype == b.dtype and a.shape == b.shape and bool(np.array_equal(a.numpy(), b.numpy()))
        )
    if isinstance(a, tuple) and isinstance(b, tuple):
        pairs = zip(a, b, strict=False)
        return len(a) == len(b) and all(_attr_values_equal(x, y) for x, y in pairs)
    if isinstance(a, Graph) or isinstance(b, Graph):
        return a is b
    return a == b


def attr_float(name: str, value: float) -> Attr:
    """A FLOAT attribute."""
    return Attr(name, AttrType.FLOAT, float(value))


def attr_int(name: str, value: int) -> Attr:
    """An INT attribute."""
    return Attr(name, AttrType.INT, int(value))


def attr_str(name: str, value: str) -> Attr:
    """A STRING attribute."""
    return Attr(name, AttrType.STRING, value)


def attr_ints(name: str, values: Iterable[int]) -> Attr:
    """An INTS attribute."""
    return Attr(name, AttrType.INTS, tuple(int(v) for v in values))


def attr_floats(name: str, values: Iterable[float]) -> Attr:
    """A FLOATS attribute."""
    return Attr(name, AttrType.FLOATS, tuple(float(v) for v in values))


def attr_strs(name: str, values: Iterable[str]) -> Attr:
    """A STRINGS attribute."""
    return Attr(name, AttrType.STRINGS, tuple(values))


def attr_tensor(name: str, value: Tensor) -> Attr:
    """A TENSOR attribute."""
    return Attr(name, AttrType.TENSOR, value)


def attr_graph(name: str, value: Graph) -> Attr:
    """A GRAPH attribute."""
    return Attr(name, AttrType.GRAPH, value)


def infer_attr(name: str, value: object) -> Attr:
    """Build an attribute from a Python value, choosing its kind as onnx.helper does.

    Raises:
        TypeError: when no attribute kind fits the value (empty lists are ambiguous: INTS).
    """
    if isinstance(value, bool | int | np.integer):
        return attr_int(name, int(value))
    if isinstance(value, float | np.floating):
        return attr_float(name, float(value))
    if isinstance(value, str | bytes):
        return Attr(name, AttrType.STRING, value)
    if isinstance(value, Tensor):
        return attr_tensor(name, value)
    if isinstance(value, np.ndarray):
        return attr_tensor(name, NumpyTensor(value))
    if isinstance(value, Graph):
        return attr_graph(name, value)
    if isinstance(value, list | tuple):
        items = list(value)
        if all(isinstance(v, bool | int | np.integer) for v in items):
            return attr_ints(name, items)  # also the choice for an empty list
        if all(isinstance(v, int | float | np.integer | np.floating) for v in items):
            return attr_floats(name, items)
        if all(isinstance(v, str | bytes) for v in items):
            return Attr(name, AttrType.STRINGS, tuple(items))
        if all(isinstance(v, Tensor) for v in items):
            return Attr(name, AttrType.TENSORS, tuple(items))
        if all(isinstance(v, Graph) for v in items):
            return Attr(name, AttrType.GRAPHS, tuple(items))
    raise TypeError(f"cannot infer an attribute kind for {name}={value!r}")


# ---------------------------------------------------------------------------------------------
# Values and nodes


class Use(NamedTuple):
    """One use of a value: `node.inputs[index] is value`."""

    node: Node
    index: int  # type: ignore[assignment]  # shadows tuple.index on purpose: the ONNX name


def _bits(mask: int) -> Iterator[int]:
    """The positions of the set bits of `mask`, lowest first."""
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


def _journal_of_node(node: Node) -> Journal | None:
    """The open journal of the graph `node` belongs to, if any."""
    graph = node._graph
    return None if graph is None else graph._journal


def _journal_of_value(value: Value) -> Journal | None:
    """The open journal of the graph that defines `value`, if any."""
    producer = value._producer
    graph = producer._graph if producer is not None else value._graph
    return None if graph is None else graph._journal


def _record_node(node: Node) -> None:
    """Tell an open journal that `node` is about to change."""
    journal = _journal_of_node(node)
    if journal is not None:
        journal.node(node)


def _record_value(value: Value) -> None:
    """Tell an open journal that `value` is about to change."""
    journal = _journal_of_value(value)
    if journal is not None:
        journal.value(value)


def _add_use(value: Value, node: Node, index: int) -> None:
    _record_value(value)
    uses = value._uses
    uses[node] = uses.get(node, 0) | 1 << index


def _drop_use(value: Value, node: Node, index: int) -> None:
    _record_value(value)
    uses = value._uses
    mask = uses.get(node, 0) & ~(1 << index)
    if mask:
        uses[node] = mask
    else:
        uses.pop(node, None)


class Value:
    """A named SSA value: a node output, a graph input or an initializer.

    `uses` is maintained by Node; a value is never linked to its users by hand. Its type,
    doc string and metadata are plain data that anyone may set.
    """

    __slots__ = (
        "_const_value",
        "_doc_string",
        "_graph",
        "_index",
        "_meta",
        "_metadata_props",
        "_name",
        "_producer",
        "_type",
        "_uses",
    )

    def __init__(
        self,
        name: str = "",
        type: Type | None = None,
        const_value: Tensor | None = None,
        doc_string: str = "",
    ) -> None:
        self._name = name
        self._type: Type | None = type
        self._const_value = const_value
        self._producer: Node | None = None
        self._index = -1
        self._graph: Graph | None = None
        # User node -> bit mask of the input positions where it reads this value: no object
        # per use (a graph's values and nodes are many, and each object costs the collector).
        self._uses: dict[Node, int] = {}
        self._doc_string = doc_string
        # Created on first use: most values never carry metadata.
        self._metadata_props: dict[str, str] | None = None
        self._meta: dict[str, object] | None = None

    def __repr__(self) -> str:
        return f"Value({self._name!r})"

    @property
    def doc_string(self) -> str:
        """Documentation string (from value_info)."""
        return self._doc_string

    @doc_string.setter
    def doc_string(self, value: str) -> None:
        _record_value(self)
        self._doc_string = value

    @property
    def metadata_props(self) -> dict[str, str]:
        """String key/value metadata (from value_info), changed in place.

        An open journal sees the dict replaced (`value.metadata_props = ...`), not changed in
        place.
        """
        if self._metadata_props is None:
            self._metadata_props = {}
        return self._metadata_props

    @metadata_props.setter
    def metadata_props(self, value: Mapping[str, str]) -> None:
        _record_value(self)
        self._metadata_props = dict(value)

    @property
    def meta(self) -> dict[str, object]:
        """Scratch space for passes (never serialized)."""
        if self._meta is None:
            self._meta = {}
        return self._meta

    # identity --------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        """The value's name (node inputs and outputs refer to values, not names)."""
        return self._name

    @name.setter
    def name(self, new_name: str) -> None:
        if new_name == self._name:
            return
        _record_value(self)
        graph = self._graph
        if graph is not None and self._name in graph._initializers:
            graph._rename_initializer(self, new_name)
        if graph is not None and graph._sparse_initializers.get(self._name) is self:
            graph._rename_sparse_initializer(self, new_name)
        self._name = new_name

    # producer and uses -----------------------------------------------------------------------
    def producer(self) -> Node | None:
        """The node that computes this value, or None for inputs and initializers."""
        return self._producer

    @property
    def index(self) -> int:
        """Output index within the producer (-1 when there is no producer)."""
        return self._index

    @property
    def uses(self) -> tuple[Use, ...]:
        """Every (node, input index) that reads this value, in a deterministic order.

        Users come in order of first use; a user that reads the value more than once comes
        with its input positions in increasing order.
        """
        return tuple(Use(node, i) for node, mask in self._uses.items() for i in _bits(mask))

    def num_uses(self) -> int:
        """How many node inputs read this value (graph outputs not counted)."""
        return sum(map(int.bit_count, self._uses.values()))

    def users(self) -> tuple[Node, ...]:
        """The distinct nodes that read this value, in order of first use."""
        return tuple(self._uses)

    def is_used(self) -> bool:
        """True when a node reads this value or it is an output of the graph defining it."""
        if self._uses:
            return True
        producer = self._producer
        g = producer._graph if producer is not None else self._graph
        return g is not None and self in g._output_slots

    def replace_all_uses_with(self, new: Value, *, replace_graph_outputs: bool = False) -> None:
        """Make every node input that reads this value read `new` instead.

        Uses inside nested subgraphs (outer-scope references) move too. Graph outputs keep
        this value unless `replace_graph_outputs` is set; then every graph output slot that
        holds it (in the graph defining it and in its subgraphs) holds `new` instead.

        Raises:
            ValueError: `new` is this value.
        """
        if new is self:
            raise ValueError(f"cannot replace the uses of {self.name!r} with itself")
        for node, index in self.uses:
            node.replace_input_with(index, new)
        if not replace_graph_outputs:
            return
        graph = self.graph
        if graph is None:
            return
        for sub in graph.all_graphs():
            for index, out in enumerate(sub._outputs):
                if out is self:
                    sub.set_output(index, new)

    @property
    def graph(self) -> Graph | None:
        """The graph that defines this value (producer's graph, or owner of input/initializer)."""
        if self._producer is not None:
            return self._producer._graph
        return self._graph

    def is_graph_input(self) -> bool:
        """True when this value is an input of the graph that owns it."""
        g = self._graph
        return g is not None and self._producer is None and self in g._input_set

    def is_initializer(self) -> bool:
        """True when this value is an initializer of its graph."""
        g = self._graph
        return g is not None and g._initializers.get(self._name) is self

    def is_sparse_initializer(self) -> bool:
        """True when this value is a sparse initializer of its graph (a stored constant too)."""
        g = self._graph
        return g is not None and g._sparse_initializers.get(self._name) is self

    def is_graph_output(self) -> bool:
        """True when this value is an output of the graph that defines it."""
        producer = self._producer
        g = producer._graph if producer is not None else self._graph
        return g is not None and self in g._output_slots

    # facts -----------------------------------------------------------------------------------
    @property
    def type(self) -> Type | None:
        """The value's declared type, when known."""
        return self._type

    @type.setter
    def type(self, new_type: Type | None) -> None:
        _record_value(self)
        self._type = new_type

    @property
    def dtype(self) -> DataType | None:
        """Element type for tensor values (from the type or the constant), else None."""
        if self._const_value is not None:
            return self._const_value.dtype
        t = self._type
        if isinstance(t, TensorType | SparseTensorType) and t.dtype != DataType.UNDEFINED:
            return t.dtype
        return None

    @property
    def shape(self) -> tuple[Dim, ...] | None:
        """Shape for tensor values (from the constant or the type), None when rank unknown."""
        if self._const_value is not None:
            return self._const_value.shape
        t = self._type
        if isinstance(t, TensorType | SparseTensorType):
            return t.shape
        return None

    @property
    def const_value(self) -> Tensor | None:
        """The tensor of an initializer (None for computed values)."""
        return self._const_value

    @const_value.setter
    def const_value(self, tensor: Tensor | None) -> None:
        _record_value(self)
        self._const_value = tensor


class DeferredAttributes(abc.ABC):
    """Where nodes that were given it find their attributes the first time they are asked.

    Lifting hands one to the nodes of a graph so that the attributes of nodes no pass looks
    at are never built. A node calls `load(node)` once, on first access, and from then on
    holds the dict it returned; `Node.set_attribute` then replaces that dict as usual.

    Invariants an implementation keeps: `load(node)` returns the same attributes whenever it
    is called (the node keeps the returned dict and never changes it in place), and never a
    GRAPH or GRAPHS attribute (a node that owns subgraphs is given them when it is made, so
    that their owner is known).
    """

    __slots__ = ()

    @abc.abstractmethod
    def load(self, node: Node) -> dict[str, Attr]:
        """The attributes of `node`, by name, in their order."""


class Node:
    """One operator application. Inputs may be None (an omitted optional input).

    Inputs are a tuple, and attributes and metadata dicts that are replaced rather than
    changed in place (see the module docstring: a reference to one is a snapshot).
    """

    __slots__ = (
        "_attributes",
        "_doc_string",
        "_domain",
        "_graph",
        "_inputs",
        "_meta",
        "_metadata_props",
        "_name",
        "_op_type",
        "_outputs",
        "_overload",
    )

    def __init__(
        self,
        op_type: str,
        inputs: Sequence[Value | None] = (),
        attributes: Iterable[Attr] | Mapping[str, object] | DeferredAttributes = (),
        *,
        domain: str = "",
        overload: str = "",
        name: str = "",
        outputs: Sequence[Value | str] | None = None,
        num_outputs: int = 1,
        doc_string: str = "",
        metadata_props: Mapping[str, str] | None = None,
    ) -> None:
        """Create a detached node; its inputs' use lists are updated immediately.

        Args:
            op_type: ONNX operator name.
            inputs: the input values (None for an omitted optional input).
            attributes: Attr objects, a mapping from name to a Python value, or a source
                the node loads them from on first access.
            domain: operator domain ("" is the default ONNX domain).
            overload: function overload name.
            name: node name.
            outputs: output values or names; when None, `num_outputs` unnamed values.
            num_outputs: number of outputs when `outputs` is None.
            doc_string: documentation string.
            metadata_props: string key/value metadata.

        Raises:
            ValueError: an output value is already produced by a node or owned by a graph.
        """
        if outputs is None:
            outs = tuple([Value() for _ in range(num_outputs)])
        else:
            outs = tuple([Value(out) if isinstance(out, str) else out for out in outputs])
        metadata = dict(metadata_props) if metadata_props else None
        attrs: dict[str, Attr] | DeferredAttributes
        if isinstance(attributes, DeferredAttributes):
            attrs = attributes
        else:
            attrs = _attribute_dict(attributes)
        self._init(
            op_type, domain, overload, name, doc_string, metadata, tuple(inputs), attrs, outs
        )

    @classmethod
    def _create(
        cls,
        op_type: str,
        domain: str,
        overload: str,
        name: str,
        doc_string: str,
        metadata_props: dict[str, str] | None,
        inputs: tuple[Value | None, ...],
        attributes: dict[str, Attr] | DeferredAttributes,
        outputs: tuple[Value, ...],
    ) -> Node:
        """The constructor for arguments already in the form it converts them to.

        For lifting, which has them in that form for every node of a model: input and output
        tuples, output Values (not names), a dict of Attr by name or a deferred source, and a
        metadata dict (or None); the node keeps the dicts it is given. It runs the
        constructor's own `_init`, so a node is the same whichever way it is made.
        """
        node = cls.__new__(cls)
        node._init(
            op_type, domain, overload, name, doc_string, metadata_props, inputs, attributes, outputs
        )
        return node

    def _init(
        self,
        op_type: str,
        domain: str,
        overload: str,
        name: str,
        doc_string: str,
        metadata_props: dict[str, str] | None,
        inputs: tuple[Value | None, ...],
        attributes: dict[str, Attr] | DeferredAttributes,
        outputs: tuple[Value, ...],
    ) -> None:
        """Set every field, claim the outputs and register the uses (see `__init__`)."""
        self._op_type = op_type
        self._domain = domain
        self._overload = overload
        self._name = name
        self._doc_string = doc_string
        # None while empty: most nodes carry no metadata.
        self._metadata_props = metadata_props or None
        self._graph: Graph | None = None
        self._meta: dict[str, object] | None = None
        for index, value in enumerate(outputs):
            if value._producer is not None or value._graph is not None:
                raise ValueError(f"value {value.name!r} is already defined elsewhere")
            value._producer = self
            value._index = index
        self._outputs = outputs
        self._inputs = inputs
        for index, maybe in enumerate(inputs):
            if maybe is not None:
                _record_value(maybe)
                uses = maybe._uses
                uses[self] = uses.get(self, 0) | 1 << index
        self._attributes = attributes
        if type(attributes) is dict:
            for attr in attributes.values():
                for sub in attr.graphs():
                    sub._set_owner(self)

    def __repr__(self) -> str:
        label = f"{self._domain}.{self._op_type}" if self._domain else self._op_type
        return f"Node({label}, name={self._name!r})"

    def __str__(self) -> str:
        return format_node(self)

    # plain fields ----------------------------------------------------------------------------
    @property
    def op_type(self) -> str:
        """Operator type."""
        return self._op_type

    @op_type.setter
    def op_type(self, value: str) -> None:
        _record_node(self)
        self._op_type = value

    @property
    def domain(self) -> str:
        """Operator domain ("" for the default domain)."""
        return self._domain

    @domain.setter
    def domain(self, value: str) -> None:
        _record_node(self)
        self._domain = value

    @property
    def overload(self) -> str:
        """Function overload name."""
        return self._overload

    @overload.setter
    def overload(self, value: str) -> None:
        _record_node(self)
        self._overload = value

    @property
    def name(self) -> str:
        """Node name (may be empty; not required to be unique)."""
        return self._name

    @name.setter
    def name(self, value: str) -> None:
        _record_node(self)
        self._name = value

    @property
    def doc_string(self) -> str:
        """Documentation string."""
        return self._doc_string

    @doc_string.setter
    def doc_string(self, value: str) -> None:
        _record_node(self)
        self._doc_string = value

    @property
    def metadata_props(self) -> Mapping[str, str]:
        """Read-only view of metadata; change it with `set_metadata`."""
        return _ReadOnlyView(self._metadata_props or {})

    def set_metadata(self, key: str, value: str) -> None:
        """Set one metadata entry (the metadata dict is replaced, not changed in place)."""
        _record_node(self)
        self._metadata_props = {**(self._metadata_props or {}), key: value}

    def _attrs(self) -> dict[str, Attr]:
        attrs = self._attributes
        if type(attrs) is dict:
            return attrs
        assert isinstance(attrs, DeferredAttributes), f"{self!r} holds {type(attrs).__name__}"
        loaded = attrs.load(self)
        self._attributes = loaded
        return loaded

    @property
    def meta(self) -> dict[str, object]:
        """Scratch space for passes (never serialized)."""
        if self._meta is None:
            self._meta = {}
        return self._meta

    @property
    def graph(self) -> Graph | None:
        """The graph this node belongs to, or None when detached."""
        return self._graph

    # inputs and outputs ----------------------------------------------------------------------
    @property
    def inputs(self) -> tuple[Value | None, ...]:
        """Input values (None marks an omitted optional input)."""
        return self._inputs

    @inputs.setter
    def inputs(self, _: object) -> None:
        raise AttributeError("use Node.replace_input_with / Node.set_inputs to change inputs")

    @property
    def outputs(self) -> tuple[Value, ...]:
        """Output values; an omitted optional output is a value with an empty name."""
        return self._outputs

    @outputs.setter
    def outputs(self, _: object) -> None:
        raise AttributeError("outputs are fixed at construction; build a new node instead")

    def replace_input_with(self, index: int, value: Value | None) -> None:
        """Make input `index` read `value`, keeping both values' use lists right."""
        if not 0 <= index < len(self._inputs):
            raise IndexError(f"{self!r} has no input {index}")
        old = self._inputs[index]
        if old is value:
            return
        _record_node(self)
        if old is not None:
            _drop_use(old, self, index)
        if value is not None:
            _add_use(value, self, index)
        items = list(self._inputs)
        items[index] = value
        self._inputs = tuple(items)

    def set_inputs(self, values: Sequence[Value | None]) -> None:
        """Replace the whole input list (its length may change)."""
        _record_node(self)
        self.detach_inputs()
        self._inputs = tuple(values)
        for i, value in enumerate(self._inputs):
            if value is not None:
                _add_use(value, self, i)

    def append_input(self, value: Value | None) -> None:
        """Add one input at the end."""
        self.set_inputs((*self._inputs, value))

    # attributes ------------------------------------------------------------------------------
    @property
    def attributes(self) -> Mapping[str, Attr]:
        """Read-only view of the attributes by name; change them with `set_attribute`."""
        return _ReadOnlyView(self._attrs())

    def attribute(self, name: str, default: AttrValue = None) -> AttrValue:
        """The value of attribute `name`, or `default` when the node does not carry it."""
        attr = self._attrs().get(name)
        return default if attr is None else attr.value

    def set_attribute(self, attr: Attr) -> None:
        """Add or replace one attribute (the attribute dict is replaced, not changed)."""
        attrs = self._attrs()
        _record_node(self)
        old = attrs.get(attr.name)
        if old is not None:
            for sub in old.graphs():
                sub._set_owner(None)
        self._attributes = {**attrs, attr.name: attr}
        for sub in attr.graphs():
            sub._set_owner(self)

    def remove_attribute(self, name: str) -> None:
        """Remove one attribute if present (the attribute dict is replaced, not changed)."""
        attrs = self._attrs()
        old = attrs.get(name)
        if old is None:
            return
        _record_node(self)
        for sub in old.graphs():
            sub._set_owner(None)
        self._attributes = {key: attr for key, attr in attrs.items() if key != name}

    def subgraphs(self) -> Iterator[Graph]:
        """The graphs held by this node's attributes, in attribute order."""
        attrs = self._attributes
        if type(attrs) is not dict:
            return  # attributes not loaded yet never hold graphs (see DeferredAttributes)
        for attr in attrs.values():
            yield from attr.graphs()

    def reads(self) -> list[Value]:
        """Every value this node reads: its inputs, then what its subgraphs read from outside.

        A value read several times comes as often (the order is inputs first, then the
        subgraphs' nodes in order).
        """
        found = [value for value in self._inputs if value is not None]
        for sub in self.subgraphs():
            found.extend(_outer_values(sub))
        return found

    # lifecycle -------------------------------------------------------------------------------
    def detach_inputs(self) -> None:
        """Drop this node's uses of its inputs (the inputs are kept in `inputs`)."""
        for value in self._inputs:
            if value is not None:
                _record_value(value)
                value._uses.pop(self, None)


def _attribute_dict(attributes: Iterable[Attr] | Mapping[str, object]) -> dict[str, Attr]:
    """Attributes by name, from Attr objects or from a mapping of names to Python values."""
    if isinstance(attributes, Mapping):
        attrs = [
            value if isinstance(value, Attr) else infer_attr(key, value)
            for key, value in attributes.items()
        ]
        return {attr.name: attr for attr in attrs}
    return {attr.name: attr for attr in attributes}


_V = TypeVar("_V")


class _ReadOnlyView(Mapping[str, _V]):
    """A read-only mapping over a node's attribute or metadata dict."""

    __slots__ = ("_data",)

    def __init__(self, data: dict[str, _V]) -> None:
        self._data = data

    def __getitem__(self, key: str) -> _V:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return repr(self._data)


# ---------------------------------------------------------------------------------------------
# Graphs


class Graph:
    """A graph: ordered nodes, inputs, outputs and initializers.

    Node order is kept as given; lowering emits a topological order that keeps the given
    order wherever it is already valid. `metadata_props` (string key/value metadata) and
    `meta` (scratch space for passes, never serialized) are plain dicts.
    """

    __slots__ = (
        "_doc_string",
        "_initializers",
        "_input_set",
        "_inputs",
        "_journal",
        "_name",
        "_nodes",
        "_output_slots",
        "_outputs",
        "_owner",
        "_sparse_initializers",
        "meta",
        "metadata_props",
    )

    def __init__(
        self,
        inputs: Sequence[Value] = (),
        outputs: Sequence[Value] = (),
        nodes: Iterable[Node] = (),
        initializers: Iterable[Value] = (),
        *,
        sparse_initializers: Iterable[Value] = (),
        name: str = "",
        doc_string: str = "",
        metadata_props: Mapping[str, str] | None = None,
    ) -> None:
        """Create a graph from its parts (which must not belong to another graph).

        Raises:
            ValueError: a node already belongs to a graph, a value is defined elsewhere, an
                initializer has no `const_value`, or two initializers share a name.
        """
        self._name = name
        self._doc_string = doc_string
        self.metadata_props: dict[str, str] = dict(metadata_props or {})
        self.meta: dict[str, object] = {}
        self._inputs: list[Value] = []
        # The inputs as a set (a value is an input at most once): `Value.is_graph_input` in O(1).
        self._input_set: dict[Value, None] = {}
        self._outputs: list[Value] = []
        # How many output slots each output value fills: `Value.is_graph_output` in O(1).
        self._output_slots: dict[Value, int] = {}
        self._initializers: dict[str, Value] = {}
        self._sparse_initializers: dict[str, Value] = {}
        self._nodes: dict[Node, None] = {}
        self._owner: Node | Function | None = None
        # The journal recording changes to this graph, while one is open (see `ir.Journal`).
        self._journal: Journal | None = None
        for value in inputs:
            self.add_input(value)
        for value in initializers:
            self.add_initializer(value)
        for value in sparse_initializers:
            self.add_sparse_initializer(value)
        self.extend(nodes)
        for value in outputs:
            self.add_output(value)

    def __repr__(self) -> str:
        return f"Graph({self.name!r}, {len(self._nodes)} nodes)"

    def __str__(self) -> str:
        return format_graph(self)

    # plain fields ----------------------------------------------------------------------------
    @property
    def name(self) -> str:
        """Graph name."""
        return self._name

    @name.setter
    def name(self, value: str) -> None:
        self._record_fields()
        self._name = value

    @property
    def doc_string(self) -> str:
        """Documentation string."""
        return self._doc_string

    @doc_string.setter
    def doc_string(self, value: str) -> None:
        self._record_fields()
        self._doc_string = value

    # structure -------------------------------------------------------------------------------
    @property
    def nodes(self) -> tuple[Node, ...]:
        """Nodes in their current order (a snapshot)."""
        return tuple(self._nodes)

    def __iter__(self) -> Iterator[Node]:
        return iter(tuple(self._nodes))

    def __len__(self) -> int:
        return len(self._nodes)

    def __contains__(self, node: object) -> bool:
        return node in self._nodes

    @property
    def inputs(self) -> tuple[Value, ...]:
        """Graph inputs in order."""
        return tuple(self._inputs)

    @property
    def outputs(self) -> tuple[Value, ...]:
        """Graph outputs in order."""
        return tuple(self._outputs)

    @property
    def initializers(self) -> Mapping[str, Value]:
        """Initializers by name, in order (read-only view)."""
        return _ValueView(self._initializers)

    @property
    def sparse_initializers(self) -> Mapping[str, Value]:
        """Sparse initializers by name, in order (read-only view)."""
        return _ValueView(self._sparse_initializers)

    @property
    def owner(self) -> Node | Function | None:
        """The node whose attribute holds this graph, or the function it is the body of."""
        return self._owner

    def _record_fields(self) -> None:
        if self._journal is not None:
            self._journal.graph_fields(self)

    def _record_io(self) -> None:
        if self._journal is not None:
            self._journal.graph_io(self)

    def _record_order(self) -> None:
        if self._journal is not None:
            self._journal.order(self)

    def _record_initializers(self) -> None:
        if self._journal is not None:
            self._journal.initializers(self)

    def add_input(self, value: Value) -> None:
        """Append a graph input."""
        self.insert_input(len(self._inputs), value)

    def insert_input(self, index: int, value: Value) -> None:
        """Insert a graph input at `index`.

        Raises:
            ValueError: `value` is an input of this graph already.
        """
        if value in self._input_set:
            raise ValueError(f"value {value.name!r} is an input of this graph already")
        self._record_io()
        self._claim(value)
        self._inputs.insert(index, value)
        self._input_set[value] = None

    def remove_input(self, value: Value) -> None:
        """Remove a graph input that nothing uses any more.

        An input that an initializer of this graph also defines (as IR 3 lists every weight)
        may have uses: they read the initializer from then on.
        """
        if value._uses and self._initializers.get(value.name) is not value:
            raise ValueError(f"graph input {value.name!r} still has uses")
        self._record_io()
        _record_value(value)
        self._inputs.remove(value)
        del self._input_set[value]
        if not self._is_defined_here(value):
            value._graph = None

    def add_output(self, value: Value) -> None:
        """Append a graph output."""
        self._record_io()
        self._outputs.append(value)
        self._output_slots[value] = self._output_slots.get(value, 0) + 1

    def set_output(self, index: int, value: Value) -> None:
        """Make graph output `index` be `value`."""
        self._record_io()
        self._forget_output_slot(self._outputs[index])
        self._outputs[index] = value
        self._output_slots[value] = self._output_slots.get(value, 0) + 1

    def remove_output(self, index: int) -> None:
        """Remove graph output `index`."""
        self._record_io()
        self._forget_output_slot(self._outputs.pop(index))

    def _forget_output_slot(self, value: Value) -> None:
        left = self._output_slots[value] - 1
        if left:
            self._output_slots[value] = left
        else:
            del self._output_slots[value]

    def is_output(self, value: Value) -> bool:
        """True when `value` fills an output slot of this graph (O(1))."""
        return value in self._output_slots

    def _restore_io(self, inputs: list[Value], outputs: list[Value]) -> None:
        """Put back inputs and outputs a journal recorded (their indexes made again)."""
        self._inputs = inputs
        self._input_set = dict.fromkeys(inputs)
        self._outputs = outputs
        slots: dict[Value, int] = {}
        for value in outputs:
            slots[value] = slots.get(value, 0) + 1
        self._output_slots = slots

    def add_initializer(self, value: Value) -> None:
        """Register `value` (which must carry a `const_value`) as an initializer."""
        if value.const_value is None:
            raise ValueError(f"initializer {value.name!r} has no const_value")
        if value.name in self._initializers and self._initializers[value.name] is not value:
            raise ValueError(f"an initializer named {value.name!r} already exists")
        if self._journal is not None:
            self._journal.initializer_added(self, value)
        self._claim(value)
        self._initializers[value.name] = value

    def remove_initializer(self, name: str) -> Value:
        """Unregister an initializer that nothing uses any more; returns it."""
        value = self._initializers[name]
        if value._uses or value.is_graph_output():
            raise ValueError(f"initializer {name!r} still has uses")
        self._record_initializers()
        _record_value(value)
        del self._initializers[name]
        if not self._is_defined_here(value):
            value._graph = None
        return value

    def add_sparse_initializer(self, value: Value) -> None:
        """Register a sparse initializer."""
        self._record_initializers()
        self._claim(value)
        self._sparse_initializers[value.name] = value

    def remove_sparse_initializer(self, name: str) -> Value:
        """Unregister a sparse initializer that nothing uses any more; returns it."""
        value = self._sparse_initializers[name]
        if value._uses or value.is_graph_output():
            raise ValueError(f"sparse initializer {name!r} still has uses")
        del self._sparse_initializers[name]
        if not self._is_defined_here(value):
            value._graph = None
        return value

    def _claim(self, value: Value) -> None:
        if value._producer is not None:
            raise ValueError(f"value {value.name!r} is produced by {value._producer!r}")
        if value._graph is not None and value._graph is not self:
            raise ValueError(f"value {value.name!r} already belongs to another graph")
        _record_value(value)
        value._graph = self

    def _is_defined_here(self, value: Value) -> bool:
        return (
            value in self._input_set
            or self._initializers.get(value.name) is value
            or self._sparse_initializers.get(value.name) is value
        )

    def _rename_initializer(self, value: Value, new_name: str) -> None:
        # Rebuild to keep order; renaming initializers is rare.
        if new_name in self._initializers:
            raise ValueError(f"an initializer named {new_name!r} already exists")
        self._record_initializers()
        self._initializers = {
            (new_name if v is value else k): v for k, v in self._initializers.items()
        }

    def _rename_sparse_initializer(self, value: Value, new_name: str) -> None:
        if new_name in self._sparse_initializers:
            raise ValueError(f"a sparse initializer named {new_name!r} already exists")
        self._record_initializers()
        self._sparse_initializers = {
            (new_name if v is value else k): v for k, v in self._sparse_initializers.items()
        }

    # nodes -----------------------------------------------------------------------------------
    def append(self, node: Node) -> None:
        """Add a detached node at the end."""
        self.extend((node,))

    def extend(self, nodes: Iterable[Node]) -> None:
        """Add detached nodes at the end, in order (none is added if one is refused).

        Raises:
            ValueError: a node already belongs to a graph, or is given twice.
        """
        items = list(nodes)
        batch = dict.fromkeys(items)
        for node in batch:
            if node._graph is not None:
                raise ValueError(f"{node!r} already belongs to a graph")
        if len(batch) != len(items):
            raise ValueError("a node is given twice")
        if self._journal is not None:
            self._journal.appended(self, batch)
        for node in batch:
            node._graph = self
        self._nodes.update(batch)

    def insert_before(self, anchor: Node, nodes: Sequence[Node]) -> None:
        """Insert detached nodes just before `anchor` (O(number of nodes))."""
        self._insert(anchor, nodes, after=False)

    def insert_after(self, anchor: Node, nodes: Sequence[Node]) -> None:
        """Insert detached nodes just after `anchor` (O(number of nodes))."""
        self._insert(anchor, nodes, after=True)

    def _insert(self, anchor: Node, nodes: Sequence[Node], *, after: bool) -> None:
        if anchor._graph is not self:
            raise ValueError(f"{anchor!r} is not in this graph")
        for node in nodes:
            if node._graph is not None:
                raise ValueError(f"{node!r} already belongs to a graph")
        self._record_order()
        reordered: dict[Node, None] = {}
        for existing in self._nodes:
            if existing is anchor and not after:
                reordered.update(dict.fromkeys(nodes))
            reordered[existing] = None
            if existing is anchor and after:
                reordered.update(dict.fromkeys(nodes))
        for node in nodes:
            node._graph = self
        self._nodes = reordered

    def remove(self, node: Node, *, safe: bool = True) -> None:
        """Remove a node and drop its uses of its inputs.

        Args:
            node: a node of this graph.
            safe: refuse (ValueError) when an output is still used or is a graph output.
        """
        if node._graph is not self:
            raise ValueError(f"{node!r} is not in this graph")
        if safe:
            for out in node._outputs:
                if out._uses:
                    user = next(iter(out._uses))
                    raise ValueError(
                        f"cannot remove {node!r}: output {out.name!r} is still used by {user!r}"
                    )
                if out in self._output_slots:
                    raise ValueError(
                        f"cannot remove {node!r}: output {out.name!r} is a graph output"
                    )
        self._record_order()
        _record_node(node)
        node.detach_inputs()
        # Nodes inside the removed node's subgraphs may read values of this (or an outer)
        # graph: those uses go away with it.
        for sub in node.subgraphs():
            for value in _outer_values(sub):
                for user in [
                    n for n in value._uses if n._graph is not None and _is_within(n._graph, sub)
                ]:
                    _record_value(value)
                    del value._uses[user]
        del self._nodes[node]
        node._graph = None

    def sort(self) -> None:
        """Put nodes in the topological order lowering would emit."""
        self._record_order()
        self._nodes = dict.fromkeys(topological_order(self))

    def _set_owner(self, owner: Node | Function | None) -> None:
        self._record_fields()
        self._owner = owner

    # traversal -------------------------------------------------------------------------------
    def all_nodes(self) -> Iterator[Node]:
        """Every node of this graph and of its nested subgraphs, depth first."""
        for node in tuple(self._nodes):
            yield node
            for sub in node.subgraphs():
                yield from sub.all_nodes()

    def all_graphs(self) -> Iterator[Graph]:
        """This graph and every nested subgraph, depth first."""
        yield self
        for node in tuple(self._nodes):
            for sub in node.subgraphs():
                yield from sub.all_graphs()

    def values(self) -> Iterator[Value]:
        """Every value this graph defines: inputs, initializers, then node outputs in order."""
        seen: dict[Value, None] = {}
        for value in self._inputs:
            seen[value] = None
        for value in self._initializers.values():
            seen[value] = None
        for value in self._sparse_initializers.values():
            seen[value] = None
        for node in self._nodes:
            for value in node._outputs:
                seen[value] = None
        return iter(seen)


class _ValueView(Mapping[str, Value]):
    """A read-only mapping over a name -> value dict."""

    __slots__ = ("_data",)

    def __init__(self, data: dict[str, Value]) -> None:
        self._data = data

    def __getitem__(self, key: str) -> Value:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)


def topological_order(graph: Graph) -> list[Node]:
    """The graph's nodes, producers first, keeping the current order wherever it is valid.

    A node is emitted at its place in the current order unless one of its producers comes
    later; then that producer (and what it needs) is pulled forward. Values from outer scopes
    used inside subgraphs count as dependencies of the node that owns the subgraph.

    Raises:
        GraphStructureError: when the nodes form a cycle (names one node on it).
    """
    nodes = graph._nodes
    done: dict[Node, None] = {}
    on_stack: dict[Node, None] = {}
    order: list[Node] = []
    for root in nodes:
        if root in done:
            continue
        # Iterative DFS: (node, iterator over its producers).
        stack: list[tuple[Node, Iterator[Node]]] = [(root, _producers_in(graph, root))]
        on_stack[root] = None
        while stack:
            node, it = stack[-1]
            pushed = False
            for dep in it:
                if dep in done:
                    continue
                if dep in on_stack:
                    raise GraphStructureError(
                        f"cycle in graph {graph.name!r} through node "
                        f"{dep.name or dep.op_type!r} ({dep.op_type})"
                    )
                on_stack[dep] = None
                stack.append((dep, _producers_in(graph, dep)))
                pushed = True
                break
            if not pushed:
                stack.pop()
                del on_stack[node]
                done[node] = None
                order.append(node)
    return order


def _producers_in(graph: Graph, node: Node) -> Iterator[Node]:
    """Producers in `graph` of the values `node` (and its subgraphs) read."""
    nodes = graph._nodes
    for value in node._inputs:
        if value is not None:
            producer = value._producer
            if producer is not None and producer in nodes:
                yield producer
    if node._attributes:
        for sub in node.subgraphs():
            for value in _outer_values(sub):
                producer = value._producer
                if producer is not None and producer in nodes:
                    yield producer


def _outer_values(graph: Graph) -> Iterator[Value]:
    """Values read inside `graph` (or deeper) that are defined outside it."""
    for node in graph.all_nodes():
        for value in node._inputs:
            if value is None:
                continue
            owner = value.graph
            if owner is not None and not _is_within(owner, graph):
                yield value


def _is_within(inner: Graph, outer: Graph) -> bool:
    """True when `inner` is `outer` or nested (at any depth) inside it."""
    g: Graph | None = inner
    while g is not None:
        if g is outer:
            return True
        owner = g._owner
        g = owner._graph if isinstance(owner, Node) else None
    return False


# ---------------------------------------------------------------------------------------------
# Functions and models


class Function:
    """A model-local function: a body graph plus its identity, attributes and opsets."""

    __slots__ = (
        "attribute_defaults",
        "attributes",
        "doc_string",
        "domain",
        "graph",
        "meta",
        "metadata_props",
        "name",
        "opset_imports",
        "overload",
    )

    def __init__(
        self,
        domain: str,
        name: str,
        graph: Graph,
        *,
        overload: str = "",
        attributes: Sequence[str] = (),
        attribute_defaults: Sequence[Attr] = (),
        opset_imports: Mapping[str, int] | None = None,
        doc_string: str = "",
        metadata_props: Mapping[str, str] | None = None,
    ) -> None:
        self.domain = domain
        self.name = name
        self.overload = overload
        self.graph = graph
        graph._set_owner(self)
        self.attributes: list[str] = list(attributes)
        self.attribute_defaults: list[Attr] = list(attribute_defaults)
        self.opset_imports: dict[str, int] = dict(opset_imports or {})
        self.doc_string = doc_string
        self.metadata_props: dict[str, str] = dict(metadata_props or {})
        self.meta: dict[str, object] = {}

    @property
    def identifier(self) -> tuple[str, str, str]:
        """(domain, name, overload): how calls refer to this function."""
        return (self.domain, self.name, self.overload)

    def __repr__(self) -> str:
        return f"Function({self.domain}.{self.name})"


class Model:
    """A model: the main graph, functions, opset imports and model-level metadata.

    Weakly referenceable, so that lowering can keep what it needs about a lifted model (the
    messages it was read from) beside it rather than in it.
    """

    __slots__ = (
        "__weakref__",
        "base_dir",
        "doc_string",
        "domain",
        "functions",
        "graph",
        "ir_version",
        "meta",
        "metadata_props",
        "model_version",
        "opset_imports",
        "producer_name",
        "producer_version",
    )

    def __init__(
        self,
        graph: Graph,
        *,
        ir_version: int = 10,
        opset_imports: Mapping[str, int] | None = None,
        producer_name: str = "",
        producer_version: str = "",
        domain: str = "",
        model_version: int = 0,
        doc_string: str = "",
        functions: Iterable[Function] = (),
        metadata_props: Mapping[str, str] | None = None,
        base_dir: str | None = None,
    ) -> None:
        """Create a model around its main graph.

        Args:
            graph: the main graph.
            ir_version: the ONNX IR version.
            opset_imports: domain -> version (the default domain at 21 when None).
            producer_name: the producing tool.
            producer_version: its version.
            domain: the model's domain.
            model_version: the model's own version number.
            doc_string: documentation string.
            functions: model-local functions.
            metadata_props: string key/value metadata.
            base_dir: the folder relative external-data locations are resolved against.
        """
        self.graph = graph
        self.ir_version = ir_version
        self.opset_imports: dict[str, int] = (
            dict(opset_imports) if opset_imports is not None else {"": 21}
        )
        self.producer_name = producer_name
        self.producer_version = producer_version
        self.domain = domain
        self.model_version = model_version
        self.doc_string = doc_string
        self.metadata_props: dict[str, str] = dict(metadata_props or {})
        self.functions: dict[tuple[str, str, str], Function] = {f.identifier: f for f in functions}
        self.base_dir = base_dir
        self.meta: dict[str, object] = {}

    def __repr__(self) -> str:
        return f"Model({self.graph.name!r}, opsets={self.opset_imports})"

    def __str__(self) -> str:
        lines = [f"ir_version={self.ir_version} opsets={self.opset_imports}"]
        lines.append(format_graph(self.graph))
        for fn in self.functions.values():
            lines.append(f"function {fn.domain}.{fn.name}:")
            lines.append(format_graph(fn.graph, indent="  "))
        return "\n".join(lines)

    def graphs(self) -> Iterator[Graph]:
        """The main graph, its subgraphs, then every function body and its subgraphs."""
        yield from self.graph.all_graphs()
        for fn in self.functions.values():
            yield from fn.graph.all_graphs()


# ---------------------------------------------------------------------------------------------
# Printing


def _format_value(value: Value | None) -> str:
    if value is None:
        return "''"
    return f"%{value.name}" if value.name else "%<anonymous>"


def _format_attr(attr: Attr) -> str:
    if attr.ref_attr_name:
        return f"{attr.name}=@{attr.ref_attr_name}"
    value = attr.value
    if isinstance(value, Graph):
        return f"{attr.name}=<graph {value.name} ({len(value)} nodes)>"
    if isinstance(value, Tensor):
        return f"{attr.name}=<tensor {value.dtype.onnx_name}{list(value.shape)}>"
    if isinstance(value, tuple):
        return f"{attr.name}=[{', '.join(_short_repr(v) for v in value)}]"
    return f"{attr.name}={_short_repr(value)}"


def _short_repr(value: object) -> str:
    if isinstance(value, Graph):
        return f"<graph {value.name}>"
    if isinstance(value, Tensor):
        return f"<tensor {value.dtype.onnx_name}{list(value.shape)}>"
    if isinstance(value, float):
        return repr(value)
    return repr(value) if isinstance(value, str | bytes) else str(value)


def format_node(node: Node) -> str:
    """One line in ONNX text style: `%y = Op <attrs> (%a, %b)`."""
    outs = ", ".join(_format_value(v) if v.name else "''" for v in node.outputs)
    op = f"{node.domain}.{node.op_type}" if node.domain else node.op_type
    attrs = ""
    if node.attributes:
        attrs = " <" + ", ".join(_format_attr(a) for a in node.attributes.values()) + ">"
    ins = ", ".join(_format_value(v) for v in node.inputs)
    return f"{outs} = {op}{attrs} ({ins})"


def format_graph(graph: Graph, indent: str = "") -> str:
    """A deterministic, readable multi-line form of a graph (nested graphs indented)."""
    lines = [f"{indent}graph {graph.name!r} ("]
    for value in graph.inputs:
        lines.append(f"{indent}  input %{value.name}: {value.type}")
    for name, value in graph.initializers.items():
        tensor = value.const_value
        desc = f"{tensor.dtype.onnx_name}{list(tensor.shape)}" if tensor is not None else "?"
        lines.append(f"{indent}  init %{name}: {desc}")
    lines.append(f"{indent}) {{")
    for node in graph._nodes:
        lines.append(f"{indent}  {format_node(node)}")
        for sub in node.subgraphs():
            lines.append(format_graph(sub, indent + "    "))
    outs = ", ".join(_format_value(v) for v in graph.outputs)
    lines.append(f"{indent}  return {outs}")
    lines.append(f"{indent}}}")
    return "\n".join(lines)
