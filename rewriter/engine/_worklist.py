"""The worklist of the fixed-point driver: nodes to try rules at, each once until it changes.

A rewrite revisits only the nodes near it (no rescan of the whole graph): the new nodes,
their neighbours, and the nodes downstream of them that a rule's pattern can reach.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable

import ir
from rewriter.engine._rule_index import RuleIndex


class Worklist:
    """A FIFO of nodes without duplicates (a deque plus a membership set)."""

    def __init__(self, nodes: Iterable[ir.Node]) -> None:
        self._queue: collections.deque[ir.Node] = collections.deque()
        self._pending: set[ir.Node] = set()
        self.extend(nodes)

    def __bool__(self) -> bool:
        return bool(self._pending)

    def __len__(self) -> int:
        return len(self._pending)

    def pop(self) -> ir.Node:
        node = self._queue.popleft()
        self._pending.discard(node)
        return node

    def extend(self, nodes: Iterable[ir.Node]) -> None:
        for node in nodes:
            if node.graph is not None and node not in self._pending:
                self._pending.add(node)
                self._queue.append(node)


def downstream(nodes: Iterable[ir.Node], index: RuleIndex) -> list[ir.Node]:
    """Nodes downstream of `nodes` where a rule could now match (the nodes included).

    A node `d` uses away is kept only when a rule anchored at its op reaches `d` lines up
    (`CompiledRule.reach`); the walk stops at the longest reach of any rule.
    """
    seen: dict[ir.Node, None] = dict.fromkeys(nodes)
    found = list(seen)
    frontier = list(seen)
    for distance in range(1, index.max_reach + 1):
        next_frontier = []
        for node in frontier:
            for out in node.outputs:
                for user in out.users():
                    if user not in seen:
                        seen[user] = None
                        next_frontier.append(user)
                        if index.reach(user) >= distance:
                            found.append(user)
        if not next_frontier:
            break
        frontier = next_frontier
    return found
