"""Shape and type facts for a run: inferred once per model, before any rule is tried."""

from __future__ import annotations

import ir


def infer_facts(model: ir.Model) -> None:
    """Record inferred types of every value of `model` as facts rules can ask for.

    The facts come from the IR's own shape inference (`ir.infer_types`): onnx's inference
    first, then symbolic dims followed through the shape computations exporters write.
    """
    ir.infer_types(model)
