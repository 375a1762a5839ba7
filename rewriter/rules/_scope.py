"""Which variables a rule reads before anything binds them.

A rule's match binds the outputs and inputs its node patterns name, the attributes it binds
and the nodes it names; its conditions may read those; the rewrite's statements may read
those and what earlier statements defined. The rule language's checker reports the same
problems with source locations; this check serves rules built in Python.
"""

from __future__ import annotations

from rewriter.rules._expr import Expr
from rewriter.rules._pattern import AttrBind, InputVar, NodePattern, OutputVar
from rewriter.rules._rewrite import Alias, CopyAttrs, Let, MatchedOp, NewNode, Rewrite, SetAttr
from rewriter.rules._rule import Rule
from rewriter.rules._walk import names_in


def bound_by(lines: tuple[NodePattern, ...]) -> dict[str, None]:
    """The names a match binds, in order of appearance."""
    names: dict[str, None] = {}
    for line in lines:
        names.update(dict.fromkeys(line.output_names))
        names.update((p.name, None) for p in line.inputs if isinstance(p, InputVar))
        names.update((a.var, None) for a in line.attrs if isinstance(a, AttrBind))
        if line.node_var is not None:
            names[line.node_var] = None
    return names


def unbound_names(rule: Rule) -> list[str]:
    """One message per variable read before it is bound (empty when there is none)."""
    bound = bound_by(rule.lines)
    if rule.pattern.repeat is not None:
        bound[rule.pattern.repeat.count_var] = None
    problems = [_unbound(expr, bound, "a condition") for expr in rule.conditions]
    if isinstance(rule.rewrite, Rewrite):
        defined = dict(bound)
        for stmt in rule.rewrite.stmts:
            problems.extend(_statement_problems(stmt, defined))
    return [problem for problem in problems if problem]


def _statement_problems(stmt: Let | NewNode | Alias, defined: dict[str, None]) -> list[str]:
    if isinstance(stmt, Let):
        found = [_unbound(stmt.expr, defined, f"`let {stmt.name}`")]
        defined[stmt.name] = None
        return found
    if isinstance(stmt, Alias):
        found = [_unbound(stmt.source, defined, f"`{stmt.target} = ...`")]
        if stmt.target not in defined:
            found.append(
                f"`{stmt.target} = ...` replaces `{stmt.target}`, which the match does not bind"
            )
        return found
    found = [_unbound(value, defined, "a new node's input") for value in stmt.inputs]
    for entry in stmt.attrs:
        if isinstance(entry, SetAttr):
            found.append(_unbound(entry.value, defined, f"attribute `{entry.name}`"))
        elif isinstance(entry, CopyAttrs) and entry.node_var not in defined:
            found.append(f"`...{entry.node_var}` names no matched node")
    if isinstance(stmt.op, MatchedOp) and stmt.op.node_var not in defined:
        found.append(f"`...{stmt.op.node_var}` names no matched node")
    defined.update((o.name, None) for o in stmt.outputs if isinstance(o, OutputVar))
    if stmt.node_var is not None:
        defined[stmt.node_var] = None
    return found


def _unbound(expr: Expr, bound: dict[str, None], where: str) -> str:
    missing = [name for name in names_in(expr) if name not in bound]
    if not missing:
        return ""
    return f"{where} reads `{missing[0]}`, which nothing binds before it"
