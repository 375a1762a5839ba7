"""Adversarial findings on the surgery commands, each pinned: no internal error, no raw checker
message, and a valid model where the cut or graft is valid.

Models are built here with onnx.helper / onnx.parser; results are run with onnxruntime and
compared with the original's own values.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import onnx
import onnx.helper
import onnx.numpy_helper
import onnx.parser
import onnxruntime as ort
import pytest
from onnx import TensorProto

import ir
from rewriter._errors import RewriteError
from rewriter.cli import main
from rewriter.surgery import extract, graft, load_pipeline, split, verify_grafted

MODELS = Path(__file__).parents[2] / "models"
RESNET = MODELS / "cnn_bn_ts14.onnx"
BLOCK = "/layers/layers.0/relu/Relu_output_0"  # an intermediate value no value_info types


def _run(model: onnx.ModelProto | str | Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    data = str(model) if isinstance(model, str | Path) else model.SerializeToString()
    session = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def _save(model: onnx.ModelProto, path: Path, *, full_check: bool = True) -> Path:
    # onnx's inference types a sparse initializer as a sparse tensor no op takes: no full check.
    onnx.checker.check_model(model, full_check=full_check)
    onnx.save(model, path)
    return path


# -- extract --verify over an If whose branches read a main-graph initializer ----------------------


def _if_model(path: Path) -> Path:
    then_branch = onnx.helper.make_graph(
        [onnx.helper.make_node("Add", ["h", "W"], ["t"])],
        "then",
        [],
        [onnx.helper.make_tensor_value_info("t", TensorProto.FLOAT, [2])],
    )
    else_branch = onnx.helper.make_graph(
        [onnx.helper.make_node("Mul", ["h", "W"], ["e"])],
        "else",
        [],
        [onnx.helper.make_tensor_value_info("e", TensorProto.FLOAT, [2])],
    )
    graph = onnx.helper.make_graph(
        [
            onnx.helper.make_node("Relu", ["x"], ["h"]),
            onnx.helper.make_node(
                "If", ["c"], ["y"], then_branch=then_branch, else_branch=else_branch
            ),
            onnx.helper.make_node("Neg", ["y"], ["z"]),
        ],
        "g",
        [
            onnx.helper.make_tensor_value_info("x", TensorProto.FLOAT, [2]),
            onnx.helper.make_tensor_value_info("c", TensorProto.BOOL, []),
        ],
        [onnx.helper.make_tensor_value_info("z", TensorProto.FLOAT, [2])],
        [onnx.numpy_helper.from_array(np.array([1.0, 2.0], np.float32), "W")],
    )
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)])
    return _save(model, path)


@pytest.mark.parametrize(("inputs", "outputs"), [("h,c", "y"), ("x,c", "z"), ("h,c", "z")])
def test_extract_verify_over_an_if_reading_a_main_graph_initializer(
    tmp_path, capsys, inputs, outputs
):
    source = _if_model(tmp_path / "if.onnx")
    out = tmp_path / "sub.onnx"
    code = main(
        [
            "extract",
            str(source),
            "--inputs",
            inputs,
            "--outputs",
            outputs,
            "-o",
            str(out),
            "--verify",
            "--examples",
            "5",
            "--no-progress",
        ]
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "equivalent (5 examples" in captured.out
    sub = onnx.load(out)
    onnx.checker.check_model(sub, full_check=True)
    assert [i.name for i in sub.graph.input] == inputs.split(",")


# -- pipeline manifests: the schema, and tampering ---------------------------------------------


@pytest.fixture
def pipeline(tmp_path):
    source = _sparse_model(tmp_path / "sparse.onnx")
    folder = tmp_path / "stages"
    assert main(["split", str(source), "--stages", "2", "-o", str(folder)]) == 0
    manifest = json.loads((folder / "pipeline.json").read_text())
    return source, folder, manifest


def _tampered(folder: Path, manifest: dict, change) -> Path:
    changed = copy.deepcopy(manifest)
    change(changed)
    path = folder / "tampered.json"
    path.write_text(json.dumps(changed))
    return path


def _stages_an_object(m):
    m["stages"] = {"0": m["stages"][0]}


def _model_a_number(m):
    m["stages"][1]["model"] = 1


def _nonexistent_outputs(m):
    m["stages"][0]["outputs"] = ["nothing"]


def _duplicated_stage(m):
    m["stages"].append(m["stages"][1])


def _final_output_nobody_gives(m):
    m["outputs"] = ["y", "w"]


def _unknown_field(m):
    m["stages"][0]["weights"] = "all"


def _out_of_order(m):
    m["stages"].reverse()


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (_stages_an_object, "stages: expected a list, found an object"),
        (
            _model_a_number,
            "stages[1].model: expected a file name (a non-empty string), found a number",
        ),
        (
            _nonexistent_outputs,
            "stages[0].outputs: stage_0.onnx has no graph output named 'nothing'",
        ),
        (_duplicated_stage, "stages[2].model: 'stage_1.onnx' is already stage 1"),
        (_final_output_nobody_gives, "outputs[1]: no stage gives 'w'"),
        (
            _unknown_field,
            "stages[0].weights: not a field of a pipeline manifest (expected inputs, model, outputs)",
        ),
        (_out_of_order, "stages[0].inputs: 'm' is given only by a later stage"),
    ],
    ids=lambda x: getattr(x, "__name__", "")[1:] if callable(x) else "",
)
def test_a_malformed_or_tampered_manifest_is_refused_naming_the_field(
    pipeline, capsys, change, expected
):
    source, folder, manifest = pipeline
    tampered = _tampered(folder, manifest, change)
    capsys.readouterr()
    assert main(["verify", str(source), str(tampered)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"rewrite: error: {tampered}: {expected}"


def test_a_manifest_naming_another_model_by_absolute_path_is_refused(pipeline, capsys):
    source, folder, manifest = pipeline
    tampered = _tampered(
        folder, manifest, lambda m: m["stages"][1].__setitem__("model", str(source.resolve()))
    )
    capsys.readouterr()
    assert main(["verify", str(source), str(tampered)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        f"rewrite: error: {tampered}: stages[1].model: {str(source.resolve())!r} is not a file "
        "beside the manifest (a pipeline's stages are named relative to its folder, without `..`)"
    )
    with pytest.raises(RewriteError, match=r"stages\[0\]\.model: '\.\./sparse\.onnx'"):
        load_pipeline(
            _tampered(
                folder, manifest, lambda m: m["stages"][0].__setitem__("model", "../sparse.onnx")
            )
        )


def test_the_untampered_manifest_verifies(pipeline, capsys):
    source, folder, _ = pipeline
    assert main(["verify", str(source), str(folder / "pipeline.json"), "--examples", "5"]) == 0
    assert "equivalent" in capsys.readouterr().out


# -- graft: a byte-identical local function, kept intermediates -------------------------------


_FUNCTION = """
<domain: "local", opset_import: ["" : 17]>
double (x) => (y) {
   y = Add (x, x)
}
"""


def test_graft_accepts_two_models_carrying_the_same_local_function(tmp_path, capsys):
    header = '<ir_version: 8, opset_import: ["" : 17, "local" : 1]>\n'
    a = onnx.parser.parse_model(
        header + "A (float[2] x) => (float[2] y) {\n  y = local.double (x)\n}\n" + _FUNCTION
    )
    b = onnx.parser.parse_model(
        header
        + "B (float[2] u) => (float[2] v) {\n  y = local.double (u)\n  v = Neg (y)\n}\n"
        + _FUNCTION
    )
    out = tmp_path / "ab.onnx"
    code = main(
        [
            "graft",
            str(_save(a, tmp_path / "a.onnx")),
            str(_save(b, tmp_path / "b.onnx")),
            "--connect",
            "y=u",
            "-o",
            str(out),
            "--verify",
            "--examples",
            "5",
            "--no-progress",
        ]
    )
    assert code == 0, capsys.readouterr().err
    grafted = onnx.load(out)
    assert len(grafted.functions) == 1
    x = np.array([1.0, -2.5], np.float32)
    (v,) = _run(grafted, {"x": x})
    np.testing.assert_array_equal(v, -4 * x)


def test_graft_keeps_an_intermediate_of_the_shipped_resnet_without_recorded_type(tmp_path, capsys):
    head = onnx.parser.parse_model(
        '<ir_version: 8, opset_import: ["" : 14]>\nH (float[N,10] u) => (float[N,10] v) {\n  v = Relu (u)\n}\n'
    )
    assert BLOCK not in {vi.name for vi in onnx.load(RESNET).graph.value_info}
    out = tmp_path / "ab.onnx"
    code = main(
        [
            "graft",
            str(RESNET),
            str(_save(head, tmp_path / "head.onnx")),
            "--connect",
            "logits=u",
            "--keep-outputs",
            BLOCK,
            "-o",
            str(out),
            "--verify",
            "--examples",
            "3",
            "--no-progress",
        ]
    )
    assert code == 0, capsys.readouterr().err
    grafted = onnx.load(out)
    onnx.checker.check_model(grafted, full_check=True)
    kept = grafted.graph.output[1]
    assert kept.name == BLOCK
    assert [d.dim_value or d.dim_param for d in kept.type.tensor_type.shape.dim] == [
        "batch",
        16,
        32,
        32,
    ]
    x = np.random.default_rng(0).standard_normal((2, 3, 32, 32)).astype(np.float32)
    v, block = _run(grafted, {"input": x})
    reference = extract(RESNET, ["input"], ["logits", BLOCK])
    logits, expected_block = _run(ir.to_onnx(reference), {"input": x})
    np.testing.assert_allclose(v, np.maximum(logits, 0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(block, expected_block, rtol=1e-5, atol=1e-6)


def test_a_kept_value_of_no_known_type_is_refused_in_words(tmp_path):
    a = onnx.parser.parse_model(
        '<ir_version: 8, opset_import: ["" : 17, "custom" : 1]>\n'
        "A (float[2] x) => (float[2] y) {\n  t = custom.Mystery (x)\n  y = Relu (x)\n}\n"
    )
    b = onnx.parser.parse_model(
        '<ir_version: 8, opset_import: ["" : 17]>\nB (float[2] u) => (float[2] v) {\n  v = Neg (u)\n}\n'
    )
    with pytest.raises(RewriteError) as caught:
        graft(a, b, ["y=u"], keep_outputs=["t"])
    assert str(caught.value) == (
        "graft: output 't' has no type: the model does not declare one and shape inference "
        "finds none, and ONNX needs one for every graph output"
    )


def test_graft_verify_catches_a_grafted_model_that_computes_something_else():
    a = onnx.parser.parse_model(
        '<ir_version: 8, opset_import: ["" : 17]>\nA (float[3] x) => (float[3] y) {\n  y = Relu (x)\n}\n'
    )
    b = onnx.parser.parse_model(
        '<ir_version: 8, opset_import: ["" : 17]>\nB (float[3] u) => (float[3] v) {\n  v = Neg (u)\n}\n'
    )
    result = graft(a, b, ["y=u"])
    assert verify_grafted(a, b, result, examples=5).ok
    (neg,) = [node for node in result.model.graph if node.op_type == "Neg"]
    neg.op_type = "Abs"  # a graft that lost B's computation
    check = verify_grafted(a, b, result, examples=5)
    assert not check.ok
    assert [label for label, r in check.parts if not r.ok] == ["B's outputs in the grafted model"]


# -- a weight stored as a sparse initializer ---------------------------------------------------


def _sparse_model(path: Path) -> Path:
    dense = np.array([[0, 1.5, 0], [0, 0, 0], [2.0, 0, 0], [0, 0, 3.0]], np.float32)
    positions = np.nonzero(dense.reshape(-1))[0].astype(np.int64)
    sparse = onnx.helper.make_sparse_tensor(
        onnx.numpy_helper.from_array(dense.reshape(-1)[positions], "W"),
        onnx.numpy_helper.from_array(positions, "W_indices"),
        [4, 3],
    )
    graph = onnx.helper.make_graph(
        [
            onnx.helper.make_node("Relu", ["x"], ["h"]),
            onnx.helper.make_node("MatMul", ["h", "W"], ["m"]),
            onnx.helper.make_node("Neg", ["m"], ["y"]),
        ],
        "g",
        [onnx.helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
        [onnx.helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 3])],
        sparse_initializer=[sparse],
    )
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)])
    return _save(model, path, full_check=False)


def test_stats_counts_a_sparse_weight(tmp_path, capsys):
    source = _sparse_model(tmp_path / "sparse.onnx")
    assert main(["stats", str(source), "--json", "-"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["parameters"] == 12
    assert [t["name"] for t in stats["largest_tensors"]] == ["W"]


def test_split_gives_typed_stage_inputs_and_verifies_with_a_sparse_weight(tmp_path, capsys):
    source = _sparse_model(tmp_path / "sparse.onnx")
    stages = split(source, 2)
    for stage in stages:
        for value in stage.model.graph.inputs:
            assert value.type is not None, value.name
        onnx.checker.check_model(ir.to_onnx(stage.model))
    assert stages[0].inputs == ("x",)
    folder = tmp_path / "stages"
    assert main(["split", str(source), "--stages", "2", "-o", str(folder)]) == 0
    assert main(["verify", str(source), str(folder / "pipeline.json"), "--examples", "5"]) == 0


def test_extract_takes_a_cut_that_reads_a_sparse_weight(tmp_path, capsys):
    source = _sparse_model(tmp_path / "sparse.onnx")
    out = tmp_path / "cut.onnx"
    code = main(
        [
            "extract",
            str(source),
            "--inputs",
            "h",
            "--outputs",
            "m",
            "-o",
            str(out),
            "--verify",
            "--examples",
            "5",
            "--no-progress",
        ]
    )
    assert code == 0, capsys.readouterr().err
    cut = onnx.load(out)
    assert [s.values.name for s in cut.graph.sparse_initializer] == ["W"]
    h = np.abs(np.random.default_rng(1).standard_normal((2, 4))).astype(np.float32)
    (m,) = _run(cut, {"h": h})
    (y,) = _run(source, {"x": h})
    np.testing.assert_allclose(m, -y, rtol=1e-6)
