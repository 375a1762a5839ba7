"""Replaying a counterexample on onnxruntime: both sides of the rule, run on its values.

A counterexample is only as good as the semantics it was found in. Before the prover calls a
rule refuted, the instance is built twice as a one-graph ONNX model (the match alone; the
match with the rewrite's nodes added), with the counterexample's input values as graph inputs,
its constants as initializers and its attributes filled in, and both run on onnxruntime's CPU
provider with graph optimizations off. The rule is refuted when they differ (or onnxruntime
refuses the rewritten model where it runs the original); when they agree, the counterexample
was an artefact of the semantics (an unknown function's, or a prover bug) and says so.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import z3

import ir
from rewriter.prove._dtypes import to_python
from rewriter.prove._evaluate import NotConcreteError, concrete
from rewriter.prove._expressions import FreeAttribute
from rewriter.prove._instance import Instance, Leaf
from rewriter.prove._query import Counterexample
from rewriter.prove._registry import NodeSpec
from rewriter.prove._symbolic import Sym


@dataclasses.dataclass(frozen=True, slots=True)
class Replay:
    """What onnxruntime did with a counterexample.

    `confirmed`: the two models differ as the prover said (or the rewrite does not run).
    `leaves` and `attributes` are the concrete values used; `original`/`rewritten` are the
    outputs' values at the counterexample's index (or the error). `ran` is False when the
    counterexample could not be turned into runnable models (an input too large to build).
    """

    confirmed: bool
    detail: str
    leaves: Mapping[str, np.ndarray[Any, Any]]
    attributes: Mapping[str, object]
    original: object = None
    rewritten: object = None
    ran: bool = True


class _NotReplayableError(ValueError):
    pass


def replay(instance: Instance, found: Counterexample, *, signed_zeros: bool = False) -> Replay:
    """Run both sides of `instance` on onnxruntime with the values of `found`."""
    model = found.model
    if model is None:
        return Replay(False, "not replayed: the counterexample has no model", {}, {}, ran=False)
    try:
        leaves = _leaf_values(instance, found, model)
        nodes_before = [_concrete_node(n, model) for n in instance.pattern_nodes]
        nodes_after = [_concrete_node(n, model) for n in instance.rewrite_nodes]
    except _NotReplayableError as exc:
        return Replay(False, f"not replayed: {exc}", {}, {}, ran=False)
    attributes = {
        f"{node.op_type}.{name}": value
        for node in [*nodes_before, *nodes_after]
        for name, value in node.attributes.items()
        if name in _symbolic_names(instance)
    }
    original_model = _model(instance, leaves, nodes_before, instance.outputs)
    rewritten_model = _model(instance, leaves, [*nodes_before, *nodes_after], instance.rewritten)
    feeds = {
        leaf.name: leaves[leaf.name]
        for leaf in instance.leaves
        if leaf.kind == "input" and _is_read(leaf.name, [*nodes_before, *nodes_after])
    }
    try:
        original = _run(original_model, _only_read(feeds, nodes_before))
    except _RunError as exc:
        detail = f"prover bug: onnxruntime does not run the match on the counterexample ({exc})"
        return Replay(False, detail, leaves, attributes)
    try:
        rewritten = _run(rewritten_model, feeds)
    except _RunError as exc:
        detail = f"onnxruntime refuses the rewritten model where it runs the original: {exc}"
        return Replay(True, detail, leaves, attributes, rewritten=str(exc))
    poison = _original_poison(instance, model)
    for position, (a, b) in enumerate(zip(original, rewritten, strict=True)):
        differs = _difference(a, b, poison[position], signed_zeros)
        if differs is not None:
            name = instance.outputs[position]
            where, left, right = differs
            detail = f"onnxruntime: `{name}`{where} is {left!r} before and {right!r} after"
            return Replay(True, detail, leaves, attributes, left, right)
    return Replay(False, "onnxruntime gives the same outputs on both sides", leaves, attributes)


def _symbolic_names(instance: Instance) -> set[str]:
    names: set[str] = set()
    for node in [*instance.pattern_nodes, *instance.rewrite_nodes]:
        for name, value in node.attributes.items():
            if isinstance(value, Sym | FreeAttribute):
                names.add(name)
    return names


def _leaf_values(
    instance: Instance, found: Counterexample, model: z3.ModelRef
) -> dict[str, np.ndarray[Any, Any]]:
    values: dict[str, np.ndarray[Any, Any]] = {}
    for leaf in instance.leaves:
        values[leaf.name] = _leaf_value(leaf, found, model)
    return values


def _leaf_value(leaf: Leaf, found: Counterexample, model: z3.ModelRef) -> np.ndarray[Any, Any]:
    if leaf.kind == "computed":
        contents = leaf.contents
        assert contents is not None, "a computed constant keeps its contents"
        if contents.dtype != object:
            return np.asarray(contents)
        dtype = leaf.tensor.dtype
        flat = [
            to_python(model.eval(item.term, model_completion=True), dtype)
            for item in contents.reshape(-1)
        ]
        return np.array(flat, dtype=ir.numpy_dtype(dtype)).reshape(contents.shape)
    if leaf.name in found.inputs:
        return np.asarray(found.inputs[leaf.name])
    try:
        return concrete(leaf.tensor, model).values
    except NotConcreteError as exc:
        raise _NotReplayableError(f"`{leaf.name}` cannot be read ({exc})") from exc


def _concrete_node(node: NodeSpec, model: z3.ModelRef) -> NodeSpec:
    attributes: dict[str, object] = {}
    for name, value in node.attributes.items():
        if isinstance(value, FreeAttribute):
            default = ir.schemas.attribute_default(node.op_type, name, node.domain)
            if default is not None:
                attributes[name] = default.value
            continue
        if isinstance(value, Sym):
            evaluated = model.eval(value.term, model_completion=True)
            attributes[name] = float(to_python(evaluated, value.dtype))
            continue
        attributes[name] = value
    return dataclasses.replace(node, attributes=attributes)


def _is_read(name: str, nodes: Sequence[NodeSpec]) -> bool:
    return any(name in node.inputs for node in nodes)


def _only_read(
    feeds: dict[str, np.ndarray[Any, Any]], nodes: Sequence[NodeSpec]
) -> dict[str, np.ndarray[Any, Any]]:
    return {name: value for name, value in feeds.items() if _is_read(name, nodes)}


def _attribute(op: NodeSpec, name: str, value: object, opset: int) -> ir.Attr:
    kind = ir.schemas.attribute_type(op.op_type, name, op.domain, opset)
    if isinstance(value, ir.Tensor):
        return ir.attr_tensor(name, value)
    if kind == ir.AttrType.FLOAT:
        return ir.attr_float(name, float(value))  # type: ignore[arg-type]
    if kind == ir.AttrType.INT:
        return ir.attr_int(name, int(value))  # type: ignore[call-overload]
    if kind == ir.AttrType.INTS:
        return ir.attr_ints(name, [int(v) for v in value])  # type: ignore[attr-defined]
    if kind == ir.AttrType.FLOATS:
        return ir.attr_floats(name, [float(v) for v in value])  # type: ignore[attr-defined]
    if kind == ir.AttrType.TENSOR and isinstance(value, np.ndarray):
        return ir.attr_tensor(name, ir.NumpyTensor(value))
    return ir.infer_attr(name, value)


def _model(
    instance: Instance,
    leaves: Mapping[str, np.ndarray[Any, Any]],
    nodes: Sequence[NodeSpec],
    outputs: Sequence[str],
) -> bytes:
    values: dict[str, ir.Value] = {}
    graph_inputs: list[ir.Value] = []
    initializers: list[ir.Value] = []
    for leaf in instance.leaves:
        if not _is_read(leaf.name, nodes) and leaf.name not in outputs:
            continue
        array = leaves[leaf.name]
        dtype = leaf.tensor.dtype
        value_type = ir.TensorType(dtype, tuple(int(d) for d in array.shape))
        if leaf.kind == "input":
            value = ir.Value(leaf.name, type=value_type)
            graph_inputs.append(value)
        else:
            tensor = ir.NumpyTensor(np.asarray(array, dtype=ir.numpy_dtype(dtype)))
            value = ir.Value(leaf.name, type=value_type, const_value=tensor)
            initializers.append(value)
        values[leaf.name] = value
    built: list[ir.Node] = []
    for spec in nodes:
        inputs = [values[name] if name else None for name in spec.inputs]
        attributes = [
            _attribute(spec, name, value, instance.opset)
            for name, value in spec.attributes.items()
            if value is not None
        ]
        node = ir.Node(
            spec.op_type, inputs, attributes, domain=spec.domain, outputs=list(spec.outputs)
        )
        for value in node.outputs:
            values[value.name] = value
        built.append(node)
    graph_outputs: list[ir.Value] = []
    for position, name in enumerate(outputs):
        copy = ir.Node("Identity", [values[name]], [], outputs=[f"output{position}"])
        built.append(copy)
        graph_outputs.append(copy.outputs[0])
    graph = ir.Graph(graph_inputs, graph_outputs, built, initializers, name="replay")
    model = ir.Model(graph, ir_version=10, opset_imports={"": instance.opset})
    return bytes(ir.to_onnx(model).SerializeToString())


class _RunError(Exception):
    pass


def _run(model: bytes, feeds: Mapping[str, np.ndarray[Any, Any]]) -> list[np.ndarray[Any, Any]]:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 4
    options.intra_op_num_threads = 1
    try:
        session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
        results = session.run(None, dict(feeds))
    except Exception as exc:  # onnxruntime's error types are not importable
        raise _RunError(str(exc).splitlines()[0][:300]) from exc
    return [np.asarray(r) for r in results]


def _original_poison(instance: Instance, model: z3.ModelRef) -> list[np.ndarray[Any, Any] | None]:
    found: list[np.ndarray[Any, Any] | None] = []
    for tensor in instance.lhs:
        try:
            found.append(concrete(tensor, model).poison)
        except NotConcreteError:
            found.append(None)
    return found


def _difference(
    a: np.ndarray[Any, Any],
    b: np.ndarray[Any, Any],
    poison: np.ndarray[Any, Any] | None,
    signed_zeros: bool,
) -> tuple[str, object, object] | None:
    """Where and how two outputs differ (None when they agree), as the prover compares."""
    if a.dtype != b.dtype:
        return "'s dtype", a.dtype.name, b.dtype.name
    if a.shape != b.shape:
        return "'s shape", list(a.shape), list(b.shape)
    if a.dtype.kind == "f":
        same = (a == b) | (np.isnan(a) & np.isnan(b))
        if signed_zeros:
            same &= np.signbit(a) == np.signbit(b)
    else:
        same = a == b
    if poison is not None and poison.shape == same.shape:
        same = same | poison
    if bool(np.all(same)):
        return None
    index = tuple(int(i) for i in np.argwhere(~same)[0])
    return f" at {list(index)}", a[index].item(), b[index].item()
