"""Applying a rule's `rewrite` block to a match: build, commit, validate, roll back if needed.

`Builder.apply` builds the rewrite detached from the graph (`_build`: new nodes type-checked
with onnx's per-node inference, replacements checked against the values they replace),
commits it through an undo log (`_commit`), validates the region it touched (`_validate`)
and, when that fails, undoes exactly this rewrite: the model is as it was before, and the
run goes on. Then it finishes the rewrite (dead nodes removed, names given back). A failure
before the commit leaves the graph untouched.
"""

from __future__ import annotations

import ir
from rewriter.engine._build import RewriteBuilder
from rewriter.engine._commit import commit, finish
from rewriter.engine._matcher import Match, Matcher
from rewriter.engine._pending import Applied, RewriteRejectedError
from rewriter.engine._undo import UndoLog
from rewriter.engine._validate import find_problem


class Builder:
    """Builds and applies rewrites for one model."""

    def __init__(self, model: ir.Model, matcher: Matcher, names: ir.NameAllocator) -> None:
        self.model = model
        self.names = names
        self._rewrites = RewriteBuilder(model, matcher, names)

    def apply(self, match: Match) -> Applied:
        """Apply the rewrite of `match.rule`.

        Raises:
            RewriteRejectedError: the rewrite cannot be applied; the model is unchanged.
        """
        pending = self._rewrites.build(match)
        log = UndoLog()
        try:
            staged = commit(self.model, match, pending, self.names, log)
        except BaseException:
            log.undo()
            raise
        problem = find_problem(match.graph, pending.nodes, staged.neighbours)
        if problem is not None:
            log.undo()
            raise RewriteRejectedError(problem)
        return finish(match.graph, pending, staged, self.names)

    def try_rewrite(self, match: Match) -> RewriteRejectedError | None:
        """Why the rewrite of `match` would be declined or rejected (None: it would apply).

        Builds and checks the rewrite like `apply`, commits and validates it, then undoes
        it: the model is unchanged.
        """
        try:
            pending = self._rewrites.build(match)
        except RewriteRejectedError as exc:
            return exc
        log = UndoLog()
        try:
            staged = commit(self.model, match, pending, self.names, log)
            problem = find_problem(match.graph, pending.nodes, staged.neighbours)
        finally:
            log.undo()
        return None if problem is None else RewriteRejectedError(problem)
