"""The loop passes and repeat rules through `rewriter.rewrite` and the shipped opt-in files."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import onnx
import onnx.helper

import ir
import rewriter
from rewriter import StopReason
from tests.rewriter.loops.loop_models import assert_same_on, dense_chain, ops, random_feeds

PATTERNS = Path(__file__).resolve().parents[3] / "patterns" / "loops"

_REPEAT = """
# y_k = relu(y_{k-1} @ W_k + b_k), rolled into one Loop
rule roll_dense {
  match repeat (n >= 3) from h to out {
    m = MatMul (h, w)
    a = Add (m, b)
    out = Relu (a)
  }
  rewrite loop
}
"""


def test_the_shipped_roll_file_rolls():
    proto = dense_chain(4)
    result = rewriter.rewrite(proto, [PATTERNS / "roll.rw"])
    ir.verify(result.model)
    assert ops(result.model.graph) == {"Loop": 1}
    assert result.trace.counts()["roll_loops"] == 1
    assert_same_on(proto, result.proto, random_feeds(proto))


def test_the_shipped_unroll_file_undoes_the_roll():
    proto = dense_chain(4)
    rolled = rewriter.rewrite(proto, [PATTERNS / "roll.rw"]).proto
    result = rewriter.rewrite(rolled, [PATTERNS / "unroll.rw"])
    assert ops(result.model.graph) == {"MatMul": 4, "Add": 4, "Relu": 4}
    assert_same_on(proto, result.proto, random_feeds(proto))


def test_the_shipped_outline_file_outlines():
    proto = dense_chain(4)
    result = rewriter.rewrite(proto, [PATTERNS / "outline.rw"])
    assert len(result.model.functions) == 1
    assert_same_on(proto, result.proto, random_feeds(proto))


def test_a_repeat_rule_is_traced(tmp_path):
    path = tmp_path / "dense.rw"
    path.write_text(_REPEAT)
    proto = dense_chain(5)
    result = rewriter.rewrite(proto, [path])
    (entry,) = result.trace.entries
    assert entry.rule == "roll_dense"
    assert entry.location == f"{path}:3"
    assert len(entry.matched) == 15
    assert_same_on(proto, result.proto, random_feeds(proto))


def test_excluded_repeat_rules_do_not_run(tmp_path):
    path = tmp_path / "dense.rw"
    path.write_text(_REPEAT)
    result = rewriter.rewrite(
        dense_chain(5), [path], rewriter.RewriteOptions(exclude_rules=frozenset({"roll_dense"}))
    )
    assert not result.trace.entries
    assert "Loop" not in ops(result.model.graph)


def test_rolling_and_unrolling_together_is_stopped(tmp_path):
    path = tmp_path / "both.rw"
    path.write_text(
        "pass roll_loops { min_repeats = 3 }\npass unroll_loops { max_trip_count = 8 }\n"
    )
    proto = dense_chain(4)
    result = rewriter.rewrite(proto, [path])
    ir.verify(result.model)
    # Names differ from round to round, so the manager stops at its iteration cap (or on a
    # repeated state); either way it says so and the model is still right.
    assert result.trace.stop_reason in (StopReason.OSCILLATION, StopReason.ITERATION_LIMIT)
    assert result.trace.warnings
    assert_same_on(proto, result.proto, random_feeds(proto))


def test_rolling_an_ir3_model_makes_it_ir4():
    # IR 3 wants every initializer listed as an input; the Loop's trip count is one, so the
    # result is IR 4 (which allows that) rather than a model onnx's checker refuses.
    nodes, h = [], "x"
    for k in range(4):
        nodes.append(onnx.helper.make_node("Relu", [h], [f"r{k}"]))
        nodes.append(onnx.helper.make_node("Neg", [f"r{k}"], [f"h{k}"]))
        h = f"h{k}"
    nodes.append(onnx.helper.make_node("Identity", [h], ["y"]))
    graph = onnx.helper.make_graph(
        nodes,
        "g",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["batch", 3])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["batch", 3])],
    )
    proto = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 8)])
    proto.ir_version = 3
    onnx.checker.check_model(proto, full_check=True)
    result = rewriter.rewrite(proto, [PATTERNS / "roll.rw"])
    assert ops(result.model.graph)["Loop"] == 1
    assert result.proto.ir_version == 4
    onnx.checker.check_model(result.proto, full_check=True)
    assert_same_on(proto, result.proto, random_feeds(proto))


def test_the_loops_package_can_be_imported_first():
    # The README's `rewriter.loops.roll_loops`: a fresh interpreter importing it before
    # anything else of the rewriter (the pass registry imports this package back).
    code = "from rewriter.loops import outline_functions, roll_loops, unroll_loops; print('ok')"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
