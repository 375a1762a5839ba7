"""Print expressions and literals in canonical `.rw` syntax, with minimal parentheses.

Parentheses follow the rule language's precedence (`rewriter/dsl/grammar.lark`), so printing
then parsing gives back an equal expression. Messages quote rule conditions this way
(`expression_text`), whether the rule was written in a `.rw` file or built in Python.

Layout is the formatter's business: it passes a `group` callback that decides how a bracketed
list is laid out (exploded one item per line or not), and a `line_break` callback that says
where an expression keeps a line break (to keep a comment written after an operator).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from rewriter._errors import Span
from rewriter.rules import _expr as ast

# Precedence levels, loosest first, as in the grammar.
CONDITIONAL = 1
OR = 2
AND = 3
NOT = 4
COMPARISON = 5
COALESCE = 6
SUM = 7
TERM = 8
UNARY = 9
POWER = 10
POSTFIX = 11
ATOM = 12

_BINARY_LEVELS = {"+": SUM, "-": SUM, "*": TERM, "/": TERM, "//": TERM, "%": TERM, "**": POWER}
_STRING_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\r": "\\r", "\0": "\\0"}

# group(open, close, item renderers, item spans, line of the closer or None, depth) -> text
GroupPrinter = Callable[
    [str, str, Sequence[Callable[[int], str]], Sequence[Span], int | None, int], str
]
# line_break(left operand's span, right operand's span, continuation depth) -> the text to
# print after the operator instead of a space (a comment and a line break), or None.
LineBreaker = Callable[[Span, Span, int], str | None]


def level(expr: ast.Expr) -> int:
    """How tightly `expr` binds (higher binds tighter)."""
    if isinstance(expr, ast.Conditional):
        return CONDITIONAL
    if isinstance(expr, ast.BoolOp):
        return OR if expr.op == "or" else AND
    if isinstance(expr, ast.Unary):
        return NOT if expr.op == "not" else UNARY
    if isinstance(expr, ast.Compare):
        return COMPARISON
    if isinstance(expr, ast.Coalesce):
        return COALESCE
    if isinstance(expr, ast.Binary):
        return _BINARY_LEVELS.get(expr.op, SUM)
    if isinstance(expr, ast.Call | ast.ConstraintCall | ast.Attribute | ast.Index):
        return POSTFIX
    if isinstance(expr, ast.Const) and _is_negative_number(expr.value):
        return UNARY
    return ATOM


def format_const(value: object) -> str:
    """A literal as written in a rule file."""
    if value is None:
        return "none"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return '"' + "".join(_STRING_ESCAPES.get(c, c) for c in value) + '"'
    if isinstance(value, float):
        return repr(value)
    return str(value)


def format_literal(const: ast.Const) -> str:
    """A constant as written in a rule file; a number keeps its source digits (`1e-5`).

    A number's sign comes from its value (`- -1` prints `1`); a constant without a source
    spelling (every non-number, and numbers built in code) prints as `format_const` does.
    """
    if const.spelling is None:
        return format_const(const.value)
    sign = "-" if _is_negative_number(const.value) else ""
    return sign + const.spelling


def _is_negative_number(value: object) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return math.copysign(1.0, value) < 0


class ExprPrinter:
    """Prints expressions; `group` lays out bracketed lists, `line_break` keeps comments."""

    def __init__(self, group: GroupPrinter, line_break: LineBreaker | None = None) -> None:
        self.group = group
        self.line_break = line_break

    def expr(self, expr: ast.Expr, indent: int, minimum: int = CONDITIONAL) -> str:
        """`expr` as text, parenthesized when it binds looser than `minimum`."""
        text = self._bare(expr, indent)
        if level(expr) < minimum:
            return f"({text})"
        return text

    def attribute_value(self, expr: ast.Expr, indent: int) -> str:
        """`expr` as an attribute's value inside `<...>`, where `==` and looser need parentheses."""
        return self.expr(expr, indent, COALESCE)

    def _clarified(self, expr: ast.Expr, indent: int, minimum: int, parent: ast.Expr) -> str:
        """Like `expr`, but also parenthesizes where precedence is correct but easy to misread.

        `a or (b and c)`, `not (x in xs)` and `(a ?? b) == c` keep their parentheses.
        """
        if _reads_ambiguously(expr, parent):
            return f"({self._bare(expr, indent)})"
        return self.expr(expr, indent, minimum)

    def _bare(self, expr: ast.Expr, indent: int) -> str:
        if isinstance(expr, ast.Name):
            return expr.name
        if isinstance(expr, ast.Const):
            return format_literal(expr)
        if isinstance(expr, ast.ListExpr):
            return self.items("[", "]", expr.items, indent, expr.span.end_line)
        if isinstance(expr, ast.Unary):
            return self._unary(expr, indent)
        if isinstance(expr, ast.Binary):
            return self._binary(expr, indent)
        if isinstance(expr, ast.Compare):
            left = self._clarified(expr.left, indent, COMPARISON, expr)
            space, inner = self._space(expr.left, expr.right, indent)
            right = self._clarified(expr.right, inner, COALESCE, expr)
            return f"{left} {expr.op}{space}{right}"
        if isinstance(expr, ast.BoolOp):
            own = OR if expr.op == "or" else AND
            left = self._clarified(expr.left, indent, own, expr)
            space, inner = self._space(expr.left, expr.right, indent)
            return f"{left} {expr.op}{space}{self._clarified(expr.right, inner, own + 1, expr)}"
        if isinstance(expr, ast.Coalesce):
            left = self.expr(expr.left, indent, SUM)
            space, inner = self._space(expr.left, expr.right, indent)
            return f"{left} ??{space}{self.expr(expr.right, inner, COALESCE)}"
        if isinstance(expr, ast.Conditional):
            return self._conditional(expr, indent)
        if isinstance(expr, ast.Call | ast.ConstraintCall):
            return self._call(expr, indent)
        if isinstance(expr, ast.Attribute):
            return f"{self._postfix_base(expr.obj, indent)}.{expr.name}"
        if isinstance(expr, ast.Index):
            return f"{self._postfix_base(expr.obj, indent)}[{self._subscript(expr.index, indent)}]"
        raise AssertionError(f"unknown expression node {type(expr).__name__}")

    def items(
        self, open_: str, close: str, items: Sequence[ast.Expr], indent: int, closer: int | None
    ) -> str:
        """A bracketed, comma-separated list of expressions."""
        renderers = [_bind(self.expr, item) for item in items]
        return self.group(open_, close, renderers, [i.span for i in items], closer, indent)

    def _space(self, left: ast.Expr, right: ast.Expr, indent: int) -> tuple[str, int]:
        """What follows the operator between `left` and `right`, and the depth for `right`.

        That is a space, or a kept line break (with its comments) and a continuation line.
        """
        if self.line_break is None:
            return " ", indent
        kept = self.line_break(left.span, right.span, indent + 1)
        if kept is None:
            return " ", indent
        return kept, indent + 1

    def _conditional(self, expr: ast.Conditional, indent: int) -> str:
        then = self.expr(expr.then, indent, OR)
        space, inner = self._space(expr.then, expr.cond, indent)
        text = f"{then} if{space}{self.expr(expr.cond, inner, OR)}"
        space, inner = self._space(expr.cond, expr.otherwise, indent)
        return f"{text} else{space}{self.expr(expr.otherwise, inner)}"

    def _unary(self, expr: ast.Unary, indent: int) -> str:
        if expr.op == "not":
            return f"not {self._clarified(expr.operand, indent, NOT, expr)}"
        operand = self.expr(expr.operand, indent, UNARY)
        # `- -x` must not print as `--x` (nor `- -1` as `--1`).
        space = " " if operand.startswith(("-", "+")) else ""
        return f"{expr.op}{space}{operand}"

    def _binary(self, expr: ast.Binary, indent: int) -> str:
        own = _BINARY_LEVELS.get(expr.op, SUM)
        if expr.op == "**":
            left = self.expr(expr.left, indent, POSTFIX)
            space, inner = self._space(expr.left, expr.right, indent)
            return f"{left} **{space}{self.expr(expr.right, inner, UNARY)}"
        left = self.expr(expr.left, indent, own)
        space, inner = self._space(expr.left, expr.right, indent)
        return f"{left} {expr.op}{space}{self.expr(expr.right, inner, own + 1)}"

    def _call(self, call: ast.Call | ast.ConstraintCall, indent: int) -> str:
        renderers: list[Callable[[int], str]] = [_bind(self.expr, a) for a in call.args]
        spans = [a.span for a in call.args]
        for key, value in call.kwargs if isinstance(call, ast.Call) else ():
            renderers.append(_bind_keyword(self.expr, key, value))
            spans.append(value.span)
        args = self.group("(", ")", renderers, spans, call.span.end_line, indent)
        return f"{call.func}{args}"

    def _postfix_base(self, expr: ast.Expr, indent: int) -> str:
        if isinstance(expr, ast.Const) and not isinstance(expr.value, str):
            return f"({self._bare(expr, indent)})"
        return self.expr(expr, indent, POSTFIX)

    def _subscript(self, index: ast.Expr | ast.Slice, indent: int) -> str:
        if not isinstance(index, ast.Slice):
            return self.expr(index, indent)
        parts = [index.start, index.stop]
        text = ":".join("" if p is None else self.expr(p, indent) for p in parts)
        if index.step is not None:
            text += ":" + self.expr(index.step, indent)
        return text


