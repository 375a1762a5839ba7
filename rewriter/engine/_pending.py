"""What one rewrite is made of before and after it enters the graph.

`Pending` holds the new nodes, initializers and value replacements a rewrite built, detached
from the graph; `Applied` says what a committed rewrite did. The two errors say why a rewrite
was not applied: rejected (it would break the model; the rule is at fault) or declined (it
would change nothing, which is no fault).
"""

from __future__ import annotations

import dataclasses

import ir
from rewriter._errors import RewriteError
from rewriter.engine._compile import CompiledRule

RULE_TAG = "rewriter.rule"
"""Node metadata key: the rule that created the node."""
SOURCE_TAG = "rewriter.source"
"""Node metadata key: where that rule is written (`file:line`)."""


class RewriteRejectedError(RewriteError):
    """A rewrite could not be applied; the graph was not changed (or was restored)."""


class RewriteDeclinedError(RewriteRejectedError):
    """A rewrite would change nothing (its message ends with "nothing to do"); not a failure."""


@dataclasses.dataclass(frozen=True, slots=True)
class Applied:
    """What one rewrite did."""

    matched: tuple[ir.Node, ...]
    created: tuple[ir.Node, ...]
    removed: tuple[ir.Node, ...]
    neighbours: tuple[ir.Node, ...]
    # Producers of what the removed nodes read: those values lost a use, so a `uses(v) == 1`
    # condition downstream may hold now (revisited, not drawn as neighbours in reports).
    lost_uses: tuple[ir.Node, ...] = ()


class Pending:
    """New objects built for one rewrite, not yet in the graph."""

    def __init__(self, rule: CompiledRule) -> None:
        self.rule = rule
        self.nodes: list[ir.Node] = []
        self.initializers: list[ir.Value] = []
        self.replacements: list[tuple[ir.Value, ir.Value]] = []
        self.new_opsets: dict[str, int] = {}

    def discard(self) -> None:
        """Drop the new nodes' uses of existing values (the graph never saw them)."""
        for node in self.nodes:
            node.detach_inputs()

    def made(self, value: ir.Value) -> bool:
        """True when `value` was made for this rewrite (a new initializer or node output)."""
        if value in self.initializers:
            return True
        producer = value.producer()
        return producer is not None and producer in self.nodes
