"""`rewrite split` / `rewriter.surgery.split`: pipeline stages, and `rewrite verify MODEL pipeline`."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import onnx
import onnx.helper
import onnx.numpy_helper
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ir
from rewriter._errors import RewriteError
from rewriter.api._flops import node_flops
from rewriter.cli import main
from rewriter.surgery import load_pipeline, split
from rewriter.surgery._split import _balanced_cuts
from tests.helpers import assert_same_outputs

MODELS = Path(__file__).parents[2] / "models"
GPT2 = MODELS / "gpt2_ts14.onnx"  # a small GPT-2 exported by torch.onnx (TorchScript)


def _initializer_bytes(path: Path) -> int:
    model = ir.load(path)
    return sum(v.const_value.nbytes for v in model.graph.initializers.values())


def test_gpt2_in_three_stages_chains_back_to_the_original(tmp_path, capsys):
    folder = tmp_path / "stages"
    assert main(["split", str(GPT2), "--stages", "3", "-o", str(folder)]) == 0
    assert "wrote" in capsys.readouterr().out
    manifest = json.loads((folder / "pipeline.json").read_text())
    assert [s["model"] for s in manifest["stages"]] == [f"stage_{i}.onnx" for i in range(3)]
    sizes = [_initializer_bytes(folder / s["model"]) for s in manifest["stages"]]
    total = _initializer_bytes(GPT2)
    assert sum(sizes) <= 1.05 * total  # weights are not duplicated
    assert max(sizes) <= total / 2
    # Each stage reads only the original's inputs and values earlier stages give.
    given_so_far = {i.name for i in onnx.load(GPT2).graph.input}
    for stage in manifest["stages"]:
        assert set(stage["inputs"]) <= given_so_far
        given_so_far |= set(stage["outputs"])
        onnx.checker.check_model(onnx.load(folder / stage["model"]), full_check=True)
    verify = ["verify", str(GPT2), str(folder / "pipeline.json"), "--examples", "5"]
    assert main(verify) == 0
    assert "equivalent" in capsys.readouterr().out
    assert_same_outputs(onnx.load(GPT2), ir.to_onnx(load_pipeline(folder / "pipeline.json")))


def _mlp(widths: list[int]) -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    nodes, initializers = [], []
    previous = "x"
    for index, (k, n) in enumerate(itertools.pairwise(widths)):
        weight = f"w{index}"
        initializers.append(
            onnx.numpy_helper.from_array(rng.standard_normal((k, n)).astype(np.float32), weight)
        )
        out = f"h{index}" if index < len(widths) - 2 else "y"
        nodes.append(onnx.helper.make_node("MatMul", [previous, weight], [f"m{index}"]))
        nodes.append(onnx.helper.make_node("Relu", [f"m{index}"], [out]))
        previous = out
    graph = onnx.helper.make_graph(
        nodes,
        "mlp",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 128, widths[0]])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 128, widths[-1]])],
        initializers,
    )
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def test_flops_of_matmuls_are_two_m_k_n():
    model = ir.from_onnx(_mlp([64, 256, 64]))
    ir.infer_types(model)
    flops = {node.op_type + str(i): node_flops(node) for i, node in enumerate(model.graph)}
    assert flops == {
        "MatMul0": 2 * 128 * 64 * 256,
        "Relu1": 128 * 256,
        "MatMul2": 2 * 128 * 256 * 64,
        "Relu3": 128 * 64,
    }


def test_flops_balance_puts_the_wide_layers_apart(tmp_path):
    path = tmp_path / "mlp.onnx"
    onnx.save(_mlp([32, 32, 512, 32, 32]), path)
    stages = split(path, 2, balance="flops")
    costs = [s.cost for s in stages]
    assert sum(costs) > 0
    # The two big MatMuls (32x512 and 512x32) hold almost all FLOPs: one per stage.
    assert max(costs) < 0.6 * sum(costs)
    by_params = split(path, 2, balance="params")
    assert [s.nodes for s in by_params] == [s.nodes for s in stages]  # same here: same shapes


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(min_value=0, max_value=50), min_size=1, max_size=9),
    st.integers(min_value=1, max_value=4),
)
def test_balanced_cuts_are_optimal(costs, stages):
    stages = min(stages, len(costs))
    cuts = _balanced_cuts(costs, stages)
    assert cuts[0] == 0
    assert cuts[-1] == len(costs)
    assert len(cuts) == stages + 1
    assert all(a < b for a, b in itertools.pairwise(cuts))  # no empty stage
    worst = max(sum(costs[a:b]) for a, b in itertools.pairwise(cuts))
    best = min(
        max(sum(costs[a:b]) for a, b in itertools.pairwise((0, *inner, len(costs))))
        for inner in itertools.combinations(range(1, len(costs)), stages - 1)
    )
    assert worst == best


def test_more_stages_than_nodes_and_bad_folders_are_refused(tmp_path, capsys):
    path = tmp_path / "mlp.onnx"
    onnx.save(_mlp([8, 8]), path)
    with pytest.raises(RewriteError, match="stages=5: the model has 2 nodes"):
        split(path, 5)
    assert main(["split", str(path), "--stages", "5", "-o", str(tmp_path / "five")]) == 2
    assert "--stages 5: the model has 2 nodes" in capsys.readouterr().err
    assert main(["split", str(path), "--stages", "2", "-o", str(tmp_path)]) == 2
    assert "other than the model's own" in capsys.readouterr().err
    out = tmp_path / "out"
    assert main(["split", str(path), "--stages", "2", "-o", str(out)]) == 0
    assert main(["split", str(path), "--stages", "2", "-o", str(out)]) == 2
    assert "already holds a pipeline" in capsys.readouterr().err
