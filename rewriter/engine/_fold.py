"""The `fold_constants` pass: nodes whose inputs are all constant become constants.

A folded value must be what onnxruntime computes for the node it replaces, with the dtype and
shape the node declares: the foldable nodes of a graph run in one onnxruntime session
(`_runtime.run_nodes`), and a result is kept only when onnxruntime produced a tensor whose
dtype matches the node's known output type. Nodes onnxruntime cannot run are left as they
are (one session per node finds which, when the batch fails). Shape and Size of values whose
shape is fully static fold from the facts, without running anything, and so does any small
integer value whose elements the facts know (`ir.shape_elements`: the head size read back
from a tensor whose other dims are dynamic, through Shape, Gather, Slice, Concat, Cast, ...).
Only pure standard ops
fold (`_purity`); a node whose result would exceed `max_output_bytes` stays, but the nodes
after it may still fold (it then goes as dead code). DequantizeLinear never folds: it holds a
quantized weight on purpose. A scale of a MatMul computed from a shape stays unfolded where
onnxruntime would fuse the constant into its MatMul inexactly (`_matmul_scales`; the pass
option `keep_matmul_scales = 0` folds it).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

import ir
from rewriter.engine import _facts, _trace
from rewriter.engine._matmul_scales import unfused_scales
from rewriter.engine._pass import (
    NO_CONTEXT,
    ChangeLog,
    PassContext,
    PassResult,
    check_options,
    option,
)
from rewriter.engine._purity import Purity
from rewriter.engine._runtime import RuntimeEvaluationError, run_nodes

logger = logging.getLogger(__name__)

_STANDARD = ("", "ai.onnx", "ai.onnx.ml")
# Never folded: a Constant is already one; a DequantizeLinear of a constant is a quantized
# weight kept so on purpose (folding it would store the float weight again; runtimes fuse
# it into their integer and 4-bit kernels), as onnxruntime's own constant folding leaves it.
_KEPT = frozenset({"Constant", "DequantizeLinear"})
# Constant inputs larger than this are not read to fold a node (a weight is not worth it).
_INPUT_ELEMENTS_LIMIT = 1 << 21


@dataclasses.dataclass(frozen=True, slots=True)
class FoldConstantsOptions:
    """Options of `pass fold_constants`."""

    max_output_bytes: int = option(1 << 20, "largest tensor a fold may produce, in bytes")
    keep_matmul_scales: int = option(
        1,
        "1: leave a MatMul's scale computed from a shape unfolded where onnxruntime's "
        "MatMulScaleFusion would fuse the constant inexactly (see _matmul_scales); 0: fold it",
    )

    def __post_init__(self) -> None:
        check_options(self)


def fold_constants(
    model: ir.Model, options: FoldConstantsOptions, context: PassContext = NO_CONTEXT
) -> PassResult:
    """Fold every node of every graph whose inputs are all constant (see the module docstring)."""
    limit = options.max_output_bytes
    purity = Purity(model)
    folded = 0
    touched: dict[ir.Node, None] = {}
    log = ChangeLog()
    for graph in list(model.graphs()):
        region = _foldable_region(graph, purity, _default_opset(model.opset_imports))
        if not region.nodes:
            continue
        values = _evaluate(region, model.opset_imports)
        kept = unfused_scales(region.nodes, values) if options.keep_matmul_scales else set()
        for node in region.nodes:
            if node in kept:
                continue
            results = [values.get(out) for out in node.outputs if out.name]
            if any(r is None or r.nbytes > limit for r in results):
                continue
            for out in node.outputs:
                if not out.name:
                    continue
                array = values[out]
                constant = _folded_constant(model, graph, node, out, array, log)
                for use in out.uses:
                    use.node.replace_input_with(use.index, constant)
                    touched[use.node] = None
            graph.remove(node)
            touched.pop(node, None)
            log.removed(graph, _trace.distinct_label(node))
            folded += 1
    return PassResult(
        "fold_constants", folded > 0, tuple(n for n in touched if n.graph), folded, log.changes()
    )


@dataclasses.dataclass(frozen=True, slots=True)
class _Region:
    """The nodes of a graph that compute from constants only, in topological order.

    `from_facts` holds the outputs of those whose values the facts give without running
    anything.
    """

    nodes: list[ir.Node]
    from_facts: dict[ir.Node, list[np.ndarray[Any, Any]]]


def _foldable_region(graph: ir.Graph, purity: Purity, opset: int) -> _Region:
    """The nodes of `graph` that compute from constants only (see `_Region`)."""
    region = _Region([], {})
    computed: set[ir.Value] = set()
    elements = ir.ShapeElements(opset)  # the graph does not change while it is read
    for node in ir.topological_order(graph):
        if not _is_foldable(node, purity):
            continue
        static = _fold_shape_op(node, opset, elements)
        if static is not None:
            region.from_facts[node] = static
        elif not all(
            value is None or value in computed or _small_constant(value) for value in node.inputs
        ):
            continue
        region.nodes.append(node)
        computed.update(out for out in node.outputs if out.name)
    return region


def _default_opset(opsets: Mapping[str, int]) -> int:
    return opsets.get("", opsets.get("ai.onnx", 0))


def _is_foldable(node: ir.Node, purity: Purity) -> bool:
    if node.domain not in _STANDARD or node.op_type in _KEPT or not node.inputs:
        return False
    if any(True for _ in node.subgraphs()) or not purity.is_pure(node):
        return False
    if any(out.is_graph_output() for out in node.outputs):
        return False
    # Only tensors become constants (a sequence or an optional cannot be an initializer).
    return all(
        not out.name or isinstance(_facts.value_type(out), ir.TensorType | None)
        for out in node.outputs
    )


def _small_constant(value: ir.Value) -> bool:
    size = _facts.const_size(value)
    return size is not None and size <= _INPUT_ELEMENTS_LIMIT


def _evaluate(region: _Region, opsets: Mapping[str, int]) -> dict[ir.Value, np.ndarray[Any, Any]]:
    """Every output of the region's nodes that could be computed (facts, else onnxruntime)."""
    values: dict[ir.Value, np.ndarray[Any, Any]] = {}
    to_run: list[ir.Node] = []
    for node in region.nodes:
        static = region.from_facts.get(node)
        if static is not None:
            values.update(zip(node.outputs, static, strict=False))
        else:
            to_run.append(node)
    if not to_run:
        return values
    try:
        values.update(_run(to_run, values, opsets))
    except RuntimeEvaluationError as exc:
        # One node onnxruntime cannot run fails the batch: find it, node by node.
        logger.debug("folding node by node: %s", exc)
        for node in to_run:
            try:
                values.update(_run([node], values, opsets))
            except RuntimeEvaluationError as reason:
                logger.debug("not folding %s: %s", _trace.distinct_label(node), reason)
    return {v: a for v, a in values.items() if _has_declared_type(v, a)}


