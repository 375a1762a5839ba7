"""tf2onnx conversions of channels-last (NHWC) models through the default library.

The models (tests/models/tf_*.onnx, made by tests/models/make_tf_nhwc_models.py) are what a
user gets from tf2onnx with its own optimizer on. The library must leave no more nodes and no
more Transposes than onnxruntime's transpose optimizer (`ORT_ENABLE_BASIC`, the optimized
model saved with `optimized_model_filepath`), and compute what TensorFlow computed on the
saved samples. benchmarks/transposes.py compares with onnxslim too.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import onnx
import onnxruntime as ort
import pytest

import ir
import rewriter
from tests.patterns.fusion_helpers import MODELS, assert_same_outputs, run_npz_samples

# model -> (nodes, Transposes) the default library leaves (onnxruntime's: 9/2, 35/3, 17/2)
EXPECTED = {
    "tf_patches_native": (9, 2),
    "tf_keras_cnn": (18, 1),  # the Dense on the 4-D map becomes a 1x1 Conv
    "tf_separable_block": (11, 2),
}


def _counts(model: onnx.ModelProto) -> tuple[int, int]:
    ops = Counter(node.op_type for node in model.graph.node)
    return sum(ops.values()), ops["Transpose"]


def _onnxruntime_basic(path: Path, folder: Path) -> onnx.ModelProto:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.optimized_model_filepath = str(folder / "basic.onnx")
    ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    return onnx.load(folder / "basic.onnx")


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_no_more_nodes_or_transposes_than_onnxruntime(name: str, tmp_path: Path) -> None:
    path = MODELS / f"{name}.onnx"
    original = onnx.load(path)
    result = rewriter.rewrite(path)
    ir.verify(result.model)
    ours = _counts(result.proto)
    theirs = _counts(_onnxruntime_basic(path, tmp_path))
    assert ours == EXPECTED[name]
    assert ours[0] <= theirs[0], (ours, theirs)
    assert ours[1] <= theirs[1], (ours, theirs)
    run_npz_samples(name, result.proto)  # TensorFlow's own outputs
    assert_same_outputs(original, result.proto)
