"""`rewrite stats` profiles: FLOPs and bytes, parameters by layer, weight distributions."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnx.helper
import onnx.numpy_helper

import ir
from rewriter.api._profile import profile, weight_stats
from rewriter.cli import main


def _transformer_mlp(path: Path, hidden: int = 768, inner: int = 3072) -> None:
    """An MLP of transformer width over a symbolic [batch, sequence, hidden] input."""
    rng = np.random.default_rng(0)

    def weight(name: str, shape: tuple[int, ...]) -> onnx.TensorProto:
        return onnx.numpy_helper.from_array(
            (rng.standard_normal(shape) * 0.02).astype(np.float32), name
        )

    graph = onnx.helper.make_graph(
        [
            onnx.helper.make_node("MatMul", ["x", "w1"], ["a"], name="/mlp/fc1/MatMul"),
            onnx.helper.make_node("Add", ["a", "b1"], ["ab"], name="/mlp/fc1/Add"),
            onnx.helper.make_node("Relu", ["ab"], ["r"], name="/mlp/act/Relu"),
            onnx.helper.make_node("MatMul", ["r", "w2"], ["y"], name="/mlp/fc2/MatMul"),
        ],
        "mlp",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["B", "S", hidden])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["B", "S", hidden])],
        [weight("w1", (hidden, inner)), weight("b1", (inner,)), weight("w2", (inner, hidden))],
    )
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)


def test_flops_of_an_mlp_with_a_given_input_shape(tmp_path, capsys):
    path = tmp_path / "mlp.onnx"
    _transformer_mlp(path)
    out = tmp_path / "stats.json"
    argv = ["stats", str(path), "--input-shape", "x=1x128x768", "--json", str(out)]
    assert main(argv) == 0
    assert "FLOPs" in capsys.readouterr().out
    stats = json.loads(out.read_text())
    matmuls = 2 * 128 * 768 * 3072 * 2
    assert abs(stats["flops"] - matmuls) <= 0.05 * matmuls
    assert stats["flops_by_op"]["MatMul"] == matmuls
    assert stats["parameter_bytes_by_layer"]["/mlp/fc1"] == (768 * 3072 + 3072) * 4
    # Without the shape, symbolic dims count as 1: per example (per token here).
    per_token = profile(ir.load(path)).flops
    assert per_token * 128 == stats["flops"]


def test_input_shape_errors_name_the_input(tmp_path, capsys):
    path = tmp_path / "mlp.onnx"
    _transformer_mlp(path, 8, 16)
    assert main(["stats", str(path), "--input-shape", "z=1x2x8"]) == 2
    assert "--input-shape z: no graph input of that name (x)" in capsys.readouterr().err
    assert main(["stats", str(path), "--input-shape", "x=1x8"]) == 2
    assert "2 dims given, the input has 3" in capsys.readouterr().err
    assert main(["stats", str(path), "--input-shape", "x=1xAx8"]) == 2
    assert "expected NAME=D1xD2x..." in capsys.readouterr().err


def test_weight_distributions_flag_what_stands_out():
    rng = np.random.default_rng(1)
    normal = rng.standard_normal(10_000).astype(np.float32)
    assert weight_stats("normal", normal).flags == ()
    outliers = normal.copy()
    outliers[[3, 500, 7000]] = 60.0
    assert weight_stats("outliers", outliers).flags == ("3 outliers",)
    # A training bug the seeds found: weights split into two clusters.
    two_modes = np.concatenate([rng.normal(-1, 0.05, 5000), rng.normal(1, 0.05, 5000)])
    (flag,) = weight_stats("bimodal", two_modes.astype(np.float32)).flags
    assert flag.startswith("bimodal")
    special = normal.copy()
    special[:2] = np.nan
    special[2] = np.inf
    special[3] = 1e-40  # subnormal in float32
    stats = weight_stats("special", special)
    assert stats.flags[:3] == ("2 NaN", "1 inf", "1 subnormal")
    assert sum(stats.histogram) == special.size - 3  # the finite values


def test_shape_inference_disagreements_are_named(tmp_path, capsys):
    model = onnx.parser.parse_model(
        """<ir_version: 8, opset_import: ["" : 17]>
        g (float[2, 3] x) => (float[2, 3] y) {
            t = Relu (x)
            y = Identity (t)
        }"""
    )
    model.graph.value_info.append(
        onnx.helper.make_tensor_value_info("t", onnx.TensorProto.FLOAT, [2, 5])
    )
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    assert main(["stats", str(path)]) == 0
    out = capsys.readouterr().out
    assert "shape inference disagrees: t: declared float[2,5], inferred float[2,3]" in out


def test_report_shows_flops_and_histograms(tmp_path):
    path = tmp_path / "mlp.onnx"
    _transformer_mlp(path, 16, 64)
    report = tmp_path / "stats.html"
    assert main(["stats", str(path), "--report", str(report)]) == 0
    html = report.read_text()
    assert 'id="flops"' in html
    assert 'aria-label="FLOPs by op type"' in html
    assert 'aria-label="values of w1"' in html
