"""Rules by the op they are anchored at, so a node is tried only against rules that can match.

Within one op, rules are tried by `priority` (higher first), then in load order. `reach` says
how far upstream of a node a change can complete a match anchored there; the worklist uses it
to revisit only the nodes a change can matter to.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable

import ir
from rewriter import rules
from rewriter.engine._compile import CompiledRule, compile_rule


class RuleIndex:
    """Rules by anchor op; wildcard-anchored rules apply to every node."""

    def __init__(self, rules: Iterable[CompiledRule]) -> None:
        self.by_op: dict[tuple[str, str], list[CompiledRule]] = collections.defaultdict(list)
        self.wildcard: list[CompiledRule] = []
        for rule in rules:
            if not rule.anchor_ops:
                self.wildcard.append(rule)
            for op in rule.anchor_ops:
                self.by_op[(op.domain, op.op_type)].append(rule)
        key = _priority_key
        for bucket in self.by_op.values():
            bucket.sort(key=key)
        self.wildcard.sort(key=key)
        self._merged: dict[tuple[str, str], list[CompiledRule]] = {}
        self._reach: dict[tuple[str, str], int] = {}
        every = [*self.wildcard, *(r for bucket in self.by_op.values() for r in bucket)]
        self.max_reach = max((r.reach for r in every), default=0)

    def candidates(self, node: ir.Node) -> list[CompiledRule]:
        """The rules that may match at `node`, in the order they are tried."""
        key = (ir.schemas.normalize_domain(node.domain), node.op_type)
        found = self._merged.get(key)
        if found is None:
            found = sorted(self.by_op.get(key, []) + self.wildcard, key=_priority_key)
            self._merged[key] = found
            self._reach[key] = max((r.reach for r in found), default=-1)
        return found

    def reach(self, node: ir.Node) -> int:
        """How far upstream of `node` a change can complete a match anchored at it (-1: none)."""
        key = (ir.schemas.normalize_domain(node.domain), node.op_type)
        found = self._reach.get(key)
        if found is None:
            self.candidates(node)
            found = self._reach[key]
        return found


def _priority_key(rule: CompiledRule) -> tuple[int, int]:
    return (-rule.priority, rule.order)


def compile_rules(ruleset: rules.RuleSet) -> list[CompiledRule]:
    """Compile every node-rewriting rule of a rule set (in load order).

    `match repeat` rules are left out: block rules roll chains their own way.
    """
    return [
        compile_rule(rule, order, ruleset.functions)
        for order, rule in enumerate(ruleset.rules)
        if rule.pattern.repeat is None
    ]
