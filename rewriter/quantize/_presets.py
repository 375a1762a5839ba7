"""Presets: one command per intent (`rewrite MODEL --quantize int8|int4|float16`).

A preset names the rule files of `patterns/quantize/` it applies (after the default library
has reached its fixed point), the rules of those files it leaves out, and the opset it needs.
Which rules depend on what the caller gives:

* int8: MatMul and Gemm with constant weights get dynamic int8 with per-channel weight
  scales (onnxruntime fuses them into DynamicQuantizeMatMul / MatMulIntegerToFloat);
  embeddings are stored int8. Conv gets static int8 in QDQ form from calibration samples
  (fused into QLinearConv); without samples it is tried as dynamic int8 (ConvInteger), which
  the speed check keeps only where it is faster, and without the speed check Conv stays float.
  The elementwise Add and Mul between Convs stay float (int8_static.rw's QLinearAdd /
  QLinearMul rules are left out): each re-quantizes a feature map to 256 levels of one range
  per tensor, and on trained MobileNet-style models (the PP-OCRv4 detector and recognizer)
  those steps cost more accuracy than the Convs (CTC frames agreeing with float: 95.5% with
  them, 97.5% without) for a few percent of latency. Opset 14 at least, so that the default
  library fuses HardSwish written out as `x * Clip(x + 3, 0, 6) / 6` into one op before the
  precision rules see it (int8_static.rw then quantizes a Conv output that only HardSwish
  reads from just below -3). With samples, activation ranges are the 99.99th percentile of
  the values seen unless the caller names a method (`calibration_method`), the quantized
  Convs' biases are corrected afterwards (`correct_biases`;
  `CalibrationSamples.bias_correction`), and the layers that compute first on the model's
  inputs stay float (`first_layers`; `CalibrationSamples.first_layers_float`).
* int4: MatMul with a constant weight gets 4-bit blocked weights as DequantizeLinear +
  MatMul (opset 21; onnxruntime fuses it into MatMulNBits), activation-aware with samples.
  Where onnxruntime does not fuse that form and the model imports `com.microsoft`
  (`--add-opset com.microsoft=1`), `com.microsoft.MatMulNBits` is written instead.
* float16: the ops of float16.rw in float16 between Casts, inputs and outputs float32.

The rule files stay in `patterns/quantize/` (they are the language's); this module only
chooses among them.
"""

from __future__ import annotations

import dataclasses

PRESETS = ("int8", "int4", "float16")


@dataclasses.dataclass(frozen=True, slots=True)
class Preset:
    """What one preset applies.

    Attributes:
        name: `int8`, `int4` or `float16`.
        files: rule files, relative to the library's `quantize/` folder.
        excluded_rules: rules of those files the preset does not apply.
        min_opset: the default-domain opset its forms need (the model is converted up).
        opset_required: below `min_opset` none of its rules applies (int4's types come with
            opset 21); False where `min_opset` only enables more (int8: fused HardSwish).
        notes: what the caller should know about the choice (one line each).
    """

    name: str
    files: tuple[str, ...]
    excluded_rules: frozenset[str] = frozenset()
    min_opset: int | None = None
    notes: tuple[str, ...] = ()
    opset_required: bool = True


_INT8_DYNAMIC_ONLY = frozenset(
    {"quantize_matmul_int8_static", "quantize_gemm_int8_static", "quantize_gather_int8_static"}
)
_INT8_STATIC_CONV = frozenset({"quantize_conv_int8_static", "quantize_conv_relu_int8_static"})
# Elementwise steps of feature maps in QDQ (QLinearAdd / QLinearMul): `--rules` route only.
_INT8_STATIC_ELEMENTWISE = frozenset(
    {
        "quantize_add_int8_static",
        "quantize_add_constant_int8_static",
        "quantize_add_constant_first_int8_static",
        "quantize_mul_int8_static",
        "quantize_mul_constant_int8_static",
        "quantize_mul_constant_first_int8_static",
    }
)
# HardSwish is an op from opset 14: the default library fuses its written-out form there.
_INT8_OPSET = 14


def preset(name: str, *, calibrated: bool, speed_check: bool, runtime_ops: bool = False) -> Preset:
    """The preset `name` for a run with or without calibration samples and speed check.

    `runtime_ops`: the model imports `com.microsoft`, so onnxruntime's own ops may be written.

    Raises:
        ValueError: an unknown preset name.
    """
    if name == "int8":
        return _int8(calibrated=calibrated, speed_check=speed_check)
    if name == "int4":
        files: tuple[str, ...] = ("int4_weight_only.rw",)
        if runtime_ops:
            files += ("int4_matmul_nbits.rw",)
        return Preset("int4", files, frozenset(), 21)
    if name == "float16":
        return Preset("float16", ("float16.rw",), frozenset(), 11)
    raise ValueError(f"unknown quantization preset {name!r} (known: {', '.join(PRESETS)})")


def _int8(*, calibrated: bool, speed_check: bool) -> Preset:
    files = ("int8_dynamic.rw", "int8_static.rw")
    excluded = set(_INT8_DYNAMIC_ONLY | _INT8_STATIC_ELEMENTWISE)
    notes: list[str] = []
    if calibrated:
        excluded.add("quantize_conv_int8_dynamic")
    else:
        excluded |= _INT8_STATIC_CONV
        if speed_check:
            notes.append(
                "Conv without calibration samples: tried as dynamic int8 (ConvInteger), kept "
                "only where the speed check finds it faster; give --calibration for static int8"
            )
        else:
            excluded.add("quantize_conv_int8_dynamic")
            notes.append(
                "Conv left float: no calibration samples for static int8 (--calibration), and "
                "dynamic int8 (ConvInteger) is slower than float on onnxruntime's CPU provider"
            )
    return Preset("int8", files, frozenset(excluded), _INT8_OPSET, tuple(notes), False)


# Said by an int8 run where onnxruntime's uint8 x int8 sums saturate and the caller left the
# weights' width to the rules (`patterns/quantize/int8_weights.rw`).
SATURATION_NOTE = (
    "int8 weights in 7 bits (-64..64): onnxruntime's uint8 x int8 kernels saturate on this "
    "machine (x86 without VNNI adds two products in 16 bits); --param weight_bits=8 keeps 8"
)
