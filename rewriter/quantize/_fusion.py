"""Did onnxruntime fuse the quantized layers into its integer and 4-bit kernels?

The quantization rules write standard ONNX (QuantizeLinear / DequantizeLinear around Conv and
MatMul, DynamicQuantizeLinear + MatMulInteger) that onnxruntime turns into its own kernels
when it builds a session (QLinearConv, MatMulNBits, DynamicQuantizeMatMul, ...). When it does
not, the layer runs as dequantize-then-float: slower than float. This module builds a session
with `ORT_ENABLE_ALL`, has onnxruntime write the model it optimized
(`SessionOptions.optimized_model_filepath`), and finds the layers whose compute node is still
there as the plain op the rule wrote.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence

import ir

# The compute ops a quantized layer writes that onnxruntime replaces by a fused kernel when
# their inputs are dequantized (or, for MatMulInteger, dynamically quantized).
_FUSED_WHEN_DEQUANTIZED = frozenset({"MatMul", "Conv", "Gemm"})
_ALWAYS_FUSED = frozenset({"MatMulInteger"})


def fusion_targets(model: ir.Model, node_layers: Mapping[str, int]) -> dict[str, int]:
    """Nodes of the layers that onnxruntime should fuse: name -> layer."""
    targets = {}
    for graph in model.graphs():
        for node in graph:
            layer = node_layers.get(node.name)
            if layer is None or node.domain not in ("", "ai.onnx"):
                continue
            if node.op_type in _ALWAYS_FUSED or (
                node.op_type in _FUSED_WHEN_DEQUANTIZED and _reads_dequantized(node)
            ):
                targets[node.name] = layer
    return targets


def computes_in_float_until_fused(model: ir.Model, node_layers: Mapping[str, int]) -> bool:
    """Whether a layer's written form runs in float unless onnxruntime fuses it.

    DequantizeLinear -> Conv (static QDQ int8, blocked int4 MatMul) computes in float in a
    session without graph optimizations; onnxruntime's integer or 4-bit kernel, with its own
    rounding and saturation, runs only once it fuses them (`ORT_ENABLE_ALL`).
    """
    targets = fusion_targets(model, node_layers)
    return any(
        node.name in targets and node.op_type in _FUSED_WHEN_DEQUANTIZED
        for graph in model.graphs()
        for node in graph
    )


def _reads_dequantized(node: ir.Node) -> bool:
    for value in node.inputs:
        producer = value.producer() if value is not None else None
        if producer is not None and producer.op_type == "DequantizeLinear":
            return True
    return False


def fusion_misses(
    model: ir.Model,
    node_layers: Mapping[str, int],
    providers: Sequence[str] = ("CPUExecutionProvider",),
) -> dict[int, str]:
    """Layer -> the op onnxruntime left unfused in it (layers fused everywhere are absent).

    Returns an empty mapping when onnxruntime cannot build the session (the speed check and
    the final verification report that).
    """
    import onnxruntime as ort

    targets = fusion_targets(model, node_layers)
    if not targets:
        return {}
    with tempfile.TemporaryDirectory(prefix="rewrite-fusion-") as folder:
        path = os.path.join(folder, "optimized.onnx")
        options = ort.SessionOptions()
        options.log_severity_level = 3
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.optimized_model_filepath = path
        try:
            ort.InferenceSession(
                ir.to_onnx(model).SerializeToString(), options, providers=list(providers)
            )
            optimized = ir.load(path)
        except Exception:  # onnxruntime's error classes are not importable types
            return {}
    left = {}
    for graph in optimized.graphs():
        for node in graph:
            if node.name in targets and node.op_type in _FUSED_WHEN_DEQUANTIZED | _ALWAYS_FUSED:
                left[targets[node.name]] = node.op_type
    return left
