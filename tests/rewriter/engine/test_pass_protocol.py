"""Built-in passes under the rules' safety net, and the default pipeline.

A pass runs under an `ir.Journal`; what it changed is validated like a rule's rewrite, and a
pass that would break the model (or raises) is undone and reported like a rolled-back rule.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx
import pytest

import ir
import rewriter
from rewriter import engine, rules
from tests.helpers import assert_same_outputs, model_from_text, op_types

MODEL = """<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 3] x) => (float[2, 3] y) {
    a = Relu (x)
    b = Neg (a)
    y = Abs (b)
}"""


@dataclasses.dataclass(frozen=True, slots=True)
class _NoOptions:
    """A planted pass takes no options."""


def _cycle(model: ir.Model, options: _NoOptions, context: engine.PassContext) -> engine.PassResult:
    """Makes the first node read the last node's output: a cycle."""
    first, *_, last = model.graph.nodes
    first.replace_input_with(0, last.outputs[0])
    return engine.PassResult("make_cycle", True, (first,), 1)


def _ill_typed(
    model: ir.Model, options: _NoOptions, context: engine.PassContext
) -> engine.PassResult:
    """Replaces Neg's input by an int64 constant: the float model no longer type-checks."""
    graph = model.graph
    ints = np.zeros((2, 3), dtype=np.int64)
    value = ir.Value("ints", const_value=ir.NumpyTensor(ints, "ints"))
    graph.add_initializer(value)
    neg = graph.nodes[1]
    neg.replace_input_with(0, value)
    return engine.PassResult("ill_typed", True, (neg,), 1)


def _crash(model: ir.Model, options: _NoOptions, context: engine.PassContext) -> engine.PassResult:
    """Renames the graph output, then fails: the rename must not survive."""
    graph = model.graph
    abs_node = graph.nodes[-1]
    abs_node.outputs[0].name = "renamed"
    raise ZeroDivisionError("planted")


PLANTED = {
    name: engine.PassDefinition(name, f"planted: {name}", _NoOptions, run)
    for name, run in (("make_cycle", _cycle), ("ill_typed", _ill_typed), ("crash", _crash))
}


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("make_cycle", "cycle in graph"),
        ("ill_typed", "int64"),
        ("crash", "failed (ZeroDivisionError: planted)"),
    ],
)
def test_a_pass_that_breaks_the_model_is_undone_and_reported(name: str, reason: str) -> None:
    proto = model_from_text(MODEL)
    model = ir.from_onnx(proto)
    before = ir.to_onnx(model).SerializeToString()
    manager = engine.PassManager(
        rules.RuleSet(()),
        engine.RunOptions(passes=(rules.PassUse(name),)),
        passes={**engine.BUILTIN_PASSES, **PLANTED},
    )
    trace = manager.run(model)
    assert ir.to_onnx(model).SerializeToString() == before
    ir.verify(model.graph)
    (skip,) = trace.skips
    assert (skip.rule, skip.location) == (name, "built-in pass")
    assert skip.reason.startswith("rolled back: ")
    assert reason in skip.reason
    assert any(f"pass `{name}` was undone" in w for w in trace.warnings)


def test_the_default_pipeline_runs_without_any_rule_file_declaring_it() -> None:
    proto = model_from_text(
        """<ir_version: 8, opset_import: ["" : 17]>
        g (float[2, 3] x) => (float[2, 3] y) {
            c = Constant <value = float[3] {1, 2, 3}> ()
            d = Neg (c)
            unused = Relu (x)
            y = Add (x, d)
        }"""
    )
    library = rewriter.load_rules()
    assert library.passes == ()  # no rule file declares them: the run brings them
    result = rewriter.rewrite(proto, rules.RuleSet(()))
    assert op_types(result.proto) == ["Add"]
    passes = {entry.rule for entry in result.trace.entries if entry.kind == "pass"}
    assert {"fold_constants", "eliminate_dead_code"} <= passes
    assert_same_outputs(proto, result.proto, rtol=0, atol=0)
    untouched = rewriter.rewrite(proto, rules.RuleSet(()), rewriter.RewriteOptions(passes=()))
    assert op_types(untouched.proto) == op_types(proto)


def test_a_rule_file_can_give_a_pipeline_pass_other_options() -> None:
    declared = (rules.PassUse("fold_constants", (("max_output_bytes", 4),)),)
    merged = engine.pipeline(engine.DEFAULT_PIPELINE, declared)
    assert [use.name for use in merged] == [use.name for use in engine.DEFAULT_PIPELINE]
    assert merged[0].options == (("max_output_bytes", 4),)


def test_the_pipeline_is_one_readable_list_of_builtin_passes() -> None:
    names = [use.name for use in engine.DEFAULT_PIPELINE]
    assert names == [
        "fold_constants",
        "eliminate_dead_code",
        "eliminate_common_subexpressions",
        "optimize_transposes",
        "inline_constant_ifs",
        "flatten_concats",
    ]
    assert all(name in engine.BUILTIN_PASSES for name in names)


def test_the_cli_runs_without_passes_when_asked(tmp_path) -> None:
    from rewriter.cli import main

    source = tmp_path / "m.onnx"
    onnx.save(
        model_from_text(
            """<ir_version: 8, opset_import: ["" : 17]>
            g (float[2] x) => (float[2] y) { unused = Relu (x)
             y = Neg (x) }"""
        ),
        source,
    )
    out = tmp_path / "out.onnx"
    assert main([str(source), "-o", str(out), "--passes", "none"]) == 0
    assert op_types(onnx.load(out)) == ["Relu", "Neg"]
    assert main([str(source), "-o", str(out), "--force"]) == 0
    assert op_types(onnx.load(out)) == ["Neg"]
