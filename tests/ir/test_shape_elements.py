"""`ir.shape_elements`: the elements of shape tensors, followed through the ops exporters
compute them with; and dims onnx invented in value_info are no facts."""

from __future__ import annotations

import onnx
import onnx.helper as oh

import ir
from tests.helpers import batched_key_transpose_text, model_from_text

KT_CHAIN = batched_key_transpose_text(18)


def _values(model: ir.Model) -> dict[str, ir.Value]:
    return {v.name: v for node in model.graph.nodes for v in node.outputs}


def test_shape_elements_follow_shape_slice_and_concat() -> None:
    model = ir.from_onnx(model_from_text(KT_CHAIN))
    ir.infer_types(model)
    values = _values(model)
    assert ir.shape_elements(values["flat"], 18) == (-1, "seq", 16)
    assert ir.shape_elements(values["back"], 18) == ("batch", 4, 16, "seq")
    assert ir.shape_elements(values["shape"], 18) == ("batch", 4, "seq", 16)
    # not an integer shape value: nothing to follow
    assert ir.shape_elements(values["t"], 18) is None


def test_invented_dims_in_value_info_are_no_facts() -> None:
    # An exporter wrote onnx's inference results into value_info, with invented names where
    # onnx could not tell a dim. They say nothing; inference computes those dims again.
    proto = model_from_text(KT_CHAIN)
    proto.graph.value_info.append(
        oh.make_tensor_value_info("t", onnx.TensorProto.FLOAT, ["unk__7", 16, "unk__8"])
    )
    model = ir.from_onnx(proto)
    ir.infer_types(model)
    t = _values(model)["t"]
    assert t.type is not None
    assert t.type.shape == ("unk__7", 16, "unk__8")
    fact = ir.fact_type(t)
    assert isinstance(fact, ir.TensorType)
    assert fact.shape is not None
    assert "unk__7" not in fact.shape
    assert "unk__8" not in fact.shape
    assert fact.shape[1] == 16
    # a graph input's declared names are the model's interface: kept as facts
    k = model.graph.inputs[0]
    assert ir.fact_type(k).shape == ("batch", 4, "seq", 16)  # type: ignore[union-attr]
    # and the model written back keeps its value_info as it was
    written = ir.to_onnx(model)
    info = next(i for i in written.graph.value_info if i.name == "t")
    assert [d.dim_param or d.dim_value for d in info.type.tensor_type.shape.dim] == [
        "unk__7",
        16,
        "unk__8",
    ]


def _identity_chain(length: int) -> ir.Model:
    """`s = Shape(x)`, then `length` Identity nodes: `i1`, `i2`, ..."""
    body = ["s = Shape (x)"] + [
        f"i{k} = Identity ({'s' if k == 1 else f'i{k - 1}'})" for k in range(1, length + 1)
    ]
    text = (
        '<ir_version: 8, opset_import: ["" : 18]>\n'
        f"g (float[batch, 3] x) => (int64[2] i{length}) {{\n" + "\n".join(body) + "\n}"
    )
    model = ir.from_onnx(model_from_text(text))
    ir.infer_types(model)
    return model


def test_shape_elements_shared_between_values_remember_what_they_followed() -> None:
    model = _identity_chain(100)
    values = _values(model)
    # One look back stops after 64 producers: the end of a 100-node chain is out of reach.
    assert ir.shape_elements(values["i100"], 18) is None
    elements = ir.ShapeElements(18)
    assert elements(values["i100"]) is None
    # Asked along the chain, each value is one step from the last: the stop above is not
    # remembered as "unknown", so the end is found now.
    for k in range(1, 100):
        assert elements(values[f"i{k}"]) == ("batch", 3)
    assert elements(values["i100"]) == ("batch", 3)
