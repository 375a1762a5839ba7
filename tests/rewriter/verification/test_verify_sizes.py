"""Verification at the sizes a model mentions, and twice the largest of them (issue 28).

`Slice(x, 0, 8) -> x` agrees with the original on every sequence of at most 8 positions, so
examples drawn from small dims pass it; the examples at the model's own sizes catch it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnx.helper as oh
import pytest
from onnx import TensorProto, numpy_helper

import ir
import rewriter
from rewriter.api import load_rules
from rewriter.cli import main
from rewriter.verification import InputOptions, VerifyOptions, check_equivalence

RULES = Path(__file__).resolve().parents[1] / "checkrules" / "rules" / "size_dependent.rw"
TABLE = 128


def position_model() -> onnx.ModelProto:
    """Token and position embeddings over a symbolic sequence; the first 8 positions sliced.

    `positions = Gather(table, Range(0, seq))` is [seq, 4]; output `first` holds its first 8
    rows (`Slice(positions, 0, 8)`), output `hidden` token plus position embeddings.
    """
    rng = np.random.default_rng(0)
    ids = oh.make_tensor_value_info("ids", TensorProto.INT64, ["seq"])
    first = oh.make_tensor_value_info("first", TensorProto.FLOAT, [None, 4])
    hidden = oh.make_tensor_value_info("hidden", TensorProto.FLOAT, ["seq", 4])
    inits = [
        numpy_helper.from_array(rng.standard_normal((50, 4)).astype(np.float32), "words"),
        numpy_helper.from_array(rng.standard_normal((TABLE, 4)).astype(np.float32), "table"),
        numpy_helper.from_array(np.array(0, np.int64), "zero"),
        numpy_helper.from_array(np.array(1, np.int64), "one"),
        numpy_helper.from_array(np.array([0], np.int64), "starts"),
        numpy_helper.from_array(np.array([8], np.int64), "ends"),
        numpy_helper.from_array(np.array([0], np.int64), "axes"),
    ]
    nodes = [
        oh.make_node("Gather", ["words", "ids"], ["tokens"]),
        oh.make_node("Shape", ["ids"], ["shape"]),
        oh.make_node("Squeeze", ["shape"], ["length"]),
        oh.make_node("Range", ["zero", "length", "one"], ["position_ids"]),
        oh.make_node("Gather", ["table", "position_ids"], ["positions"]),
        oh.make_node("Add", ["tokens", "positions"], ["hidden"]),
        oh.make_node("Slice", ["positions", "starts", "ends", "axes"], ["first"]),
    ]
    graph = oh.make_graph(nodes, "positions", [ids], [first, hidden], inits)
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])
    onnx.checker.check_model(model, full_check=True)
    return model


def rewritten_by(rule: str) -> onnx.ModelProto:
    """The position model rewritten by one rule of `size_dependent.rw`."""
    ruleset = load_rules(RULES)
    others = frozenset(r.name for r in ruleset.rules if r.name != rule)
    options = rewriter.RewriteOptions(exclude_rules=others)
    rewritten = rewriter.rewrite(position_model(), ruleset, options)
    assert [e.rule for e in rewritten.trace.entries if e.kind == "rule"] == [rule]
    return rewritten.proto


@pytest.mark.parametrize("rule", ["wrong_slice_prefix", "wrong_slice_prefix_checked"])
def test_a_slice_rule_right_only_up_to_8_positions_is_caught(rule: str) -> None:
    result = check_equivalence(
        position_model(), rewritten_by(rule), VerifyOptions(save_counterexample=False)
    )
    assert not result.ok
    assert result.mismatched_outputs == ("first",)
    assert result.counterexample is not None
    # the smallest disagreeing length: 8 agrees, 9 keeps one row too many
    assert result.counterexample["ids"].shape == (9,)
    assert "shape (9, 4) != (8, 4)" in result.message
    assert any("`seq` 8, 9 (disagrees)" in note for note in result.notes())


def test_sizes_the_caller_fixes_are_never_changed() -> None:
    """At a fixed length of 6 the two models agree, and no other length is tried."""
    result = check_equivalence(
        position_model(),
        rewritten_by("wrong_slice_prefix"),
        VerifyOptions(inputs=InputOptions(dims={"seq": 6})),
    )
    assert result.ok
    assert not [note for note in result.notes() if note.startswith("at the sizes")]


def test_sizes_the_original_refuses_are_outside_its_domain() -> None:
    """Twice the table's length is refused by the original: reported, not a failure."""
    model = position_model()
    result = check_equivalence(model, model, VerifyOptions(save_counterexample=False))
    assert result.ok
    assert result.examples_rejected == 0
    sizes = [note for note in result.notes() if note.startswith("at the sizes")]
    assert sizes == [
        f"at the sizes the models mention: `seq` 8, {TABLE}, {2 * TABLE} (refused by the original)"
    ]


def test_the_models_sizes_are_related_to_their_dims() -> None:
    from rewriter.verification._model_sizes import model_sizes

    model = ir.from_onnx(position_model())
    ir.infer_types(model)
    sizes = model_sizes([model], ["seq"])
    assert sizes.by_symbol == {"seq": (8, TABLE)}
    assert sizes.for_symbol("seq") == (8, TABLE)
    assert sizes.largest() == TABLE


def test_cli_verify_refuses_to_write_the_slice_rewrite(tmp_path: Path, capsys) -> None:
    source = tmp_path / "positions.onnx"
    onnx.save(position_model(), source)
    out = tmp_path / "out.onnx"
    code = main([str(source), "--rules", str(RULES), "-o", str(out), "--verify", "--no-progress"])
    printed = capsys.readouterr()
    assert code == 1
    assert not out.exists()
    assert "`seq` 8, 9 (disagrees)" in printed.out
    assert "wrong_slice_prefix" in printed.err


def test_sizes_too_large_or_past_the_time_budget_are_reported_not_tried() -> None:
    from rewriter.verification._inputs import InputSpec
    from rewriter.verification._model_sizes import ModelSizes
    from rewriter.verification._size_examples import try_sizes

    specs = (InputSpec("x", ir.DataType.FLOAT, (("sym", "seq"), 4), "float"),)
    tried: list[int] = []

    def judge(example) -> bool:
        tried.append(dict(example.dims)[("sym", "seq")])
        return True

    huge = ModelSizes({"seq": (512, 32768)}, ())
    report = try_sizes(specs, huge, {}, (1, 6), judge)
    assert tried == [512]
    assert (
        report.describe() == "`seq` 512, 32768 (not tried: too large), 65536 (not tried: too large)"
    )
    tried.clear()
    late = try_sizes(specs, ModelSizes({"seq": (8,)}, ()), {}, (1, 6), judge, budget=-1.0)
    assert tried == []
    assert (
        late.describe()
        == "`seq` 8 (not tried: time budget spent), 16 (not tried: time budget spent)"
    )
