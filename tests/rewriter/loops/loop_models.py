"""Small models for the loop-pass tests, built with onnx.helper, and ORT helpers."""

from __future__ import annotations

import collections
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnx
import onnx.helper as oh
import onnx.numpy_helper as onh
import onnxruntime as ort

import ir

MODELS = Path(__file__).resolve().parents[2] / "models"
FLOAT = onnx.TensorProto.FLOAT


def _init(name: str, array: np.ndarray) -> onnx.TensorProto:
    return onh.from_array(array, name)


def dense_chain(
    blocks: int = 4,
    width: int = 8,
    *,
    side_input: bool = False,
    alphas: Sequence[float] | None = None,
    odd_bias_block: int | None = None,
    leak_block: int | None = None,
    scale_constants: Sequence[float] | None = None,
    seed: int = 0,
) -> onnx.ModelProto:
    """`blocks` x [MatMul(W_k) -> Add(b_k) (-> Add(s)) -> Relu or LeakyRelu(alpha_k)].

    Args:
        blocks: number of blocks.
        width: feature size.
        side_input: every block also adds the graph input `s` (a value read from outside).
        alphas: use LeakyRelu with these per-block alphas instead of Relu.
        odd_bias_block: this block's bias has shape [1, width] instead of [width].
        leak_block: this block's MatMul output is also a graph output.
        scale_constants: each block multiplies by a `Constant` node with this value.
        seed: weights' random seed.
    """
    rng = np.random.default_rng(seed)
    nodes: list[onnx.NodeProto] = []
    inits: list[onnx.TensorProto] = []
    inputs = [oh.make_tensor_value_info("x", FLOAT, ["batch", width])]
    if side_input:
        inputs.append(oh.make_tensor_value_info("s", FLOAT, ["batch", width]))
    outputs = []
    h = "x"
    for k in range(blocks):
        w = (rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32)
        bias_shape = (1, width) if k == odd_bias_block else (width,)
        b = rng.standard_normal(bias_shape).astype(np.float32) * 0.1
        inits += [_init(f"w{k}", w), _init(f"b{k}", b)]
        nodes.append(oh.make_node("MatMul", [h, f"w{k}"], [f"mm{k}"], name=f"block{k}/matmul"))
        nodes.append(oh.make_node("Add", [f"mm{k}", f"b{k}"], [f"add{k}"], name=f"block{k}/add"))
        last = f"add{k}"
        if side_input:
            nodes.append(oh.make_node("Add", [last, "s"], [f"side{k}"], name=f"block{k}/side"))
            last = f"side{k}"
        if scale_constants is not None:
            value = onh.from_array(np.array(scale_constants[k], dtype=np.float32), f"c{k}")
            nodes.append(
                oh.make_node("Constant", [], [f"c{k}"], value=value, name=f"block{k}/const")
            )
            nodes.append(oh.make_node("Mul", [last, f"c{k}"], [f"mul{k}"], name=f"block{k}/mul"))
            last = f"mul{k}"
        out = "y" if k == blocks - 1 else f"h{k}"
        if alphas is not None:
            act = oh.make_node("LeakyRelu", [last], [out], alpha=alphas[k], name=f"block{k}/act")
        else:
            act = oh.make_node("Relu", [last], [out], name=f"block{k}/act")
        nodes.append(act)
        if k == leak_block:
            outputs.append(oh.make_tensor_value_info(f"mm{k}", FLOAT, ["batch", width]))
        h = out
    outputs.insert(0, oh.make_tensor_value_info("y", FLOAT, ["batch", width]))
    graph = oh.make_graph(nodes, "dense_chain", inputs, outputs, inits)
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model, full_check=True)
    return model


def pair_chain(blocks: int = 4, width: int = 6, seed: int = 1) -> onnx.ModelProto:
    """Blocks threading two values: h' = Relu(h @ W_k + c), c' = c + h'."""
    rng = np.random.default_rng(seed)
    nodes: list[onnx.NodeProto] = []
    inits: list[onnx.TensorProto] = []
    h, c = "x", "c"
    for k in range(blocks):
        w = (rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32)
        inits.append(_init(f"w{k}", w))
        nodes.append(oh.make_node("MatMul", [h, f"w{k}"], [f"mm{k}"]))
        nodes.append(oh.make_node("Add", [f"mm{k}", c], [f"pre{k}"]))
        nodes.append(oh.make_node("Relu", [f"pre{k}"], [f"h{k}"]))
        nodes.append(oh.make_node("Add", [c, f"h{k}"], [f"c{k}"]))
        h, c = f"h{k}", f"c{k}"
    nodes.append(oh.make_node("Add", [h, c], ["y"]))
    graph = oh.make_graph(
        nodes,
        "pair_chain",
        [
            oh.make_tensor_value_info("x", FLOAT, ["batch", width]),
            oh.make_tensor_value_info("c", FLOAT, ["batch", width]),
        ],
        [oh.make_tensor_value_info("y", FLOAT, ["batch", width])],
        inits,
    )
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model, full_check=True)
    return model


