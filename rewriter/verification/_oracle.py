"""The accuracy oracle: the original model evaluated in float64.

`oracle_model(model)` returns a copy of a model in which every float32, float16 and bfloat16
tensor is float64: graph inputs and outputs, declared value types, initializers, `Constant`
and `ConstantOfShape` payloads, and the `to`/`dtype` attributes that name those types. Run on
the same inputs (cast to float64, which is exact), it computes the original's function with
about 2^29 times less rounding error than float32 does: what float32 cannot resolve is what
the verifier measures against it (see `_compare`).

Where onnxruntime cannot run a node in double, the node is

* replaced by an exact double computation from `_double_ops` (Conv, Erf, Gelu,
  GlobalAveragePool, InstanceNormalization and most activations), or else
* computed in its original precision: its float64 inputs are cast down to the original type
  and its outputs cast back up. That node's rounding then stays in the oracle; the oracle's
  `notes` name such nodes, and the verifier shows them.

Nodes whose schema refuses double at some input (Resize's `scales`, a quantization scale)
are treated the same way, input by input. Function bodies are widened (payloads and casts)
but not checked node by node: onnxruntime loads them or the oracle is not built.

Which op kinds lack a double kernel is asked of onnxruntime once per process per kind (op,
domain, opset, input types), with a one-node session, as the engine does for rewrites.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

import ir
from rewriter.verification._double_ops import Emitter, double_replacement

logger = logging.getLogger(__name__)

WIDENED = (ir.DataType.FLOAT, ir.DataType.FLOAT16, ir.DataType.BFLOAT16)
"""The element types the oracle computes in float64."""

_DOUBLE = ir.DataType.DOUBLE
_TYPE_ATTRIBUTES = {
    "Cast": "to",
    "EyeLike": "dtype",
    "RandomNormal": "dtype",
    "RandomUniform": "dtype",
    "RandomNormalLike": "dtype",
    "RandomUniformLike": "dtype",
    "Bernoulli": "dtype",
}
_FLOAT_PAYLOADS = ("value_float", "value_floats")


@dataclasses.dataclass(frozen=True, slots=True)
class OracleModel:
    """The float64 copy of a model, and what in it is not computed in double."""

    model: ir.Model
    notes: tuple[str, ...]


def _dtype(value: ir.Value | None) -> ir.DataType | None:
    if value is None:
        return None
    if value.const_value is not None:
        return value.const_value.dtype
    fact = ir.fact_type(value)
    if isinstance(fact, ir.TensorType) and fact.dtype != ir.DataType.UNDEFINED:
        return fact.dtype
    return None


def _widened_tensor(tensor: ir.Tensor) -> ir.Tensor:
    array = np.asarray(tensor.numpy()).astype(np.float64)
    return ir.NumpyTensor(array, tensor.name)


def _widened_type(value: ir.Value) -> None:
    declared = value.type
    if isinstance(declared, ir.TensorType) and declared.dtype in WIDENED:
        value.type = dataclasses.replace(declared, dtype=_DOUBLE)


def _opset(model: ir.Model, domain: str) -> int:
    domain = ir.schemas.normalize_domain(domain)
    found = model.opset_imports.get(domain)
    if found is None and domain == "":
        found = model.opset_imports.get("ai.onnx")
    return int(found or 1)


# ---------------------------------------------------------------------------------------------
# Kernel availability (asked of onnxruntime once per kind of node)


@functools.cache
def _has_double_kernel(
    domain: str, op_type: str, opset: int, inputs: tuple[tuple[int, int] | None, ...]
) -> bool:
    """Whether onnxruntime builds a session for one such node (inputs: dtype and rank)."""
    import onnxruntime as ort

    values: list[ir.Value | None] = []
    feeds: dict[str, np.ndarray[Any, Any]] = {}
    for index, entry in enumerate(inputs):
        if entry is None:
            values.append(None)
            continue
        dtype, rank = entry
        name = f"input{index}"
        values.append(ir.Value(name))
        feeds[name] = np.zeros((1,) * rank, dtype=ir.numpy_dtype(ir.DataType(dtype)))
    node = ir.Node(op_type, values, domain=domain, outputs=["output"])
    opsets = {ir.schemas.normalize_domain(domain): opset}
    if domain:
        opsets.setdefault("", 21)
    proto = ir.evaluation_model([node], feeds, ["output"], opsets)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 4
    try:
        ort.InferenceSession(proto.SerializeToString(), options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime raises its own untyped error classes
        text = str(exc)
        return not ("NOT_IMPLEMENTED" in text or "Could not find an implementation" in text)
    return True


# ---------------------------------------------------------------------------------------------
# Widening


class _Widener:
    """Widens one model in place (a copy the caller owns)."""

    def __init__(self, model: ir.Model, runtime_types: Mapping[str, ir.DataType]) -> None:
        self.model = model
        self.names = ir.NameAllocator(model)
        self.notes: dict[str, None] = {}
        # Original element types of the values made float64, per value.
        self.original: dict[ir.Value, ir.DataType] = {}
        # Element types onnxruntime gives values that inference leaves untyped, by name.
        self.runtime_types = runtime_types

    def run(self) -> None:
        main_graphs = list(self.model.graph.all_graphs())
        for graph in main_graphs:
            self._record_types(graph)
        for graph in self._all_graphs():
            self._widen_payloads(graph)
        for graph in main_graphs:
            self._widen_values(graph)
        for graph in main_graphs:
            for node in list(graph):
                self._fit_node(graph, node)

    def _all_graphs(self) -> Iterator[ir.Graph]:
        yield from self.model.graphs()

    def _record_types(self, graph: ir.Graph) -> None:
        for value in graph.values():
            dtype = _dtype(value)
            if dtype is None:
                dtype = self.runtime_types.get(value.name)
            if dtype is not None and dtype in WIDENED:
                self.original[value] = dtype

    def _widen_values(self, graph: ir.Graph) -> None:
        for value in graph.values():
            if value not in self.original:
                continue
            if value.const_value is not None:
                value.const_value = _widened_tensor(value.const_value)
            _widened_type(value)

    def _widen_payloads(self, graph: ir.Graph) -> None:
        """Constants and type attributes (also in function bodies, which have no facts)."""
        for node in graph:
            if node.domain not in ("", "ai.onnx"):
                continue
            if node.op_type in ("Constant", "ConstantOfShape"):
                self._widen_constant(node)
            name = _TYPE_ATTRIBUTES.get(node.op_type)
            if name is not None and node.attribute(name) in [int(t) for t in WIDENED]:
                node.set_attribute(ir.attr_int(name, int(_DOUBLE)))

    def _widen_constant(self, node: ir.Node) -> None:
        payload = node.attribute("value")
        if isinstance(payload, ir.Tensor) and payload.dtype in WIDENED:
            node.set_attribute(ir.attr_tensor("value", _widened_tensor(payload)))
        for name in _FLOAT_PAYLOADS:
            found = node.attribute(name)
            if found is None:
                continue
            array = np.asarray(found, dtype=np.float64)
            node.remove_attribute(name)
            node.set_attribute(ir.attr_tensor("value", ir.NumpyTensor(array)))

    # per node --------------------------------------------------------------------------------
    def _fit_node(self, graph: ir.Graph, node: ir.Node) -> None:
        """Make a node run in double: as it is, replaced, or kept in its own precision."""
        widened_inputs = [v is not None and v in self.original for v in node.inputs]
        widened_outputs = [v in self.original for v in node.outputs]
        if not (any(widened_inputs) or any(widened_outputs)) or any(node.subgraphs()):
            return
        if node.op_type in ("Constant", "ConstantOfShape", "Cast", "CastLike"):
            return
        opset = _opset(self.model, node.domain)
        schema = ir.schemas.find_schema(node.op_type, node.domain, opset)
        refused = self._refused_inputs(schema, node, widened_inputs, widened_outputs)
        if refused is None:
            self._keep_precision(graph, node, reason="no double type in its schema")
            return
        if refused:
            self._cast_down_inputs(graph, node, refused)
            widened_inputs = [w and i not in refused for i, w in enumerate(widened_inputs)]
            if not any(widened_inputs) and not any(widened_outputs):
                return
        if self._runs_in_double(node, opset):
            return
        emit = Emitter(self.names, node.name or node.op_type, opset)
        replacement = double_replacement(node, emit)
        if replacement is not None:
            self._replace(graph, node, *replacement)
            return
        self._keep_precision(graph, node, reason="onnxruntime has no double kernel")

    def _refused_inputs(
        self,
        schema: Any,
        node: ir.Node,
        widened_inputs: Sequence[bool],
        widened_outputs: Sequence[bool],
    ) -> list[int] | None:
        """Inputs whose formal type refuses double; None when the node as a whole must stay.

        A custom op (no schema) stays in its own precision. An output that cannot be double,
        or an input whose type variable it shares with such an output, keeps the node whole.
        """
        if schema is None:
            return None if node.domain not in ("", "ai.onnx") else []
        allowed = {c.type_param_str: set(c.allowed_type_strs) for c in schema.type_constraints}

        def takes_double(formals: Sequence[Any], index: int) -> bool:
            if not formals:
                return True
            formal = formals[min(index, len(formals) - 1)]
            types = allowed.get(formal.type_str, {formal.type_str})
            return "tensor(double)" in types

        for index, widened in enumerate(widened_outputs):
            if widened and not takes_double(schema.outputs, index):
                return None
        return [
            index
            for index, widened in enumerate(widened_inputs)
            if widened and not takes_double(schema.inputs, index)
        ]

    def _runs_in_double(self, node: ir.Node, opset: int) -> bool:
        kinds: list[tuple[int, int] | None] = []
        for value in node.inputs:
            if value is None:
                kinds.append(None)
                continue
            dtype = _DOUBLE if value in self.original else _dtype(value)
            fact = ir.fact_type(value)
            rank = len(fact.shape) if isinstance(fact, ir.TensorType) and fact.shape else 0
            if value.const_value is not None:
                rank = len(value.const_value.shape)
            if dtype is None:
                return True  # unknown type: let onnxruntime decide when it loads the model
            kinds.append((int(dtype), rank))
        domain = ir.schemas.normalize_domain(node.domain)
        return _has_double_kernel(domain, node.op_type, opset, tuple(kinds))

    def _cast(self, value: ir.Value, to: ir.DataType, stem: str) -> ir.Node:
        out = ir.Value(self.names.fresh(f"{stem}_as_{to.onnx_name}"))
        return ir.Node(
            "Cast",
            [value],
            {"to": int(to)},
            outputs=[out],
            name=self.names.fresh(f"{stem}_cast"),
        )

    def _cast_down_inputs(self, graph: ir.Graph, node: ir.Node, indices: Sequence[int]) -> None:
        casts = []
        for index in indices:
            value = node.inputs[index]
            assert value is not None, "a widened input is a value"
            cast = self._cast(value, self.original[value], value.name)
            casts.append(cast)
            node.replace_input_with(index, cast.outputs[0])
        graph.insert_before(node, casts)

    def _keep_precision(self, graph: ir.Graph, node: ir.Node, *, reason: str) -> None:
        """Compute `node` in its original types: cast its inputs down, its outputs up."""
        label = node.op_type if not node.domain else f"{node.domain}.{node.op_type}"
        self.notes[f"`{label}` computed in its own precision ({reason})"] = None
        indices = [i for i, v in enumerate(node.inputs) if v is not None and v in self.original]
        self._cast_down_inputs(graph, node, indices)
        ups = []
        for out in node.outputs:
            dtype = self.original.get(out)
            if dtype is None:
                continue
            wide = ir.Value(self.names.fresh(f"{out.name}_double"))
            # A later node kept in its own precision casts it down again.
            self.original[wide] = dtype
            name = out.name
            out.replace_all_uses_with(wide, replace_graph_outputs=True)
            out.name = self.names.fresh(f"{name}_{dtype.onnx_name}")
            declared = out.type
            if isinstance(declared, ir.TensorType):
                out.type = dataclasses.replace(declared, dtype=dtype)
            ups.append(
                ir.Node(
                    "Cast",
                    [out],
                    {"to": int(_DOUBLE)},
                    outputs=[wide],
                    name=self.names.fresh(f"{name}_cast"),
                )
            )
            wide.name = name
        graph.insert_after(node, ups)

    def _replace(
        self, graph: ir.Graph, node: ir.Node, nodes: list[ir.Node], outputs: list[ir.Value]
    ) -> None:
        graph.insert_before(node, nodes)
        for old, new in zip(node.outputs, outputs, strict=True):
            name = old.name
            declared = old.type
            old.replace_all_uses_with(new, replace_graph_outputs=True)
            old.name = self.names.fresh(f"{name}_replaced")
            new.name = name
            if declared is not None:
                new.type = declared
        inputs = [v for v in node.inputs if v is not None]
        graph.remove(node)
        # Weights the replacement copied into its constants are no longer read.
        for value in inputs:
            unused = not value.uses and not value.is_graph_output() and not value.is_graph_input()
            if unused and value.is_initializer():
                graph.remove_initializer(value.name)


_ORT_TYPE_NAMES = {f"tensor({dtype.onnx_name})": dtype for dtype in ir.DataType}


def _runtime_types(model: ir.Model) -> dict[str, ir.DataType]:
    """Element types of the main graph's values that inference leaves untyped, from onnxruntime.

    onnx's inference stops at the ops of onnxruntime's own domains (a model that already holds
    SkipLayerNormalization or Attention): the values they compute, and those computed from
    them, get no type, and the oracle could neither cast such a node's outputs up nor widen
    what follows. onnxruntime types them when it loads the model: each such value is made a
    graph output without a type and read back from the session (no optimizations, not run).
    Empty when every value is typed, no node is in another domain, or onnxruntime refuses.
    """
    graph = model.graph
    if all(ir.schemas.normalize_domain(node.domain) == "" for node in graph):
        return {}
    untyped = [
        value.name
        for node in graph
        for value in node.outputs
        if value.name and _dtype(value) is None and not value.is_graph_output()
    ]
    if not untyped:
        return {}
    import onnx
    import onnxruntime as ort

    proto = ir.to_onnx(model)
    proto.graph.output.extend(onnx.ValueInfoProto(name=name) for name in untyped)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 4
    try:
        session = ort.InferenceSession(
            proto.SerializeToString(), options, providers=["CPUExecutionProvider"]
        )
    except Exception as exc:  # onnxruntime raises its own untyped error classes
        logger.info("onnxruntime did not type the untyped values: %s", exc)
        return {}
    wanted = set(untyped)
    return {
        output.name: _ORT_TYPE_NAMES[output.type]
        for output in session.get_outputs()
        if output.name in wanted and output.type in _ORT_TYPE_NAMES
    }


def oracle_model(model: ir.Model) -> OracleModel:
    """A float64 copy of `model` (see the module docstring); `model` is not changed.

    Raises:
        ir.IRError: the copy cannot be made (the model's own data cannot be read).
    """
    copy = ir.from_onnx(ir.to_onnx(model), base_dir=model.base_dir)
    ir.infer_types(copy)
    widener = _Widener(copy, _runtime_types(copy))
    widener.run()
    return OracleModel(copy, tuple(widener.notes))


def widen_feeds(
    feeds: Mapping[str, np.ndarray[Any, Any]], widened_inputs: frozenset[str]
) -> dict[str, np.ndarray[Any, Any]]:
    """The inputs of the oracle: the float inputs cast (exactly) to float64."""
    wide = {}
    for name, array in feeds.items():
        if name in widened_inputs:
            wide[name] = np.asarray(array).astype(np.float64)
        else:
            wide[name] = array
    return wide


def widened_input_names(model: ir.Model) -> frozenset[str]:
    """Names of the graph inputs whose element type the oracle widens."""
    names = []
    for value in model.graph.inputs:
        declared = value.type
        if isinstance(declared, ir.TensorType) and declared.dtype in WIDENED:
            names.append(value.name)
    return frozenset(names)
