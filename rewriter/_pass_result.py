"""What a pass returns: shared by the built-in passes and the loop passes of rewriter.loops."""

from __future__ import annotations

import dataclasses

import ir


@dataclasses.dataclass(frozen=True, slots=True)
class PassChange:
    """What a pass changed in one graph (trace labels, see `TraceEntry`)."""

    graph: str
    removed: tuple[str, ...]
    created: tuple[str, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class PassResult:
    """What a pass did; `changes` is empty for passes that do not itemize them."""

    name: str
    changed: bool
    touched: tuple[ir.Node, ...] = ()
    count: int = 0
    changes: tuple[PassChange, ...] = ()
