"""Rules that match onnxruntime's own default-domain ops load, lint and check like others.

`SimplifiedLayerNormalization` exists only in onnxruntime (at every opset); models it runs hold
it, so rules may match it: lint knows its inputs, outputs and attributes, and check-rules
builds instances that onnxruntime runs.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rewriter import RuleCheckError
from rewriter.api import load_rules
from rewriter.checkrules import CheckOptions, Status, check_rules

RULES = """
# Relu(Relu(SimplifiedLayerNormalization(x, s))) -> Relu(SimplifiedLayerNormalization(x, s))
rule relu_twice_after_rms_norm {
  match {
    n = SimplifiedLayerNormalization <epsilon = e> (_x, _s)
    r = Relu (n)
    y = Relu (r)
  }
  rewrite {
    y = Relu (n)
  }
}

# planted: drops the normalization
rule wrong_rms_norm_dropped {
  match {
    y = SimplifiedLayerNormalization (x, _s)
  }
  rewrite {
    y = Identity (x)
  }
}

"""


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Status]:
    path = tmp_path_factory.mktemp("rules") / "runtime_ops.rw"
    path.write_text(RULES)
    found = check_rules(load_rules(path), CheckOptions(seed=0))
    return {r.name: r.status for r in found if r.kind == "rule"}


def test_a_correct_rule_on_simplified_layer_normalization_verifies(reports):
    assert reports["relu_twice_after_rms_norm"] is Status.VERIFIED


def test_a_wrong_rule_on_simplified_layer_normalization_fails(reports):
    assert reports["wrong_rms_norm_dropped"] is Status.FAILED


def test_lint_still_refuses_an_attribute_the_op_does_not_have(tmp_path: Path):
    path = tmp_path / "bad.rw"
    path.write_text(
        "# bad\nrule bad {\n  match {\n    y = SimplifiedLayerNormalization <alpha = 1.0> (x, s)\n"
        "  }\n  rewrite {\n    y = Identity (x)\n  }\n}\n"
    )
    with pytest.raises(RuleCheckError) as caught:
        load_rules(path)
    assert "`SimplifiedLayerNormalization` has no attribute `alpha`" in str(caught.value)


def test_lint_refuses_a_third_input(tmp_path: Path):
    path = tmp_path / "bad.rw"
    path.write_text(
        "# bad\nrule bad {\n  match {\n    y = SimplifiedLayerNormalization (x, s, b)\n"
        "  }\n  rewrite {\n    y = Identity (x)\n  }\n}\n"
    )
    with pytest.raises(RuleCheckError) as caught:
        load_rules(path)
    assert "`SimplifiedLayerNormalization` takes 2 inputs, but this line gives 3" in str(
        caught.value
    )


def test_a_rule_for_onnxruntime_writes_its_op_with_its_attributes(tmp_path: Path):
    # an onnxruntime rule (it requires com.microsoft) below opset 23 may write the op, and
    # lint knows its attributes at the opsets where onnxruntime runs it
    path = tmp_path / "sln.rw"
    path.write_text(
        "# rms\nrule to_sln requires opset < 23, opset com.microsoft >= 1 {\n  match {\n"
        "    y = Relu (x)\n  }\n  rewrite {\n"
        "    y = SimplifiedLayerNormalization <axis = -1, epsilon = 1e-5, stash_type = 1> "
        "(x, ones(shape(x)[-1:], dtype(x)))\n  }\n}\n"
    )
    (rule,) = load_rules(path).rules
    assert rule.name == "to_sln"
