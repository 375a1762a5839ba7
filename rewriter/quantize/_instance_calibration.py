"""Instances of rules that read calibration statistics get statistics of their own.

A rule that quantizes activations asks `is_calibrated(x)` and `calibrated_range(x)` (or
`awq_scale`), which hold only with calibration data. check-rules calibrates each instance of
such a rule on plain inputs of its own (other draws than the examples the bound is measured
on, so a range that clips is seen to clip), and the rule's conditions and rewrite read those.
"""

from __future__ import annotations

from typing import Any

from rewriter import rules
from rewriter.engine import Calibration
from rewriter.rules import walk

# The built-ins that read `RunOptions.calibration`.
CALIBRATION_BUILTINS = frozenset({"is_calibrated", "calibrated_range", "awq_scale"})
# Samples an instance is calibrated on, and the seed they are drawn from (apart from the
# examples' seeds).
_SAMPLES = 32
_SEED = 7919


def reads_calibration(rule: rules.Rule) -> bool:
    """Whether the rule's conditions or rewrite call a calibration built-in."""
    expressions: list[rules.Expr] = list(rule.conditions)
    if isinstance(rule.rewrite, rules.Rewrite):
        for stmt in rule.rewrite.stmts:
            if isinstance(stmt, rules.Let):
                expressions.append(stmt.expr)
            elif isinstance(stmt, rules.Alias):
                expressions.append(stmt.source)
            elif isinstance(stmt, rules.NewNode):
                expressions.extend(stmt.inputs)
                expressions.extend(a.value for a in stmt.attrs if isinstance(a, rules.SetAttr))
    return any(
        isinstance(node, rules.Call) and node.func in CALIBRATION_BUILTINS
        for expr in expressions
        for node, _ in walk(expr)
    )


def instance_calibration(rule: rules.Rule, proto: Any) -> Calibration | None:
    """Statistics of the instance's values on plain inputs, for a rule that reads them."""
    if not reads_calibration(rule):
        return None
    from rewriter.quantize._calibration import collect_calibration
    from rewriter.verification import VerifyError, plain_samples

    try:
        return collect_calibration(proto, plain_samples(proto, _SAMPLES, _SEED))
    except VerifyError:
        return None
