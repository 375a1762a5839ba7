"""Which folds `fold_constants` leaves out so onnxruntime computes the model as it did.

onnxruntime's `ORT_ENABLE_ALL` optimizer fuses a Mul or Div by a *constant* scalar on a
MatMul's input or output into a `com.microsoft.FusedMatMul` whose alpha is the product of the
scales (its MatMulScaleFusion: `Mul(v, MatMul(Mul(t, A), Mul(u, B)))` becomes
`FusedMatMul(A, B, alpha=t*u*v)`). Its own header says the result may differ in floating
point: the scales are multiplied first and applied once, where the model rounds after each.

A scale the model computes from a tensor's shape (`sqrt(1 / sqrt(head_dim))`, as PyTorch
exports scaled dot-product attention) is no constant to onnxruntime, so the original runs
unfused. Folded to the constant it always is, the scale lets that fusion fire, and the
rewritten model computes something else under onnxruntime's default settings, exact as the
fold is by ONNX semantics: on kokoro's ALBERT encoder the rounding moves its rounded
durations, and the audio comes out with another length.

So a fold is left out when it would turn a value onnxruntime cannot fold itself (it depends
on a tensor's shape, not on constants alone) into such a scale: a floating scalar that is
not a power of two (scaling by 2^k commutes with rounding, so the fusion would be exact),
read as the scale of a Mul or the divisor of a Div next to a MatMul or FusedMatMul. The
scale is kept with the shape-dependent nodes it is computed from; onnxruntime would fold a
constant left in between back into the scale.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

import ir
from rewriter.engine import _facts

_MATMULS = {("", "MatMul"), ("ai.onnx", "MatMul"), ("com.microsoft", "FusedMatMul")}
_STANDARD = ("", "ai.onnx")


def unfused_scales(
    region: Sequence[ir.Node], values: Mapping[ir.Value, np.ndarray[Any, Any]]
) -> set[ir.Node]:
    """The nodes of a fold region to keep so no shape-derived MatMul scale becomes constant.

    `region` is in topological order; `values` holds what its outputs fold to. A region node
    is shape-derived when it reads a value that is neither a constant tensor nor computed by
    a region node that is not.
    """
    produced = {out: node for node in region for out in node.outputs}
    dynamic: set[ir.Node] = set()
    for node in region:
        for value in node.inputs:
            if value is None:
                continue
            producer = produced.get(value)
            if producer is not None:
                constant = producer not in dynamic
            else:
                constant = _facts.constant_tensor_of(value) is not None
            if not constant:
                dynamic.add(node)
                break
    seeds = [
        node
        for node in region
        if node in dynamic
        and any(_is_matmul_scale(out, values.get(out)) for out in node.outputs if out.name)
    ]
    kept: set[ir.Node] = set()
    while seeds:
        node = seeds.pop()
        if node in kept:
            continue
        kept.add(node)
        for value in node.inputs:
            producer = produced.get(value) if value is not None else None
            if producer is not None and producer in dynamic:
                seeds.append(producer)
    return kept


def _is_matmul_scale(value: ir.Value, array: np.ndarray[Any, Any] | None) -> bool:
    """True when `value`, folded to `array`, is a scale onnxruntime would fuse inexactly."""
    if array is None or array.size != 1 or not _is_float(array):
        return False
    scalar = float(array.reshape(()).astype(np.float64))
    if np.isfinite(scalar) and scalar != 0.0 and np.frexp(scalar)[0] in (0.5, -0.5):
        return False  # a power of two: fused or not, the same result
    for use in value.uses:
        node = use.node
        if node.domain not in _STANDARD:
            continue
        scales = node.op_type == "Mul" or (node.op_type == "Div" and use.index == 1)
        if scales and _next_to_matmul(node, use.index):
            return True
    return False


def _is_float(array: np.ndarray[Any, Any]) -> bool:
    dtype = np.dtype(array.dtype)
    return bool(dtype.kind == "f" or dtype.name == "bfloat16")


def _next_to_matmul(scale: ir.Node, index: int) -> bool:
    """True when the Mul/Div `scale` scales a MatMul's input or output."""
    other = scale.inputs[1 - index] if len(scale.inputs) == 2 else None
    producer = other.producer() if other is not None else None
    if producer is not None and (producer.domain, producer.op_type) in _MATMULS:
        return True
    return any(
        (use.node.domain, use.node.op_type) in _MATMULS for out in scale.outputs for use in out.uses
    )