def _run(
    nodes: Sequence[ir.Node],
    known: Mapping[ir.Value, np.ndarray[Any, Any]],
    opsets: Mapping[str, int],
) -> dict[ir.Value, np.ndarray[Any, Any]]:
    """Run `nodes` with onnxruntime on the constants and computed values they read."""
    produced = {out for node in nodes for out in node.outputs}
    inputs: dict[str, np.ndarray[Any, Any]] = {}
    for node in nodes:
        for value in node.inputs:
            if value is None or value in produced or value.name in inputs:
                continue
            array = known.get(value)
            if array is None:
                array = _facts.const_array(value)
            if array is None:
                raise RuntimeEvaluationError(f"`{value.name}` is not known")
            inputs[value.name] = array
    outputs = [out for node in nodes for out in node.outputs if out.name]
    results = run_nodes(nodes, inputs, [out.name for out in outputs], opsets)
    return {out: results[out.name] for out in outputs}


def _has_declared_type(value: ir.Value, array: np.ndarray[Any, Any]) -> bool:
    """False when the value's known dtype or static dims differ from what was computed."""
    if array.dtype == object:
        return False  # strings: exact, but a folded string tensor is not worth the doubt
    known = _facts.value_type(value)
    if not isinstance(known, ir.TensorType):
        return True
    if known.dtype and ir.DataType.from_numpy(array.dtype) != known.dtype:
        return False
    if known.shape is None:
        return True
    if len(known.shape) != array.ndim:
        return False
    return all(
        not isinstance(d, int) or d == n for d, n in zip(known.shape, array.shape, strict=True)
    )


