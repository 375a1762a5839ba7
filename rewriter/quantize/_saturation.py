"""Whether onnxruntime's integer kernels saturate int8 weights, and which width runs closer.

onnxruntime runs int8 layers in integer kernels (QLinearConv, DynamicQuantizeMatMul,
MatMulInteger, ...). On an x86 CPU without VNNI (AVX2 only: AMD EPYC before Zen 4, Intel
before Cascade Lake) they multiply uint8 activations by int8 weights with vpmaddubsw, which
adds two products in 16 bits and saturates when both are large (255 * 127 * 2 > 32767): the
model run is not the model written. Measured on an AMD EPYC with onnxruntime 1.32: a Conv ->
BatchNorm -> Relu CNN with a Gemm head, the int8 preset's output at 17.4 dB against float
with 8-bit weights and 36.4 dB with 7-bit ones (-64..64, where two products fit in 16 bits:
what onnxruntime's quantizers call reduce_range).

`integer_kernels_saturate` asks the runtime itself: a MatMulInteger of 255s by 127s, whose
exact sums a saturating kernel cannot give. Where it saturates, the int8 preset also builds
the model with 7-bit weights (`patterns/quantize/int8_weights.rw`) and keeps whichever runs
closer to the float model on the samples (`output_snr`): 7 bits halve the weights' precision,
so where few sums saturate 8 bits can still run closer. On the same CPU the trained PP-OCRv4
recognizer ran at 17.3 dB against float on its calibration lines with 8-bit weights and 19.0 dB
with 7-bit ones (CTC frames agreeing with float: 98.17% and 98.59%).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rewriter._errors import RewriteError

# The probe's depth: many pairs of products, as a layer's reduction has.
_PROBE_DEPTH = 64
# Samples run per comparison (the first ones).
_MOST_SAMPLES = 8


def _session(model: bytes, providers: Sequence[str]) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    try:
        return ort.InferenceSession(model, options, providers=list(providers))
    except Exception as exc:  # onnxruntime's error classes are not importable types
        raise RewriteError(f"int8 weights' check: onnxruntime cannot load a model: {exc}") from exc


@functools.lru_cache(maxsize=8)
def integer_kernels_saturate(providers: tuple[str, ...] = ("CPUExecutionProvider",)) -> bool:
    """Whether onnxruntime's uint8 x int8 matrix product loses sums on this machine.

    A MatMulInteger of uint8 255s by a constant int8 weight of 127s (the layout of a quantized
    layer: activations fed, weights an initializer): every exact sum is depth * 255 * 127.
    """
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    depth = _PROBE_DEPTH
    weight = numpy_helper.from_array(np.full((depth, 8), 127, np.int8), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMulInteger", ["x", "w"], ["y"])],
        "int8_saturation_probe",
        [helper.make_tensor_value_info("x", TensorProto.UINT8, [8, depth])],
        [helper.make_tensor_value_info("y", TensorProto.INT32, [8, 8])],
        [weight],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    session = _session(model.SerializeToString(), providers)
    sums = session.run(None, {"x": np.full((8, depth), 255, np.uint8)})[0]
    return bool(np.any(sums != depth * 255 * 127))


def _outputs(session: Any, samples: Sequence[Mapping[str, object]]) -> list[np.ndarray]:
    found: list[np.ndarray] = []
    for sample in samples[:_MOST_SAMPLES]:
        feeds = {name: np.asarray(value) for name, value in sample.items()}
        found.extend(np.asarray(value) for value in session.run(None, feeds))
    return found


def output_snr(
    reference: bytes,
    model: bytes,
    samples: Sequence[Mapping[str, object]],
    providers: Sequence[str] = ("CPUExecutionProvider",),
) -> float:
    """SNR in dB of `model`'s float outputs against `reference`'s, all of them together.

    Both run as a user runs them (onnxruntime's default optimizations).
    """
    expected = _outputs(_session(reference, providers), samples)
    actual = _outputs(_session(model, providers), samples)
    signal = noise = 0.0
    for want, got in zip(expected, actual, strict=True):
        if not np.issubdtype(want.dtype, np.floating):
            continue
        want64 = want.astype(np.float64)
        signal += float(np.sum(want64**2))
        noise += float(np.sum((want64 - got.astype(np.float64)) ** 2))
    if noise == 0.0:
        return math.inf
    return 10 * math.log10(signal / noise) if signal > 0 else -math.inf
