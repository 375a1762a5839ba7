"""Layers of a staged run and the models that choose per layer (`rewriter.quantize._sites`).

One rewrite by the approximate rules, then any mix of float and approximate layers is built
from the float model by copying the variant's nodes in: the same numbers as the engine's own
result, and a switchable model whose boolean inputs pick each layer at run time.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import ir
from rewriter.api import RewriteOptions, rewrite
from rewriter.quantize import find_layers, materialize, name_every_node, switch_name
from tests.budget_models import ROUNDED_RULE, outlier_mlp

X = np.random.default_rng(3).standard_normal((5, 16)).astype(np.float32)


def _run(model: ir.Model, **switches: bool) -> np.ndarray:
    session = ort.InferenceSession(
        ir.to_onnx(model).SerializeToString(), providers=["CPUExecutionProvider"]
    )
    feeds = {"x": X, **{name: np.array(on) for name, on in switches.items()}}
    return session.run(["y"], feeds)[0]


@pytest.fixture(scope="module")
def staged(tmp_path_factory):
    folder = tmp_path_factory.mktemp("layers")
    rules = folder / "rounded.rw"
    rules.write_text(ROUNDED_RULE)
    float_model = ir.from_onnx(outlier_mlp())
    name_every_node(float_model)
    # The approximate rules alone, as the staged run makes its variants (no passes after).
    approximate = rewrite(float_model, [str(rules)], RewriteOptions(passes=()))
    layers = find_layers(float_model, [(approximate.model, approximate.trace)])
    return float_model, approximate, layers


def test_each_approximate_rewrite_is_a_layer_named_by_its_anchor(staged):
    _, approximate, layers = staged
    assert [layer.anchor for layer in layers] == ["mm0", "mm1", "mm2", "mm3"]
    assert [layer.options[0].rule for layer in layers] == ["matmul_weight_rounded"] * 4
    assert [layer.outputs for layer in layers] == [("mm0",), ("mm1",), ("mm2",), ("mm3",)]
    assert layers.unplaced == ()
    assert len(approximate.trace.approximate_sites()) == 4


def test_every_layer_approximate_computes_what_the_engine_wrote(staged):
    float_model, approximate, layers = staged
    built = materialize(float_model, [approximate.model], layers, dict.fromkeys(range(4), 0))
    ir.verify(built.model.graph)
    np.testing.assert_array_equal(_run(built.model), _run(approximate.model))
    assert sorted(set(built.node_layers.values())) == [0, 1, 2, 3]


def test_a_float_layer_keeps_its_float_nodes_and_the_others_lose_theirs(staged):
    float_model, approximate, layers = staged
    built = materialize(float_model, [approximate.model], layers, {0: 0, 2: 0, 3: 0})
    matmuls = {node.name: node for node in built.model.graph if node.op_type == "MatMul"}
    assert "layer1" in matmuls  # the float MatMul of layer 1, reading w1 itself
    assert matmuls["layer1"].inputs[1].name == "w1"
    assert not {"layer0", "layer2", "layer3"} & set(matmuls)  # replaced by rounded copies
    assert sorted(set(built.node_layers.values())) == [0, 2, 3]
    assert not np.array_equal(_run(built.model), _run(approximate.model))


def test_the_switchable_model_picks_float_or_approximate_per_layer(staged):
    float_model, approximate, layers = staged
    switchable = materialize(float_model, [approximate.model], layers, switchable=True).model
    names = [switch_name(i, 0) for i in range(4)]
    assert [v.name for v in switchable.graph.inputs] == ["x", *names]
    np.testing.assert_array_equal(
        _run(switchable, **dict.fromkeys(names, False)), _run(float_model)
    )
    np.testing.assert_array_equal(
        _run(switchable, **dict.fromkeys(names, True)), _run(approximate.model)
    )
    only_second = materialize(float_model, [approximate.model], layers, {1: 0}).model
    chosen = {name: name == names[1] for name in names}
    np.testing.assert_array_equal(_run(switchable, **chosen), _run(only_second))


def test_unnamed_and_repeated_node_names_get_unique_names():
    model = outlier_mlp()
    model.graph.node[0].name = ""
    model.graph.node[1].name = "layer0"
    model.graph.node[2].name = "layer0"
    ir_model = ir.from_onnx(model)
    assert name_every_node(ir_model) == 2  # the unnamed node, the second `layer0`
    names = [node.name for node in ir_model.graph]
    assert len(names) == len(set(names))
    assert all(names)
    assert onnx.checker.check_model(ir.to_onnx(ir_model)) is None
