"""What a rule needs before it can be instantiated: its shape, and what makes it unprovable.

Read once per rule: the match lines in an order that defines each value before it is read;
which inputs the rule reads the contents of (those get concrete shapes, their elements stay
symbolic); which pairs of inputs the rule compares for identity; which inputs it bounds
(`lower_bound(d)`); the opsets it is proved at; and, before any solving, the reason it cannot
be proved at all (an approximate rule, a loop, an op without semantics).
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Iterable

import ir
from rewriter import rules
from rewriter.prove._functions import FACT_FUNCTIONS
from rewriter.prove._registry import SEMANTICS
from rewriter.prove._typing import mentioned_dtypes

LATEST_OPSET = 21
"""The newest default-domain opset a proof uses (onnxruntime replays counterexamples there)."""
OLDEST_OPSET = 7

_STANDARD = ("", "ai.onnx")


class UnsupportedRuleError(ValueError):
    """A rule the prover cannot prove; the message is the reason."""


@dataclasses.dataclass(frozen=True, slots=True)
class RulePlan:
    """A rule read for proving (see the module docstring)."""

    rule: rules.Rule
    rewrite: rules.Rewrite
    order: tuple[int, ...]
    inputs: tuple[str, ...]
    defined: frozenset[str]
    contents_read: frozenset[str]
    vectors: frozenset[str]
    identities: tuple[tuple[str, str], ...]
    bounded: frozenset[tuple[str, str]]
    opsets: tuple[int, ...]
    mentioned: frozenset[ir.DataType]


def plan(rule: rules.Rule) -> RulePlan:
    """The plan of `rule`.

    Raises:
        UnsupportedRuleError: the rule cannot be proved (the message says why).
    """
    if rule.approximate is not None:
        raise UnsupportedRuleError("approximate rule")
    if isinstance(rule.rewrite, rules.RollLoop):
        raise UnsupportedRuleError("rolling a loop (a Loop op has no semantics here)")
    if rule.rewrite is None:
        raise UnsupportedRuleError("a query (no rewrite) has nothing to prove")
    if rule.pattern.repeat is not None:
        raise UnsupportedRuleError("a repeated match (`match repeat`) is not modelled")
    _check_ops(rule)
    lines = rule.pattern.nodes
    defined = frozenset(name for node in lines for name in node.output_names)
    order = _topological(lines, defined)
    inputs: dict[str, None] = {}
    for index in order:
        for item in lines[index].inputs:
            if isinstance(item, rules.InputVar) and item.name not in defined:
                inputs[item.name] = None
    expressions = _expressions(rule)
    contents_read, vectors = _reads(expressions, frozenset(inputs), defined)
    return RulePlan(
        rule=rule,
        rewrite=rule.rewrite,
        order=order,
        inputs=tuple(inputs),
        defined=defined,
        contents_read=contents_read,
        vectors=vectors,
        identities=_identities(rule.conditions, frozenset(inputs)),
        bounded=_bounded(rule.conditions, frozenset(inputs)),
        opsets=_opsets(rule),
        mentioned=mentioned_dtypes(rule.conditions),
    )


def _check_ops(rule: rules.Rule) -> None:
    assert isinstance(rule.rewrite, rules.Rewrite), "checked by the caller"
    for node in rule.pattern.nodes:
        if not node.ops:
            raise UnsupportedRuleError("a match line that accepts any op")
        for op in node.ops:
            _check_op(op)
    for stmt in rule.rewrite.stmts:
        if isinstance(stmt, rules.NewNode) and isinstance(stmt.op, rules.OpId):
            _check_op(stmt.op)


def _check_op(op: rules.OpId) -> None:
    if op.domain not in _STANDARD:
        raise UnsupportedRuleError(f"op `{op}` has no semantics here (not the ONNX domain)")
    if op.op_type not in SEMANTICS:
        raise UnsupportedRuleError(f"op `{op.op_type}` has no semantics here")


def _topological(lines: tuple[rules.NodePattern, ...], defined: frozenset[str]) -> tuple[int, ...]:
    done: set[str] = set()
    order: list[int] = []
    remaining = list(range(len(lines)))
    while remaining:
        for index in remaining:
            needed = [
                i.name
                for i in lines[index].inputs
                if isinstance(i, rules.InputVar) and i.name in defined
            ]
            if all(name in done for name in needed):
                order.append(index)
                done.update(lines[index].output_names)
                remaining.remove(index)
                break
        else:
            raise UnsupportedRuleError("a match whose lines read each other in a cycle")
    return tuple(order)


def _expressions(rule: rules.Rule) -> list[tuple[rules.Expr, bool]]:
    """Every expression of the rule, and whether a bare name there is a tensor use."""
    found: list[tuple[rules.Expr, bool]] = [
        (c, False) for c in rules.inline_constraints(rule.conditions)
    ]
    assert isinstance(rule.rewrite, rules.Rewrite), "checked by the caller"
    for stmt in rule.rewrite.stmts:
        if isinstance(stmt, rules.Let):
            found.append((stmt.expr, False))
        elif isinstance(stmt, rules.NewNode):
            found.extend((value, True) for value in stmt.inputs)
            found.extend(
                (entry.value, False) for entry in stmt.attrs if isinstance(entry, rules.SetAttr)
            )
        else:
            found.append((stmt.source, True))
    return found


def _reads(
    expressions: Iterable[tuple[rules.Expr, bool]], inputs: frozenset[str], defined: frozenset[str]
) -> tuple[frozenset[str], frozenset[str]]:
    """The inputs whose contents the rule reads, and those read as 1-D shapes."""
    tensors = inputs | defined
    contents: set[str] = set()
    vectors: set[str] = set()
    for expr, tensor_use in expressions:
        if tensor_use and isinstance(expr, rules.Name):
            continue
        for node, parent in rules.walk(expr):
            if not isinstance(node, rules.Name) or node.name not in tensors:
                continue
            if isinstance(parent, rules.Call) and parent.func == "shape_value":
                vectors.add(node.name)
            elif _is_fact_use(node, parent, tensors):
                continue
            else:
                contents.add(node.name)
    return frozenset(contents & inputs), frozenset((vectors - contents) & inputs)


def _is_fact_use(node: rules.Name, parent: object, tensors: frozenset[str]) -> bool:
    if parent is None:
        return True
    if isinstance(parent, rules.Call):
        return parent.func in FACT_FUNCTIONS
    if isinstance(parent, rules.Compare) and parent.op in ("==", "!="):
        other = parent.right if parent.left is node else parent.left
        if isinstance(other, rules.Const) and other.value is None:
            return True
        return isinstance(other, rules.Name) and other.name in tensors
    return isinstance(parent, rules.BoolOp) or (
        isinstance(parent, rules.Unary) and parent.op == "not"
    )


def _identities(
    conditions: tuple[rules.Expr, ...], inputs: frozenset[str]
) -> tuple[tuple[str, str], ...]:
    pairs: dict[tuple[str, str], None] = {}
    for condition in rules.inline_constraints(conditions):
        for node, _ in rules.walk(condition):
            if (
                isinstance(node, rules.Compare)
                and node.op in ("==", "!=")
                and isinstance(node.left, rules.Name)
                and isinstance(node.right, rules.Name)
                and node.left.name in inputs
                and node.right.name in inputs
                and node.left.name != node.right.name
            ):
                pair = tuple(sorted((node.left.name, node.right.name)))
                pairs[(pair[0], pair[1])] = None
    return tuple(pairs)


def _bounded(
    conditions: tuple[rules.Expr, ...], inputs: frozenset[str]
) -> frozenset[tuple[str, str]]:
    found: set[tuple[str, str]] = set()
    for condition in rules.inline_constraints(conditions):
        for node, _ in rules.walk(condition):
            if (
                isinstance(node, rules.Call)
                and node.func in ("lower_bound", "upper_bound", "is_finite")
                and len(node.args) == 1
                and isinstance(node.args[0], rules.Name)
                and node.args[0].name in inputs
            ):
                found.add((node.args[0].name, node.func))
    return frozenset(found)


_COMPARE = {
    ">=": operator.ge,
    ">": operator.gt,
    "<=": operator.le,
    "<": operator.lt,
    "==": operator.eq,
}


def _allows(rule: rules.Rule, opset: int) -> bool:
    for requirement in rule.requires:
        if requirement.domain not in _STANDARD:
            continue
        if not _COMPARE[requirement.op](opset, requirement.version):
            return False
    return True


def _fits(rule: rules.Rule, opset: int, *, attributes: bool) -> bool:
    """Every match line's ops exist at `opset` (and name only attributes they have)."""
    for node in rule.pattern.nodes:
        for op in node.ops:
            schema = ir.schemas.find_schema(op.op_type, op.domain, opset)
            if schema is None:
                return False
            arity = ir.schemas.input_arity(schema)
            fixed = [i for i in node.inputs if not (isinstance(i, rules.InputVar) and i.variadic)]
            if arity.max_inputs is not None and len(fixed) > arity.max_inputs:
                return False
            if attributes and any(a.name not in schema.attributes for a in node.attrs):
                return False
    return True


def _opsets(rule: rules.Rule) -> tuple[int, ...]:
    """The opsets to prove at.

    The newest the rule allows, and, when the match names attributes that only older schemas
    have (Clip's `min` before 11), the newest of those.
    """
    allowed = [v for v in range(LATEST_OPSET, OLDEST_OPSET - 1, -1) if _allows(rule, v)]
    chosen: list[int] = []
    newest = next((v for v in allowed if _fits(rule, v, attributes=False)), None)
    if newest is not None:
        chosen.append(newest)
    named = next((v for v in allowed if _fits(rule, v, attributes=True)), None)
    if named is not None and named not in chosen:
        chosen.append(named)
    if not chosen:
        # The requirements are about where the engine applies the rule (a decomposition for
        # a --target-opset below the op's own); the ops' semantics is the newest schema's.
        every = range(LATEST_OPSET, OLDEST_OPSET - 1, -1)
        newest = next((v for v in every if _fits(rule, v, attributes=False)), None)
        if newest is None:
            raise UnsupportedRuleError("no opset has every op of the match")
        chosen.append(newest)
    return tuple(chosen)
