"""The sizes a rule mentions: instances drawn at them catch rules right only for small dims.

Instances draw their dims from 1 to 4, where `Slice(x, 0, 8) -> x` is exact. The integers a
rule writes (match literals, attribute values, `where` lines with the named constraints they
call spelled out, the rewrite's lets and nodes) are the sizes where its behaviour may change;
`size_menu` makes of them the dims a few extra attempts draw (`_line.draw_dim`): twice the
largest, and the two largest.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

from rewriter.checkrules._analysis import RulePlan
from rewriter.dsl import _ast as ast

# Sizes from 2 (1 and 0 are axes and flags far more often than sizes) to this bound.
_SMALLEST = 2
_LARGEST = 1 << 12
# How many of the largest mentioned sizes the menu keeps, besides twice the largest.
_KEPT = 2


def _constants(node: object) -> Iterator[ast.Const]:
    """Every literal in a tree of the rule's frozen dataclasses and tuples."""
    stack: list[object] = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, ast.Const):
            yield item
        elif isinstance(item, tuple):
            stack.extend(item)
        elif dataclasses.is_dataclass(item) and not isinstance(item, type):
            stack.extend(getattr(item, field.name) for field in dataclasses.fields(item))


def rule_sizes(plan: RulePlan) -> tuple[int, ...]:
    """The integers from 2 to 4096 the rule's match, conditions and rewrite write, ascending."""
    found: dict[int, None] = {}
    for part in (plan.lines, plan.conditions, plan.rule.rewrite):
        for const in _constants(part):
            value = const.value
            if isinstance(value, bool) or not isinstance(value, int):
                continue
            if _SMALLEST <= abs(value) <= _LARGEST:
                found[abs(value)] = None
    return tuple(sorted(found))


def size_menu(sizes: tuple[int, ...]) -> tuple[int, ...]:
    """The dims an instance drawn at the rule's sizes picks from (empty: none mentioned).

    Twice the largest comes first: it is the pick a draw makes most often, and the size past
    every one the rule mentions.
    """
    if not sizes:
        return ()
    return tuple(dict.fromkeys((2 * sizes[-1], *reversed(sizes[-_KEPT:]))))
