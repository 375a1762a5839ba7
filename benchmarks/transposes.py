"""Benchmark: Transposes left in channels-last networks, against onnxruntime, onnxsim, onnxslim.

Run: ``python benchmarks/transposes.py [--blocks 4 8 16]``.

Two sets of models. The real ones are tf2onnx conversions of NHWC TensorFlow models
(`tests/models/tf_*.onnx`, made by `tests/models/make_tf_nhwc_models.py`: native
extract_patches, a small Keras CNN, a depthwise-separable block), compared on nodes and
Transposes with onnxruntime's basic-level optimizer, onnxsim and onnxslim; each result is
checked against TensorFlow's outputs saved with the model. The synthetic ones follow.

The models are what tf2onnx writes for a Keras NHWC network: each Conv wrapped in a
Transpose to NCHW and one back, the bias Add and the activation in NHWC, every second block
fanning out into a scaled copy concatenated over channels (a Concat on the NHWC channel
axis), and a head that splits the channels with a Reshape before a final Transpose. For each
model this reports the Transposes and nodes left by this project's default library, by
onnxruntime's basic-level optimizer (its transpose optimizer; the result saved with
`optimized_model_filepath`) and by onnxsim, and checks on onnxruntime that ours computes
what the original does.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx.helper as helper
import onnx.numpy_helper as numpy_helper
import onnxruntime as ort

import rewriter

CHANNELS = 8
SIDE = 16


def nhwc_network(blocks: int, seed: int = 0) -> onnx.ModelProto:
    """A tf2onnx-style NHWC network of `blocks` Conv blocks (see the module docstring)."""
    rng = np.random.default_rng(seed)
    nodes: list[onnx.NodeProto] = []
    weights: list[onnx.TensorProto] = []

    def weight(name: str, shape: tuple[int, ...]) -> str:
        array = (rng.standard_normal(shape) * 0.1).astype(np.float32)
        weights.append(numpy_helper.from_array(array, name))
        return name

    current = "x"
    for i in range(blocks):
        nodes += [
            helper.make_node("Transpose", [current], [f"t{i}"], perm=[0, 3, 1, 2]),
            helper.make_node(
                "Conv",
                [f"t{i}", weight(f"w{i}", (CHANNELS, CHANNELS, 3, 3))],
                [f"c{i}"],
                pads=[1, 1, 1, 1],
            ),
            helper.make_node("Transpose", [f"c{i}"], [f"u{i}"], perm=[0, 2, 3, 1]),
            helper.make_node("Add", [f"u{i}", weight(f"b{i}", (CHANNELS,))], [f"a{i}"]),
            helper.make_node("Relu", [f"a{i}"], [f"r{i}"]),
        ]
        current = f"r{i}"
        if i % 2:
            nodes += [
                helper.make_node("Mul", [current, weight(f"s{i}", (1, 1, 1, CHANNELS))], [f"m{i}"]),
                helper.make_node("Concat", [current, f"m{i}"], [f"k{i}"], axis=3),
                helper.make_node("Transpose", [f"k{i}"], [f"tk{i}"], perm=[0, 3, 1, 2]),
                helper.make_node(
                    "Conv", [f"tk{i}", weight(f"q{i}", (CHANNELS, 2 * CHANNELS, 1, 1))], [f"p{i}"]
                ),
                helper.make_node("Transpose", [f"p{i}"], [f"uk{i}"], perm=[0, 2, 3, 1]),
            ]
            current = f"uk{i}"
    weights.append(
        numpy_helper.from_array(np.array([1, SIDE, SIDE, 2, CHANNELS // 2], np.int64), "split")
    )
    nodes += [
        helper.make_node("Reshape", [current, "split"], ["heads"]),
        helper.make_node("Transpose", ["heads"], ["y"], perm=[0, 3, 4, 1, 2]),
    ]
    graph = helper.make_graph(
        nodes,
        "nhwc",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, SIDE, SIDE, CHANNELS])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, list("ABCDE"))],
        weights,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _transposes(model: onnx.ModelProto) -> int:
    """Transposes in the main graph."""
    return sum(node.op_type == "Transpose" for node in model.graph.node)


def _onnxruntime_basic(path: Path, folder: Path) -> onnx.ModelProto:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.optimized_model_filepath = str(folder / "ort_basic.onnx")
    ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    return onnx.load(folder / "ort_basic.onnx")


def _run(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    return session.run(None, {"x": x})[0]


MODELS = Path(__file__).resolve().parent.parent / "tests" / "models"


def _tf_outputs_match(name: str, model: onnx.ModelProto) -> str:
    """Worst |result - TensorFlow| over the samples saved with tests/models/<name>."""
    manifest = json.loads((MODELS / "manifest.json").read_text())
    entry = next(m for m in manifest["models"] if m["file"] == f"{name}.onnx")
    data = np.load(MODELS / entry["npz"])
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    worst = 0.0
    for sample in entry["samples"]:
        feeds = {k: data[v] for k, v in sample["inputs"].items()}
        got = session.run(list(sample["outputs"]), feeds)
        for value, key in zip(got, sample["outputs"].values(), strict=True):
            worst = max(worst, float(np.abs(value - data[key]).max()))
    tol = entry["tolerance"]["atol"]
    return f"{worst:.1e}" + ("" if worst <= tol else " (over the tolerance)")


def _tf2onnx_rows(folder: Path) -> list[tuple[str, ...]]:
    """One row per tests/models/tf_*.onnx: Transposes / nodes per tool, error vs TensorFlow."""
    peers: dict[str, Any] = {}
    for module in ("onnxsim", "onnxslim"):
        try:
            peers[module] = __import__(module)
        except ImportError:
            peers[module] = None
    rows = []
    for path in sorted(MODELS.glob("tf_*.onnx")):
        model = onnx.load(path)
        ours = rewriter.rewrite(path).proto
        basic = _onnxruntime_basic(path, folder)
        sim = peers["onnxsim"].simplify(model)[0] if peers["onnxsim"] else None
        slim = peers["onnxslim"].slim(onnx.load(path)) if peers["onnxslim"] else None
        rows.append(
            (
                path.stem,
                *(_cell(m) for m in (model, ours, basic, sim, slim)),
                _tf_outputs_match(path.stem, ours),
            )
        )
    return rows


def _cell(model: onnx.ModelProto | None) -> str:
    return f"{_transposes(model)} / {len(model.graph.node)}" if model is not None else "-"


def _table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> None:
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(row) + " |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, nargs="+", default=[4, 8, 16])
    args = parser.parse_args(argv)
    try:
        import onnxsim
    except ImportError:
        onnxsim = None
    with tempfile.TemporaryDirectory() as work:
        tf_rows = _tf2onnx_rows(Path(work))
    print("tf2onnx conversions of NHWC models: Transposes / nodes left (fewer is better)\n")
    _table(
        (
            "model",
            "original",
            "rewrite",
            "onnxruntime basic",
            "onnxsim",
            "onnxslim",
            "max |ours - TensorFlow|",
        ),
        tf_rows,
    )
    print()
    rows = []
    with tempfile.TemporaryDirectory() as work:
        folder = Path(work)
        for blocks in args.blocks:
            model = nhwc_network(blocks)
            path = folder / f"nhwc_{blocks}.onnx"
            onnx.save(model, path)
            ours = rewriter.rewrite(path).proto
            peer = _onnxruntime_basic(path, folder)
            sim = onnxsim.simplify(model)[0] if onnxsim is not None else None
            x = (
                np.random.default_rng(1)
                .standard_normal((1, SIDE, SIDE, CHANNELS))
                .astype(np.float32)
            )
            error = float(np.abs(_run(model, x) - _run(ours, x)).max())
            rows.append(
                (
                    f"{blocks} blocks",
                    f"{_transposes(model)} / {len(model.graph.node)}",
                    f"{_transposes(ours)} / {len(ours.graph.node)}",
                    f"{_transposes(peer)} / {len(peer.graph.node)}",
                    f"{_transposes(sim)} / {len(sim.graph.node)}" if sim is not None else "-",
                    f"{error:.1e}",
                )
            )
    print("Synthetic tf2onnx-style networks: Transposes / nodes left (fewer is better)\n")
    _table(
        ("model", "original", "rewrite", "onnxruntime basic", "onnxsim", "max |ours - original|"),
        rows,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
