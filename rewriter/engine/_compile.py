"""Compilation of a rule of the rule IR into a matching plan and compiled expressions.

A plan is anchored at the node pattern that defines the rule's result (the last line whose
outputs no other line reads). The other lines are reached from already bound values: through
a value's producer (one candidate) or, when a line only reads bound values, through the
value's users (several candidates, with backtracking). Candidates for the anchor come from an
op-type index, so a node is only tried against rules whose anchor op it has.

The rule's conditions are compiled into closures here, once (`rewriter.engine._evaluate`);
the rewrite's expressions are compiled on first use and kept (`ExprCache`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Literal

from rewriter import rules
from rewriter._errors import Diagnostic, RuleCheckError, Span
from rewriter.engine._evaluate import Evaluator, Functions, compile_all, compile_expr

OpKey = tuple[str, str]
"""(normalized domain, op type)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Step:
    """How to find the node for one match line from an already bound variable."""

    line: int
    access: Literal["producer", "consumer"]
    var: str
    position: int


class ExprCache:
    """Compiled expressions of one rule, by expression object: each compiled once."""

    __slots__ = ("_compiled", "_functions")

    def __init__(self, functions: Functions) -> None:
        self._functions = functions
        # id -> (the expression, kept alive so its id is not reused; its closure)
        self._compiled: dict[int, tuple[rules.Expr, Evaluator]] = {}

    def __call__(self, expr: rules.Expr) -> Evaluator:
        """The closure of `expr`, compiled on first use."""
        found = self._compiled.get(id(expr))
        if found is None:
            found = (expr, compile_expr(expr, self._functions))
            self._compiled[id(expr)] = found
        return found[1]


class _Conditions:
    """A rule's `where` conditions, compiled and spelled out on first use.

    A model meets few of a library's rules past their match lines, so most rules never
    evaluate a condition: loading them does not compile any.
    """

    __slots__ = ("_checks", "_functions", "_inlined", "_written")

    def __init__(self, written: tuple[rules.Expr, ...], functions: Functions) -> None:
        self._written = written
        self._functions = functions
        self._checks: tuple[Evaluator, ...] | None = None
        self._inlined: tuple[rules.Expr, ...] | None = None

    def checks(self) -> tuple[Evaluator, ...]:
        if self._checks is None:
            self._checks = compile_all(self._written, self._functions)
        return self._checks

    def inlined(self) -> tuple[rules.Expr, ...]:
        if self._inlined is None:
            self._inlined = tuple(rules.inline_constraints(self._written))
        return self._inlined


@dataclasses.dataclass(frozen=True, slots=True)
class CompiledRule:
    """A rule ready for matching: the rule, its anchor, plan, compiled conditions and facts."""

    rule: rules.Rule
    order: int
    lines: tuple[rules.NodePattern, ...]
    anchor: int
    plan: tuple[Step, ...]
    redefined: frozenset[str]
    defined_by_match: frozenset[str]
    # The `where` conditions, compiled (in order) on first use.
    where: _Conditions
    # Compiles the rewrite's expressions on first use.
    expressions: ExprCache
    # Per match line, the (normalized domain, op type) pairs it accepts; None for `_`.
    line_ops: tuple[frozenset[OpKey] | None, ...] = ()
    # The longest chain of uses from a matched node to the anchor: a change further upstream
    # of a node cannot complete a match of this rule anchored there.
    reach: int = 0
    # Necessary conditions on the anchor node, checked before the full search: (input
    # position, ops accepted for that input's producer, output index there) for every anchor
    # input that another match line defines.
    anchor_producers: tuple[tuple[int, frozenset[OpKey] | None, int], ...] = ()

    @property
    def checks(self) -> tuple[Evaluator, ...]:
        """The `where` conditions, compiled (in order)."""
        return self.where.checks()

    @property
    def conditions(self) -> tuple[rules.Expr, ...]:
        """The conditions with the named constraints they call spelled out.

        (`rewriter.rules.inline_constraints`), for tools that reason about the conditions.
        """
        return self.where.inlined()

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
        return self.rule.location

    @property
    def priority(self) -> int:
        """Higher priorities are tried first on the same node."""
        return self.rule.priority

    @property
    def anchor_ops(self) -> tuple[rules.OpId, ...]:
        """Op types the anchor line accepts (empty for `_`)."""
        return self.lines[self.anchor].ops

    @property
    def emitted_ops(self) -> tuple[rules.OpId, ...]:
        """The ops the rewrite creates."""
        return self.rule.emitted_ops


def _choose_anchor(lines: tuple[rules.NodePattern, ...]) -> int:
    read: set[str] = set()
    for line in lines:
        read.update(name for _, name in line.input_names)
    sinks = [i for i, line in enumerate(lines) if not set(line.output_names) & read]
    return sinks[-1] if sinks else len(lines) - 1


