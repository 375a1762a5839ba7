"""Broken model files: `ir.load` raises an `ir.IRError` naming the file and the culprit, and
`rewrite MODEL`, `rewrite stats MODEL` and `rewrite verify A B` exit 2 with that one line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx.defs
import onnx.helper
import onnx.numpy_helper
import pytest

import ir
from ir._validate import TENSOR_ATTRIBUTE_OPS, check_tensor_proto
from rewriter.cli import main
from tests.robustness.bad_models import CATALOGUE, BadModel, good_model

CASES = [pytest.param(case, id=case.name) for case in CATALOGUE]
RULES = """\
# relu(relu(x)) -> relu(x)
rule relu_relu {
  match {
    t = Relu (x)
    y = Relu (t)
  }
  rewrite {
    y = Relu (x)
  }
}
"""


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A model folder one level down, so that `../` leaves it but stays in tmp_path."""
    path = tmp_path / "models"
    path.mkdir()
    return path


@pytest.fixture
def rules_path(tmp_path: Path) -> Path:
    """A one-rule file (the shipped library would only make each run slower)."""
    path = tmp_path / "rules.rw"
    path.write_text(RULES)
    return path


@pytest.fixture
def good_path(tmp_path: Path) -> Path:
    path = tmp_path / "good.onnx"
    path.write_bytes(good_model().SerializeToString())
    return path


def _assert_one_line(err: str, path: Path, case: BadModel) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    line = lines[0]
    assert line.startswith(f"rewrite: error: {path}: "), line
    for fragment in case.fragments:
        assert fragment in line, (fragment, line)
    assert "Traceback" not in err
    assert "internal error" not in err


@pytest.mark.parametrize("case", CASES)
def test_load_raises_the_documented_error_naming_file_and_culprit(
    case: BadModel, folder: Path
) -> None:
    path = case.write(folder)
    with pytest.raises(case.error) as info:
        ir.load(path)
    message = str(info.value)
    assert isinstance(info.value, ir.IRError)
    assert message.startswith(f"{path}: "), message
    assert "\n" not in message
    for fragment in case.fragments:
        assert fragment in message, (fragment, message)


@pytest.mark.parametrize("case", CASES)
def test_rewrite_exits_2_with_one_line_and_writes_nothing(
    case: BadModel,
    folder: Path,
    tmp_path: Path,
    rules_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = case.write(folder)
    out = tmp_path / "out.onnx"
    before = sorted(p.name for p in folder.iterdir())
    assert main([str(path), "--rules", str(rules_path), "-o", str(out), "--no-progress"]) == 2
    _assert_one_line(capsys.readouterr().err, path, case)
    assert not out.exists()
    assert sorted(p.name for p in folder.iterdir()) == before


@pytest.mark.parametrize("case", CASES)
def test_stats_exits_2_with_one_line(
    case: BadModel, folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = case.write(folder)
    assert main(["stats", str(path)]) == 2
    _assert_one_line(capsys.readouterr().err, path, case)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("side", ["original", "rewritten"])
def test_verify_exits_2_with_one_line(
    case: BadModel, side: str, folder: Path, good_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = case.write(folder)
    pair = [path, good_path] if side == "original" else [good_path, path]
    assert main(["verify", *map(str, pair), "--examples", "2"]) == 2
    _assert_one_line(capsys.readouterr().err, path, case)


# ---------------------------------------------------------------------------------------------
# validate_model on models built in memory, and no false alarms


def test_validate_model_checks_models_lifted_from_protos() -> None:
    model = good_model()
    model.graph.initializer[0].raw_data = b"\0" * 5
    lifted = ir.from_onnx(model)  # lifting alone does not look at tensor data
    with pytest.raises(ir.TensorDataError, match=r"tensor 'w': raw_data holds 5 bytes"):
        ir.validate_model(lifted)
    ir.validate_model(ir.from_onnx(good_model()))


def test_cycle_through_a_subgraph_is_found() -> None:
    """`t = If(c)` whose branch reads `u`, and `u = Neg(t)`: a cycle only through the branch."""
    branch = onnx.helper.make_graph(
        [onnx.helper.make_node("Identity", ["u"], ["b"], name="inner")],
        "then",
        [],
        [onnx.helper.make_tensor_value_info("b", onnx.TensorProto.FLOAT, [2])],
    )
    graph = onnx.helper.make_graph(
        [
            onnx.helper.make_node(
                "If", ["c"], ["t"], name="branch", then_branch=branch, else_branch=branch
            ),
            onnx.helper.make_node("Neg", ["t"], ["u"], name="neg"),
        ],
        "g",
        [onnx.helper.make_tensor_value_info("c", onnx.TensorProto.BOOL, [])],
        [onnx.helper.make_tensor_value_info("u", onnx.TensorProto.FLOAT, [2])],
    )
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 18)])
    with pytest.raises(ir.ModelLoadError, match="cycle in graph 'g'"):
        ir.validate_model(ir.from_onnx(model))


