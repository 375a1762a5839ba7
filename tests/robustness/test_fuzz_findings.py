"""Regression tests for what the fuzzers found (see fuzz.py and atheris_loader.py).

Most findings of the loader fuzzers are broken models and live in `bad_models.CATALOGUE`.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnx.numpy_helper
import onnx.parser
import pytest

import ir
from rewriter.cli import main
from tests.helpers import model_from_text

MODEL = """<ir_version: 8, opset_import: ["" : 17]>
g (float[N, 4] x) => (float[N, 4] y) {
    t = Identity (x)
    y = Relu (t)
}"""


def test_verify_with_json_writes_the_verdict(tmp_path: Path) -> None:
    # `rewrite --verify --json FILE` called a VerifyResult.to_json that did not exist.
    source = tmp_path / "m.onnx"
    onnx.save(model_from_text(MODEL), source)
    report = tmp_path / "run.json"
    args = [str(source), "-o", str(tmp_path / "o.onnx"), "--verify", "--examples", "2"]
    assert main([*args, "--json", str(report), "--no-progress"]) == 0
    verification = json.loads(report.read_text())["verification"]
    assert verification["ok"] is True
    # One entry per output and optimization level the rewritten model ran at.
    outputs = [(o["name"], o["optimization"]) for o in verification["outputs"]]
    assert outputs == [("y", "ORT_DISABLE_ALL"), ("y", "ORT_ENABLE_ALL")]


@pytest.mark.parametrize("flag", ["-vv", "-v"])
def test_verbose_runs_of_bad_input_still_exit_2(
    tmp_path: Path, flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # With -vv the command line re-raises after printing, for debugging; main() itself
    # still reports one line first.
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x07garbage")
    if flag == "-vv":
        with pytest.raises(Exception, match="not an ONNX model"):
            main([flag, str(bad)])
    else:
        assert main([flag, str(bad)]) == 2
    assert "rewrite: error: " in capsys.readouterr().err


def test_a_constant_whose_value_is_not_a_tensor_is_not_a_constant(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # BatchNormalization's shift came from `Constant <value = 2.5>` (a float attribute where a
    # tensor belongs); the fold read it as an object array and lowering its result crashed.
    model = onnx.parser.parse_model(
        """<ir_version: 8, opset_import: ["" : 17]>
        g (float[1, 3, 4, 4] x) => (float[1, 2, 4, 4] y) {
            w = Constant <value = float[2, 3, 1, 1] {1, 2, 3, 4, 5, 6}> ()
            scale = Constant <value = float[2] {1, 2}> ()
            shift = Constant <value_float = 2.5> ()
            mean = Constant <value = float[2] {0, 1}> ()
            var = Constant <value = float[2] {1, 1}> ()
            c = Conv <kernel_shape = [1, 1]> (x, w)
            y = BatchNormalization (c, scale, shift, mean, var)
        }"""
    )
    shift = model.graph.node[2]
    shift.attribute[0].name = "value"  # now FLOAT-typed, as a corrupted file may have it
    source = tmp_path / "m.onnx"
    source.write_bytes(model.SerializeToString())
    assert main([str(source), "-o", str(tmp_path / "o.onnx"), "--no-progress"]) == 0
    assert "error" not in capsys.readouterr().err
    ops = [n.op_type for n in onnx.load(tmp_path / "o.onnx").graph.node]
    assert "BatchNormalization" in ops


def test_a_lazily_lifted_subgraph_with_an_op_type_that_is_not_text_is_an_ir_error(
    tmp_path: Path,
) -> None:
    # Found by atheris: a graph attribute on a plain op is lifted on first access, where a
    # bytes op type made `intern` raise TypeError.
    branch = onnx.helper.make_graph(
        [onnx.helper.make_node("Neg", ["x"], ["b"], name="inner")],
        "branch",
        [],
        [onnx.helper.make_tensor_value_info("b", onnx.TensorProto.FLOAT, [2])],
    )
    model = onnx.parser.parse_model(
        """<ir_version: 8, opset_import: ["" : 17]>
        g (float[2] x) => (float[2] y) { y = Relu (x) }"""
    )
    model.graph.node[0].attribute.append(onnx.helper.make_attribute("body", branch))
    path = tmp_path / "m.onnx"
    path.write_bytes(model.SerializeToString().replace(b"Neg", b"N\xffg"))
    loaded = ir.load(path)  # attributes of Relu are lifted on first access
    with pytest.raises(ir.IRError, match=r"node op_type b'N\\xffg' is not UTF-8 text"):
        dict(loaded.graph.nodes[0].attributes)


def test_a_graph_output_without_a_name_is_refused_at_load(tmp_path: Path) -> None:
    # An output renamed to "" loaded, and lowering the rewritten model then refused it
    # (ONNX reads an empty name as an absent value).
    model = model_from_text(MODEL)
    # An initializer named "" defines the empty name, and a second graph output names it.
    model.graph.initializer.append(onnx.numpy_helper.from_array(np.zeros(2, np.float32), ""))
    model.graph.output.append(onnx.helper.make_tensor_value_info("", onnx.TensorProto.FLOAT, [2]))
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    with pytest.raises(ir.ModelLoadError, match="output 1 has no name"):
        ir.load(path)


def test_a_sparse_attribute_without_an_element_type_is_a_tensor_error(tmp_path: Path) -> None:
    # A mutation turned Conv's `dilations` into a sparse tensor whose values have no element
    # type; the loader does not lift attributes of ops that hold no tensors, and the common
    # subexpression pass read it with numpy_helper (TypeError).
    model = model_from_text(MODEL)
    relu = model.graph.node[1]
    attr = relu.attribute.add()
    attr.name = "bogus"
    attr.type = onnx.AttributeProto.SPARSE_TENSOR
    attr.sparse_tensor.dims.extend([2])
    attr.sparse_tensor.values.dims.extend([1])
    attr.sparse_tensor.indices.data_type = onnx.TensorProto.INT64
    attr.sparse_tensor.indices.dims.extend([1])
    attr.sparse_tensor.indices.int64_data.extend([0])
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    loaded = ir.load(path)
    (node,) = [n for n in loaded.graph if n.op_type == "Relu"]
    with pytest.raises(ir.IRError, match="sparse tensor"):
        node.attributes["bogus"].value.numpy()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--verify", "--examples", "0"], "--examples 0 checks nothing without --inputs"),
        (["--max-rewrites", "-5"], "--max-rewrites: expected a non-negative integer, got '-5'"),
        (["--target-opset", "999"], "defines opsets 1 to"),
    ],
)
def test_numeric_options_are_checked_when_parsed(
    tmp_path: Path, args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # `--verify --examples 0` was an internal error (found by the command-line fuzzer);
    # `--max-rewrites -5` ran with a negative budget.
    source = tmp_path / "m.onnx"
    onnx.save(model_from_text(MODEL), source)
    assert main([str(source), "-o", str(tmp_path / "o.onnx"), *args]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "o.onnx").exists()


def _conv_bn_bytes() -> bytes:
    """Conv + BatchNormalization over a `batchdim` input: what fold_batchnorm_into_conv folds."""
    rng = np.random.default_rng(0)
    weights = {
        "w": rng.standard_normal((2, 3, 1, 1)),
        "scale": rng.uniform(0.5, 1.5, 2),
        "bias": rng.standard_normal(2),
        "mean": rng.standard_normal(2),
        "var": rng.uniform(0.5, 1.5, 2),
    }
    graph = onnx.helper.make_graph(
        [
            onnx.helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[1, 1]),
            onnx.helper.make_node(
                "BatchNormalization", ["c", "scale", "bias", "mean", "var"], ["y"]
            ),
        ],
        "g",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["batchdim", 3, 4, 4])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["batchdim", 2, 4, 4])],
        [onnx.numpy_helper.from_array(v.astype(np.float32), k) for k, v in weights.items()],
    )
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)])
    return model.SerializeToString()


def test_an_attribute_name_that_is_not_utf8_rolls_back_the_rewrite_that_copies_it(
    tmp_path: Path,
) -> None:
    # The loader fuzzer: folding the BatchNormalization writes a new Conv with the old one's
    # attributes, and a name that is not UTF-8 text (kept as bytes) crashed the lowering.
    import rewriter

    path = tmp_path / "m.onnx"
    path.write_bytes(_conv_bn_bytes().replace(b"kernel_shape", b"k\xe5rnel_shape"))
    result = rewriter.rewrite(ir.load(path), None, rewriter.RewriteOptions(max_rewrites=200))
    (skip,) = [s for s in result.trace.skips if s.rule == "fold_batchnorm_into_conv"]
    assert "attribute name b'k\\xe5rnel_shape' is not UTF-8 text" in skip.reason
    assert [n.op_type for n in result.model.graph] == ["Conv", "BatchNormalization"]
    ir.save(result.model, tmp_path / "out.onnx")


def test_a_dim_param_that_is_not_utf8_is_an_unknown_dim(tmp_path: Path) -> None:
    # The loader fuzzer: a declared dim kept as bytes reached the symbolic-dim algebra
    # (comparing an output's declared rank with the inferred one).
    from ir._symbolic_dims import from_dim

    assert from_dim(b"b\xe5tchdim") is None
    path = tmp_path / "m.onnx"
    path.write_bytes(_conv_bn_bytes().replace(b"batchdim", b"b\xe5tchdim"))
    model = ir.load(path)
    assert model.graph.outputs[0].shape == (b"b\xe5tchdim", 2, 4, 4)  # kept as the file has it
    ir.infer_types(model)
    ir.save(model, tmp_path / "out.onnx")
