"""Initializers that are also graph inputs: constants in IR 3, overridable defaults after.

Before IR version 4 every initializer had to be listed as an input, and onnxruntime treats
them as constants (it refuses a feed for one), so the rewriter does too: they stop being
inputs and the model becomes IR 4. From IR 4 on such an input is a default a caller may
override (onnxruntime accepts the feed), so no rule may rest on its value unless the user
says so with `--freeze-initializer-inputs` (what `keep_initializers_as_inputs=True` exports
want).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnx.helper
import onnx.numpy_helper
import pytest

import ir
import rewriter
from rewriter.cli import main
from tests.helpers import assert_same_outputs, session


def _weights_as_inputs(ir_version: int = 3) -> onnx.ModelProto:
    """y = Relu(x * w + b) with w all ones and b all -0.0 (x + -0.0 is x, exactly), both initializers and inputs."""
    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", 4])
    w = onnx.helper.make_tensor_value_info("w", onnx.TensorProto.FLOAT, [4])
    b = onnx.helper.make_tensor_value_info("b", onnx.TensorProto.FLOAT, [4])
    y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["N", 4])
    graph = onnx.helper.make_graph(
        [
            onnx.helper.make_node("Mul", ["x", "w"], ["t"]),
            onnx.helper.make_node("Add", ["t", "b"], ["u"]),
            onnx.helper.make_node("Relu", ["u"], ["y"]),
        ],
        "g",
        [x, w, b],
        [y],
        [
            onnx.numpy_helper.from_array(np.ones(4, np.float32), "w"),
            onnx.numpy_helper.from_array(np.full(4, -0.0, np.float32), "b"),
        ],
    )
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 8)])
    model.ir_version = ir_version
    onnx.checker.check_model(model, full_check=True)
    return model


def test_ir3_weights_listed_as_inputs_are_constants() -> None:
    model = _weights_as_inputs(ir_version=3)
    result = rewriter.rewrite(model)
    proto = result.proto
    assert [n.op_type for n in proto.graph.node] == ["Relu"]
    assert [i.name for i in proto.graph.input] == ["x"]
    assert proto.ir_version == 4
    onnx.checker.check_model(proto, full_check=True)
    assert_same_outputs(model, proto)


def test_later_initializer_inputs_stay_overridable_without_the_flag() -> None:
    model = _weights_as_inputs(ir_version=8)
    result = rewriter.rewrite(model)
    assert [n.op_type for n in result.proto.graph.node] == ["Mul", "Add", "Relu"]
    assert [i.name for i in result.proto.graph.input] == ["x", "w", "b"]


def test_the_flag_makes_them_constants() -> None:
    model = _weights_as_inputs(ir_version=8)
    result = rewriter.rewrite(model, None, rewriter.RewriteOptions(freeze_initializer_inputs=True))
    proto = result.proto
    assert [n.op_type for n in proto.graph.node] == ["Relu"]
    assert [i.name for i in proto.graph.input] == ["x"]
    assert proto.ir_version == 8
    assert_same_outputs(model, proto)


def test_the_cli_flag_verifies_and_keeps_the_input_file(tmp_path: Path, capsys) -> None:
    source = tmp_path / "old.onnx"
    onnx.save(_weights_as_inputs(ir_version=8), source)
    before = source.read_bytes()
    out = tmp_path / "new.onnx"
    code = main([str(source), "-o", str(out), "--freeze-initializer-inputs", "--verify"])
    assert code == 0, capsys.readouterr().err
    assert "equivalent" in capsys.readouterr().out
    assert source.read_bytes() == before
    assert [i.name for i in onnx.load(out).graph.input] == ["x"]


def test_remove_input_keeps_the_uses_of_an_input_an_initializer_defines() -> None:
    model = ir.from_onnx(_weights_as_inputs())
    graph = model.graph
    w = next(v for v in graph.inputs if v.name == "w")
    x = next(v for v in graph.inputs if v.name == "x")
    graph.remove_input(w)
    assert w.is_initializer()
    assert w.num_uses() == 1
    assert not w.is_graph_input()
    with pytest.raises(ValueError, match="'x' still has uses"):
        graph.remove_input(x)


def _reshape_by_overridable_shape() -> onnx.ModelProto:
    """y = Reshape(x, s), s an initializer [3, 4] that is also an input (IR 8)."""
    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 6])
    s = onnx.helper.make_tensor_value_info("s", onnx.TensorProto.INT64, [2])
    y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["a", "b"])
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("Reshape", ["x", "s"], ["y"])],
        "g",
        [x, s],
        [y],
        [onnx.numpy_helper.from_array(np.array([3, 4], np.int64), "s")],
    )
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 8)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


def test_facts_do_not_rest_on_the_default_of_an_overridable_input() -> None:
    # With the default's value, inference would give y the shape [3, 4] and
    # materialize_reshape_shape would bake it in; feeding s = [4, 3] would then differ.
    model = _reshape_by_overridable_shape()
    result = rewriter.rewrite(model)
    assert not [e for e in result.trace.entries if e.kind == "rule"]
    feeds = {"x": np.arange(12, dtype=np.float32).reshape(2, 6), "s": np.array([4, 3])}
    original = session(model).run(None, feeds)[0]
    rewritten = session(result.proto).run(None, feeds)[0]
    assert original.shape == rewritten.shape == (4, 3)
