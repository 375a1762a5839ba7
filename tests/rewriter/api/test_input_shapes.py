"""Input shapes fixed before rewriting (`RewriteOptions.input_shapes`, `--input-shape`)."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

import rewriter
from rewriter._errors import RewriteError
from rewriter.surgery import extract
from tests.helpers import model_from_text, op_types

DYNAMIC = """<ir_version: 8, opset_import: ["" : 17]>
g (float[N, D] x) => (float[N, D] y) {
    s = Shape (x)
    i = Constant <value = int64 {0}> ()
    n = Gather (s, i)
    f = Cast <to = 1> (n)
    r = Relu (x)
    y = Mul (r, f)
}"""


def test_fixed_shapes_unlock_folding_and_stay_in_the_result():
    model = model_from_text(DYNAMIC)
    loose = rewriter.rewrite(model).proto
    fixed = rewriter.rewrite(model, None, rewriter.RewriteOptions(input_shapes={"x": (2, 3)}))
    assert "Shape" in op_types(loose)  # N and D unknown: the Shape stays
    assert op_types(fixed.proto) == ["Relu", "Mul"]  # N is 2: the size computation folds
    dims = [d.dim_value for d in fixed.proto.graph.input[0].type.tensor_type.shape.dim]
    assert dims == [2, 3]
    out_dims = [d.dim_value for d in fixed.proto.graph.output[0].type.tensor_type.shape.dim]
    assert out_dims == [2, 3]  # the output's N and D are the input's: bound everywhere
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    session = ort.InferenceSession(
        fixed.proto.SerializeToString(), providers=["CPUExecutionProvider"]
    )
    np.testing.assert_array_equal(session.run(None, {"x": x})[0], np.maximum(x, 0) * 2)


@pytest.mark.parametrize(
    ("shapes", "message"),
    [
        ({"z": (2, 3)}, "no graph input of that name (x)"),
        ({"x": (2,)}, "1 dims given, the input has 2"),
    ],
)
def test_bad_input_shapes_are_named(shapes, message):
    model = model_from_text(DYNAMIC)
    with pytest.raises(RewriteError, match=message.replace("(", r"\(").replace(")", r"\)")):
        rewriter.rewrite(model, None, rewriter.RewriteOptions(input_shapes=shapes))


def test_extract_takes_input_shapes():
    model = model_from_text(DYNAMIC)
    cut = extract(model, ["x"], ["n"], input_shapes={"x": (4, 5)})
    (value,) = cut.graph.outputs
    assert str(value.type) == "int64[]"
    assert str(cut.graph.inputs[0].type) == "float[4,5]"


def test_the_main_command_fixes_input_shapes_before_rewriting(tmp_path):
    import onnx

    from rewriter.cli import main

    source = tmp_path / "m.onnx"
    onnx.save(model_from_text(DYNAMIC), source)
    out = tmp_path / "o.onnx"
    argv = [str(source), "-o", str(out), "--input-shape", "x=2x3", "--verify", "--no-progress"]
    assert main(argv) == 0
    written = onnx.load(out)
    assert op_types(written) == ["Relu", "Mul"]
    assert [d.dim_value for d in written.graph.input[0].type.tensor_type.shape.dim] == [2, 3]
