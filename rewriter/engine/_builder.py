"""Applying a rule's `rewrite` block to a match: build, commit, validate, roll back if needed.

`Builder.apply` builds the rewrite detached from the graph (`_build`: new nodes type-checked
with onnx's per-node inference, replacements checked against the values they replace),
commits it under an `ir.Journal` (`_commit`), validates the region it touched (`_validate`)
and, when that fails, undoes exactly this rewrite: the model is as it was before, and the
run goes on. Then it finishes the rewrite (dead nodes removed, names given back). A failure
before the commit leaves the graph untouched. Built-in passes are held to the same journal
and validation (`_pass.run_checked`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import ir
from rewriter.engine._build import RewriteBuilder
from rewriter.engine._commit import commit, finish
from rewriter.engine._facts import dtype_of, shape_of
from rewriter.engine._matcher import Match, Matcher
from rewriter.engine._pending import (
    Applied,
    Pending,
    RewriteDeclinedError,
    RewriteRejectedError,
)
from rewriter.engine._validate import find_problem

Runnable = Callable[[ir.Node, Mapping[str, int]], "bool | None"]
"""Whether a runtime can run a node at these opsets (None: cannot tell)."""


class Builder:
    """Builds and applies rewrites for one model."""

    def __init__(
        self,
        model: ir.Model,
        matcher: Matcher,
        names: ir.NameAllocator,
        runnable: Runnable | None = None,
        exact: bool = False,
    ) -> None:
        self.model = model
        self.names = names
        self.runnable = runnable
        self.exact = exact
        self._rewrites = RewriteBuilder(model, matcher, names)

    def apply(self, match: Match) -> Applied:
        """Apply the rewrite of `match.rule`.

        Raises:
            RewriteRejectedError: the rewrite cannot be applied; the model is unchanged.
        """
        self._check_assumptions(match)
        pending = self._rewrites.build(match)
        self._check_runnable(match, pending)
        with ir.Journal(self.model, ir.scope_of(match.graph)) as journal:
            try:
                staged = commit(self.model, match, pending, self.names)
            except BaseException:
                journal.undo()
                raise
            problem = find_problem(match.graph, pending.nodes, staged.neighbours)
            if problem is not None:
                journal.undo()
                raise RewriteRejectedError(problem)
        return finish(match.graph, pending, staged, self.names)

    def _check_assumptions(self, match: Match) -> None:
        """In an exact run, decline a rule whose `assumes` clause the model does not prove.

        `assumes finite` cannot be proved of a model's inputs, so such a rule never applies,
        nor does an `approximate` one (it changes numerics on purpose);
        `assumes nonempty` holds where every tensor the matched nodes read has a known shape
        without a zero dim (a named dim may be 0 at run time).

        Raises:
            RewriteDeclinedError: the rule assumes what this run does not grant.
        """
        rule = match.rule.rule
        if not self.exact:
            return
        if rule.assumes_finite:
            raise RewriteDeclinedError(
                "the rule assumes finite inputs, and this run is exact; nothing to do"
            )
        if rule.approximate is not None:
            raise RewriteDeclinedError(
                f"the rule is approximate ({rule.approximate}), and this run is exact; "
                "nothing to do"
            )
        if rule.assumes_nonempty:
            for node in match.nodes:
                if node is None:
                    continue
                for value in node.inputs:
                    if value is not None and not _known_nonempty(value):
                        raise RewriteDeclinedError(
                            f"the rule assumes non-empty tensors, and `{value.name}` may be "
                            "empty (a dim not known to be positive); this run is exact"
                        )

    def _check_runnable(self, match: Match, pending: Pending) -> None:
        """Decline a rewrite whose new nodes the runtime cannot run where it ran the old ones.

        Raises:
            RewriteDeclinedError: a new node has no kernel while every matched node has one.
        """
        if self.runnable is None:
            return
        opsets = dict(self.model.opset_imports) | pending.new_opsets
        for node in pending.nodes:
            if node.op_type == "Constant" or self.runnable(node, opsets) is not False:
                continue
            matched = [n for n in match.nodes if n is not None]
            if any(self.runnable(n, opsets) is False for n in matched):
                return  # the original could not run there either
            pending.discard()
            raise RewriteDeclinedError(
                f"onnxruntime has no kernel for {_kind(node)}: the original runs there, so it "
                "stays; nothing to do"
            )

    def try_rewrite(self, match: Match) -> RewriteRejectedError | None:
        """Why the rewrite of `match` would be declined or rejected (None: it would apply).

        Builds and checks the rewrite like `apply`, commits and validates it, then undoes
        it: the model is unchanged.
        """
        try:
            self._check_assumptions(match)
            pending = self._rewrites.build(match)
            self._check_runnable(match, pending)
        except RewriteRejectedError as exc:
            return exc
        with ir.Journal(self.model, ir.scope_of(match.graph)) as journal:
            try:
                staged = commit(self.model, match, pending, self.names)
                problem = find_problem(match.graph, pending.nodes, staged.neighbours)
            finally:
                journal.undo()
        return None if problem is None else RewriteRejectedError(problem)


def _known_nonempty(value: ir.Value) -> bool:
    """Whether every dim of `value`'s shape is a known positive size."""
    shape = shape_of(value)
    return shape is not None and all(isinstance(d, int) and d > 0 for d in shape)


def _kind(node: ir.Node) -> str:
    """`HardSigmoid(double)`: the op and the element types of its inputs."""
    types = []
    for value in node.inputs:
        dtype = dtype_of(value) if value is not None else None
        types.append(dtype.onnx_name if dtype is not None else "-")
    label = f"{node.domain}.{node.op_type}" if node.domain not in ("", "ai.onnx") else node.op_type
    return f"{label}({', '.join(types)})"
