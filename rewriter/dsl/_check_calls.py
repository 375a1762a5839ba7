"""Check calls in expressions against the built-ins, the permitted plugins and the constraints."""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Collection, Mapping

from rewriter.dsl import _ast as ast
from rewriter.dsl._reporter import Reporter, head
from rewriter.rules import Signature


@dataclasses.dataclass(frozen=True, slots=True)
class ConstraintInfo:
    """What a call of a named constraint is checked against.

    `node_params` are the positions of the parameters the constraint reads as nodes
    (`p.attr`): a call passes a node named with `as` there.
    """

    definition: ast.Constraint
    signature: Signature
    node_params: frozenset[int] = frozenset()


@dataclasses.dataclass(frozen=True, slots=True)
class KnownFunctions:
    """What a rule may call: built-ins (with signatures), permitted plugins, constraints.

    And what it may read besides its own bindings: the rule parameters (`param`), by name.
    """

    builtins: Mapping[str, Signature]
    plugins: Collection[str] = ()
    constraints: Mapping[str, ConstraintInfo] = dataclasses.field(default_factory=dict)
    params: Mapping[str, ast.ParamDecl] = dataclasses.field(default_factory=dict)


def node_parameter(
    argument: ast.Expr, call: object, constraints: Mapping[str, ConstraintInfo]
) -> str | None:
    """The parameter `argument` is passed to when `call` is a constraint reading it as a node."""
    if not isinstance(call, ast.Call):
        return None
    info = constraints.get(call.func)
    if info is None:
        return None
    for position, given in enumerate(call.args):
        if given is argument:
            if position in info.node_params and position < len(info.definition.params):
                return info.definition.params[position].name
            return None
    return None


def check_call(call: ast.Call, context: str, known: KnownFunctions, report: Reporter) -> None:
    """Report an unknown function, or arguments its signature does not accept.

    Args:
        call: the call expression.
        context: "where" or "rewrite" (which decides whether `const` is allowed).
        known: the built-ins and the names permitted `use` declarations registered.
        report: where diagnostics go.
    """
    name_span = head(call.span, len(call.func))
    if call.func in known.plugins:
        return
    constraint = known.constraints.get(call.func)
    if constraint is not None:
        _check_constraint_call(call, context, constraint, report)
        return
    signature = known.builtins.get(call.func)
    if signature is None:
        names = sorted({*known.builtins, *known.plugins, *known.constraints})
        close = difflib.get_close_matches(call.func, names, n=1, cutoff=0.7)
        hint = f"; did you mean `{close[0]}`?" if close else ""
        report.error(name_span, f"unknown function `{call.func}`{hint}")
        return
    if context == "where" and signature.let_only:
        report.error(
            name_span, f"`{call.func}` builds rewrite values; use it in `let` or a rewrite line"
        )
        return
    _check_arguments(call, signature, report)


def _check_constraint_call(
    call: ast.Call, context: str, info: ConstraintInfo, report: Reporter
) -> None:
    name_span = head(call.span, len(call.func))
    if context != "where":
        report.error(
            name_span,
            f"`{call.func}` is a constraint; call it in a `where` line or in another constraint",
        )
        return
    _check_arguments(call, info.signature, report)
    for position, argument in enumerate(call.args):
        if position in info.node_params and not isinstance(argument, ast.Name):
            param = info.definition.params[position].name
            report.error(
                argument.span,
                f"constraint `{call.func}` reads `{param}` as a node (`{param}.attr`); pass a "
                "node named with `as`",
            )


def _check_arguments(call: ast.Call, signature: Signature, report: Reporter) -> None:
    name_span = head(call.span, len(call.func))
    given = len(call.args)
    if not signature.variadic and given > len(signature.params):
        report.error(
            name_span,
            f"`{signature.usage}` takes at most {_arguments(len(signature.params))}, got {given}",
        )
        return
    named: set[str] = set()
    for keyword, value in call.kwargs:
        if keyword not in signature.keywords:
            accepted = ", ".join(signature.keywords) or "no keyword arguments"
            report.error(
                value.span, f"`{call.func}` has no keyword `{keyword}` (it accepts {accepted})"
            )
            continue
        if keyword in signature.params and signature.params.index(keyword) < given:
            report.error(value.span, f"`{keyword}` is given twice in this call to `{call.func}`")
        named.add(keyword)
    missing = [p for p in signature.params[given : signature.required] if p not in named]
    if missing:
        needed = ", ".join(f"`{p}`" for p in missing)
        report.error(name_span, f"`{signature.usage}` needs {needed}")


def _arguments(count: int) -> str:
    return "1 argument" if count == 1 else f"{count} arguments"
