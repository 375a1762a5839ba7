"""Floating-point operations of a node, estimated from its inputs' and outputs' facts.

The counting (also what `--balance flops` balances):

* MatMul: 2 x M x K x N per batch element, i.e. 2 x (elements of the output) x K, where K
  is the last dim of the first input; Gemm likewise, plus the output's elements for a bias.
* Conv: 2 x (elements of the output) x (input channels / group) x (kernel elements), one
  multiply and one add per weight tap per output element; ConvTranspose: 2 x (elements of
  the input) x (output channels / group) x (kernel elements).
* Every other op: one operation per output element (elementwise and data movement alike).

Unknown (symbolic) dims count as 1, so the figure is per example; an output whose shape is
unknown counts 0.
"""

from __future__ import annotations

import math

import ir


def _elements(value: ir.Value | None) -> int | None:
    fact = ir.fact_type(value) if value is not None else None
    if not isinstance(fact, ir.TensorType) or fact.shape is None:
        return None
    return math.prod(d if isinstance(d, int) and d >= 0 else 1 for d in fact.shape)


def _dim(value: ir.Value | None, index: int) -> int | None:
    fact = ir.fact_type(value) if value is not None else None
    if not isinstance(fact, ir.TensorType) or fact.shape is None or not fact.shape:
        return None
    try:
        dim = fact.shape[index]
    except IndexError:
        return None
    return dim if isinstance(dim, int) and dim >= 0 else None


def node_flops(node: ir.Node) -> int:
    """Estimated floating-point operations of one run of `node` (see the module's counting)."""
    out = node.outputs[0] if node.outputs else None
    elements = _elements(out)
    if elements is None:
        return 0
    op = node.op_type if node.domain in ("", "ai.onnx") else ""
    first = node.inputs[0] if node.inputs else None
    if op in ("MatMul", "MatMulInteger"):
        depth = _dim(first, -1)
        return 2 * elements * depth if depth is not None else elements
    if op == "Gemm":
        trans_a = node.attribute("transA", 0)
        depth = _dim(first, 0 if trans_a else -1)
        bias = elements if len(node.inputs) > 2 and node.inputs[2] is not None else 0
        return (2 * elements * depth if depth is not None else elements) + bias
    if op in ("Conv", "ConvTranspose", "ConvInteger"):
        weight = node.inputs[1] if len(node.inputs) > 1 else None
        taps = _elements(weight)
        leading = _dim(weight, 0)  # Conv: output channels; ConvTranspose: input channels
        if taps is None or not leading:
            return elements
        if op == "ConvTranspose":
            # Each input element is spread over (output channels / group) x kernel taps.
            return 2 * (_elements(first) or 0) * (taps // leading)
        # Each output element sums (input channels / group) x kernel taps.
        return 2 * elements * (taps // leading)
    return elements