def _reads_ambiguously(child: ast.Expr, parent: ast.Expr) -> bool:
    """True for operands printed in parentheses for the reader's sake only."""
    if isinstance(parent, ast.BoolOp) and parent.op == "or":
        return isinstance(child, ast.BoolOp) and child.op == "and"
    if isinstance(parent, ast.Unary) and parent.op == "not":
        return isinstance(child, ast.Compare | ast.BoolOp)
    if isinstance(parent, ast.Compare):
        return isinstance(child, ast.Coalesce | ast.Compare)
    return False


def _bind(print_expr: Callable[[ast.Expr, int], str], item: ast.Expr) -> Callable[[int], str]:
    def render(indent: int) -> str:
        return print_expr(item, indent)

    return render


def _bind_keyword(
    print_expr: Callable[[ast.Expr, int], str], key: str, value: ast.Expr
) -> Callable[[int], str]:
    def render(indent: int) -> str:
        return f"{key} = {print_expr(value, indent)}"

    return render


def expression_text(expr: ast.Expr, *, abbreviate_lists: bool = False) -> str:
    """`expr` on one line, as the formatter prints it (for messages).

    With `abbreviate_lists`, a list literal of three or more items prints as `[...]`, so a
    message quoting `dtype(x) in ["float", "float16", ...]` stays short.
    """

    def group(
        open_: str,
        close: str,
        renderers: Sequence[Callable[[int], str]],
        spans: Sequence[Span],
        closer_line: int | None,
        depth: int,
    ) -> str:
        if abbreviate_lists and open_ == "[" and len(renderers) >= 3:
            return "[...]"
        return open_ + ", ".join(render(depth) for render in renderers) + close

    return ExprPrinter(group).expr(expr, 0)


def attribute_value_text(expr: ast.Expr) -> str:
    """`expr` on one line as an attribute's value inside `<...>`.

    `==`, `??`, `if` and looser are parenthesized there, as the formatter prints them
    (`<axis = (1 if a else 2)>`).
    """
    text = expression_text(expr)
    return f"({text})" if level(expr) < COALESCE else text
