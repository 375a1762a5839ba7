"""A rule of the IR printed in the rule language's block form, for rules without source text.

Rules built in Python have no file to quote; reports and messages print them this way. The
text parses back to an equal rule when the rule only uses what the language can say (a rule
built from the dataclasses may hold anything the types allow).
"""

from __future__ import annotations

from rewriter.rules._expr import Constraint
from rewriter.rules._pattern import (
    AnyValue,
    AttrBind,
    InputConst,
    InputVar,
    LiteralValue,
    NodePattern,
    OutputPattern,
)
from rewriter.rules._print import attribute_value_text, expression_text, format_const
from rewriter.rules._rewrite import Alias, CopyAttrs, Let, MatchedOp, NewNode, Rewrite, RollLoop
from rewriter.rules._rule import Rule

_INDENT = "  "


def rule_text(rule: Rule) -> str:
    """`rule NAME ... { match {...} where {...} rewrite {...} }` for one rule."""
    header = f"rule {rule.name}"
    if rule.priority:
        header += f" priority {rule.priority}"
    if rule.requires:
        header += " requires " + ", ".join(str(r) for r in rule.requires)
    if rule.assumes:
        header += " assumes " + ", ".join(rule.assumes)
    if rule.approximate is not None:
        header += f" approximate {rule.approximate}"
    lines = [header + " {"]
    repeat = rule.pattern.repeat
    if repeat is not None:
        lines.append(
            f"{_INDENT}match repeat ({repeat.count_var} {repeat.count_op} {repeat.count}) "
            f"from {repeat.from_var} to {repeat.to_var} {{"
        )
    else:
        lines.append(f"{_INDENT}match {{")
    lines.extend(_INDENT * 2 + _node_pattern(line) for line in rule.lines)
    lines.append(_INDENT + "}")
    if rule.conditions:
        lines.append(f"{_INDENT}where {{")
        lines.extend(_INDENT * 2 + expression_text(c) for c in rule.conditions)
        lines.append(_INDENT + "}")
    if isinstance(rule.rewrite, RollLoop):
        lines.append(f"{_INDENT}rewrite loop")
    elif isinstance(rule.rewrite, Rewrite):
        lines.append(f"{_INDENT}rewrite {{")
        lines.extend(_INDENT * 2 + _statement(s) for s in rule.rewrite.stmts)
        lines.append(_INDENT + "}")
    lines.append("}")
    return "\n".join(lines)


def _literal(value: LiteralValue) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_literal(item) for item in value) + "]"
    return format_const(value)


def _outputs(outputs: tuple[OutputPattern, ...]) -> str:
    return ", ".join("_" if isinstance(o, AnyValue) else o.name for o in outputs)


def _node_pattern(line: NodePattern) -> str:
    outputs = _outputs(line.outputs) + (", ..." if line.more_outputs else "")
    op = " | ".join(str(op) for op in line.ops) or "_"
    attrs = [
        f"{a.name} = {a.var}" if isinstance(a, AttrBind) else f"{a.name} = {_literal(a.value)}"
        for a in line.attrs
    ]
    inputs = []
    for item in line.inputs:
        if isinstance(item, AnyValue):
            inputs.append("_")
        elif isinstance(item, InputConst):
            inputs.append(_literal(item.value))
        elif isinstance(item, InputVar):
            inputs.append(
                item.name + ("?" if item.optional else "") + ("..." if item.variadic else "")
            )
    text = f"{outputs} = {op} <{', '.join(['...', *attrs])}> ({', '.join(inputs)})"
    return text + (f" as {line.node_var}" if line.node_var else "")


def _statement(stmt: Let | NewNode | Alias) -> str:
    if isinstance(stmt, Let):
        return f"let {stmt.name} = {expression_text(stmt.expr)}"
    if isinstance(stmt, Alias):
        return f"{stmt.target} = {expression_text(stmt.source)}"
    attrs = []
    copied = stmt.op.node_var if isinstance(stmt.op, MatchedOp) else None
    for entry in stmt.attrs:
        if isinstance(entry, CopyAttrs):
            if entry.node_var != copied:
                attrs.append(f"...{entry.node_var}")
        else:
            attrs.append(f"{entry.name} = {attribute_value_text(entry.value)}")
    listed = (
        f" <{', '.join(attrs)}>" if attrs else (" <>" if not str(stmt.op)[:1].isupper() else "")
    )
    inputs = ", ".join(expression_text(i) for i in stmt.inputs)
    text = f"{_outputs(stmt.outputs)} = {stmt.op}{listed} ({inputs})"
    return text + (f" as {stmt.node_var}" if stmt.node_var else "")


def constraint_text(constraint: Constraint) -> str:
    """`constraint NAME(params) { conditions }` for one named constraint."""
    lines = [f"constraint {constraint.name}({', '.join(constraint.params)}) {{"]
    lines.extend(_INDENT + expression_text(c) for c in constraint.conditions)
    lines.append("}")
    return "\n".join(lines)
