"""Rules and rule sets of the rule IR.

A `Rule` is a value (STYLE 10): a name, a pattern, the conditions under which a match holds,
the rewrite that replaces it, and where it was written. Rules come from `.rw` files (the rule
language lowers each rule once into this form) or from Python (`rewriter.rules.rule(...)`);
the engine, `--why-not`, rule checking, loop rolling, reports and the prover read only this
form, whichever the origin.
"""

# ruff: noqa: RUF009  (`span_field()` builds a fresh dataclasses.field for each class)

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Literal, TypeAlias

from rewriter._errors import Diagnostic, Span
from rewriter.rules._expr import Constraint, Expr, span_field
from rewriter.rules._pattern import LiteralValue, NodePattern, OpId, Pattern
from rewriter.rules._rewrite import NewNode, Rewrite, RollLoop

APPROXIMATION_METRICS = {"snr": ">=", "cosine": ">=", "max_rel": "<=", "max_abs": "<="}
"""Each metric an `approximate` rule may declare -> the comparison that states its bound."""

Assumption: TypeAlias = Literal["finite", "nonempty"]
"""What a rule may assume of its inputs: finite values, or no zero-size dims."""


@dataclasses.dataclass(frozen=True, slots=True)
class Requirement:
    """`opset >= 17` or `opset com.microsoft >= 1`: what a model must import for the rule."""

    domain: str
    op: str
    version: int
    span: Span = span_field()

    def __str__(self) -> str:
        domain = f"{self.domain} " if self.domain else ""
        return f"opset {domain}{self.op} {self.version}"


@dataclasses.dataclass(frozen=True, slots=True)
class Approximation:
    """`approximate snr >= 30`: the numeric change a rule declares it may make.

    The rewritten subgraph's outputs, compared with the matched subgraph's, satisfy
    `metric comparison bound` (`metric` is one of APPROXIMATION_METRICS).
    """

    metric: str
    comparison: str
    bound: float
    # The bound as the source wrote it (printing keeps the digits).
    bound_text: str = dataclasses.field(default="", compare=False)
    span: Span = span_field()

    def __str__(self) -> str:
        return f"{self.metric} {self.comparison} {self.bound_text or repr(self.bound)}"


@dataclasses.dataclass(frozen=True, slots=True)
class Rule:
    """A named rewrite rule, or a query (`rewrite` is None: matched, never rewritten).

    `conditions` must all be definitely true for a match to hold (three-valued logic: an
    unknown fact never makes a rule fire). Higher `priority` is tried first on the same node.
    `assumes` declares inputs for which the rewrite is exact only: "finite" (NaN and
    infinities may come out differently), "nonempty" (a kernel the rewrite introduces
    rejects zero-size tensors the matched ops accept).
    """

    name: str
    pattern: Pattern
    conditions: tuple[Expr, ...] = ()
    rewrite: Rewrite | RollLoop | None = None
    priority: int = 0
    requires: tuple[Requirement, ...] = ()
    assumes: tuple[Assumption, ...] = ()
    approximate: Approximation | None = None
    span: Span = span_field()

    @property
    def location(self) -> str:
        """`file:line` where the rule is written."""
        return f"{self.span.path}:{self.span.line}"

    @property
    def is_query(self) -> bool:
        """True for a query (`rewrite find -e`): match lines and conditions only."""
        return self.rewrite is None

    @property
    def assumes_finite(self) -> bool:
        """Exact for finite inputs only."""
        return "finite" in self.assumes

    @property
    def assumes_nonempty(self) -> bool:
        """Exact where no tensor the match reads has a zero-size dim."""
        return "nonempty" in self.assumes

    @property
    def lines(self) -> tuple[NodePattern, ...]:
        """The node patterns one match finds (a repeated block's body for `match repeat`)."""
        return self.pattern.lines

    @property
    def emitted_ops(self) -> tuple[OpId, ...]:
        """The ops the rewrite creates, in order (ops kept from the match are not listed)."""
        if not isinstance(self.rewrite, Rewrite):
            return ()
        return tuple(
            stmt.op
            for stmt in self.rewrite.stmts
            if isinstance(stmt, NewNode) and isinstance(stmt.op, OpId)
        )


@dataclasses.dataclass(frozen=True, slots=True)
class PassUse:
    """A built-in pass a rule set runs, with its integer options (`pass NAME { k = v }`)."""

    name: str
    options: tuple[tuple[str, int], ...] = ()
    span: Span = span_field()


Helper: TypeAlias = Callable[..., object]
"""A plugin function a permitted `use` declaration registered."""


@dataclasses.dataclass(frozen=True, slots=True)
class RuleSet:
    """Rules and passes, in load order, with what the loader learned about them.

    `functions` holds the helpers that permitted `use` declarations registered;
    `constraints` the named constraints the files define (the rules' conditions hold the ones
    they call); `warnings` the loader's non-fatal diagnostics; `sources` maps each loaded
    file's path to its text, in load order (for error messages and reports; rules built in
    Python have none); `params` the value each rule parameter the files declare was lowered
    with (`param NAME = literal`, or the value the loader was given).
    """

    rules: tuple[Rule, ...]
    passes: tuple[PassUse, ...] = ()
    functions: Mapping[str, Helper] = dataclasses.field(default_factory=dict)
    constraints: Mapping[str, Constraint] = dataclasses.field(default_factory=dict)
    warnings: tuple[Diagnostic, ...] = ()
    sources: Mapping[str, str] = dataclasses.field(default_factory=dict)
    params: Mapping[str, LiteralValue] = dataclasses.field(default_factory=dict)

    def rule(self, name: str) -> Rule | None:
        """The rule called `name`, if present."""
        for rule in self.rules:
            if rule.name == name:
                return rule
        return None

    @property
    def paths(self) -> tuple[str, ...]:
        """The files the rules were loaded from, in load order."""
        return tuple(self.sources)
