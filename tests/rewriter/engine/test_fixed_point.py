"""The fixed-point driver's fingerprint sees every change a round can make, and only those."""

from __future__ import annotations

import numpy as np

import ir
from rewriter.engine._fingerprint import LARGE_TENSOR_ELEMENTS, fingerprint
from tests.helpers import model_from_text

TEXT = """<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 3] x) => (float[2, 3] y) {
    w = Constant <value = float[1] {2.0}> ()
    t = LeakyRelu <alpha = 0.1> (x)
    y = Mul (t, w)
}"""

BRANCHES = """<ir_version: 8, opset_import: ["" : 17]>
g (bool c, float[2] x) => (float[2] y) {
    y = If (c) <
        then_branch = t () => (float[2] a) {
            k = Constant <value = float[2] {1.0, 2.0}> ()
            a = Add (x, k)
        },
        else_branch = e () => (float[2] b) { b = Neg (x) }
    >
}"""

TWO_READS = """<ir_version: 8, opset_import: ["" : 17]>
g (float[2] x) => (float[2] y) {
    a = Relu (x)
    b = Neg (x)
    y = Sub (a, b)
}"""


def _model(text: str = TEXT) -> ir.Model:
    return ir.from_onnx(model_from_text(text))


def test_an_attribute_change_changes_the_fingerprint():
    model = _model()
    before = fingerprint(model)
    leaky = next(n for n in model.graph if n.op_type == "LeakyRelu")
    leaky.set_attribute(ir.attr_float("alpha", 0.2))
    assert fingerprint(model) != before


def test_an_initializer_change_changes_the_fingerprint():
    model = _model()
    value = ir.Value("k", const_value=ir.NumpyTensor(np.array([2.0], np.float32), "k"))
    model.graph.add_initializer(value)
    mul = next(n for n in model.graph if n.op_type == "Mul")
    mul.replace_input_with(1, value)
    before = fingerprint(model)
    value.const_value = ir.NumpyTensor(np.array([3.0], np.float32), "k")
    assert fingerprint(model) != before


def test_models_differing_only_in_a_constant_value_differ():
    other = TEXT.replace("{2.0}", "{3.0}")
    assert fingerprint(_model(TEXT)) != fingerprint(_model(other))


def test_a_constant_change_inside_a_branch_changes_the_fingerprint():
    other = BRANCHES.replace("{1.0, 2.0}", "{1.0, 5.0}")
    assert fingerprint(_model(BRANCHES)) != fingerprint(_model(other))


def test_a_big_constant_is_told_apart_by_its_holder_not_read():
    def with_big(name: str, fill: float) -> ir.Model:
        model = _model()
        array = np.full(LARGE_TENSOR_ELEMENTS + 1, fill, np.float32)
        value = ir.Value(name, const_value=ir.NumpyTensor(array, name))
        model.graph.add_initializer(value)
        return model

    assert fingerprint(with_big("big", 1.0)) == fingerprint(with_big("big", 2.0))
    assert fingerprint(with_big("big", 1.0)) != fingerprint(with_big("big_2", 1.0))


def test_wiring_is_told_apart_when_values_share_a_name():
    straight = _model(TWO_READS)
    swapped = _model(TWO_READS)
    sub = next(n for n in swapped.graph if n.op_type == "Sub")
    a, b = sub.inputs
    sub.replace_input_with(0, b)
    sub.replace_input_with(1, a)
    for model in (straight, swapped):
        for node in model.graph:
            if node.op_type in ("Relu", "Neg"):
                node.outputs[0].name = "t"
    assert fingerprint(straight) != fingerprint(swapped)


def test_renaming_inner_values_is_not_a_change():
    model = _model()
    before = fingerprint(model)
    leaky = next(n for n in model.graph if n.op_type == "LeakyRelu")
    leaky.outputs[0].name = "renamed"
    assert fingerprint(model) == before


def test_renaming_a_graph_output_is_a_change():
    model = _model()
    before = fingerprint(model)
    model.graph.outputs[0].name = "z"
    assert fingerprint(model) != before


def test_the_same_model_has_the_same_fingerprint():
    assert fingerprint(_model()) == fingerprint(_model())
    assert fingerprint(_model(BRANCHES)) == fingerprint(_model(BRANCHES))
