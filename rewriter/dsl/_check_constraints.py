"""Check named constraints: their names, their bodies, and the calls between them.

Rules of constraints (LANGUAGE.md, "Constraints"):

* Every loaded file sees every constraint of every other loaded file, whatever the load
  order. A name is defined once across all files, and may not be a built-in function's or a
  `use`d helper's (errors at the second name, with a note at the first definition).
* A constraint's conditions see only its parameters. A parameter is read either as a node
  (`p.attr`, or passed on to another constraint's node parameter) or as a value, never both;
  a call passes a node named with `as` for a node parameter.
* A constraint may call built-ins, helpers and other constraints, but not itself, directly
  or through others (the error points at the call that closes the cycle).
* Unused parameters are warnings (a name starting with `_` is exempt), as for rules.

`check_constraints` returns what call sites need (`ConstraintInfo`, by name); calls are
checked against those signatures by `check_call`, in rules and constraints alike.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from rewriter._errors import Span
from rewriter.dsl import _ast as ast
from rewriter.dsl._check_calls import ConstraintInfo, KnownFunctions, check_call, node_parameter
from rewriter.dsl._reporter import Reporter, head
from rewriter.rules import Signature, walk

_VISITING = "visiting"
_DONE = "done"


def collect_constraints(
    files: Sequence[ast.File],
    builtins: Mapping[str, Signature],
    helpers: Mapping[str, ast.UseDecl],
    report: Reporter,
) -> dict[str, ast.Constraint]:
    """Every constraint of `files` by name (the first of each name), reporting name clashes.

    Args:
        files: the loaded files, in load order.
        builtins: the built-in functions, whose names a constraint may not take.
        helpers: the names that permitted `use` declarations registered, with the `use`.
        report: where diagnostics go.
    """
    defined: dict[str, ast.Constraint] = {}
    for file in files:
        for item in file.items:
            if isinstance(item, ast.Constraint):
                _define(item, defined, builtins, helpers, report)
    return defined


def _define(
    constraint: ast.Constraint,
    defined: dict[str, ast.Constraint],
    builtins: Mapping[str, Signature],
    helpers: Mapping[str, ast.UseDecl],
    report: Reporter,
) -> None:
    name = constraint.name
    if name in builtins:
        report.error(
            constraint.name_span,
            f"constraint `{name}` has the name of a built-in function; choose another name",
        )
        return
    use = helpers.get(name)
    if use is not None:
        note = report.note(head(use.span, len("use")), f"`{use.module}` registers `{name}` here")
        report.error(
            constraint.name_span,
            f"constraint `{name}` has the name of a helper function; choose another name",
            [note],
        )
        return
    earlier = defined.get(name)
    if earlier is not None:
        note = report.note(earlier.name_span, f"`{name}` is first defined here")
        report.error(constraint.name_span, f"duplicate constraint name `{name}`", [note])
        return
    defined[name] = constraint


def check_constraints(
    files: Sequence[ast.File],
    defined: Mapping[str, ast.Constraint],
    known: KnownFunctions,
    report: Reporter,
) -> dict[str, ConstraintInfo]:
    """Check every constraint's body; return the signatures calls are checked against.

    `known` holds the built-ins and helpers; the constraints' own signatures are added as
    they are worked out (a constraint's callees first, since a parameter passed on to a
    callee's node parameter is a node parameter too).
    """
    infos: dict[str, ConstraintInfo] = {}
    state: dict[str, str] = {}
    for name in defined:
        _visit(name, defined, infos, state, [], report)
    complete = dataclasses.replace(known, constraints=infos)
    for file in files:
        for item in file.items:
            if isinstance(item, ast.Constraint):
                _BodyChecker(item, complete, report).run()
    return infos


def _visit(
    name: str,
    defined: Mapping[str, ast.Constraint],
    infos: dict[str, ConstraintInfo],
    state: dict[str, str],
    path: list[str],
    report: Reporter,
) -> None:
    """Work out `name`'s signature after its callees', reporting the calls that recurse."""
    state[name] = _VISITING
    path.append(name)
    constraint = defined[name]
    for call in _constraint_calls(constraint, defined):
        callee = call.func
        if state.get(callee) == _VISITING:
            cycle = [*path[path.index(callee) :], callee]
            chain = " -> ".join(f"`{step}`" for step in cycle)
            report.error(
                head(call.span, len(callee)),
                f"recursive constraint: {chain}; a constraint cannot call itself, directly or "
                "through others",
            )
        elif callee not in state:
            _visit(callee, defined, infos, state, path, report)
    path.pop()
    state[name] = _DONE
    infos[name] = ConstraintInfo(
        constraint,
        Signature(name, constraint.param_names, required=len(constraint.params)),
        _node_parameters(constraint, infos),
    )


def _constraint_calls(
    constraint: ast.Constraint, defined: Mapping[str, ast.Constraint]
) -> list[ast.Call]:
    return [
        node
        for condition in constraint.conditions
        for node, _ in walk(condition)
        if isinstance(node, ast.Call) and node.func in defined
    ]


def _node_parameters(
    constraint: ast.Constraint, infos: Mapping[str, ConstraintInfo]
) -> frozenset[int]:
    """Positions of the parameters read as nodes: `p.attr`, or passed to a node parameter."""
    names = constraint.param_names
    found: set[int] = set()
    for condition in constraint.conditions:
        for node, parent in walk(condition):
            if not isinstance(node, ast.Name) or node.name not in names:
                continue
            if _is_node_use(node, parent, infos):
                found.add(names.index(node.name))
    return frozenset(found)


def _is_node_use(name: ast.Name, parent: object, infos: Mapping[str, ConstraintInfo]) -> bool:
    if isinstance(parent, ast.Attribute) and parent.obj is name:
        return True
    return node_parameter(name, parent, infos) is not None


class _BodyChecker:
    """Checks one constraint's parameters and conditions."""

    def __init__(self, constraint: ast.Constraint, known: KnownFunctions, report: Reporter):
        self.constraint = constraint
        self.known = known
        self.report = report
        self.params: dict[str, ast.Param] = {}
        # How each parameter is used: "node" or "value", with the first use's span.
        self.kinds: dict[str, tuple[str, Span]] = {}

    def run(self) -> None:
        """Check the parameters, every condition, and warn about unused parameters."""
        self._check_params()
        if not self.constraint.conditions:
            self.report.error(
                self.constraint.name_span,
                f"constraint `{self.constraint.name}` has no conditions",
            )
        for condition in self.constraint.conditions:
            self._check_condition(condition)
        for name, param in self.params.items():
            if name not in self.kinds and not name.startswith("_"):
                self.report.warning(
                    param.span,
                    f"parameter `{name}` of constraint `{self.constraint.name}` is never used; "
                    f"write `_{name}` if that is intended",
                )

    def _check_params(self) -> None:
        for param in self.constraint.params:
            if param.name == "_":
                self.report.error(
                    param.span, "`_` cannot name a parameter; write `_x` for one that is unused"
                )
            elif param.name in self.params:
                note = self.report.note(self.params[param.name].span, "the first is here")
                self.report.error(param.span, f"parameter `{param.name}` is listed twice", [note])
            else:
                self.params[param.name] = param

    def _check_condition(self, condition: ast.Expr) -> None:
        for node, parent in walk(condition):
            if isinstance(node, ast.Name):
                self._check_name(node, parent)
            elif isinstance(node, ast.Attribute) and not isinstance(node.obj, ast.Name):
                self.report.error(node.span, f"`.{node.name}` needs a node parameter")
            elif isinstance(node, ast.Call):
                check_call(node, "where", self.known, self.report)

    def _check_name(self, name: ast.Name, parent: object) -> None:
        if name.name == "_":
            self.report.error(name.span, "`_` is not a value; it only appears in patterns")
            return
        if name.name not in self.params:
            self.report.error(name.span, self._unbound_message(name.name))
            return
        kind = "node" if _is_node_use(name, parent, self.known.constraints) else "value"
        earlier = self.kinds.setdefault(name.name, (kind, name.span))
        if earlier[0] != kind:
            note = self.report.note(earlier[1], f"`{name.name}` is used as a {earlier[0]} here")
            self.report.error(
                name.span,
                f"parameter `{name.name}` is used both as a node (`{name.name}.attr`) and as a "
                "value; a parameter is one or the other",
                [note],
            )

    def _unbound_message(self, name: str) -> str:
        names = ", ".join(f"`{p}`" for p in self.constraint.param_names)
        sees = f"sees only its parameters ({names})" if names else "has no parameters"
        return f"unbound variable `{name}`: constraint `{self.constraint.name}` {sees}"
