"""Shape and type facts for a run: inferred once per model, before any rule is tried."""

from __future__ import annotations

import ir
from rewriter.engine._symbolic import ort_symbolic_inference

# onnxruntime's symbolic engine first (relates dims through shape arithmetic), onnx's own
# when that one gives up.
INFERENCE_ENGINES = (ort_symbolic_inference, ir.onnx_inference)


def infer_facts(model: ir.Model) -> None:
    """Record inferred types of every value of `model` as facts rules can ask for."""
    ir.infer_types(model, INFERENCE_ENGINES)
