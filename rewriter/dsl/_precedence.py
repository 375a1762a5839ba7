"""Operator precedence of rule expressions, and precedence climbing over operator chains.

The grammar reads `a + b * -c == d` as one flat chain of operands and operator tokens (one
LALR reduction per operand instead of one per precedence level); `build_chain` turns the
chain into the tree Python's precedence gives it. The levels are shared with the printer,
which parenthesizes by them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from lark import Token

from rewriter._errors import Span
from rewriter.dsl import _ast as ast
from rewriter.dsl._located import LocatedError

# Precedence levels, loosest first.
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

COMPARISONS = frozenset({"==", "!=", "<", "<=", ">", ">=", "in", "not in"})
BINARY_LEVELS: dict[str, int] = {
    "or": OR,
    "and": AND,
    **dict.fromkeys(COMPARISONS, COMPARISON),
    "??": COALESCE,
    "+": SUM,
    "-": SUM,
    "*": TERM,
    "/": TERM,
    "//": TERM,
    "%": TERM,
    "**": POWER,
}
# The loosest level a right operand may have: one tighter for left-associative operators,
# the same for `??`, and a unary operand for `**` (`2 ** -1`).
RIGHT_OPERAND_LEVEL: dict[str, int] = {op: level + 1 for op, level in BINARY_LEVELS.items()}
RIGHT_OPERAND_LEVEL["??"] = COALESCE
RIGHT_OPERAND_LEVEL["**"] = UNARY
PREFIX_LEVELS = {"not": NOT, "-": UNARY, "+": UNARY}


def build_chain(
    items: Sequence[Token | ast.Expr],
    token_span: Callable[[Token], Span],
    register: Callable[[ast.Expr], ast.Expr],
    max_depth: int,
) -> ast.Expr:
    """The expression tree of a flat chain of operands and operator tokens.

    Args:
        items: operands (AST expressions) and operator tokens, as the grammar reads them.
        token_span: the span of an operator token in the file.
        register: called with every node built (the builder records depths through it).
        max_depth: deepest operator nesting accepted.

    Raises:
        LocatedError: a prefix operator where precedence forbids it, or nesting too deep.
    """
    return _Climber(items, token_span, register, max_depth).run()


class _Climber:
    def __init__(
        self,
        items: Sequence[Token | ast.Expr],
        token_span: Callable[[Token], Span],
        register: Callable[[ast.Expr], ast.Expr],
        max_depth: int,
    ) -> None:
        self.items = items
        self.token_span = token_span
        self.register = register
        self.max_depth = max_depth
        self.position = 0

    def run(self) -> ast.Expr:
        expr = self._climb(CONDITIONAL, 0)
        assert self.position == len(self.items), "the grammar only produces complete chains"
        return expr

    def _climb(self, minimum: int, depth: int) -> ast.Expr:
        if depth > self.max_depth:
            raise LocatedError(
                self._span_at(self.position),
                f"this expression nests deeper than {self.max_depth} levels; split it with `let`",
            )
        left = self._operand(minimum, depth)
        while self.position < len(self.items):
            op, width = self._binary_operator()
            level = BINARY_LEVELS[op]
            if level < minimum:
                break
            self.position += width
            right = self._climb(RIGHT_OPERAND_LEVEL[op], depth + 1)
            left = self.register(_combine(op, left, right))
        return left

    def _operand(self, minimum: int, depth: int) -> ast.Expr:
        item = self.items[self.position]
        self.position += 1
        if not isinstance(item, Token):
            return item
        op = str(item)
        if PREFIX_LEVELS[op] < minimum:
            raise LocatedError(
                self.token_span(item), f"`{op} ...` needs parentheses here: `({op} ...)`"
            )
        operand = self._climb(PREFIX_LEVELS[op], depth + 1)
        start = self.token_span(item)
        span = Span(start.path, start.line, start.col, operand.span.end_line, operand.span.end_col)
        if op != "not" and isinstance(operand, ast.Const) and _is_number(operand.value):
            number = operand.value
            assert isinstance(number, int | float), "checked by _is_number"
            value = -number if op == "-" else number
            return ast.Const(value, operand.spelling, span=span)
        return self.register(ast.Unary(op, operand, span=span))

    def _binary_operator(self) -> tuple[str, int]:
        token = self.items[self.position]
        assert isinstance(token, Token), "operands and operators alternate in a chain"
        if token.type == "NOT":
            return "not in", 2
        return str(token), 1

    def _span_at(self, position: int) -> Span:
        item = self.items[min(position, len(self.items) - 1)]
        return self.token_span(item) if isinstance(item, Token) else item.span


def _combine(op: str, left: ast.Expr, right: ast.Expr) -> ast.Expr:
    span = Span(
        left.span.path, left.span.line, left.span.col, right.span.end_line, right.span.end_col
    )
    if op in ("or", "and"):
        return ast.BoolOp(op, left, right, span=span)
    if op in COMPARISONS:
        return ast.Compare(op, left, right, span=span)
    if op == "??":
        return ast.Coalesce(left, right, span=span)
    return ast.Binary(op, left, right, span=span)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