def strided_conv_chain(blocks: int = 3, channels: int = 4, seed: int = 2) -> onnx.ModelProto:
    """Conv(k3, stride 2, pad 1) -> Relu blocks: the time axis halves in every block."""
    rng = np.random.default_rng(seed)
    nodes: list[onnx.NodeProto] = []
    inits: list[onnx.TensorProto] = []
    h = "x"
    for k in range(blocks):
        w = rng.standard_normal((channels, channels, 3)).astype(np.float32) * 0.3
        b = rng.standard_normal((channels,)).astype(np.float32) * 0.1
        inits += [_init(f"w{k}", w), _init(f"b{k}", b)]
        nodes.append(
            oh.make_node(
                "Conv",
                [h, f"w{k}", f"b{k}"],
                [f"conv{k}"],
                kernel_shape=[3],
                strides=[2],
                pads=[1, 1],
            )
        )
        out = "y" if k == blocks - 1 else f"h{k}"
        nodes.append(oh.make_node("Relu", [f"conv{k}"], [out]))
        h = out
    graph = oh.make_graph(
        nodes,
        "strided_conv_chain",
        [oh.make_tensor_value_info("x", FLOAT, ["batch", channels, "time"])],
        [oh.make_tensor_value_info("y", FLOAT, ["batch", channels, "time_out"])],
        inits,
    )
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model, full_check=True)
    return model


def lift(model: onnx.ModelProto) -> ir.Model:
    """The IR of `model` with type facts (as the pass manager would have them)."""
    lifted = ir.from_onnx(model)
    ir.infer_types(lifted)
    return lifted


def ops(graph: ir.Graph) -> collections.Counter[str]:
    """Op counts of one graph (not its subgraphs)."""
    return collections.Counter(node.op_type for node in graph)


def session(model: onnx.ModelProto | ir.Model, optimized: bool = False) -> ort.InferenceSession:
    """A CPU session; graph optimizations disabled unless `optimized`."""
    proto = ir.to_onnx(model) if isinstance(model, ir.Model) else model
    options = ort.SessionOptions()
    options.graph_optimization_level = (
        ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        if optimized
        else ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    )
    options.log_severity_level = 3
    return ort.InferenceSession(
        proto.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )


def sample_feeds(name: str, input_names: list[str]) -> list[dict[str, np.ndarray]]:
    """The input samples stored beside a corpus model (`<name>.npz`)."""
    data = np.load(MODELS / f"{name}.npz")
    samples = sorted({key.split("_")[1] for key in data.files if key.startswith("input_")})
    feeds = []
    for sample in samples:
        if len(input_names) == 1:
            feeds.append({input_names[0]: data[f"input_{sample}"]})
        else:
            feeds.append({n: data[f"input_{sample}_{n}"] for n in input_names})
    return feeds


def assert_same_on(
    original: onnx.ModelProto | ir.Model,
    rewritten: onnx.ModelProto | ir.Model,
    feeds: list[dict[str, np.ndarray]],
    rtol: float = 1e-5,
    atol: float = 1e-5,
) -> None:
    """Both models give equal outputs (within float32 tolerance) on every feed."""
    a, b = session(original), session(rewritten)
    assert [o.name for o in a.get_outputs()] == [o.name for o in b.get_outputs()]
    for feed in feeds:
        for x, y in zip(a.run(None, feed), b.run(None, feed), strict=True):
            assert x.dtype == y.dtype
            assert x.shape == y.shape
            np.testing.assert_allclose(x, y, rtol=rtol, atol=atol)


def random_feeds(
    model: onnx.ModelProto, count: int = 3, batch: int = 2, time: int = 32
) -> list[dict[str, np.ndarray]]:
    """Random float inputs (dims named `time` get `time`, other symbolic dims `batch`)."""
    rng = np.random.default_rng(123)
    feeds = []
    for _ in range(count):
        feed = {}
        for vi in model.graph.input:
            dims = []
            for dim in vi.type.tensor_type.shape.dim:
                if dim.HasField("dim_value"):
                    dims.append(dim.dim_value)
                else:
                    dims.append(time if dim.dim_param == "time" else batch)
            feed[vi.name] = rng.standard_normal(dims).astype(np.float32)
        feeds.append(feed)
    return feeds
