"""Facts inside model-local function bodies come from the calls, when every call agrees."""

from __future__ import annotations

import onnx
import onnx.parser

import ir
import rewriter
from tests.helpers import assert_same_outputs

_BODY = """
<domain: "pkg.custom", opset_import: ["" : 17]>
afunction (input_x, input_y) => (output)
{
   shape_a = Constant <value: tensor = int64[3] {4, 8, 8}> ()
   reshape_x = Reshape (input_x, shape_a)
   shape_b = Constant <value: tensor = int64[3] {4, 8, 6}> ()
   reshape_y = Reshape (input_y, shape_b)
   matmul = MatMul (reshape_x, reshape_y)
   shape_c = Constant <value: tensor = int64[4] {1, 4, 8, 6}> ()
   output = Reshape (matmul, shape_c)
}
"""


def _model(calls: str, inputs: str, outputs: str) -> onnx.ModelProto:
    header = '<ir_version: 8, opset_import: ["" : 17, "pkg.custom" : 1]>'
    return onnx.parser.parse_model(
        f"{header}\ng ({inputs}) => ({outputs}) {{\n{calls}\n}}\n{_BODY}"
    )


def _body_facts(model: ir.Model) -> dict[str, str | None]:
    (function,) = model.functions.values()
    values = [*function.graph.inputs, *(v for n in function.graph for v in n.outputs)]
    return {v.name: None if ir.fact_type(v) is None else str(ir.fact_type(v)) for v in values}


ONE_CALL = _model(
    "output = pkg.custom.afunction (x, y)",
    "float[1, 4, 8, 8] x, float[1, 4, 8, 6] y",
    "float[1, 4, 8, 6] output",
)


def test_a_body_called_once_gets_the_facts_of_its_call() -> None:
    model = ir.from_onnx(ONE_CALL)
    ir.infer_types(model)
    facts = _body_facts(model)
    assert facts["input_x"] == "float[1,4,8,8]"
    assert facts["reshape_x"] == "float[4,8,8]"
    assert facts["matmul"] == "float[4,8,6]"
    assert facts["output"] == "float[1,4,8,6]"


def test_calls_of_different_types_leave_the_body_without_facts() -> None:
    model = ir.from_onnx(
        _model(
            "o1 = pkg.custom.afunction (x, y)\n o2 = pkg.custom.afunction (x2, y2)",
            "float[1, 4, 8, 8] x, float[1, 4, 8, 6] y, float[4, 1, 8, 8] x2, float[4, 1, 8, 6] y2",
            "float[1, 4, 8, 6] o1, float[1, 4, 8, 6] o2",
        )
    )
    ir.infer_types(model)
    assert set(_body_facts(model).values()) == {None}


def test_calls_of_one_type_give_the_body_their_facts() -> None:
    model = ir.from_onnx(
        _model(
            "o1 = pkg.custom.afunction (x, y)\n o2 = pkg.custom.afunction (x2, y2)",
            "float[1, 4, 8, 8] x, float[1, 4, 8, 6] y, float[1, 4, 8, 8] x2, float[1, 4, 8, 6] y2",
            "float[1, 4, 8, 6] o1, float[1, 4, 8, 6] o2",
        )
    )
    ir.infer_types(model)
    assert _body_facts(model)["reshape_y"] == "float[4,8,6]"


def test_a_rule_rewrites_inside_the_body_and_the_outputs_stay() -> None:
    result = rewriter.rewrite(ONE_CALL)
    (function,) = result.model.functions.values()
    assert [n.op_type for n in function.graph] == ["MatMul"]
    assert_same_outputs(ONE_CALL, result.proto)