def test_nodes_out_of_order_without_a_cycle_are_accepted(tmp_path: Path) -> None:
    model = good_model()
    nodes = list(model.graph.node)
    del model.graph.node[:]
    model.graph.node.extend(reversed(nodes))
    path = tmp_path / "m.onnx"
    path.write_bytes(model.SerializeToString())
    loaded = ir.load(path)
    assert [n.op_type for n in ir.topological_order(loaded.graph)] == ["Add", "Relu"]


def test_default_domain_may_be_spelled_ai_onnx(tmp_path: Path) -> None:
    model = good_model()
    model.graph.node[0].domain = "ai.onnx"
    path = tmp_path / "m.onnx"
    path.write_bytes(model.SerializeToString())
    ir.load(path)


@pytest.mark.parametrize("op", ["Gelu", "Upsample"])
def test_ops_of_another_opset_of_the_domain_load(tmp_path: Path, op: str) -> None:
    # onnxruntime's optimizer writes LayerNormalization into opset-14 models (it registers
    # the kernel from opset 1) and such models run: only ops no opset defines are refused.
    model = good_model()
    model.graph.node[1].op_type = op
    path = tmp_path / "m.onnx"
    path.write_bytes(model.SerializeToString())
    assert [n.op_type for n in ir.load(path).graph] == ["Add", op]


def test_function_bodies_may_use_the_domains_their_function_imports() -> None:
    body = [onnx.helper.make_node("Scaler", ["a"], ["b"], domain="ai.onnx.ml", scale=[2.0])]
    function = onnx.helper.make_function(
        "local",
        "scale",
        ["a"],
        ["b"],
        body,
        [onnx.helper.make_opsetid("", 18), onnx.helper.make_opsetid("ai.onnx.ml", 3)],
    )
    model = good_model()
    model.graph.node[1].domain = "local"
    model.graph.node[1].op_type = "scale"
    model.opset_import.append(onnx.helper.make_opsetid("local", 1))
    model.functions.append(function)
    ir.validate_model(ir.from_onnx(model))


def test_tensor_attribute_ops_match_onnx_schemas() -> None:
    kinds = {
        onnx.defs.OpSchema.AttrType.TENSOR,
        onnx.defs.OpSchema.AttrType.TENSORS,
        onnx.defs.OpSchema.AttrType.SPARSE_TENSOR,
        onnx.defs.OpSchema.AttrType.SPARSE_TENSORS,
    }
    found = {
        (schema.domain, schema.name)
        for schema in onnx.defs.get_all_schemas_with_history()
        if any(a.type in kinds for a in schema.attributes.values())
        and schema.domain in ("", "ai.onnx.ml")
    }
    assert found == TENSOR_ATTRIBUTE_OPS


_EXOTIC = [
    onnx.TensorProto.FLOAT16,
    onnx.TensorProto.BFLOAT16,
    onnx.TensorProto.FLOAT8E4M3FN,
    onnx.TensorProto.FLOAT8E5M2,
    onnx.TensorProto.INT4,
    onnx.TensorProto.UINT4,
    onnx.TensorProto.FLOAT4E2M1,
    onnx.TensorProto.BOOL,
    onnx.TensorProto.INT8,
    onnx.TensorProto.UINT16,
    onnx.TensorProto.UINT32,
    onnx.TensorProto.UINT64,
    onnx.TensorProto.INT64,
    onnx.TensorProto.DOUBLE,
    onnx.TensorProto.COMPLEX64,
    onnx.TensorProto.COMPLEX128,
    onnx.TensorProto.STRING,
]


# Every exotic type in both forms, except strings, which have no raw form.
_FORMS = [
    pytest.param(data_type, raw, id=f"{onnx.helper.tensor_dtype_to_string(data_type)}-{raw}")
    for data_type in _EXOTIC
    for raw in (False, True)
    if not (raw and data_type == onnx.TensorProto.STRING)
]


@pytest.mark.parametrize("shape", [(), (0,), (3,), (2, 3), (1, 5, 1)])
@pytest.mark.parametrize(("data_type", "raw"), _FORMS)
def test_well_formed_tensors_of_every_type_pass(
    data_type: int, raw: bool, shape: tuple[int, ...]
) -> None:
    size = int(np.prod(shape))
    if data_type == onnx.TensorProto.STRING:
        values: list[Any] = [b"s"] * size
    elif data_type == onnx.TensorProto.BOOL:
        values = [True] * size
    elif data_type in (onnx.TensorProto.COMPLEX64, onnx.TensorProto.COMPLEX128):
        values = [1 + 2j] * size
    else:
        values = [1] * size
    tensor = onnx.helper.make_tensor("t", data_type, shape, values, raw=False)
    if raw:
        # numpy_helper writes the raw form the way exporters do (packed sub-byte types too).
        tensor = onnx.numpy_helper.from_array(onnx.numpy_helper.to_array(tensor), "t")
        assert tensor.HasField("raw_data") or size == 0
    check_tensor_proto(tensor, "t")
    assert onnx.numpy_helper.to_array(tensor).shape == shape


