"""Compilation of a rule's AST into a matching plan.

A plan is anchored at the match line that defines the rule's result (the last line whose
outputs no other line reads). The other lines are reached from already bound values: through
a value's producer (one candidate) or, when a line only reads bound values, through the
value's users (several candidates, with backtracking). Candidates for the anchor come from an
op-type index, so a node is only tried against rules whose anchor op it has.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Literal

import ir
from rewriter._errors import Diagnostic, RuleCheckError, Span
from rewriter.dsl import _ast as ast
from rewriter.dsl import inline_constraints


@dataclasses.dataclass(frozen=True, slots=True)
class Step:
    """How to find the node for one match line from an already bound variable."""

    line: int
    access: Literal["producer", "consumer"]
    var: str
    position: int


@dataclasses.dataclass(frozen=True, slots=True)
class CompiledRule:
    """A rule ready for matching: its AST, anchor, plan and rewrite facts."""

    rule: ast.Rule
    order: int
    lines: tuple[ast.NodePattern, ...]
    anchor: int
    plan: tuple[Step, ...]
    redefined: frozenset[str]
    defined_by_match: frozenset[str]
    emitted_ops: tuple[ast.OpRef, ...]
    # Per match line, the (normalized domain, op type) pairs it accepts; None for `_`.
    line_ops: tuple[frozenset[tuple[str, str]] | None, ...] = ()
    # The longest chain of uses from a matched node to the anchor: a change further upstream
    # of a node cannot complete a match of this rule anchored there.
    reach: int = 0
    # Necessary conditions on the anchor node, checked before the full search: (input
    # position, ops accepted for that input's producer, output index there) for every anchor
    # input that another match line defines.
    anchor_producers: tuple[tuple[int, frozenset[tuple[str, str]] | None, int], ...] = ()
    functions_source: str = ""
    # The `where` lines with the named constraints they call spelled out
    # (`rewriter.dsl.inline_constraints`), for tools that reason about the conditions.
    conditions: tuple[ast.Expr, ...] = ()

    @property
    def name(self) -> str:
        """The rule's name."""
        return self.rule.name

    @property
    def span(self) -> Span:
        """Where the rule is written."""
        return self.rule.span

    @property
    def location(self) -> str:
        """`file:line` of the rule."""
        return f"{self.rule.span.path}:{self.rule.span.line}"

    @property
    def priority(self) -> int:
        """Higher priorities are tried first on the same node."""
        return self.rule.priority

    @property
    def anchor_ops(self) -> tuple[ast.OpRef, ...]:
        """Op types the anchor line accepts (empty for `_`)."""
        return self.lines[self.anchor].op.alternatives


def _output_names(line: ast.NodePattern) -> list[str]:
    return [o.name for o in line.outputs if isinstance(o, ast.OutputVar)]


def _input_names(line: ast.NodePattern) -> list[tuple[int, str]]:
    return [(i, p.name) for i, p in enumerate(line.inputs) if isinstance(p, ast.InputVar)]


def _choose_anchor(lines: tuple[ast.NodePattern, ...]) -> int:
    read: set[str] = set()
    for line in lines:
        read.update(name for _, name in _input_names(line))
    sinks = [i for i, line in enumerate(lines) if not set(_output_names(line)) & read]
    return sinks[-1] if sinks else len(lines) - 1


def _plan(lines: tuple[ast.NodePattern, ...], anchor: int, rule: ast.Rule) -> tuple[Step, ...]:
    bound: set[str] = set(_output_names(lines[anchor])) | {
        n for _, n in _input_names(lines[anchor])
    }
    remaining = [i for i in range(len(lines)) if i != anchor]
    steps: list[Step] = []
    while remaining:
        chosen: Step | None = None
        # Prefer walking to a producer: it has exactly one candidate.
        for i in remaining:
            for position, out in enumerate(lines[i].outputs):
                if isinstance(out, ast.OutputVar) and out.name in bound:
                    chosen = Step(i, "producer", out.name, position)
                    break
            if chosen is not None:
                break
        if chosen is None:
            for i in remaining:
                for position, name in _input_names(lines[i]):
                    if name in bound and not lines[i].inputs[position].variadic:  # type: ignore[union-attr]
                        chosen = Step(i, "consumer", name, position)
                        break
                if chosen is not None:
                    break
        if chosen is None:
            line = lines[remaining[0]]
            raise RuleCheckError(
                [
                    Diagnostic(
                        "error",
                        line.span,
                        f"match line is not connected to the rest of rule `{rule.name}` "
                        "(it shares no value with the other lines)",
                    )
                ]
            )
        steps.append(chosen)
        remaining.remove(chosen.line)
        bound.update(_output_names(lines[chosen.line]))
        bound.update(n for _, n in _input_names(lines[chosen.line]))
    return tuple(steps)


