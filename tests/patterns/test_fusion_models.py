"""The default rule library (patterns/ without the opt-in folders) on real exported models (tests/models): every BatchNormalization
folded, every decomposed LayerNorm / GELU / attention fused at an opset that has the fused op,
and the outputs still equal to the source framework's outputs saved in the .npz files."""

from __future__ import annotations

import collections

import onnx
import pytest

import ir
import rewriter
from tests.patterns.fusion_helpers import (
    LIBRARY,
    MODELS,
    default_library,
    manifest_entry,
    run_npz_samples,
)


def _path(name: str) -> str:
    path = MODELS / f"{name}.onnx"
    if not path.exists():
        pytest.skip(f"{name}.onnx is not in tests/models")
    return str(path)


def _ops(proto: onnx.ModelProto) -> collections.Counter[str]:
    """Op counts over the main graph and every subgraph."""
    counts: collections.Counter[str] = collections.Counter()

    def visit(graph: onnx.GraphProto) -> None:
        for node in graph.node:
            counts[node.op_type] += 1
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.GRAPH:
                    visit(attr.g)
                for sub in attr.graphs:
                    visit(sub)

    visit(proto.graph)
    return counts


def _rewrite(
    name: str, target_opset: int | None = None, *, relaxed: bool = False
) -> tuple[rewriter.RewriteResult, onnx.ModelProto]:
    rules = [*default_library(), LIBRARY / "relaxed"] if relaxed else default_library()
    result = rewriter.rewrite(
        _path(name), rules, rewriter.RewriteOptions(target_opset=target_opset)
    )
    ir.verify(result.model)
    proto = result.proto
    onnx.checker.check_model(proto, full_check=True)
    return result, proto


@pytest.mark.parametrize("name", ["cnn_bn_ts14", "mobilenetv2_ts14", "cnn_bn_dynamo18"])
def test_every_batchnorm_folds(name):
    expected = manifest_entry(name)["expected"]["batchnorm"]
    before = _ops(onnx.load(_path(name)))
    assert before["BatchNormalization"] == expected
    result, proto = _rewrite(name)
    ops = _ops(proto)
    assert ops["BatchNormalization"] == 0, result.trace.explain()
    assert ops["Conv"] == before["Conv"]
    run_npz_samples(name, proto)


@pytest.mark.parametrize("name", ["bert_ts14", "gpt2_ts14", "vit_ts14", "conv1d_ln_gelu_x6_ts14"])
def test_every_layer_norm_fuses_at_opset_17(name):
    expected = manifest_entry(name)["expected"]["layernorm"]
    _result, proto = _rewrite(name, target_opset=17)
    ops = _ops(proto)
    assert ops["LayerNormalization"] == expected
    assert ops["ReduceMean"] == 0
    assert ops["Sqrt"] == 0
    run_npz_samples(name, proto)


def test_layer_norm_is_not_fused_below_opset_17():
    result, proto = _rewrite("bert_ts14")
    assert _ops(proto)["LayerNormalization"] == 0
    assert any("requires opset ai.onnx >= 17" in skip.reason for skip in result.trace.skips)


@pytest.mark.parametrize(
    "name", ["bert_ts14", "gpt2_ts14", "vit_ts14", "conv1d_ln_gelu_x6_ts14", "bert_dynamo18"]
)
def test_every_gelu_fuses_at_opset_20(name):
    entry = manifest_entry(name)["expected"]
    _, proto = _rewrite(name, target_opset=20)
    ops = _ops(proto)
    assert ops["Gelu"] == entry["gelu"]
    assert ops["Erf"] == 0
    assert ops["LayerNormalization"] == entry["layernorm"]
    run_npz_samples(name, proto)


@pytest.mark.slow
@pytest.mark.parametrize(
    "name",
    [
        "bert_dynamo18",
        "bert_ts14",
        "bert_sdpa_ts14",
        "gpt2_ts14",
        "vit_ts14",
    ],
)
def test_every_attention_fuses_at_opset_23(name):
    # bert_sdpa_ts14's masks are Where(keep, 0, -inf), guarded by Where(IsNaN(p), 0, p): fused
    # exactly by default (the guard's zeros put back where Attention gives NaN)
    entry = manifest_entry(name)["expected"]
    _, proto = _rewrite(name, target_opset=23)
    ops = _ops(proto)
    assert ops["Gelu"] == entry["gelu"]
    assert ops["LayerNormalization"] == entry["layernorm"]
    run_npz_samples(name, proto)
    assert ops["Attention"] == entry["attention"]
    assert ops["Softmax"] == 0


@pytest.mark.slow
def test_the_guarded_sdpa_attention_is_fused_without_its_guard_by_relaxed():
    _, proto = _rewrite("bert_sdpa_ts14", target_opset=23, relaxed=True)
    assert _ops(proto)["Attention"] == 6
    assert _ops(proto)["Softmax"] == 0
    assert _ops(proto)["IsNaN"] == 0  # the exact default form keeps one per attention
    run_npz_samples("bert_sdpa_ts14", proto)


def test_attention_fuses_in_bert_dynamo18_at_opset_23():
    # the one attention model of the fast run (the others are marked slow)
    _, proto = _rewrite("bert_dynamo18", target_opset=23)
    assert _ops(proto)["Attention"] == 6
    run_npz_samples("bert_dynamo18", proto)