# ---------------------------------------------------------------------------------------------
# Broken but usable: found by fuzzing the loader (see fuzz.py)


def test_an_unknown_element_type_inside_the_graph_makes_the_fact_unknown(
    tmp_path: Path, rules_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = good_model()
    model.graph.value_info.append(
        onnx.helper.make_tensor_value_info("t", onnx.TensorProto.FLOAT, [2])
    )
    model.graph.value_info[0].type.tensor_type.elem_type = 31
    path = tmp_path / "m.onnx"
    path.write_bytes(model.SerializeToString())
    loaded = ir.load(path)
    assert loaded.graph.nodes[0].outputs[0].type == ir.TensorType(ir.DataType.UNDEFINED, (2,))
    assert main(["stats", str(path)]) == 0
    assert main([str(path), "--rules", str(rules_path), "-o", str(tmp_path / "o.onnx")]) == 0
    assert "error" not in capsys.readouterr().err


def test_inference_with_an_input_of_unknown_type_is_a_node_inference_error() -> None:
    x = ir.Value("x")
    node = ir.Node("Relu", [x], outputs=["y"])
    with pytest.raises(ir.NodeInferenceError, match="the type of input 'x' is unknown"):
        ir.infer_node_types(node, {"": 18}, type_of=lambda value: None)


# ---------------------------------------------------------------------------------------------
# Ops checked against onnx's schemas: standard domains only, at the imported opset


def _with_op(domain: str, op_type: str, imports: dict[str, int]) -> onnx.ModelProto:
    model = good_model()
    model.graph.node[1].domain = domain
    model.graph.node[1].op_type = op_type
    del model.opset_import[:]
    model.opset_import.extend(onnx.helper.make_opsetid(d, v) for d, v in imports.items())
    return model


@pytest.mark.parametrize(
    ("domain", "op_type", "imports"),
    [
        pytest.param("com.example", "NoSuchOp", {"": 18, "com.example": 1}, id="custom_domain"),
        pytest.param("", "Gelu", {"": 20}, id="op_at_its_first_opset"),
        pytest.param("ai.onnx", "Relu", {"ai.onnx": 14}, id="default_domain_spelled_out"),
        pytest.param("ai.onnx.ml", "Scaler", {"": 18, "ai.onnx.ml": 3}, id="ml_domain"),
    ],
)
def test_ops_that_exist_at_the_imported_opset_load(
    domain: str, op_type: str, imports: dict[str, int], tmp_path: Path
) -> None:
    path = tmp_path / "m.onnx"
    path.write_bytes(_with_op(domain, op_type, imports).SerializeToString())
    assert [n.op_type for n in ir.load(path).graph.nodes] == ["Add", op_type]


def test_unknown_op_in_a_subgraph_is_refused() -> None:
    branch = onnx.helper.make_graph(
        [onnx.helper.make_node("NoSuchOp", ["x"], ["b"], name="inner")], "then", [], [_float("b")]
    )
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("If", ["c"], ["y"], then_branch=branch, else_branch=branch)],
        "g",
        [onnx.helper.make_tensor_value_info("c", onnx.TensorProto.BOOL, []), _float("x")],
        [_float("y")],
    )
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 18)])
    with pytest.raises(ir.ModelLoadError, match=r"graph 'then': node 'inner' \(NoSuchOp\)"):
        ir.validate_model(ir.from_onnx(model))


def test_model_local_function_may_share_a_standard_domain_name() -> None:
    """A call of a model-local function is not looked up in onnx's schemas."""
    body = [onnx.helper.make_node("Relu", ["a"], ["b"])]
    function = onnx.helper.make_function("ai.onnx.ml", "MyAct", ["a"], ["b"], body, _OPSET_18)
    model = _with_op("ai.onnx.ml", "MyAct", {"": 18, "ai.onnx.ml": 3})
    model.functions.append(function)
    ir.validate_model(ir.from_onnx(model))


def test_shipped_models_pass_the_op_check() -> None:
    models = sorted((Path(__file__).resolve().parents[1] / "models").glob("*.onnx"))
    assert models
    for path in models:
        ir.load(path)


_OPSET_18 = [onnx.helper.make_opsetid("", 18)]


def _float(name: str) -> onnx.ValueInfoProto:
    return onnx.helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, [2])
