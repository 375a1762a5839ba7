"""A fold exact by ONNX semantics that onnxruntime's optimizer then rounds differently.

kokoro's ALBERT encoder computes its attention scale from the head dim's size (Shape ->
Gather -> Slice -> Cast -> Sqrt -> Div -> Sqrt) and multiplies it into the query and the
key. `fold_constants` folds that chain to the constant it always is; onnxruntime's
`ORT_ENABLE_ALL` then fuses both Muls into a `com.microsoft.FusedMatMul` with alpha = the
scale squared (its MatMulScaleFusion), which rounds differently from the two Muls. Where a
model turns such values into sizes (kokoro's rounded durations), the rewritten model's
output has another length under onnxruntime's default settings, while it equals the
original with the optimizations off. `fold_constants` leaves such a scale unfolded by
default; where a model still meets this (the fold asked for, or a rule making such a
constant), `--verify` must say so, and what onnxruntime did.
"""

from __future__ import annotations

import numpy as np
import onnxruntime as ort

import ir
import rewriter
from rewriter import rules
from rewriter.verification import (
    Criterion,
    RuntimeOptions,
    check_on_inputs,
    describe_optimizer_difference,
    optimizer_difference,
)
from tests.rewriter.verification import _models as models

LEVELS = ort.GraphOptimizationLevel


def _feeds(seed: int = 0, n: int = 5) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "q": rng.standard_normal((1, 2, n, 8)).astype(np.float32),
        "k": rng.standard_normal((1, 2, 8, n)).astype(np.float32),
    }


def _run(model: ir.Model, level: ort.GraphOptimizationLevel) -> np.ndarray:
    options = ort.SessionOptions()
    options.graph_optimization_level = level
    options.log_severity_level = 3
    serialized = ir.to_onnx(model).SerializeToString()
    session = ort.InferenceSession(serialized, options, providers=["CPUExecutionProvider"])
    return np.asarray(session.run(None, _feeds())[0])


def _folded() -> tuple[ir.Model, ir.Model]:
    original = ir.from_onnx(models.attention_scale())
    # The fold `fold_constants` leaves out by default (see test_fold_matmul_scales.py).
    fold = rules.PassUse("fold_constants", (("keep_matmul_scales", 0),))
    options = rewriter.RewriteOptions(passes=(fold,))
    return original, rewriter.rewrite(original, rules.RuleSet(()), options).model


def test_the_fold_is_exact_and_onnxruntime_rounds_the_folded_form_differently():
    original, folded = _folded()
    assert "Sqrt" not in {node.op_type for node in folded.graph}
    disabled = _run(original, LEVELS.ORT_DISABLE_ALL)
    # Exact by ONNX semantics: with onnxruntime's optimizations off, bit for bit.
    np.testing.assert_array_equal(_run(folded, LEVELS.ORT_DISABLE_ALL), disabled)
    # onnxruntime's optimizer leaves the original's arithmetic as it is ...
    np.testing.assert_array_equal(_run(original, LEVELS.ORT_ENABLE_ALL), disabled)
    # ... and fuses the folded form's scale into the MatMul, which rounds differently.
    optimized = _run(folded, LEVELS.ORT_ENABLE_ALL)
    assert np.any(optimized != disabled)
    np.testing.assert_allclose(optimized, disabled, rtol=1e-6, atol=1e-6)


def test_optimizer_difference_names_the_fusion_the_folded_form_lets_fire():
    original, folded = _folded()
    difference = optimizer_difference(original, folded)
    assert difference == {"MatMul": -1, "Mul": -2, "com.microsoft.FusedMatMul": 1}
    assert describe_optimizer_difference(difference) == (
        "1 more com.microsoft.FusedMatMul, 1 fewer MatMul, 2 fewer Mul"
    )
    assert optimizer_difference(original, original) == {}


def test_a_difference_only_under_ort_enable_all_is_explained_as_such():
    original, folded = _folded()
    exact = Criterion(compare="direct", rtol=0.0, atol=0.0)
    result = check_on_inputs(original, folded, _feeds(), exact, RuntimeOptions(ort_enable_all=True))
    assert not result.ok
    assert result.failing_level == "ORT_ENABLE_ALL"
    assert [o.ok for o in result.outputs] == [True, False]
    notes = "\n".join(result.notes())
    assert "the difference appears only under onnxruntime's graph optimizations" in notes
    assert "with them off (ORT_DISABLE_ALL) the rewritten model agrees" in notes
    assert "1 more com.microsoft.FusedMatMul, 1 fewer MatMul, 2 fewer Mul" in notes