def _plan(lines: tuple[rules.NodePattern, ...], anchor: int, rule: rules.Rule) -> tuple[Step, ...]:
    bound: set[str] = set(lines[anchor].output_names) | {n for _, n in lines[anchor].input_names}
    remaining = [i for i in range(len(lines)) if i != anchor]
    steps: list[Step] = []
    while remaining:
        chosen = _producer_step(lines, remaining, bound) or _consumer_step(lines, remaining, bound)
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
        bound.update(lines[chosen.line].output_names)
        bound.update(n for _, n in lines[chosen.line].input_names)
    return tuple(steps)


def _producer_step(
    lines: tuple[rules.NodePattern, ...], remaining: list[int], bound: set[str]
) -> Step | None:
    """A step to a line that defines a bound value: it has exactly one candidate."""
    for i in remaining:
        for position, out in enumerate(lines[i].outputs):
            if isinstance(out, rules.OutputVar) and out.name in bound:
                return Step(i, "producer", out.name, position)
    return None


def _consumer_step(
    lines: tuple[rules.NodePattern, ...], remaining: list[int], bound: set[str]
) -> Step | None:
    """A step to a line that reads a bound value (a search among the value's users)."""
    for i in remaining:
        for position, pattern in enumerate(lines[i].inputs):
            if (
                isinstance(pattern, rules.InputVar)
                and pattern.name in bound
                and not pattern.variadic
            ):
                return Step(i, "consumer", pattern.name, position)
    return None


def _line_ops(line: rules.NodePattern) -> frozenset[OpKey] | None:
    if not line.ops:
        return None
    return frozenset((op.domain, op.op_type) for op in line.ops)


def _anchor_producers(
    lines: tuple[rules.NodePattern, ...], anchor: int
) -> tuple[tuple[int, frozenset[OpKey] | None, int], ...]:
    defined_at: dict[str, tuple[int, int]] = {}
    for i, line in enumerate(lines):
        if i == anchor:
            continue
        for position, out in enumerate(line.outputs):
            if isinstance(out, rules.OutputVar):
                defined_at[out.name] = (i, position)
    found = []
    for position, pattern in enumerate(lines[anchor].inputs):
        if not isinstance(pattern, rules.InputVar) or pattern.variadic:
            continue
        if pattern.name in defined_at:
            producer_line, output = defined_at[pattern.name]
            found.append((position, _line_ops(lines[producer_line]), output))
    return tuple(found)


def _reach(lines: tuple[rules.NodePattern, ...], anchor: int) -> int:
    """Longest producer-to-user path, in match lines, from any line to the anchor line.

    Match lines form a DAG (each value has one defining line), so a memoized walk suffices;
    a line none of whose outputs leads to the anchor counts as 0.
    """
    readers: dict[str, list[int]] = {}
    for i, line in enumerate(lines):
        for _, name in line.input_names:
            readers.setdefault(name, []).append(i)
    longest: dict[int, int] = {anchor: 0}

    def to_anchor(i: int) -> int:
        if i not in longest:
            longest[i] = -1  # guards against a malformed cyclic pattern
            downstream = [
                to_anchor(j) for name in lines[i].output_names for j in readers.get(name, ())
            ]
            longest[i] = max((d + 1 for d in downstream if d >= 0), default=-1)
        return longest[i]

    return max((to_anchor(i) for i in range(len(lines))), default=0)


def _redefined(rule: rules.Rule) -> set[str]:
    """The names the rewrite (re)defines: new node outputs and alias targets."""
    names: set[str] = set()
    if isinstance(rule.rewrite, rules.Rewrite):
        for stmt in rule.rewrite.stmts:
            if isinstance(stmt, rules.NewNode):
                names.update(o.name for o in stmt.outputs if isinstance(o, rules.OutputVar))
            elif isinstance(stmt, rules.Alias):
                names.add(stmt.target)
    return names


def compile_rule(
    rule: rules.Rule, order: int, functions: Mapping[str, rules.Helper] | None = None
) -> CompiledRule:
    """Build the matching plan of one rule and compile its conditions.

    Args:
        rule: the rule.
        order: its position in load order.
        functions: the plugin helpers its expressions may call.

    Raises:
        RuleCheckError: the match lines are not connected.
    """
    lines = rule.lines
    anchor = _choose_anchor(lines)
    plan = _plan(lines, anchor, rule)
    defined: set[str] = set()
    for line in lines:
        defined.update(line.output_names)
    helpers = functions or {}
    return CompiledRule(
        rule=rule,
        order=order,
        lines=lines,
        anchor=anchor,
        plan=plan,
        redefined=frozenset(_redefined(rule) & defined),
        defined_by_match=frozenset(defined),
        where=_Conditions(tuple(rule.conditions), helpers),
        expressions=ExprCache(helpers),
        line_ops=tuple(_line_ops(line) for line in lines),
        reach=max(_reach(lines, anchor), 0),
        anchor_producers=_anchor_producers(lines, anchor),
    )
