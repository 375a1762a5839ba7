"""`rewrite graft` / `rewriter.surgery.graft`: B fed by A's values, as one model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnx.helper
import onnx.numpy_helper
import onnxruntime as ort
import pytest

import ir
from rewriter._errors import RewriteError
from rewriter.cli import main
from rewriter.surgery import extract, graft, parse_connection
from tests.helpers import random_feeds

MODELS = Path(__file__).parents[2] / "models"
RESNET = MODELS / "cnn_bn_ts14.onnx"  # a small ResNet exported by torch.onnx (TorchScript)
POOLED = "/pool/GlobalAveragePool_output_0"  # N x 64 x 1 x 1
CLASH = "/stem/stem.0/Conv_output_0"  # a value of the backbone; the head names one so too


def _run(model: onnx.ModelProto | str, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    data = model if isinstance(model, str) else model.SerializeToString()
    session = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def _backbone(tmp_path: Path) -> Path:
    """The ResNet export up to its pooled features (N x 64 x 1 x 1), as its own model."""
    path = tmp_path / "backbone.onnx"
    graph = onnx.load(RESNET).graph
    ir.save(extract(RESNET, [graph.input[0].name], [POOLED]), path)
    return path


def _head(tmp_path: Path, opset: int = 14, name: str = "head.onnx") -> Path:
    """A Gemm classifier over N x 64 features whose names clash with the backbone's."""
    rng = np.random.default_rng(0)
    weight = rng.standard_normal((10, 64)).astype(np.float32)
    graph = onnx.helper.make_graph(
        [
            onnx.helper.make_node("Gemm", ["features", "fc.weight", "fc.bias"], [CLASH], transB=1),
            onnx.helper.make_node("Relu", [CLASH], ["logits"], name="/stem/stem.0/Conv"),
        ],
        "head",
        [onnx.helper.make_tensor_value_info("features", onnx.TensorProto.FLOAT, ["N", 64])],
        [onnx.helper.make_tensor_value_info("logits", onnx.TensorProto.FLOAT, ["N", 10])],
        [
            onnx.numpy_helper.from_array(weight, "fc.weight"),
            onnx.numpy_helper.from_array(rng.standard_normal(10).astype(np.float32), "fc.bias"),
        ],
    )
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", opset)])
    model.ir_version = 8
    path = tmp_path / name
    onnx.save(model, path)
    return path


def test_pooled_features_into_a_gemm_head_through_flatten(tmp_path, capsys):
    backbone, head = _backbone(tmp_path), _head(tmp_path)
    out = tmp_path / "ab.onnx"
    argv = ["graft", str(backbone), str(head), "--connect", f"{POOLED}=features:Flatten"]
    assert main([*argv, "--keep-outputs", POOLED, "-o", str(out)]) == 0
    assert "wrote" in capsys.readouterr().out
    grafted = onnx.load(out)
    onnx.checker.check_model(grafted, full_check=True)
    assert [o.name for o in grafted.graph.output] == ["logits", POOLED]
    feeds = random_feeds(onnx.load(RESNET), seed=3)
    (pooled,) = _run(str(backbone), feeds)
    (expected,) = _run(str(head), {"features": pooled.reshape(pooled.shape[0], -1)})
    got, kept = _run(str(out), feeds)
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(kept, pooled)


def test_names_get_a_prefix_only_where_they_clash(tmp_path):
    result = graft(_backbone(tmp_path), _head(tmp_path), [f"{POOLED}=features:Flatten"])
    graph = result.model.graph
    initializers = set(graph.initializers)
    # The head's fc.weight and logits clash with nothing in the backbone (its own Gemm was
    # cut off); its Gemm output and Relu node, named like the backbone's first Conv, do.
    assert "fc.weight" in initializers
    assert [v.name for v in graph.outputs] == ["logits"]
    values = [v.name for v in graph.values()]
    assert CLASH in values
    assert f"b/{CLASH}" in values
    names = [node.name for node in graph if node.name]
    assert len(names) == len(set(names))
    assert "b//stem/stem.0/Conv" in names


def test_identical_initializers_are_stored_once(tmp_path):
    head = _head(tmp_path)
    bias = onnx.load(head).graph.initializer[1]
    shift = onnx.helper.make_model(
        onnx.helper.make_graph(
            [onnx.helper.make_node("Add", ["x", "offsets"], ["shifted"])],
            "shift",
            [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", 10])],
            [onnx.helper.make_tensor_value_info("shifted", onnx.TensorProto.FLOAT, ["N", 10])],
            [onnx.numpy_helper.from_array(onnx.numpy_helper.to_array(bias), "offsets")],
        ),
        opset_imports=[onnx.helper.make_opsetid("", 14)],
    )
    shift.ir_version = 8
    onnx.save(shift, tmp_path / "shift.onnx")
    grafted = graft(head, tmp_path / "shift.onnx", ["logits=x"]).model
    # The shift's offsets equal the head's fc.bias byte for byte: stored once.
    assert sorted(grafted.graph.initializers) == ["fc.bias", "fc.weight"]
    (add,) = [n for n in grafted.graph if n.op_type == "Add"]
    assert add.inputs[1].name == "fc.bias"
    features = np.random.default_rng(5).standard_normal((2, 64)).astype(np.float32)
    (logits,) = _run(str(head), {"features": features})
    (got,) = _run(ir.to_onnx(grafted), {"features": features})
    np.testing.assert_array_equal(got, logits + onnx.numpy_helper.to_array(bias))


def test_different_opsets_are_converted_and_said(tmp_path):
    result = graft(_backbone(tmp_path), _head(tmp_path, opset=13), [f"{POOLED}=features:Flatten"])
    assert result.notes == ("converted the second model from opset 13 to 14",)
    assert result.model.opset_imports[""] == 14


def test_reshape_and_transpose_adapters(tmp_path):
    backbone = _backbone(tmp_path)
    reshaped = graft(backbone, _head(tmp_path), [f"{POOLED}=features:Reshape"]).model
    (node,) = [n for n in reshaped.graph if n.op_type == "Reshape"]
    assert list(node.inputs[1].const_value.numpy()) == [-1, 64]
    feeds = random_feeds(onnx.load(RESNET), seed=4)
    (pooled,) = _run(str(backbone), feeds)
    (expected,) = _run(str(_head(tmp_path)), {"features": pooled.reshape(-1, 64)})
    (got,) = _run(ir.to_onnx(reshaped), feeds)
    np.testing.assert_array_equal(got, expected)
    connection = parse_connection("y=x:Transpose <perm = [0, 2, 3, 1]>")
    assert connection.adapter == ir.Adapter("Transpose", {"perm": [0, 2, 3, 1]})


@pytest.mark.parametrize(
    ("connect", "message"),
    [
        ("nothing=features:Flatten", "the first model has no value named 'nothing'"),
        (f"{POOLED}=feats", "no graph input named 'feats' (its inputs: features)"),
        (f"{POOLED}features", "expected A_OUT=B_IN"),
        (f"{POOLED}=features:Flatten <axis = >", "is not an op with literal attributes"),
        (f"{POOLED}=features", "but 'features' takes float\\[N,64\\]; give an adapter"),
    ],
)
def test_bad_connections_are_named(tmp_path, connect, message):
    pattern = message if "\\[" in message else message.replace("(", r"\(").replace(")", r"\)")
    with pytest.raises(RewriteError, match=pattern):
        graft(_backbone(tmp_path), _head(tmp_path), [connect])
