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
    """A FIFO of nodes without duplicates (a deque plus a membership set).

    `revisit` queues the nodes a change can matter to, using `index` to tell how far
    upstream of each node a rule anchored there looks.
    """

    def __init__(self, nodes: Iterable[ir.Node], index: RuleIndex) -> None:
        self._queue: collections.deque[ir.Node] = collections.deque()
        self._pending: set[ir.Node] = set()
        self._index = index
        # `index.reach` by (domain, op type) as nodes spell them: asked once per kind.
        self._reach: dict[tuple[str, str], int] = {}
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
        """Queue `nodes` (those not queued yet, in order)."""
        pending = self._pending
        queue = self._queue
        for node in nodes:
            if node not in pending and node.graph is not None:
                pending.add(node)
                queue.append(node)

    def revisit(self, nodes: Iterable[ir.Node]) -> None:
        """Queue `nodes` and the nodes downstream of them where a rule could now match."""
        self.extend(self.downstream(nodes))

    def downstream(self, nodes: Iterable[ir.Node]) -> list[ir.Node]:
        """`nodes`, then the nodes downstream of them where a rule could now match.

        A node `d` uses away is kept only when a rule anchored at its op reaches `d` lines up
        (`CompiledRule.reach`); the walk stops at the longest reach of any rule.
        """
        seen: dict[ir.Node, None] = dict.fromkeys(nodes)
        found = list(seen)
        frontier = list(found)
        reach = self._reach
        for distance in range(1, self._index.max_reach + 1):
            next_frontier = []
            for node in frontier:
                for out in node.outputs:
                    for user in out.users():
                        if user in seen:
                            continue
                        seen[user] = None
                        next_frontier.append(user)
                        kind = (user.domain, user.op_type)
                        known = reach.get(kind)
                        if known is None:
                            known = reach[kind] = self._index.reach(user)
                        if known >= distance:
                            found.append(user)
            if not next_frontier:
                break
            frontier = next_frontier
        return found