def _line_ops(line: ast.NodePattern) -> frozenset[tuple[str, str]] | None:
    if line.op.is_wildcard:
        return None
    return frozenset(
        (ir.schemas.normalize_domain(r.domain), r.op_type) for r in line.op.alternatives
    )


def _anchor_producers(
    lines: tuple[ast.NodePattern, ...], anchor: int
) -> tuple[tuple[int, frozenset[tuple[str, str]] | None, int], ...]:
    defined_at: dict[str, tuple[int, int]] = {}
    for i, line in enumerate(lines):
        if i == anchor:
            continue
        for position, out in enumerate(line.outputs):
            if isinstance(out, ast.OutputVar):
                defined_at[out.name] = (i, position)
    found = []
    for position, pattern in enumerate(lines[anchor].inputs):
        if not isinstance(pattern, ast.InputVar) or pattern.variadic:
            continue
        if pattern.name in defined_at:
            producer_line, output = defined_at[pattern.name]
            found.append((position, _line_ops(lines[producer_line]), output))
    return tuple(found)


def _reach(lines: tuple[ast.NodePattern, ...], anchor: int) -> int:
    """Longest producer-to-user path, in match lines, from any line to the anchor line.

    Match lines form a DAG (each value has one defining line), so a memoized walk suffices;
    a line none of whose outputs leads to the anchor counts as 0.
    """
    readers: dict[str, list[int]] = {}
    for i, line in enumerate(lines):
        for _, name in _input_names(line):
            readers.setdefault(name, []).append(i)
    longest: dict[int, int] = {anchor: 0}

    def to_anchor(i: int) -> int:
        if i not in longest:
            longest[i] = -1  # guards against a malformed cyclic pattern
            downstream = [
                to_anchor(j) for name in _output_names(lines[i]) for j in readers.get(name, ())
            ]
            longest[i] = max((d + 1 for d in downstream if d >= 0), default=-1)
        return longest[i]

    return max((to_anchor(i) for i in range(len(lines))), default=0)


def compile_rule(
    rule: ast.Rule, order: int, constraints: Mapping[str, ast.Constraint] | None = None
) -> CompiledRule:
    """Build the matching plan of one rule.

    Args:
        rule: the rule.
        order: its position in load order.
        constraints: the named constraints its `where` lines may call.

    Raises:
        RuleCheckError: the match lines are not connected.
    """
    lines = rule.match.patterns
    if rule.match.repeat is not None:
        lines = rule.match.repeat.body
    anchor = _choose_anchor(lines)
    plan = _plan(lines, anchor, rule)
    defined: set[str] = set()
    for line in lines:
        defined.update(_output_names(line))
    redefined: set[str] = set()
    emitted: list[ast.OpRef] = []
    if isinstance(rule.rewrite, ast.RewriteBlock):
        for stmt in rule.rewrite.stmts:
            if isinstance(stmt, ast.NodeStmt):
                redefined.update(o.name for o in stmt.outputs if isinstance(o, ast.OutputVar))
                emitted.append(stmt.op)
            elif isinstance(stmt, ast.AliasStmt):
                redefined.add(stmt.target)
    return CompiledRule(
        rule=rule,
        order=order,
        lines=lines,
        anchor=anchor,
        plan=plan,
        redefined=frozenset(redefined & defined),
        defined_by_match=frozenset(defined),
        emitted_ops=tuple(emitted),
        line_ops=tuple(_line_ops(line) for line in lines),
        reach=max(_reach(lines, anchor), 0),
        anchor_producers=_anchor_producers(lines, anchor),
        conditions=inline_constraints(rule.where, constraints or {}),
    )
