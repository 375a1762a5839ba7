"""Built-in passes: work that is not a local pattern (constant folding, dead code, CSE).

Each pass takes the model and returns a `PassResult`: whether it changed anything, the
nodes around its changes (for the rewrite worklist), and per graph what it removed, replaced
and added (for the trace). Passes run only when a loaded rules file declares them
(`pass fold_constants { max_output_bytes = 1048576 }`). A function body cannot hold
initializers, so constants folded there become `Constant` nodes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
from typing import Any

import numpy as np

import ir
from rewriter.engine import _facts, _trace
from rewriter.engine._fold import FoldConstantsOptions, fold_constants
from rewriter.engine._pass import (
    NO_CONTEXT,
    ChangeLog,
    PassContext,
    PassDefinition,
    PassResult,
    pass_table,
)
from rewriter.engine._purity import Purity
from rewriter.engine._structure import (
    FlattenConcatsOptions,
    InlineConstantIfsOptions,
    flatten_concats,
    inline_constant_ifs,
)
from rewriter.engine._transposes import OptimizeTransposesOptions, optimize_transposes

logger = logging.getLogger(__name__)


_STANDARD = ("", "ai.onnx", "ai.onnx.ml")


def _graphs(model: ir.Model) -> list[ir.Graph]:
    return list(model.graphs())


# ---------------------------------------------------------------------------------------------
# Dead code


@dataclasses.dataclass(frozen=True, slots=True)
class NoOptions:
    """The options of a pass that takes none."""


def eliminate_dead_code(
    model: ir.Model, options: NoOptions, context: PassContext = NO_CONTEXT
) -> PassResult:
    """Remove nodes whose outputs nothing reads, and initializers nothing reads."""
    removed = 0
    touched: dict[ir.Node, None] = {}
    log = ChangeLog()
    for graph in reversed(_graphs(model)):
        for node in reversed(ir.topological_order(graph)):
            if any(out.num_uses() or out.is_graph_output() for out in node.outputs):
                continue
            for value in node.inputs:
                if value is not None and value.producer() is not None:
                    touched[value.producer()] = None  # type: ignore[index]
            graph.remove(node)
            touched.pop(node, None)
            log.removed(graph, _trace.distinct_label(node))
            removed += 1
        for name, value in list(graph.initializers.items()):
            if not value.num_uses() and not value.is_graph_output() and not value.is_graph_input():
                graph.remove_initializer(name)
                log.removed(graph, _trace.value_label(value))
                removed += 1
    return PassResult(
        "eliminate_dead_code",
        removed > 0,
        tuple(n for n in touched if n.graph),
        removed,
        log.changes(),
    )


# ---------------------------------------------------------------------------------------------
# Common subexpressions


def _attr_key(attr: ir.Attr) -> object:
    value = attr.value
    if isinstance(value, ir.Tensor):
        return (attr.name, int(attr.type), _tensor_key(value))
    if isinstance(value, tuple):
        return (
            attr.name,
            int(attr.type),
            tuple(_tensor_key(v) if isinstance(v, ir.Tensor) else v for v in value),
        )
    return (attr.name, int(attr.type), value, attr.ref_attr_name)


def _tensor_key(tensor: ir.Tensor) -> object:
    if tensor.is_external or tensor.size > 1 << 20:
        return ("tensor", id(tensor))
    # np.asarray, not ascontiguousarray: the latter turns a 0-d array into a 1-d one.
    array = np.asarray(tensor.numpy())
    if array.dtype == object:
        return ("strings", tuple(array.reshape(-1).tolist()), array.shape)
    return (tensor.dtype.onnx_name, array.shape, hashlib.sha256(array.tobytes()).hexdigest())


def _merge_equal_dims(graph: ir.Graph, touched: dict[ir.Node, None], log: ChangeLog) -> int:
    """`Gather(Shape(a), i)` and `Gather(Shape(b), j)` reading the same symbolic dim: one.

    Exporters read the batch and sequence sizes back from many tensors (every attention layer
    of an SDPA export); when the facts give those dims one symbol they are one value, so the
    later computations read the first. Symbols are facts here (declared, or related by
    `ir.infer_types`, which never merges two symbols); invented ones (`unk__7`) are unique.
    """
    first: dict[object, ir.Value] = {}
    merged = 0
    for node in ir.topological_order(graph):
        key = _dim_key(node)
        if key is None:
            continue
        out = node.outputs[0]
        kept = first.setdefault(key, out)
        if kept is out or out.is_graph_output():
            continue
        for use in out.uses:
            use.node.replace_input_with(use.index, kept)
            touched[use.node] = None
        shape_node = node.inputs[0].producer() if node.inputs[0] is not None else None
        graph.remove(node)
        log.removed(graph, _trace.distinct_label(node))
        producer = kept.producer()
        if producer is not None:
            log.created(graph, _trace.distinct_label(producer))
        if shape_node is not None and not any(
            o.num_uses() or o.is_graph_output() for o in shape_node.outputs
        ):
            graph.remove(shape_node)
            log.removed(graph, _trace.distinct_label(shape_node))
        merged += 1
    return merged


def _dim_key(node: ir.Node) -> object | None:
    """What a `Gather(Shape(x), i)` computes, when it is symbolic dims of `x` (else None)."""
    if node.op_type != "Gather" or node.domain not in ("", "ai.onnx") or len(node.inputs) != 2:
        return None
    shape_value, index = node.inputs
    if shape_value is None or index is None or _int_attribute(node, "axis", 0) != 0:
        return None
    shape_node = shape_value.producer()
    if (
        shape_node is None
        or shape_node.op_type != "Shape"
        or shape_node.domain not in ("", "ai.onnx")
    ):
        return None
    source = shape_node.inputs[0] if shape_node.inputs else None
    dims = _facts.shape_of(source) if source is not None else None
    picked = _facts.const_array(index)
    if dims is None or picked is None or picked.dtype.kind not in "iu" or picked.size != 1:
        return None
    start = _int_attribute(shape_node, "start", 0)
    end = _int_attribute(shape_node, "end", None)
    window = list(dims)[start:end]
    position = int(picked.reshape(-1)[0])
    if not -len(window) <= position < len(window):
        return None
    dim = window[position]
    if not isinstance(dim, str):
        return None  # a static dim is folded by a rule; an unknown one is nothing to compare
    return ("dim", dim, picked.ndim)


def _int_attribute(node: ir.Node, name: str, default: int | None) -> Any:
    value = node.attribute(name, default)
    return int(value) if isinstance(value, int | np.integer) else default


def _cheap_tensor_key(tensor: ir.Tensor) -> object:
    """dtype, shape and the first and last few elements: equal tensors have equal keys."""
    array = np.asarray(tensor.numpy()).reshape(-1)
    if array.dtype == object:
        return ("strings", tensor.shape, tuple(array[:4].tolist()))
    edges = np.concatenate([array[:8], array[-8:]]) if array.size > 16 else array
    return (tensor.dtype.onnx_name, tuple(tensor.shape), edges.tobytes())


def eliminate_common_subexpressions(
    model: ir.Model, options: NoOptions, context: PassContext = NO_CONTEXT
) -> PassResult:
    """Merge nodes with the same op, attributes and inputs, and initializers with equal contents."""
    merged = 0
    touched: dict[ir.Node, None] = {}
    log = ChangeLog()
    purity = Purity(model)
    for graph in _graphs(model):
        merged += _merge_initializers(graph, touched, log)
        merged += _merge_equal_dims(graph, touched, log)
        seen: dict[object, ir.Node] = {}
        for node in ir.topological_order(graph):
            if any(True for _ in node.subgraphs()) or not purity.is_pure(node):
                continue
            if any(out.is_graph_output() for out in node.outputs):
                continue
            key = (
                node.domain,
                node.op_type,
                node.overload,
                tuple(id(v) if v is not None else None for v in node.inputs),
                tuple(sorted((_attr_key(a) for a in node.attributes.values()), key=repr)),
                len(node.outputs),
            )
            first = seen.get(key)
            if first is None:
                seen[key] = node
                continue
            for dup, keep in zip(node.outputs, first.outputs, strict=False):
                for use in dup.uses:
                    use.node.replace_input_with(use.index, keep)
                    touched[use.node] = None
            graph.remove(node)
            touched.pop(node, None)
            log.removed(graph, _trace.distinct_label(node))
            log.created(graph, _trace.distinct_label(first))
            merged += 1
    return PassResult(
        "eliminate_common_subexpressions",
        merged > 0,
        tuple(n for n in touched if n.graph),
        merged,
        log.changes(),
    )


def _merge_initializers(graph: ir.Graph, touched: dict[ir.Node, None], log: ChangeLog) -> int:
    # Tensors are first told apart by a cheap key (dtype, shape, a few elements); only those
    # that share it are hashed in full, so weights that differ are not read twice over.
    seen: dict[object, ir.Value] = {}
    candidates: dict[object, list[ir.Value]] = {}
    merged = 0
    for name, value in list(graph.initializers.items()):
        tensor = value.const_value
        if tensor is None or value.is_graph_input() or value.is_graph_output():
            continue
        if tensor.is_external or tensor.size > 1 << 20:
            continue
        rivals = candidates.setdefault(_cheap_tensor_key(tensor), [])
        rivals.append(value)
        if len(rivals) == 1:
            continue
        if len(rivals) == 2:
            first_tensor = rivals[0].const_value
            assert first_tensor is not None, "candidates hold initializers"
            seen.setdefault(_tensor_key(first_tensor), rivals[0])
        key = _tensor_key(tensor)
        first = seen.get(key)
        if first is None:
            seen[key] = value
            continue
        for use in value.uses:
            use.node.replace_input_with(use.index, first)
            touched[use.node] = None
        graph.remove_initializer(name)
        log.removed(graph, _trace.value_label(value))
        log.created(graph, _trace.value_label(first))
        merged += 1
    return merged


FOLD_CONSTANTS = PassDefinition(
    "fold_constants",
    "evaluate nodes whose inputs are all constant",
    FoldConstantsOptions,
    fold_constants,
)
ELIMINATE_DEAD_CODE = PassDefinition(
    "eliminate_dead_code",
    "remove nodes and initializers nothing reads",
    NoOptions,
    eliminate_dead_code,
)
ELIMINATE_COMMON_SUBEXPRESSIONS = PassDefinition(
    "eliminate_common_subexpressions",
    "merge equal nodes and equal initializers",
    NoOptions,
    eliminate_common_subexpressions,
)

OPTIMIZE_TRANSPOSES = PassDefinition(
    "optimize_transposes",
    "sink Transposes through layout-agnostic ops until they cancel or compose",
    OptimizeTransposesOptions,
    optimize_transposes,
)

INLINE_CONSTANT_IFS = PassDefinition(
    "inline_constant_ifs",
    "replace an If whose condition is a constant by the branch it takes",
    InlineConstantIfsOptions,
    inline_constant_ifs,
)

FLATTEN_CONCATS = PassDefinition(
    "flatten_concats",
    "splice a Concat read only by a Concat on the same axis into it",
    FlattenConcatsOptions,
    flatten_concats,
)

BUILTIN_PASSES = pass_table(
    FOLD_CONSTANTS,
    ELIMINATE_DEAD_CODE,
    ELIMINATE_COMMON_SUBEXPRESSIONS,
    OPTIMIZE_TRANSPOSES,
    INLINE_CONSTANT_IFS,
    FLATTEN_CONCATS,
)
"""The engine's own passes, by name."""
