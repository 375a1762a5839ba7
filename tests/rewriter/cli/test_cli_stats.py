"""`rewrite stats`: parameters count initializers and Constant values; nodes split by graph."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnx.helper
import onnx.numpy_helper
import pytest

import ir
from rewriter.api._stats import collect
from rewriter.cli import main
from tests.helpers import model_from_text

CONSTANTS = """<ir_version: 8, opset_import: ["" : 17]>
g (float[3] x) => (float[3] y) <float[3] w = {1, 2, 3}> {
    c = Constant <value = float[3] {4, 5, 6}> ()
    s = Constant <value_floats = [1.0, 2.0]> ()
    k = Constant <value_int = 7> ()
    t = Add (x, w)
    y = Mul (t, c)
}"""


def _model_with_loop() -> onnx.ModelProto:
    """A main graph of 2 nodes (Loop, Identity) whose Loop body holds 3."""
    body = onnx.helper.make_graph(
        [
            onnx.helper.make_node("Identity", ["cond"], ["cond_out"]),
            onnx.helper.make_node("Neg", ["v"], ["n"]),
            onnx.helper.make_node("Neg", ["n"], ["v_out"]),
        ],
        "body",
        [
            onnx.helper.make_tensor_value_info("i", onnx.TensorProto.INT64, []),
            onnx.helper.make_tensor_value_info("cond", onnx.TensorProto.BOOL, []),
            onnx.helper.make_tensor_value_info("v", onnx.TensorProto.FLOAT, [2]),
        ],
        [
            onnx.helper.make_tensor_value_info("cond_out", onnx.TensorProto.BOOL, []),
            onnx.helper.make_tensor_value_info("v_out", onnx.TensorProto.FLOAT, [2]),
        ],
    )
    graph = onnx.helper.make_graph(
        [
            onnx.helper.make_node("Loop", ["trips", "", "x"], ["looped"], body=body),
            onnx.helper.make_node("Identity", ["looped"], ["y"]),
        ],
        "g",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2])],
        [onnx.numpy_helper.from_array(np.array(3, np.int64), "trips")],
    )
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    return model


def test_parameters_count_initializers_and_constant_values():
    stats = collect(ir.from_onnx(model_from_text(CONSTANTS)))
    assert stats["initializer_parameters"] == 3
    assert stats["constant_parameters"] == 3 + 2 + 1
    assert stats["parameters"] == 9
    assert stats["initializers"] == 1
    assert stats["constant_tensors"] == 3
    assert stats["parameters_by_dtype"] == {"float": 8, "int64": 1}
    assert stats["largest_tensors"][0] == {
        "name": "c (Constant)",
        "dtype": "float",
        "shape": [3],
        "bytes": 12,
        "external": False,
    }


def test_parameter_count_survives_turning_constants_into_initializers(tmp_path, capsys):
    source = tmp_path / "m.onnx"
    onnx.save(model_from_text(CONSTANTS), source)
    out = tmp_path / "o.onnx"
    assert main([str(source), "-o", str(out), "--no-progress"]) == 0
    before, after = (collect(ir.load(path)) for path in (source, out))
    assert before["constant_parameters"] > 0
    assert before["parameters"] >= after["parameters"] > before["initializer_parameters"]


def test_stats_prints_where_parameters_are(tmp_path, capsys):
    source = tmp_path / "m.onnx"
    onnx.save(model_from_text(CONSTANTS), source)
    assert main(["stats", str(source)]) == 0
    out = capsys.readouterr().out
    assert (
        "9 parameters (40 B): 3 in 1 initializer, 6 in 3 Constant nodes; 0 external tensors" in out
    )
    assert "5 nodes\n" in out  # no subgraphs: no split


def test_stats_splits_main_graph_and_subgraph_nodes(tmp_path, capsys):
    source = tmp_path / "loop.onnx"
    onnx.save(_model_with_loop(), source)
    report = tmp_path / "stats.json"
    assert main(["stats", str(source), "--json", str(report)]) == 0
    assert "5 nodes (2 in the main graph, 3 in subgraphs)" in capsys.readouterr().out
    data = json.loads(report.read_text())
    assert (data["nodes"], data["main_graph_nodes"], data["subgraph_nodes"]) == (5, 2, 3)


@pytest.mark.parametrize("name", ["bert_ts14", "cnn_bn_ts14"])
def test_shipped_models_count_their_constants(name):
    path = Path(__file__).resolve().parents[2] / "models" / f"{name}.onnx"
    stats = collect(ir.load(path))
    assert stats["parameters"] == stats["initializer_parameters"] + stats["constant_parameters"]
    assert stats["nodes"] == stats["main_graph_nodes"] + stats["subgraph_nodes"]
