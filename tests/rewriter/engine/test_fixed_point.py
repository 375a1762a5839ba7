"""The fixed-point driver's fingerprint sees every change a round can make."""

from __future__ import annotations

import numpy as np

import ir
from rewriter.engine._manager import _fingerprint
from tests.helpers import model_from_text

TEXT = """<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 3] x) => (float[2, 3] y) {
    w = Constant <value = float[1] {2.0}> ()
    t = LeakyRelu <alpha = 0.1> (x)
    y = Mul (t, w)
}"""


def _model() -> ir.Model:
    return ir.from_onnx(model_from_text(TEXT))


def test_an_attribute_change_changes_the_fingerprint():
    model = _model()
    before = _fingerprint(model)
    leaky = next(n for n in model.graph if n.op_type == "LeakyRelu")
    leaky.set_attribute(ir.attr_float("alpha", 0.2))
    assert _fingerprint(model) != before


def test_a_constant_change_changes_the_fingerprint():
    model = _model()
    value = ir.Value("k", const_value=ir.NumpyTensor(np.array([2.0], np.float32), "k"))
    model.graph.add_initializer(value)
    mul = next(n for n in model.graph if n.op_type == "Mul")
    mul.replace_input_with(1, value)
    before = _fingerprint(model)
    value.const_value = ir.NumpyTensor(np.array([3.0], np.float32), "k")
    assert _fingerprint(model) != before


def test_the_same_model_has_the_same_fingerprint():
    assert _fingerprint(_model()) == _fingerprint(_model())
