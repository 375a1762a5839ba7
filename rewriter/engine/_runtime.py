"""Running part of a model on constants with onnxruntime, for constant folding.

A folded value must be what onnxruntime computes for the node it replaces (onnx's reference
evaluator differs: NaN in ReduceMax, LogSoftmax far from the maximum, int64 Pow, number
formatting in Cast to string, the dtype of ReduceSumSquare on int32). So folding runs the
foldable nodes in one onnxruntime session, with graph optimizations off and on the CPU.
onnxruntime is imported here, when a fold runs, and used only through its public API.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

import ir
from rewriter._errors import RewriteError


class RuntimeEvaluationError(RewriteError):
    """onnxruntime could not load or run the nodes (no kernel, or a failure on the inputs)."""


def run_nodes(
    nodes: Sequence[ir.Node],
    inputs: Mapping[str, np.ndarray[Any, Any]],
    outputs: Sequence[str],
    opset_imports: Mapping[str, int],
) -> dict[str, np.ndarray[Any, Any]]:
    """The values `outputs` that `nodes` compute from `inputs`, computed by onnxruntime.

    Raises:
        RuntimeEvaluationError: onnxruntime cannot load the nodes or fails on these inputs,
            or an output is not a tensor.
    """
    import onnxruntime as ort

    model = ir.evaluation_model(nodes, inputs, outputs, opset_imports)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 3  # this session's own errors are reported by the caller
    try:
        session = ort.InferenceSession(
            model.SerializeToString(), options, providers=["CPUExecutionProvider"]
        )
        results = session.run(list(outputs), dict(inputs))
    except Exception as exc:  # onnxruntime raises its own untyped error classes
        raise RuntimeEvaluationError(f"onnxruntime cannot evaluate them: {exc}") from exc
    found: dict[str, np.ndarray[Any, Any]] = {}
    for name, result in zip(outputs, results, strict=True):
        if not isinstance(result, np.ndarray):
            raise RuntimeEvaluationError(f"`{name}` is not a tensor")
        found[name] = result
    return found
