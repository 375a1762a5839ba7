"""`rewrite extract` / `rewriter.surgery.extract`: the subgraph between values, as a runnable model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnx.helper
import onnx.numpy_helper
import onnxruntime as ort
import pytest

import ir
from rewriter._errors import RewriteError
from rewriter.cli import main
from rewriter.surgery import extract, verify_extracted
from tests.helpers import model_from_text, random_feeds

MODELS = Path(__file__).parents[2] / "models"
RESNET = MODELS / "cnn_bn_ts14.onnx"  # a small ResNet exported by torch.onnx (TorchScript)
BLOCK_0 = "/layers/layers.0/relu_1/Relu_output_0"
BLOCK_2 = "/layers/layers.2/relu_1/Relu_output_0"


def _intermediates(path: Path, names: list[str], feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """The original model's values of `names`, exposed as extra outputs and run."""
    model = onnx.load(path)
    del model.graph.output[:]
    model.graph.output.extend(onnx.helper.make_empty_tensor_value_info(n) for n in names)
    return _run(model, feeds)


def _run(model: onnx.ModelProto | str, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """Run on onnxruntime as written (no graph optimizations: bit-exact comparisons hold)."""
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    data = model if isinstance(model, str) else model.SerializeToString()
    session = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def test_cut_between_two_residual_blocks_equals_the_originals_values(tmp_path, capsys):
    out = tmp_path / "block.onnx"
    before = RESNET.read_bytes()
    argv = ["extract", str(RESNET), "--inputs", BLOCK_0, "--outputs", BLOCK_2, "-o", str(out)]
    assert main([*argv, "--verify", "--examples", "5", "--no-progress"]) == 0
    assert "equivalent" in capsys.readouterr().out
    assert RESNET.read_bytes() == before
    sub = onnx.load(out)
    onnx.checker.check_model(sub, full_check=True)
    assert [i.name for i in sub.graph.input] == [BLOCK_0]
    assert [o.name for o in sub.graph.output] == [BLOCK_2]
    # Only the initializers the kept nodes read.
    read = {name for node in sub.graph.node for name in node.input}
    assert {t.name for t in sub.graph.initializer} <= read
    original = onnx.load(RESNET)
    feeds = random_feeds(original, seed=1)
    x, expected = _intermediates(RESNET, [BLOCK_0, BLOCK_2], feeds)
    (got,) = _run(sub, {BLOCK_0: x})
    np.testing.assert_array_equal(got, expected)


def test_types_of_the_new_inputs_and_outputs_come_from_inference():
    sub = extract(RESNET, [BLOCK_0], [BLOCK_2])
    (given,) = sub.graph.inputs
    (computed,) = sub.graph.outputs
    assert str(given.type) == "float[batch,16,32,32]"
    assert str(computed.type) == "float[batch,32,16,16]"


def test_an_output_that_needs_another_input_is_refused_naming_the_value():
    with pytest.raises(RewriteError) as caught:
        extract(RESNET, ["/layers/layers.1/conv1/Conv_output_0"], ["/layers/layers.1/Add_output_0"])
    message = str(caught.value)
    assert message.startswith("inputs: node '/layers/layers.1/Add' reads ")
    assert "'/layers/layers.0/relu_1/Relu_output_0', which the inputs do not feed" in message
    assert "graph input 'input'" in message


def test_the_command_line_names_its_flag_where_the_api_names_its_argument(tmp_path, capsys):
    with pytest.raises(RewriteError) as caught:
        extract(RESNET, [BLOCK_0], ["nosuch"])
    assert str(caught.value) == "outputs: the main graph has no value named 'nosuch'"
    argv = ["extract", str(RESNET), "--inputs", BLOCK_0, "--outputs", "nosuch"]
    assert main([*argv, "-o", str(tmp_path / "s.onnx")]) == 2
    err = capsys.readouterr().err
    assert "--outputs: the main graph has no value named 'nosuch'" in err


def test_unknown_names_get_a_suggestion(tmp_path, capsys):
    argv = ["extract", str(RESNET), "--inputs", BLOCK_0[:-1], "--outputs", BLOCK_2]
    assert main([*argv, "-o", str(tmp_path / "s.onnx")]) == 2
    err = capsys.readouterr().err
    assert f"no value named {BLOCK_0[:-1]!r}; did you mean {BLOCK_0!r}?" in err
    assert not (tmp_path / "s.onnx").exists()


def test_the_output_never_replaces_the_model(tmp_path, capsys):
    copy = tmp_path / "m.onnx"
    copy.write_bytes(RESNET.read_bytes())
    argv = ["extract", str(copy), "--inputs", BLOCK_0, "--outputs", BLOCK_2, "-o", str(copy)]
    assert main([*argv, "--force"]) == 2
    assert "would overwrite the model" in capsys.readouterr().err
    assert copy.read_bytes() == RESNET.read_bytes()


FUNCTIONS_AND_LOOP = """<ir_version: 8, opset_import: ["" : 17, "local" : 1]>
g (float[3] x, int64 trips) => (float[3] y, float[3] z) {
    a = local.double (x)
    b = Relu (a)
    y = local.triple (b)
    z = Loop (trips, , b) <body = body (int64 i, bool c, float[3] v) => (bool co, float[3] vo) {
        co = Identity (c)
        vo = Add (v, a)
    }>
}
<domain: "local", opset_import: ["" : 17]>
double (t) => (u) {
    u = Add (t, t)
}
<domain: "local", opset_import: ["" : 17]>
triple (t) => (u) {
    s = Add (t, t)
    u = Add (s, t)
}"""


def test_functions_are_kept_when_called_and_outer_values_of_subgraphs_are_followed():
    model = model_from_text(FUNCTIONS_AND_LOOP)
    sub = extract(model, ["b"], ["y"])
    assert [f.name for f in sub.functions.values()] == ["triple"]
    # The Loop body reads `a` from the main graph: with `a` not among the inputs, the cut
    # must take `x` as well, and says so.
    with pytest.raises(RewriteError, match="graph input 'x'"):
        extract(model, ["b", "trips"], ["z"])
    looped = ir.to_onnx(extract(model, ["a", "trips"], ["z"]))
    onnx.checker.check_model(looped, full_check=True)
    x = np.array([1.0, -2.0, 3.0], np.float32)
    trips = np.array(2, np.int64)
    expected = _run(model, {"x": x, "trips": trips})[1]
    (got,) = _run(looped, {"a": x + x, "trips": trips})
    np.testing.assert_allclose(got, expected)


def test_external_data_stays_external_and_is_streamed_to_another_folder(tmp_path):
    source_dir = tmp_path / "src"
    source_dir.mkdir()
    model = onnx.load(RESNET)
    path = source_dir / "resnet.onnx"
    onnx.save(model, path, save_as_external_data=True, location="weights.bin", size_threshold=0)
    data_before = (source_dir / "weights.bin").read_bytes()
    target_dir = tmp_path / "out"
    target_dir.mkdir()
    sub = extract(path, [BLOCK_0], [BLOCK_2])
    ir.save(sub, target_dir / "block.onnx")
    written = onnx.load(target_dir / "block.onnx", load_external_data=False)
    assert all(
        t.data_location == onnx.TensorProto.EXTERNAL for t in written.graph.initializer if t.dims
    )
    assert (source_dir / "weights.bin").read_bytes() == data_before
    # The written data holds only what the block reads: less than the whole model's.
    assert (target_dir / "block.onnx.data").stat().st_size < len(data_before)
    feeds = random_feeds(model, seed=2)
    x, expected = _intermediates(RESNET, [BLOCK_0, BLOCK_2], feeds)
    (got,) = _run(str(target_dir / "block.onnx"), {BLOCK_0: x})
    np.testing.assert_array_equal(got, expected)


def test_verify_extracted_catches_a_cut_that_computes_something_else():
    sub = extract(RESNET, [BLOCK_0], [BLOCK_2])
    # Plant a bug: scale one weight of the cut.
    weight = next(v for v in sub.graph.initializers.values() if len(v.const_value.shape) == 4)
    array = weight.const_value.numpy().copy()
    array[0] *= 1.5
    weight.const_value = ir.NumpyTensor(array, name=weight.name)
    verdict = verify_extracted(RESNET, sub, examples=3)
    assert not verdict.ok
