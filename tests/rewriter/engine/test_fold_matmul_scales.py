"""`fold_constants` leaves a shape-derived MatMul scale unfolded where onnxruntime would fuse it.

Folded, a scale computed from a shape (`sqrt(1 / sqrt(head_dim))` on the query and the key)
lets onnxruntime's ORT_ENABLE_ALL fuse both Muls into a FusedMatMul that rounds differently
(its MatMulScaleFusion); left as it is, onnxruntime runs the rewritten model as it ran the
original. The oracle is onnxruntime at both optimization levels, bit for bit.
"""

from __future__ import annotations

import numpy as np
import onnxruntime as ort

import ir
import rewriter
from rewriter import rules
from tests.helpers import model_from_text, op_types
from tests.rewriter.verification import _models as models

LEVELS = ort.GraphOptimizationLevel


def _fold(model, **options: int) -> ir.Model:
    use = rules.PassUse("fold_constants", tuple(options.items()))
    run = rewriter.RewriteOptions(passes=(use,))
    return rewriter.rewrite(model, rules.RuleSet(()), run).model


def _run(model: ir.Model, level: ort.GraphOptimizationLevel, depth: int = 8) -> np.ndarray:
    options = ort.SessionOptions()
    options.graph_optimization_level = level
    options.log_severity_level = 3
    serialized = ir.to_onnx(model).SerializeToString()
    session = ort.InferenceSession(serialized, options, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    feeds = {
        "q": rng.standard_normal((1, 2, 5, depth)).astype(np.float32),
        "k": rng.standard_normal((1, 2, depth, 5)).astype(np.float32),
    }
    return np.asarray(session.run(None, feeds)[0])


def test_a_shape_derived_scale_of_a_matmul_stays_and_onnxruntime_computes_the_same():
    original = ir.from_onnx(models.attention_scale())
    folded = _fold(original)
    assert op_types(folded) == op_types(original)
    expected = _run(original, LEVELS.ORT_DISABLE_ALL)
    np.testing.assert_array_equal(_run(folded, LEVELS.ORT_ENABLE_ALL), expected)
    # Folded anyway (the option off), onnxruntime's optimizer rounds it differently.
    forced = _fold(original, keep_matmul_scales=0)
    assert "Sqrt" not in op_types(forced)
    np.testing.assert_array_equal(_run(forced, LEVELS.ORT_DISABLE_ALL), expected)
    assert np.any(_run(forced, LEVELS.ORT_ENABLE_ALL) != expected)


def test_a_power_of_two_scale_folds_the_fusion_is_exact():
    original = ir.from_onnx(models.attention_scale(depth=16))  # sqrt(1 / sqrt(16)) = 0.5
    folded = _fold(original)
    assert "Sqrt" not in op_types(folded)
    expected = _run(original, LEVELS.ORT_DISABLE_ALL, depth=16)
    np.testing.assert_array_equal(_run(folded, LEVELS.ORT_ENABLE_ALL, depth=16), expected)


def test_a_scale_from_constants_alone_folds_onnxruntime_fuses_the_original_too():
    model = model_from_text(
        """<ir_version: 8, opset_import: ["" : 17]>
        g (float[2, 8] a, float[8, 2] b) => (float[2, 2] y) {
            eighth = Constant <value = float {0.125}> ()
            scale = Sqrt (eighth)
            scaled = Mul (a, scale)
            y = MatMul (scaled, b)
        }"""
    )
    assert "Sqrt" not in op_types(_fold(model))


def test_a_shape_derived_scale_elsewhere_folds():
    # The same scale added, not multiplied: no fusion onnxruntime would make of it.
    model = models.attention_scale()
    for node in model.graph.node:
        if node.output[0] in ("qs", "ks"):
            node.op_type = "Add"
    folded = _fold(ir.from_onnx(model))
    assert op_types(folded).count("Sqrt") == 0
