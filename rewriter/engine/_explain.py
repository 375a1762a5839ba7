"""Say which named constraint makes a `where` line fail, and which of its conditions.

Used for `--why-not` only: the matcher calls `explain_condition` on a `where` line that is
false, unknown or fails to evaluate. When a constraint call is to blame (the line itself, or
an operand of its `and`), the explanation names the call, the first condition of the
constraint that is false (else the first unknown one, else the one that failed) with its
`file:line`, and the values that condition compared, where they are cheap to show:

    `is_float(x)` is false: patterns/constraints.rw:12: `dtype(x) in [...]` (dtype(x) is "int64")

A condition that calls a further constraint is explained in turn, after a `; `. A `where`
line that calls no constraint (`explain_line`) is quoted with the values it compared:

    `shape(q)[1] == shape(kt)[1]` is unknown (a fact is not known) (shape(q)[1] is 4, ...)
"""

from __future__ import annotations

import numpy as np

from rewriter import rules
from rewriter.engine._evaluate import evaluate
from rewriter.engine._values import UNKNOWN, EvalContext, EvalError, EvalValue, truth

# At most this many values are shown, each a scalar or a list of at most this many items.
_MAX_VALUES = 4
_MAX_ITEMS = 8


def explain_condition(condition: rules.Expr, ctx: EvalContext) -> str | None:
    """Why `condition` does not hold, when a constraint call is to blame; else None."""
    if isinstance(condition, rules.ConstraintCall):
        return _explain_call(condition, ctx)
    if isinstance(condition, rules.BoolOp) and condition.op == "and":
        found = _culprit((condition.left, condition.right), ctx)
        return None if found is None else explain_condition(found[0], ctx)
    return None


def explain_line(condition: rules.Expr, ctx: EvalContext, verdict: str) -> str:
    """Why a `where` line is not true: its constraint's explanation, else the line quoted.

    `verdict` is what the line evaluated to ("false" or "unknown (...)"). Of an `and`, the
    first operand that is not true is quoted.
    """
    explained = explain_condition(condition, ctx)
    if explained is not None:
        return explained
    shown = condition
    while isinstance(shown, rules.BoolOp) and shown.op == "and":
        found = _culprit((shown.left, shown.right), ctx)
        if found is None or isinstance(found[1], EvalError):
            break
        shown, verdict = found[0], str(found[1])
    text = f"`{_quoted(shown)}` is {verdict}"
    values = _values(shown, ctx)
    return f"{text} ({values})" if values else text


def _explain_call(call: rules.ConstraintCall, ctx: EvalContext) -> str | None:
    constraint = call.constraint
    try:
        args = [evaluate(argument, ctx) for argument in call.args]
    except EvalError:
        return None  # the line's own message says what failed
    inner = ctx.inside(dict(zip(constraint.params, args, strict=False)))
    found = _culprit(constraint.conditions, inner)
    if found is None:
        return None
    condition, verdict = found
    where = f"{condition.span.path}:{condition.span.line}"
    quoted = f"`{_quoted(condition)}`"
    if isinstance(verdict, EvalError):
        return f"`{rules.expression_text(call)}` fails: {where}: {quoted}: {verdict.bare_message}"
    text = f"`{rules.expression_text(call)}` is {verdict}: {where}: {quoted}"
    values = _values(condition, inner)
    if values:
        text += f" ({values})"
    deeper = explain_condition(condition, inner)
    if deeper is not None:
        text += f"; {deeper}"
    return text


def _culprit(
    conditions: tuple[rules.Expr, ...], ctx: EvalContext
) -> tuple[rules.Expr, str | EvalError] | None:
    """The first condition that is false; else the first unknown or failing one.

    Returns the condition and "false", "unknown (...)" or the error it raised.
    """
    first_other: tuple[rules.Expr, str | EvalError] | None = None
    for condition in conditions:
        try:
            verdict = truth(evaluate(condition, ctx))
        except EvalError as exc:
            if first_other is None:
                first_other = (condition, exc)
            continue
        if verdict is False:
            return condition, "false"
        if verdict is UNKNOWN and first_other is None:
            first_other = (condition, "unknown (a fact is not known)")
    return first_other


def _quoted(condition: rules.Expr) -> str:
    return rules.expression_text(condition, abbreviate_lists=True)


def _values(condition: rules.Expr, ctx: EvalContext) -> str:
    """`left is value` for the operands the condition compares, where cheap to show.

    Only the comparisons that decide the outcome are shown: of an `and`, the operands that
    are not true.
    """
    shown: dict[str, str] = {}
    for comparison in _deciding_comparisons(condition, ctx):
        for side in (comparison.left, comparison.right):
            text = rules.expression_text(side, abbreviate_lists=True)
            if _is_literal(side) or text in shown or len(shown) >= _MAX_VALUES:
                continue
            try:
                value = evaluate(side, ctx)
            except EvalError:
                continue
            formatted = _format(value)
            if formatted is not None:
                shown[text] = formatted
    return ", ".join(f"{text} is {value}" for text, value in shown.items())


def _deciding_comparisons(expr: rules.Expr, ctx: EvalContext) -> list[rules.Compare]:
    """The comparisons in `expr` that make it not true, in source order."""
    if isinstance(expr, rules.BoolOp) and expr.op == "and":
        found: list[rules.Compare] = []
        for operand in (expr.left, expr.right):
            if _truth_or_none(operand, ctx) is not True:
                found.extend(_deciding_comparisons(operand, ctx))
        return found
    return [node for node, _ in rules.walk(expr) if isinstance(node, rules.Compare)]


def _truth_or_none(expr: rules.Expr, ctx: EvalContext) -> object:
    try:
        return truth(evaluate(expr, ctx))
    except EvalError:
        return None


def _is_literal(expr: rules.Expr) -> bool:
    if isinstance(expr, rules.Const):
        return True
    return isinstance(expr, rules.ListExpr) and all(_is_literal(item) for item in expr.items)


def _format(value: EvalValue) -> str | None:
    """A value as a rule would write it, or None when it is not cheap to show."""
    if value is UNKNOWN:
        return "unknown"
    if isinstance(value, np.generic):
        value = value.item()
    if value is None or isinstance(value, bool | int | float | str):
        return rules.format_const(value)
    if isinstance(value, np.ndarray) and value.size <= _MAX_ITEMS:
        value = value.tolist()
    if isinstance(value, list | tuple) and len(value) <= _MAX_ITEMS:
        items = [_format(item) for item in value]
        if all(item is not None for item in items):
            return "[" + ", ".join(item for item in items if item is not None) + "]"
    return None
