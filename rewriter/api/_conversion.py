"""Opset conversion that keeps a model onnxruntime runs runnable (`--target-opset`).

onnxruntime's CPU kernels are registered per opset range: HardSigmoid on double runs at opset
18 and has no kernel from opset 21 on, so onnx's version converter can turn a model that runs
into one that does not load. The engine declines a rule's rewrite that does this (issue 16,
class 7); a conversion the user asked for is refused with the reason instead, as a conversion
onnx cannot make is.
"""

from __future__ import annotations

import ir
from rewriter.engine import Runnable, dtype_of


def convert_keeping_runnable(model: ir.Model, target: int, available: Runnable | None) -> ir.Model:
    """`model` converted to default-domain opset `target` (see `ir.convert_version`).

    With `available` (onnxruntime's kernels), a conversion after which some node has no kernel,
    where every node of `model` has one, is refused.

    Raises:
        ir.ConversionError: the converter cannot convert the model, or the converted model
            would not run on onnxruntime where the original does.
    """
    converted = ir.convert_version(model, target)
    if available is None:
        return converted
    ir.infer_types(converted)
    lost = _first_without_kernel(converted, available)
    if lost is None:
        return converted
    ir.infer_types(model)
    if _first_without_kernel(model, available) is not None:
        return converted  # the original does not run on onnxruntime either
    current = model.opset_imports.get("", model.opset_imports.get("ai.onnx"))
    raise ir.ConversionError(
        f"cannot convert from opset {current} to {target}: onnxruntime has no kernel for "
        f"{_kind(lost)} at opset {target}, and runs the model at opset {current}"
    )


def _first_without_kernel(model: ir.Model, available: Runnable) -> ir.Node | None:
    """The first node (nested graphs included) onnxruntime has no kernel for, or None."""
    opsets = dict(model.opset_imports)
    for node in model.graph.all_nodes():
        if node.op_type != "Constant" and available(node, opsets) is False:
            return node
    return None


def _kind(node: ir.Node) -> str:
    """`HardSigmoid(double)`: the op and the element types of its inputs."""
    types = []
    for value in node.inputs:
        dtype = dtype_of(value) if value is not None else None
        types.append(dtype.onnx_name if dtype is not None else "-")
    return f"{node.op_type}({', '.join(types)})"
