"""Verification on real exported models from tests/models (skipped when they are absent)."""

from __future__ import annotations

import os

import onnx
import pytest

from rewriter.verification import InputOptions, VerifyOptions, check_equivalence, find_first_bad
from tests.rewriter.verification import _models as models

MODELS = os.path.join(os.path.dirname(__file__), "..", "..", "models")


def _path(name: str) -> str:
    path = os.path.join(MODELS, f"{name}.onnx")
    if not os.path.exists(path):
        pytest.skip(f"{name}.onnx is not in tests/models")
    return path


@pytest.mark.parametrize(
    "name", ["bert_ts14", "gpt2_ts14", "vit_ts14", "mobilenetv2_ts14", "cnn_bn_ts14"]
)
def test_exported_model_matches_its_onnxruntime_optimized_version(name, tmp_path):
    path = _path(name)
    optimized = models.ort_optimized(onnx.load(path), tmp_path)
    assert len(optimized.graph.node) < len(onnx.load(path).graph.node)
    result = check_equivalence(
        path, optimized, VerifyOptions(inputs=InputOptions(examples=10), save_counterexample=False)
    )
    assert result.ok, result.render_table()
    assert result.examples_rejected == 0  # ids stay inside the embedding tables


def _erf_sites(model: onnx.ModelProto) -> list[int]:
    """Indices of the Erf nodes (one per GELU)."""
    return [i for i, node in enumerate(model.graph.node) if node.op_type == "Erf"]


def _apply_prefix(model: onnx.ModelProto, k: int, bad_step: int) -> onnx.ModelProto:
    """Replay the first `k` synthetic rewrites: Identity inserted before each Erf (harmless),
    except rewrite `bad_step`, which replaces its Erf by Tanh."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    sites = _erf_sites(out)[:k]
    for step, index in reversed(list(enumerate(sites, start=1))):
        erf = out.graph.node[index]
        if step == bad_step:
            erf.op_type = "Tanh"
            continue
        moved = f"{erf.input[0]}__step{step}"
        identity = onnx.helper.make_node("Identity", [erf.input[0]], [moved], name=f"step{step}")
        erf.input[0] = moved
        out.graph.node.insert(index, identity)
    return out


def test_wrong_gelu_in_bert_is_caught_and_bisected_to_its_rewrite():
    original = onnx.load(_path("bert_ts14"))
    n_steps = len(_erf_sites(original))
    assert n_steps == 6
    bad_step = 4
    final = _apply_prefix(original, n_steps, bad_step)
    result = check_equivalence(original, final, VerifyOptions(save_counterexample=False))
    assert not result.ok
    assert set(result.mismatched_outputs) == {"last_hidden_state", "pooler_output"}
    assert result.examples_rejected == 0
    found = find_first_bad(
        n_steps,
        lambda k: _apply_prefix(original, k, bad_step),
        original,
        result.counterexample,
    )
    assert found == bad_step
