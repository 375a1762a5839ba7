"""Models with onnxruntime's own default-domain ops: rewritten, converted, and equal.

onnxruntime's transformer optimizer writes `LayerNormalization` into opset-14 models and its
and onnxscript's fusers write `SimplifiedLayerNormalization`; the library's rules see the types
past them and `--target-opset` converts them.
"""

from __future__ import annotations

import numpy as np
import onnx.parser

import rewriter
from tests.helpers import session

_X = np.random.default_rng(1).standard_normal((2, 3, 8)).astype(np.float32)


def _outputs(model: onnx.ModelProto) -> list[np.ndarray]:
    return session(model).run(None, {"x": _X})


def test_a_mul_after_onnxruntime_s_layer_normalization_folds_into_it_at_opset_23():
    model = onnx.parser.parse_model("""
    <ir_version: 8, opset_import: ["" : 14]>
    g (float[N, 3, 8] x) => (float[N, 3, 8] y)
    <float[8] s = {1, 2, 1, 2, 1, 2, 1, 2}, float[8] b = {0, 1, 0, 1, 0, 1, 0, 1},
     float[8] c = {0.5, 0.5, 2, 2, 1, 1, 3, 3}> {
        n = LayerNormalization (x, s, b)
        y = Mul (n, c)
    }
    """)
    result = rewriter.rewrite(model, options=rewriter.RewriteOptions(target_opset=23))
    assert [(n.op_type, n.domain) for n in result.proto.graph.node] == [("LayerNormalization", "")]
    assert result.proto.opset_import[0].version == 23
    np.testing.assert_allclose(_outputs(result.proto)[0], _outputs(model)[0], rtol=1e-6, atol=1e-6)


def test_rules_see_the_types_past_simplified_layer_normalization():
    model = onnx.parser.parse_model("""
    <ir_version: 8, opset_import: ["" : 18]>
    g (float[N, 3, 8] x) => (float[N, 3, 8] y)
    <float[8] s = {1, 2, 1, 2, 1, 2, 1, 2}> {
        n = SimplifiedLayerNormalization (x, s)
        r = Relu (n)
        y = Relu (r)
    }
    """)
    for target in (None, 23):
        result = rewriter.rewrite(model, options=rewriter.RewriteOptions(target_opset=target))
        assert [n.op_type for n in result.proto.graph.node] == [
            "SimplifiedLayerNormalization",
            "Relu",
        ]
        assert not [s for s in result.trace.skips if s.reason.startswith("rolled back")]
        np.testing.assert_array_equal(_outputs(result.proto)[0], _outputs(model)[0])
