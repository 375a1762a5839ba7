"""Bias correction: give each quantized Conv the mean output the float model has there.

Quantization errors do not average out on trained CNNs: a quantizer rounds a value that a
feature map holds over large regions (the background of a document, the padding of a
sequence) the same way everywhere, and the weights' rounding shifts each output channel by
its weights' error times the input's mean. Those shifts add up through the layers (on the
PP-OCRv4 detector they decided whether the probability map agreed with float on 98.5% or
99.4% of its pixels). The classic remedy (empirical bias correction, Nagel et al. 2019,
"Data-Free Quantization Through Weight Equalization and Bias Correction") measures, on the
calibration samples, the mean per output channel of each quantized Conv and of the float
Conv it replaced, and subtracts the difference from the quantized Conv's bias. Layer by
layer in graph order, each measured on the model with the earlier layers already corrected:
a shift an earlier layer leaves is then corrected once, where it arises, instead of at every
later layer too (correcting every layer at once from one measurement over-corrects and
diverges).

The quantized model is run with onnxruntime as it will be deployed (`ORT_ENABLE_ALL`, fused
integer kernels), each time up to the one Conv measured (onnxruntime leaves out the nodes no
output needs), and the float model once with every such Conv's output an output.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence

import numpy as np

import ir
from rewriter.quantize._sites import Layers
from rewriter.verification import VerifyError, analyze_inputs, split_samples

_LOG = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True, slots=True)
class BiasCorrection:
    """What `correct_biases` did.

    Attributes:
        corrected: Convs whose bias was corrected.
        largest_shift: the largest correction of one channel's mean, in the output's units.
    """

    corrected: int
    largest_shift: float

    def summary(self) -> str:
        """One line for the run's notes."""
        return (
            f"bias correction: {self.corrected} quantized Conv"
            f"{'s' * (self.corrected != 1)} given the float model's mean output per channel on "
            f"the calibration samples (largest shift {self.largest_shift:.3g})"
        )


def _float_counterparts(
    model: ir.Model, float_model: ir.Model, node_layers: Mapping[str, int], layers: Layers
) -> list[tuple[ir.Node, str]]:
    """(quantized Conv of the main graph, the float Conv output it replaced), in graph order.

    Only layers that replaced exactly one float Conv by exactly one Conv are paired.
    """
    by_index = {layer.index: layer for layer in layers}
    float_convs = {node.name: node for node in float_model.graph if node.op_type == "Conv"}
    convs_per_layer: dict[int, int] = {}
    for node in model.graph:
        index = node_layers.get(node.name)
        if node.op_type == "Conv" and index is not None:
            convs_per_layer[index] = convs_per_layer.get(index, 0) + 1
    pairs = []
    for node in model.graph:
        index = node_layers.get(node.name)
        if node.op_type != "Conv" or index is None or convs_per_layer[index] != 1:
            continue
        replaced = [float_convs[n] for n in by_index[index].float_nodes if n in float_convs]
        if len(replaced) == 1 and len(node.outputs) == 1:
            pairs.append((node, replaced[0].outputs[0].name))
    return pairs


def _session(model: ir.Model) -> object:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(
        ir.to_onnx(model).SerializeToString(), options, providers=["CPUExecutionProvider"]
    )


