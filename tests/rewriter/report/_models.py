"""Small models and rules for the report tests: linear layers that fuse into Gemm."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

# MatMul + Add -> Gemm (a copy of the library rule, so the tests do not depend on the library)
# and x * 1 -> x (an alias rewrite: no node is created).
RULES = """\
# MatMul(a, B) + c -> Gemm(a, B, c)
rule fuse_linear {
  match {
    y = MatMul (a, bw)
    z = Add (y, c)
  }
  where {
    rank(a) == 2
    rank(bw) == 2
    is_const(c)
    dtype(c) == dtype(y)
    shape(c) in [[shape(y)[1]], [1, shape(y)[1]]]
  }
  rewrite {
    z = Gemm (a, bw, c)
  }
}

# x * 1 -> x
rule mul_one: y = Mul (x, 1) => y = x where shape(y) == shape(x) and dtype(y) == dtype(x)
"""

# A node and value name that must be escaped everywhere it appears in HTML.
NASTY = "<b>x&y</b>"


def write_rules(folder: Path) -> Path:
    """The rules above as `folder/report_rules.rw`."""
    path = folder / "report_rules.rw"
    path.write_text(RULES)
    return path


def linear_chain(layers: int = 5, width: int = 4) -> onnx.ModelProto:
    """`layers` MatMul + Add pairs and one Mul by 1; the first MatMul is named `NASTY`."""
    rng = np.random.default_rng(0)
    nodes = []
    inits = []
    current = "x"
    for i in range(layers):
        w = numpy_helper.from_array(rng.standard_normal((width, width)).astype(np.float32), f"w{i}")
        b = numpy_helper.from_array(rng.standard_normal(width).astype(np.float32), f"b{i}")
        inits += [w, b]
        hidden = NASTY if i == 0 else f"h{i}"
        name = NASTY if i == 0 else f"layer{i}/MatMul"
        nodes.append(helper.make_node("MatMul", [current, f"w{i}"], [hidden], name=name))
        nodes.append(helper.make_node("Add", [hidden, f"b{i}"], [f"z{i}"], name=f"layer{i}/Add"))
        current = f"z{i}"
    one = numpy_helper.from_array(np.array(1.0, dtype=np.float32), "one")
    inits.append(one)
    nodes.append(helper.make_node("Mul", [current, "one"], ["y"], name="scale"))
    graph = helper.make_graph(
        nodes,
        "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, width])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, width])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def save_chain(folder: Path, layers: int = 5) -> Path:
    """`linear_chain(layers)` saved as `folder/chain.onnx`."""
    path = folder / "chain.onnx"
    onnx.save(linear_chain(layers), path)
    return path
