"""The first layers: the approximate layers that compute first on the model's inputs.

Under the int8 preset with calibration samples, those layers stay float, a rule practitioners
follow for image models: the first convolution reads the raw image, every later layer works
on its error, and with 3 input channels it carries little of the model's work, so float costs
little time there (the reason usually given for its error: its output channels span very
different ranges, which one int8 range per tensor rounds coarsely for most of them).
Measured on the PP-OCRv4 recognizer (benchmarks/RESULTS.md, rendered text pages): CTC frames
agreeing with float 96.3% -> 97.5%. Keeping float the layer that writes a graph output (the
other such rule) did not pay there (the recognizer's CTC head: 96.1%), so it is not applied.

Only image convolutions count: a layer is kept float when it holds a 2-D Conv that reads at
most 4 channels (an image's) and a path from a graph input reaches one of its float nodes
without passing through another node that holds weights (another approximate layer, or a
Conv, MatMul, Gemm or recurrent op left float): the walk stops at such nodes. On Silero VAD,
whose first layer is a 1-D Conv over audio (its STFT), keeping it float was worse (a speech
probability moved by up to 0.61 against 0.21 with it quantized), so the rule stays with the
case it was measured on.
"""

from __future__ import annotations

import ir
from rewriter.quantize._sites import Layers

# Ops that compute with weights of their own: a path from an input through one of them has
# already had its first layer.
_WEIGHTED_OPS = frozenset(
    {
        "Conv",
        "ConvTranspose",
        "ConvInteger",
        "QLinearConv",
        "MatMul",
        "MatMulInteger",
        "QLinearMatMul",
        "Gemm",
        "LSTM",
        "GRU",
        "RNN",
        "Einsum",
    }
)


# An image's channels: RGB, RGBA, gray.
_IMAGE_CHANNELS = 4


def _image_conv(node: ir.Node) -> bool:
    """A 2-D Conv that reads at most an image's channels (its weight: [out, in / group, kh, kw])."""
    if node.op_type != "Conv" or len(node.inputs) < 2 or node.inputs[1] is None:
        return False
    weight = node.inputs[1].const_value
    group = node.attribute("group", 1)
    if weight is None or not isinstance(group, int):
        return False
    shape = tuple(weight.shape)
    return len(shape) == 4 and int(shape[1]) * group <= _IMAGE_CHANNELS


def first_layers(float_model: ir.Model, layers: Layers) -> tuple[int, ...]:
    """Indices of the image-convolution layers first on the main graph's inputs (see the module).

    Graph inputs that are initializers (older models list their weights as inputs) are not
    the model's inputs.
    """
    graph = float_model.graph
    owner = {name: layer.index for layer in layers for name in layer.float_nodes}
    found: dict[int, None] = {}
    seen: set[int] = set()
    frontier = [
        user
        for value in graph.inputs
        if value.name not in graph.initializers
        for user, _ in value.uses
    ]
    while frontier:
        node = frontier.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        index = owner.get(node.name)
        if index is not None:
            if _image_conv(node):
                found[index] = None
            continue
        if node.op_type in _WEIGHTED_OPS:
            continue
        frontier.extend(user for value in node.outputs for user, _ in value.uses)
    return tuple(sorted(found))
