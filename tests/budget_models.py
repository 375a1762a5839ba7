"""Small models and approximate rules for the accuracy-budget tests.

`outlier_mlp` is a 4-layer MLP (MatMul, Add, Relu) built with onnx.helper whose second layer
(`layer1`, output `mm1`) has one weight of 60 among weights of about 0.2: rounding its
weights per tensor to 255 levels (`ROUNDED_RULE`, a stand-in for int8 weights) zeroes most of
them, so that layer is by far the most sensitive. `FP16_RULE` stores weights as float16.
"""

from __future__ import annotations

import itertools

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROUNDED_RULE = """\
# MatMul weights rounded to 255 levels per tensor (a test stand-in for int8 weights).
rule matmul_weight_rounded approximate snr >= 30 {
  match {
    y = MatMul (x, w)
  }
  where {
    is_const(w)
    dtype(w) == "float"
    max(abs(value(w))) > 0
  }
  rewrite {
    let step = cast(max(abs(value(w))) / 127.0, "float")
    scaled = Div (w, step)
    levels = Round (scaled)
    rounded = Mul (levels, step)
    y = MatMul (x, rounded)
  }
}
"""

FP16_RULE = """\
# MatMul weights stored in float16, widened back at run time.
rule matmul_weight_fp16 approximate snr >= 30 {
  match {
    y = MatMul (x, w)
  }
  where {
    is_const(w)
    dtype(w) == "float"
  }
  rewrite {
    wide = Cast <to = "float"> (cast(value(w), "float16"))
    y = MatMul (x, wide)
  }
}
"""

# Not declared approximate, but it changes numerics: a float baseline that misses any budget.
LEAKY_RULE = """\
rule relu_to_leaky: y = Relu (x) => y = LeakyRelu <alpha = 0.5> (x)
"""


def outlier_mlp(widths: tuple[int, ...] = (16, 32, 32, 32, 8), seed: int = 0) -> onnx.ModelProto:
    """The MLP described in the module docstring (input `x` [N, 16], output `y` [N, 8])."""
    rng = np.random.default_rng(seed)
    nodes, weights = [], []
    value = "x"
    last = len(widths) - 2
    for index, (fan_in, fan_out) in enumerate(itertools.pairwise(widths)):
        weight = (rng.standard_normal((fan_in, fan_out)) / np.sqrt(fan_in)).astype(np.float32)
        if index == 1:
            weight[0, 0] = 60.0
        bias = (0.1 * rng.standard_normal(fan_out)).astype(np.float32)
        weights += [numpy_helper.from_array(weight, f"w{index}")]
        weights += [numpy_helper.from_array(bias, f"b{index}")]
        added = "y" if index == last else f"a{index}"
        nodes.append(
            helper.make_node("MatMul", [value, f"w{index}"], [f"mm{index}"], f"layer{index}")
        )
        nodes.append(helper.make_node("Add", [f"mm{index}", f"b{index}"], [added], f"bias{index}"))
        if index != last:
            nodes.append(helper.make_node("Relu", [added], [f"h{index}"], f"relu{index}"))
            value = f"h{index}"
    graph = helper.make_graph(
        nodes,
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", widths[0]])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", widths[-1]])],
        weights,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    return model