def _folded_constant(
    model: ir.Model,
    graph: ir.Graph,
    node: ir.Node,
    out: ir.Value,
    array: np.ndarray[Any, Any],
    log: ChangeLog,
) -> ir.Value:
    """The constant replacing `out` of the folded `node`: an initializer, or a Constant node.

    The constant takes over the output's name (the node goes away once its uses moved).
    """
    tensor = ir.NumpyTensor(array, out.name)
    if _facts.can_hold_initializers(graph, model):
        value = ir.Value(out.name, const_value=tensor)
        graph.add_initializer(value)
        log.created(graph, _trace.value_label(value))
        return value
    value = ir.Value(out.name, type=ir.TensorType(tensor.dtype, tuple(tensor.shape)))
    constant = ir.Node(
        "Constant",
        [],
        [ir.attr_tensor("value", tensor)],
        outputs=[value],
        name=_constant_node_name(node, out),
    )
    graph.append(constant)
    log.created(graph, _trace.distinct_label(constant))
    return value


def _constant_node_name(node: ir.Node, out: ir.Value) -> str:
    """The folded node's name for the Constant replacing its only output, else a derived one."""
    if node.name and len(node.outputs) == 1:
        return node.name
    return f"{out.name}/Constant"


def _fold_shape_op(
    node: ir.Node, opset: int, elements: ir.ShapeElements
) -> list[np.ndarray[Any, Any]] | None:
    """The outputs of `node` from the facts alone, or None when they do not give them."""
    if node.op_type not in ("Shape", "Size"):
        return _known_elements(node, elements)
    if not node.inputs or node.inputs[0] is None:
        return None
    dims = _facts.shape_of(node.inputs[0])
    if dims is None or not all(isinstance(d, int) for d in dims):
        return None
    static = [int(d) for d in dims]  # type: ignore[arg-type]
    if node.op_type == "Size":
        return [np.array(int(np.prod(static)), dtype=np.int64)]
    start: Any = node.attribute("start", 0)
    end: Any = node.attribute("end", None)
    rank = len(static)
    start_i = max(0, min(rank, int(start) + rank if int(start) < 0 else int(start)))
    end_i = (
        rank if end is None else max(0, min(rank, int(end) + rank if int(end) < 0 else int(end)))
    )
    return [np.array(static[start_i:end_i], dtype=np.int64)]


# Integer dtypes a shape value may have (what shape computations use), and the booleans
# that comparisons of shape values give (the facts hold them as 0 and 1: an exported
# `Where(Equal(shape, -1), ones, shape)` folds without running anything).
_SHAPE_DTYPES = {
    ir.DataType.INT64: np.int64,
    ir.DataType.INT32: np.int32,
    ir.DataType.BOOL: np.bool_,
}


def _known_elements(node: ir.Node, elements: ir.ShapeElements) -> list[np.ndarray[Any, Any]] | None:
    """The output of `node` from the facts, when they know every element of it.

    Only for a node with one output, a small integer or boolean tensor of rank 0 or 1; None
    otherwise.
    """
    if len(node.outputs) != 1 or node.op_type == "Constant":
        return None
    out = node.outputs[0]
    dtype = _facts.dtype_of(out)
    dims = _facts.shape_of(out)
    if dtype not in _SHAPE_DTYPES or dims is None or len(dims) > 1:
        return None
    static = [d for d in dims if isinstance(d, int)]
    if len(static) != len(dims):
        return None
    known = elements(out)
    if known is None or not all(isinstance(e, int) for e in known):
        return None
    if dtype == ir.DataType.BOOL and not all(e in (0, 1) for e in known):
        return None
    array: np.ndarray[Any, Any] = np.array(known, dtype=_SHAPE_DTYPES[dtype])
    if array.size != int(np.prod(static)):
        return None
    return [array.reshape(static)]
