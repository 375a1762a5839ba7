"""`--freeze-initializer-inputs`: weights that IR 3 models list as graph inputs become constants.

Without the flag such a weight is an input a caller may override, so no rule treats it as a
constant (as onnxruntime does not fold it); with it, the input goes, the IR version becomes 4
and the rules see the constant.
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
from tests.rewriter.engine_helpers import assert_same_outputs


def _ir3_model() -> onnx.ModelProto:
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
    model.ir_version = 3
    onnx.checker.check_model(model, full_check=True)
    return model


def test_without_the_flag_weights_listed_as_inputs_stay_overridable() -> None:
    model = _ir3_model()
    result = rewriter.rewrite(model)
    assert [n.op_type for n in result.proto.graph.node] == ["Mul", "Add", "Relu"]
    assert [i.name for i in result.proto.graph.input] == ["x", "w", "b"]
    assert result.proto.ir_version == 3


def test_frozen_weights_are_constants_for_the_rules() -> None:
    model = _ir3_model()
    result = rewriter.rewrite(model, freeze_initializer_inputs=True)
    proto = result.proto
    assert [n.op_type for n in proto.graph.node] == ["Relu"]
    assert [i.name for i in proto.graph.input] == ["x"]
    assert proto.ir_version == 4
    onnx.checker.check_model(proto, full_check=True)
    assert_same_outputs(model, proto)


def test_the_cli_flag_verifies_and_keeps_the_input_file(tmp_path: Path, capsys) -> None:
    source = tmp_path / "old.onnx"
    onnx.save(_ir3_model(), source)
    before = source.read_bytes()
    out = tmp_path / "new.onnx"
    code = main([str(source), "-o", str(out), "--freeze-initializer-inputs", "--verify"])
    assert code == 0, capsys.readouterr().err
    assert "equivalent" in capsys.readouterr().out
    assert source.read_bytes() == before
    assert [i.name for i in onnx.load(out).graph.input] == ["x"]


def test_remove_input_keeps_the_uses_of_an_input_an_initializer_defines() -> None:
    model = ir.from_onnx(_ir3_model())
    graph = model.graph
    w = next(v for v in graph.inputs if v.name == "w")
    x = next(v for v in graph.inputs if v.name == "x")
    graph.remove_input(w)
    assert w.is_initializer()
    assert w.num_uses() == 1
    assert not w.is_graph_input()
    with pytest.raises(ValueError, match="'x' still has uses"):
        graph.remove_input(x)
