"""onnxruntime's own-domain ops whose types onnxruntime infers as a standard op's (data).

onnxruntime defines many ops in its own domain (`com.microsoft`); onnx has no schema for any
of them, so onnx's inference leaves their outputs, and everything computed from them,
without types. For several of them onnxruntime's schema hands the node to onnx's inference
function of a standard op (onnxruntime/core/graph/contrib_ops/quantization_defs.cc,
contrib_defs.cc, bert_defs.cc):

* `DynamicQuantizeLSTM`: `ONNX_NAMESPACE::RNNShapeInference`, the LSTM's;
* `DynamicQuantizeMatMul`, `MatMulIntegerToFloat`: `matmulShapeInference(ctx, 0, 1)`;
* `QLinearAdd`, `QLinearMul`: bidirectional broadcasting of inputs 0 and 3, Add's and Mul's;
* `FusedConv`: `convPoolShapeInference(ctx, true, false, 0, 1)`, the Conv's;
* `FusedGemm`: the Gemm's (`(M, N)` from `transA`, `transB`);
* `Gelu`, `FastGelu`, `QuickGelu`, `BiasGelu`, `QLinearSigmoid`, `QLinearLeakyRelu`:
  `propagateShapeAndTypeFromFirstInput`, Identity's.

This table says, for each, the standard op and the version whose inference is that function,
which input of the node stands for each of the standard op's inputs (and whether its dims mean
the same there: DynamicQuantizeLSTM's weights are laid out `[D, I, 4H]` where LSTM's are
`[D, 4H, I]`, and the inference reads neither), which input gives the outputs their element
type, and which attributes the standard op reads. The typing itself is onnx's: `_infer` runs
onnx's inference of the standard op on a node built from this table. Nothing here computes a
shape, and nothing here loads onnxruntime.

Ops whose onnxruntime shape function is their own (Attention, MultiHeadAttention,
SkipLayerNormalization's statistics, ...) are not listed: their outputs stay without facts
rather than get a guess.
"""

from __future__ import annotations

import dataclasses

_RUNTIME_DOMAIN = "com.microsoft"


@dataclasses.dataclass(frozen=True, slots=True)
class StandInput:
    """Which input of the contrib node stands for one input of the standard op.

    Attributes:
        source: the contrib node's input position.
        same_dims: whether its dims mean the same to the standard op (else only its
            element type is told: the layout differs and the inference does not read it).
    """

    source: int
    same_dims: bool = True


@dataclasses.dataclass(frozen=True, slots=True)
class ContribOp:
    """An onnxruntime op whose output types are those of a standard op on mapped inputs.

    Attributes:
        domain: the op's domain.
        op_type: the op's name.
        standard_op: the standard (default-domain) op whose inference onnxruntime uses.
        standard_version: the version of `standard_op` whose inference that is.
        inputs: per input of the standard op, the contrib input standing for it (None: not
            given).
        dtype_from: the contrib input whose element type the outputs have; the standard op's
            inputs bound to its output's type parameter are told that element type (the
            contrib op takes quantized weights where the standard op takes floats).
        attributes: the attributes the standard op reads (the others, such as a fused
            activation, are left out).
    """

    domain: str
    op_type: str
    standard_op: str
    standard_version: int
    inputs: tuple[StandInput | None, ...]
    dtype_from: int
    attributes: tuple[str, ...] = ()


def _first_input_like(op_type: str) -> ContribOp:
    """An op whose output has its first input's type and shape (Identity's inference)."""
    return ContribOp(_RUNTIME_DOMAIN, op_type, "Identity", 16, (StandInput(0),), 0)


_CONV_ATTRIBUTES = ("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides")
_RNN_ATTRIBUTES = (
    "activation_alpha",
    "activation_beta",
    "activations",
    "clip",
    "direction",
    "hidden_size",
    "input_forget",
)

CONTRIB_OPS: tuple[ContribOp, ...] = (
    ContribOp(
        _RUNTIME_DOMAIN,
        "DynamicQuantizeLSTM",
        "LSTM",
        7,
        (
            StandInput(0),
            StandInput(1, same_dims=False),
            StandInput(2, same_dims=False),
            StandInput(3),
            StandInput(4),
            StandInput(5),
            StandInput(6),
            StandInput(7),
        ),
        0,
        _RNN_ATTRIBUTES,
    ),
    ContribOp(
        _RUNTIME_DOMAIN, "DynamicQuantizeMatMul", "MatMul", 13, (StandInput(0), StandInput(1)), 0
    ),
    ContribOp(
        _RUNTIME_DOMAIN, "MatMulIntegerToFloat", "MatMul", 13, (StandInput(0), StandInput(1)), 2
    ),
    ContribOp(_RUNTIME_DOMAIN, "QLinearAdd", "Add", 14, (StandInput(0), StandInput(3)), 0),
    ContribOp(_RUNTIME_DOMAIN, "QLinearMul", "Mul", 14, (StandInput(0), StandInput(3)), 0),
    ContribOp(
        _RUNTIME_DOMAIN,
        "FusedConv",
        "Conv",
        11,
        (StandInput(0), StandInput(1), StandInput(2)),
        0,
        _CONV_ATTRIBUTES,
    ),
    ContribOp(
        _RUNTIME_DOMAIN,
        "FusedGemm",
        "Gemm",
        13,
        (StandInput(0), StandInput(1), StandInput(2)),
        0,
        ("alpha", "beta", "transA", "transB"),
    ),
    _first_input_like("Gelu"),
    _first_input_like("FastGelu"),
    _first_input_like("QuickGelu"),
    _first_input_like("BiasGelu"),
    _first_input_like("QLinearSigmoid"),
    _first_input_like("QLinearLeakyRelu"),
)

_BY_NAME: dict[tuple[str, str], ContribOp] = {(op.domain, op.op_type): op for op in CONTRIB_OPS}


def find_contrib_op(op_type: str, domain: str) -> ContribOp | None:
    """The table's entry for onnxruntime's op `domain.op_type`, or None."""
    return _BY_NAME.get((domain, op_type))


__all__ = ["CONTRIB_OPS", "ContribOp", "StandInput", "find_contrib_op"]
