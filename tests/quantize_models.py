"""Small models for the quantization preset tests, built with onnx.helper.

`cnn_bn`: two Conv + BatchNormalization + Relu blocks, a global pool and a Gemm head (the
BatchNorms must fold into the Convs before the Convs are quantized). `masked_attention`: one
attention step whose additive mask is written as transformers writes it,
`(1 - mask) * finfo(float32).min`, before a Softmax (float16 must keep it finite).
`shared_weight_mlp`: two MatMuls that read one weight (onnxruntime does not fuse a 4-bit
DequantizeLinear that two MatMuls read). `conv_hardswish`: a Conv whose output reaches far
below -3 before a HardSwish (the output's quantized range need not go there). `two_convs`:
Conv -> Relu -> Conv of any rank and group (which first layers the int8 preset keeps float;
how activation ranges are read).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def cnn_bn(seed: int = 0) -> onnx.ModelProto:
    """x [N, 3, 16, 16] -> y [N, 10]."""
    rng = np.random.default_rng(seed)
    nodes, weights = [], []
    current, channels = "x", 3
    for block, width in enumerate((16, 32)):
        w = (rng.standard_normal((width, channels, 3, 3)) * np.sqrt(2 / (9 * channels))).astype(
            np.float32
        )
        weights += [
            numpy_helper.from_array(w, f"w{block}"),
            numpy_helper.from_array(
                (1 + 0.1 * rng.standard_normal(width)).astype(np.float32), f"g{block}"
            ),
            numpy_helper.from_array(
                (0.1 * rng.standard_normal(width)).astype(np.float32), f"b{block}"
            ),
            numpy_helper.from_array(
                (0.1 * rng.standard_normal(width)).astype(np.float32), f"m{block}"
            ),
            numpy_helper.from_array((1 + rng.random(width)).astype(np.float32), f"v{block}"),
        ]
        nodes += [
            helper.make_node(
                "Conv", [current, f"w{block}"], [f"c{block}"], f"conv{block}", pads=[1, 1, 1, 1]
            ),
            helper.make_node(
                "BatchNormalization",
                [f"c{block}", f"g{block}", f"b{block}", f"m{block}", f"v{block}"],
                [f"n{block}"],
                f"bn{block}",
            ),
            helper.make_node("Relu", [f"n{block}"], [f"r{block}"], f"relu{block}"),
        ]
        current, channels = f"r{block}", width
    head = (rng.standard_normal((10, channels)) / np.sqrt(channels)).astype(np.float32)
    weights += [
        numpy_helper.from_array(head, "head"),
        numpy_helper.from_array(np.zeros(10, np.float32), "hb"),
    ]
    return _classifier("cnn_bn", nodes, current, weights)


def _classifier(
    name: str, nodes: list[onnx.NodeProto], features: str, weights: list[onnx.TensorProto]
) -> onnx.ModelProto:
    """An opset-13 model of `nodes` on x [N, 3, 16, 16] with a pooled Gemm head on `features`.

    The head's weights `head` and `hb` are among `weights`; it gives y [N, 10].
    """
    nodes = [
        *nodes,
        helper.make_node("GlobalAveragePool", [features], ["pool"], "pool"),
        helper.make_node("Flatten", ["pool"], ["flat"], "flatten"),
        helper.make_node("Gemm", ["flat", "head", "hb"], ["y"], "gemm", transB=1),
    ]
    graph = helper.make_graph(
        nodes,
        name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10])],
        weights,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def masked_attention(seed: int = 0) -> onnx.ModelProto:
    """x [B, S, 8], mask [B, S] (1 keep, 0 pad) -> y [B, S, 8]."""
    rng = np.random.default_rng(seed)
    wq = (rng.standard_normal((8, 8)) / np.sqrt(8)).astype(np.float32)
    lowest = np.array(np.finfo(np.float32).min, np.float32)
    nodes = [
        helper.make_node("MatMul", ["x", "wq"], ["q"], "query"),
        helper.make_node("Transpose", ["x"], ["kt"], "keys", perm=[0, 2, 1]),
        helper.make_node("MatMul", ["q", "kt"], ["scores"], "scores"),
        helper.make_node("Unsqueeze", ["mask", "axis1"], ["mask3"], "mask3"),
        helper.make_node("Sub", ["one", "mask3"], ["inverted"], "invert"),
        helper.make_node("Mul", ["inverted", "lowest"], ["additive"], "additive"),
        helper.make_node("Add", ["scores", "additive"], ["masked"], "masked"),
        helper.make_node("Softmax", ["masked"], ["weights"], "softmax", axis=-1),
        helper.make_node("MatMul", ["weights", "x"], ["y"], "mix"),
    ]
    graph = helper.make_graph(
        nodes,
        "masked_attention",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", "S", 8]),
            helper.make_tensor_value_info("mask", TensorProto.FLOAT, ["B", "S"]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["B", "S", 8])],
        [
            numpy_helper.from_array(wq, "wq"),
            numpy_helper.from_array(np.array([1], np.int64), "axis1"),
            numpy_helper.from_array(np.array(1.0, np.float32), "one"),
            numpy_helper.from_array(lowest, "lowest"),
        ],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def shared_weight_mlp(seed: int = 0) -> onnx.ModelProto:
    """a [N, 64], b [N, 64] -> (a @ W, b @ W), one W of [64, 64]."""
    w = np.random.default_rng(seed).standard_normal((64, 64)).astype(np.float32)
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["a", "w"], ["ya"], "left"),
            helper.make_node("MatMul", ["b", "w"], ["yb"], "right"),
        ],
        "shared_weight",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["N", 64]) for n in ("a", "b")],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["N", 64]) for n in ("ya", "yb")],
        [numpy_helper.from_array(w, "w")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])


def hardswish_cnn(seed: int = 0) -> onnx.ModelProto:
    """x [N, 3, 16, 16] -> y [N, 10]: a MobileNetV3-style block as exporters write it.

    Conv, HardSwish written out (`x * Clip(x + 3, 0, 6) / 6`, opset 13 has no HardSwish), a
    depthwise Conv and HardSwish, a pointwise Conv whose output a residual Add sums with the
    first HardSwish's, then a global pool and a Gemm head. Channels of unequal scale, as
    trained depthwise layers have them.
    """
    rng = np.random.default_rng(seed)
    width = 16
    spread = np.exp(rng.uniform(-2.0, 1.0, width)).astype(np.float32)
    arrays = {
        "w0": rng.standard_normal((width, 3, 3, 3)) * np.sqrt(2 / 27) * spread[:, None, None, None],
        "b0": 0.1 * rng.standard_normal(width),
        "w1": rng.standard_normal((width, 1, 3, 3)) * np.sqrt(2 / 9),
        "b1": 0.1 * rng.standard_normal(width),
        "w2": rng.standard_normal((width, width, 1, 1)) * np.sqrt(2 / width),
        "b2": 0.1 * rng.standard_normal(width),
        "head": rng.standard_normal((10, width)) / np.sqrt(width),
        "hb": np.zeros(10),
        "three": np.array(3.0),
        "zero": np.array(0.0),
        "six": np.array(6.0),
    }
    weights = [numpy_helper.from_array(np.asarray(a, np.float32), n) for n, a in arrays.items()]

    def hard_swish(source: str, name: str) -> list[onnx.NodeProto]:
        return [
            helper.make_node("Add", [source, "three"], [f"{name}_shifted"], f"{name}_add"),
            helper.make_node(
                "Clip", [f"{name}_shifted", "zero", "six"], [f"{name}_clipped"], f"{name}_clip"
            ),
            helper.make_node(
                "Mul", [source, f"{name}_clipped"], [f"{name}_product"], f"{name}_mul"
            ),
            helper.make_node("Div", [f"{name}_product", "six"], [name], f"{name}_div"),
        ]

    nodes = [
        helper.make_node("Conv", ["x", "w0", "b0"], ["c0"], "conv0", pads=[1, 1, 1, 1]),
        *hard_swish("c0", "h0"),
        helper.make_node(
            "Conv", ["h0", "w1", "b1"], ["c1"], "depthwise", pads=[1, 1, 1, 1], group=width
        ),
        *hard_swish("c1", "h1"),
        helper.make_node("Conv", ["h1", "w2", "b2"], ["c2"], "pointwise"),
        helper.make_node("Add", ["c2", "h0"], ["residual"], "residual"),
    ]
    return _classifier("hardswish_cnn", nodes, "residual", weights)


def conv_hardswish(seed: int = 0, *, expose_conv: bool = False) -> onnx.ModelProto:
    """x [N, 4, 8, 8] -> y [N, 8, 8, 8]: Conv, HardSwish (the opset-14 op), a pointwise Conv.

    The first Conv's biases reach -20 on half the channels, so its output spans far below -3,
    where HardSwish is 0. `expose_conv`: that output is a graph output too (`c0`).
    """
    rng = np.random.default_rng(seed)
    bias = np.where(np.arange(8) % 2 == 0, -20.0, 1.0) + 0.1 * rng.standard_normal(8)
    arrays = {
        "w0": rng.standard_normal((8, 4, 3, 3)) * np.sqrt(2 / 36),
        "b0": bias,
        "w1": rng.standard_normal((8, 8, 1, 1)) * np.sqrt(2 / 8),
        "b1": 0.1 * rng.standard_normal(8),
    }
    weights = [numpy_helper.from_array(np.asarray(a, np.float32), n) for n, a in arrays.items()]
    nodes = [
        helper.make_node("Conv", ["x", "w0", "b0"], ["c0"], "conv0", pads=[1, 1, 1, 1]),
        helper.make_node("HardSwish", ["c0"], ["h0"], "hardswish0"),
        helper.make_node("Conv", ["h0", "w1", "b1"], ["y"], "conv1"),
    ]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 8, 8, 8])]
    if expose_conv:
        outputs.append(helper.make_tensor_value_info("c0", TensorProto.FLOAT, ["n", 8, 8, 8]))
    graph = helper.make_graph(
        nodes,
        "conv_hardswish",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4, 8, 8])],
        outputs,
        weights,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])


def two_input_cnn(seed: int = 0) -> onnx.ModelProto:
    """x [N, 3, 8, 8], s [N, 4] -> y [N, 16].

    x is scaled (Mul) before a Conv, Relu, a second Conv and a pooled MatMul head; s goes
    through a MatMul of its own, concatenated to the head's output. The layers first on an input:
    the first Conv (through the weightless Mul; an image convolution, 3 channels) and the
    MatMul on s (not a convolution).
    """
    rng = np.random.default_rng(seed)
    arrays = {
        "half": np.array(0.5),
        "w0": rng.standard_normal((16, 3, 3, 3)) * np.sqrt(2 / 27),
        "b0": 0.1 * rng.standard_normal(16),
        "w1": rng.standard_normal((16, 16, 3, 3)) * np.sqrt(2 / 144),
        "b1": 0.1 * rng.standard_normal(16),
        "head": rng.standard_normal((16, 8)) / 4,
        "side": rng.standard_normal((4, 8)) / 2,
        "shape": np.array([-1, 16]),
    }
    weights = [
        numpy_helper.from_array(np.asarray(a, np.int64 if n == "shape" else np.float32), n)
        for n, a in arrays.items()
    ]
    nodes = [
        helper.make_node("Mul", ["x", "half"], ["scaled"], "scale"),
        helper.make_node("Conv", ["scaled", "w0", "b0"], ["c0"], "conv0", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c0"], ["r0"], "relu0"),
        helper.make_node("Conv", ["r0", "w1", "b1"], ["c1"], "conv1", pads=[1, 1, 1, 1]),
        helper.make_node("GlobalAveragePool", ["c1"], ["pool"], "pool"),
        helper.make_node("Reshape", ["pool", "shape"], ["flat"], "flatten"),
        helper.make_node("MatMul", ["flat", "head"], ["h"], "head_matmul"),
        helper.make_node("MatMul", ["s", "side"], ["t"], "side_matmul"),
        helper.make_node("Concat", ["h", "t"], ["y"], "concat", axis=1),
    ]
    graph = helper.make_graph(
        nodes,
        "two_input_cnn",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8]),
            helper.make_tensor_value_info("s", TensorProto.FLOAT, ["N", 4]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 16])],
        weights,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])


def two_convs(
    first_weight: tuple[int, ...],
    group: int,
    x_shape: tuple[int, ...],
    *,
    divisor: float = 3.0,
) -> onnx.ModelProto:
    """x -> Conv (first_weight, group) -> Relu -> a second Conv of the same rank.

    Weights are standard normal draws (seed 0) divided by `divisor`.
    """
    rng = np.random.default_rng(0)
    channels = first_weight[0]
    kernel = (1,) * (len(first_weight) - 2)
    weights = [
        numpy_helper.from_array(
            (rng.standard_normal(first_weight) / divisor).astype(np.float32), "w0"
        ),
        numpy_helper.from_array(
            (rng.standard_normal((channels, channels, *kernel)) / divisor).astype(np.float32),
            "w1",
        ),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w0"], ["c0"], "conv0", group=group),
        helper.make_node("Relu", ["c0"], ["r0"], "relu0"),
        helper.make_node("Conv", ["r0", "w1"], ["y"], "conv1"),
    ]
    graph = helper.make_graph(
        nodes,
        "two_convs",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        weights,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
