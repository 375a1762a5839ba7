"""Only pure nodes are merged: random bodies, stateful ops and unknown custom ops never are."""

from __future__ import annotations

import numpy as np
import pytest

import ir
import rewriter
from rewriter.engine._purity import Purity
from tests.helpers import model_from_text, session

RANDOM_BODY = """
<ir_version: 8, opset_import: ["" : 17, "local" : 1]>
g (float[4, 8] x) => (float[4, 8] d) {
    n1 = local.Noise (x)
    n2 = local.Noise (x)
    d = Sub (n1, n2)
}
<domain: "local", opset_import: ["" : 17]>
Noise (x) => (y) {
    r = RandomUniformLike (x)
    y = Add (x, r)
}
"""

DROPOUT_BODY = """
<ir_version: 8, opset_import: ["" : 17, "local" : 1]>
g (float[4, 8] x) => (float[4, 8] d) {
    n1 = local.Drop (x)
    n2 = local.Drop (x)
    d = Sub (n1, n2)
}
<domain: "local", opset_import: ["" : 17]>
Drop (x) => (y) {
    ratio = Constant <value = float {0.5}> ()
    training = Constant <value = bool {1}> ()
    y = Dropout (x, ratio, training)
}
"""

PURE_BODY = """
<ir_version: 8, opset_import: ["" : 17, "local" : 1]>
g (float[4, 8] x) => (float[4, 8] d) {
    n1 = local.Double (x)
    n2 = local.Double (x)
    d = Sub (n1, n2)
}
<domain: "local", opset_import: ["" : 17]>
Double (x) => (y) {
    y = Add (x, x)
}
"""


@pytest.mark.parametrize("text", [RANDOM_BODY, DROPOUT_BODY], ids=["random", "dropout"])
def test_calls_of_a_function_with_a_random_body_are_not_merged(text):
    model = model_from_text(text)
    result = rewriter.rewrite(model)
    calls = [n for n in result.proto.graph.node if n.domain == "local"]
    assert len(calls) == 2
    x = np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32) + 3
    (difference,) = session(result.proto).run(None, {"x": x})
    assert np.any(difference != 0), "n1 - n2 became 0: two draws were merged into one"


def test_calls_of_a_pure_function_are_merged():
    result = rewriter.rewrite(model_from_text(PURE_BODY))
    calls = [n for n in result.proto.graph.node if n.domain == "local"]
    assert len(calls) <= 1


def test_purity_of_nodes():
    model = ir.from_onnx(model_from_text(RANDOM_BODY))
    purity = Purity(model)
    (call, _, sub) = list(model.graph)
    assert not purity.is_pure(call)
    assert purity.is_pure(sub)
    unknown = ir.Node("Mystery", [model.graph.inputs[0]], domain="vendor.ops")
    assert not purity.is_pure(unknown)