def _channel_means(
    model: ir.Model, names: Sequence[str], feeds: Sequence[Mapping[str, np.ndarray]]
) -> dict[str, np.ndarray]:
    """Mean per channel (axis 1) of each named value over the feeds.

    The model's outputs are replaced by those values for the run, and put back.
    """
    graph = model.graph
    kept = list(graph.outputs)
    values = {v.name: v for node in graph for v in node.outputs}
    for index in reversed(range(len(kept))):
        graph.remove_output(index)
    try:
        for name in names:
            value = values[name]
            if value.type is None:  # a Conv's output: float, as its input (only float is quantized)
                value.type = ir.TensorType(ir.DataType.FLOAT)
            graph.add_output(value)
        session = _session(model)
    except Exception as exc:  # onnxruntime's error classes are not importable types
        raise VerifyError(f"onnxruntime cannot run the model to correct biases: {exc}") from exc
    finally:
        for index in reversed(range(len(graph.outputs))):
            graph.remove_output(index)
        for value in kept:
            graph.add_output(value)
    sums: dict[str, np.ndarray] = {}
    counts: dict[str, int] = {}
    for feed in feeds:
        try:
            results = session.run(list(names), dict(feed))  # type: ignore[attr-defined]
        except Exception as exc:  # as above
            raise VerifyError(f"the model failed on a calibration sample: {exc}") from exc
        for name, array in zip(names, results, strict=True):
            wide = np.asarray(array, np.float64)
            axes = (0, *range(2, wide.ndim))
            sums[name] = sums.get(name, 0) + wide.sum(axis=axes)
            counts[name] = counts.get(name, 0) + wide.size // max(wide.shape[1], 1)
    return {name: sums[name] / counts[name] for name in names}


def _set_bias(model: ir.Model, conv: ir.Node, bias: np.ndarray, names: ir.NameAllocator) -> None:
    """Give the Conv a bias initializer of its own holding `bias`."""
    stem = f"{conv.name}/corrected_bias"
    value = ir.Value(names.fresh(stem), const_value=ir.NumpyTensor(bias.astype(np.float32)))
    value.type = ir.TensorType(ir.DataType.FLOAT)
    model.graph.add_initializer(value)
    old = conv.inputs[2] if len(conv.inputs) >= 3 else None
    if len(conv.inputs) >= 3:
        conv.replace_input_with(2, value)
    else:
        conv.append_input(value)
    if old is not None and not old.uses and old.name in model.graph.initializers:
        model.graph.remove_initializer(old.name)


def _current_bias(conv: ir.Node, channels: int) -> np.ndarray | None:
    """The Conv's bias as float64 (zeros when it has none), None when it is not a constant."""
    bias = conv.inputs[2] if len(conv.inputs) >= 3 else None
    if bias is None:
        return np.zeros(channels)
    tensor = bias.const_value
    if tensor is None:
        return None
    return np.asarray(tensor.numpy(), np.float64).reshape(-1)


def correct_biases(
    model: ir.Model,
    float_model: ir.Model,
    samples: Sequence[Mapping[str, object]],
    node_layers: Mapping[str, int],
    layers: Layers,
) -> BiasCorrection:
    """Correct, in place, the biases of `model`'s quantized Convs (see the module docstring).

    `model` is the quantized model as written (`materialize` made it from `float_model`, which
    `node_layers` and `layers` describe); `samples` are the calibration samples (the float
    model already ran on them for the calibration statistics).

    Raises:
        VerifyError: samples that do not fit the model's inputs, or a model onnxruntime
            cannot run on them.
    """
    pairs = _float_counterparts(model, float_model, node_layers, layers)
    if not pairs:
        return BiasCorrection(0, 0.0)
    # The samples as collect_calibration took them (several stacked along a new first axis
    # are several), so any samples it accepted are accepted here.
    specs = analyze_inputs(float_model, float_model)
    feeds = split_samples(
        [{name: np.asarray(array) for name, array in sample.items()} for sample in samples], specs
    )
    reference = _channel_means(float_model, [name for _, name in pairs], feeds)
    names = ir.NameAllocator(model)
    corrected, largest = 0, 0.0
    for conv, float_name in pairs:
        target = reference[float_name]
        bias = _current_bias(conv, target.shape[0])
        if bias is None or bias.shape != target.shape:
            continue
        measured = _channel_means(model, [conv.outputs[0].name], feeds)[conv.outputs[0].name]
        if measured.shape != target.shape:
            continue
        shift = measured - target
        if not np.all(np.isfinite(shift)):
            continue
        _set_bias(model, conv, bias - shift, names)
        corrected += 1
        largest = max(largest, float(np.max(np.abs(shift), initial=0.0)))
    _LOG.debug("bias correction: %d Convs, largest shift %g", corrected, largest)
    return BiasCorrection(corrected, largest)
