"""Compilation of a rule's AST into a matching plan.

A plan is anchored at the match line that defines the rule's result (the last line whose
outputs no other line reads). The other lines are reached from already bound values: through
a value's producer (one candidate) or, when a line only reads bound values, through the
value's users (several candidates, with backtracking). Candidates for the anchor come from an
op-type index, so a node is only tried against rules whose anchor op it has.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

from rewriter._errors import Diagnostic, RuleCheckError, Span
from rewriter.dsl import _ast as ast


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
    functions_source: str = ""

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


def compile_rule(rule: ast.Rule, order: int) -> CompiledRule:
    """Build the matching plan of one rule.

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
    )
