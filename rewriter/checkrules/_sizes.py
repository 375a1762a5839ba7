"""The sizes a rule mentions: instances drawn at them catch rules right only for small dims.

Instances draw their dims from 1 to 4, where `Slice(x, 0, 8) -> x` is exact. The sizes where
a rule's behaviour may change are the ones it states about tensors: the integers of its
tensor literals (`[8]` in a match or rewrite line) and those its `where` lines (named
constraints spelled out) compare with a shape or a value (`shape(x)[1] == 64`,
`all(value(ends) == 8)`). Ranks, opsets and attribute values are not sizes (`rank(q) == 4`
asks nothing of a dim). `size_menu` makes of them the dims a few extra attempts draw
(`_line.draw_dim`): twice the largest, and the two largest.
"""

from __future__ import annotations

from collections.abc import Iterator

from rewriter import rules
from rewriter.checkrules._analysis import RulePlan, walk

# Sizes from 2 (1 and 0 are axes and flags far more often than sizes) to this bound.
_SMALLEST = 2
_LARGEST = 1 << 12
# How many of the largest mentioned sizes the menu keeps, besides twice the largest.
_KEPT = 2
# Built-ins whose result is a shape or a tensor's values: what a compared constant sizes.
_SIZED = frozenset({"shape", "value", "numel", "size"})


def _integers(expr: rules.Expr) -> Iterator[int]:
    for node in walk(expr):
        if isinstance(node, rules.Const):
            yield from _literal_integers(node.value)


def _literal_integers(value: rules.LiteralValue) -> Iterator[int]:
    """The integers of a literal (a number, or a list of them, nested)."""
    if isinstance(value, list):
        for item in value:
            yield from _literal_integers(item)
    elif isinstance(value, int) and not isinstance(value, bool):
        yield abs(value)


def _about_sizes(expr: rules.Expr) -> bool:
    return any(isinstance(node, rules.Call) and node.func in _SIZED for node in walk(expr))


def _compared(condition: rules.Expr) -> Iterator[int]:
    """The integers compared with a shape or a value anywhere in a condition."""
    for node in walk(condition):
        if not isinstance(node, rules.Compare):
            continue
        for mine, theirs in ((node.left, node.right), (node.right, node.left)):
            if _about_sizes(theirs) and not _about_sizes(mine):
                yield from _integers(mine)


def _literals(plan: RulePlan) -> Iterator[int]:
    """The integers of the rule's tensor literals, in its match and rewrite lines."""
    for line in plan.lines:
        for pattern in line.inputs:
            if isinstance(pattern, rules.InputConst):
                yield from _literal_integers(pattern.value)
    rewrite = plan.rule.rewrite
    if isinstance(rewrite, rules.Rewrite):
        for stmt in rewrite.stmts:
            if isinstance(stmt, rules.NewNode):
                for expr in stmt.inputs:
                    if isinstance(expr, rules.Const | rules.ListExpr):
                        yield from _integers(expr)


def rule_sizes(plan: RulePlan) -> tuple[int, ...]:
    """The sizes from 2 to 4096 the rule states about tensors (module docstring), ascending."""
    found: dict[int, None] = {}
    for condition in plan.conditions:
        found.update(dict.fromkeys(_compared(condition)))
    found.update(dict.fromkeys(_literals(plan)))
    return tuple(sorted(v for v in found if _SMALLEST <= v <= _LARGEST))


def size_menu(sizes: tuple[int, ...]) -> tuple[int, ...]:
    """The dims an instance drawn at the rule's sizes picks from (empty: none mentioned).

    Twice the largest comes first: it is the pick a draw makes most often, and the size past
    every one the rule mentions.
    """
    if not sizes:
        return ()
    return tuple(dict.fromkeys((2 * sizes[-1], *reversed(sizes[-_KEPT:]))))
