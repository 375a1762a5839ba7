"""Check a rule's names: what the match binds, what `where` and the rewrite use and define.

Rules of scope (LANGUAGE.md, "Names"):

* The match binds output and input variables, attribute variables (`<epsilon = eps>`),
  node names (`as conv`) and, in a repeat block, the count and the `from`/`to` values.
* `where` sees the match's names. The rewrite sees them too, then each `let` name and each
  rewrite output from the line that defines it on.
* A rewrite may redefine a value the match defines (that is how it replaces it) but not
  an input, an attribute variable, a node name, or anything twice.

Errors point at the variable; warnings name bindings that are never used.
"""

from __future__ import annotations

import dataclasses

from rewriter._errors import Span
from rewriter.dsl import _ast as ast
from rewriter.dsl._check_calls import KnownFunctions, check_call, node_parameter
from rewriter.dsl._reporter import Reporter, head
from rewriter.rules import walk

_KIND_WORDS = {
    "input": "an input (a value produced outside the match)",
    "attribute": "an attribute variable",
    "node": "a node name",
    "repeat": "a repeat variable",
    "param": "a rule parameter (`param`)",
}


@dataclasses.dataclass(slots=True)
class _Scope:
    """Names visible at one point of a rule, with how they were bound."""

    kinds: dict[str, str] = dataclasses.field(default_factory=dict)
    first_span: dict[str, Span] = dataclasses.field(default_factory=dict)
    uses: dict[str, int] = dataclasses.field(default_factory=dict)

    def bind(self, name: str, kind: str, span: Span) -> None:
        self.kinds.setdefault(name, kind)
        self.first_span.setdefault(name, span)
        self.uses[name] = self.uses.get(name, 0) + 1

    def use(self, name: str) -> None:
        self.uses[name] = self.uses.get(name, 0) + 1


class ScopeChecker:
    """Checks the names of one rule."""

    def __init__(self, rule: ast.Rule, known: KnownFunctions, report: Reporter) -> None:
        self.rule = rule
        self.known = known
        self.report = report
        self.scope = _Scope()
        self.match_outputs: dict[str, Span] = {}

    def run(self) -> None:
        """Check the match, then `where`, then the rewrite; then warn about unused names."""
        for name, decl in self.known.params.items():
            self.scope.bind(name, "param", decl.name_span)
        self._bind_match()
        for expr in self.rule.where:
            self._check_expr(expr, "where")
        rewrite = self.rule.rewrite
        if not isinstance(rewrite, ast.RewriteBlock):
            return
        redefined = _RewriteScope(self).run(rewrite)
        # An incomplete rule (empty rewrite, repeat block) gets no warnings about its names.
        if rewrite.stmts and self.rule.match.repeat is None:
            self._warn_unused()
            if self.match_outputs and not redefined:
                self._warn_nothing_replaced(rewrite)

    # -- match ---------------------------------------------------------------------------------

    def _bind_match(self) -> None:
        match = self.rule.match
        repeat = match.repeat
        for pattern in repeat.body if repeat is not None else match.patterns:
            self._bind_pattern(pattern)
        if repeat is not None:
            self.scope.bind(repeat.count_var, "repeat", repeat.span)

    def _bind_pattern(self, pattern: ast.NodePattern) -> None:
        for output in pattern.outputs:
            if isinstance(output, ast.OutputVar):
                self._bind_output(output)
        for item in pattern.inputs:
            if isinstance(item, ast.InputVar):
                self._bind_value(item.name, "input", item.span)
                if item.optional or item.variadic:
                    self.scope.use(item.name)  # names a slot that may be absent: never "unused"
        for entry in pattern.attrs:
            variable = _attribute_variable(entry)
            if variable is not None:
                self._bind_value(variable.name, "attribute", variable.span)
        if pattern.as_name is not None:
            self._bind_node(pattern)

    def _bind_output(self, output: ast.OutputVar) -> None:
        first = self.match_outputs.get(output.name)
        if first is not None:
            note = self.report.note(first, f"`{output.name}` is first defined here")
            self.report.error(
                output.span,
                f"`{output.name}` is defined by two match lines; a value has one producer",
                [note],
            )
            return
        self.match_outputs[output.name] = output.span
        self._bind_value(output.name, "output", output.span)

    def _bind_value(self, name: str, kind: str, span: Span) -> None:
        previous = self.scope.kinds.get(name)
        if previous is not None and previous != kind and "attribute" in (previous, kind):
            self.report.error(span, f"`{name}` is bound both to an attribute and to a value")
        elif previous == "node":
            self.report.error(span, f"`{name}` already names a node (`as {name}`)")
        elif previous == "param":
            self.report.error(span, f"`{name}` is a rule parameter; choose another name")
        # An input variable that another line defines is the same value: an output.
        if kind == "output" and previous == "input":
            self.scope.kinds[name] = "output"
        self.scope.bind(name, kind, span)

    def _bind_node(self, pattern: ast.NodePattern) -> None:
        name = pattern.as_name
        assert name is not None, "only called for named nodes"
        span = self.report.locate(pattern.span, name)
        previous = self.scope.kinds.get(name)
        if previous == "node":
            self.report.error(span, f"two match lines are named `{name}`")
        elif previous == "param":
            self.report.error(span, f"`{name}` is a rule parameter; choose another node name")
        elif previous is not None:
            self.report.error(span, f"`{name}` already names a value; choose another node name")
        self.scope.bind(name, "node", span)

    # -- expressions ---------------------------------------------------------------------------

    def _check_expr(self, expr: ast.Expr, context: str) -> None:
        for node, parent in walk(expr):
            if isinstance(node, ast.Name):
                self._check_name(node, parent, context)
            elif isinstance(node, ast.Attribute):
                self._check_attribute(node)
            elif isinstance(node, ast.Call):
                check_call(node, context, self.known, self.report)

    def _check_name(self, name: ast.Name, parent: object, context: str) -> None:
        if name.name == "_":
            self.report.error(name.span, "`_` is not a value; it only appears in patterns")
            return
        kind = self.scope.kinds.get(name.name)
        if kind is None:
            self.report.error(name.span, _unbound_message(name.name, context))
            return
        self.scope.use(name.name)
        is_attribute_base = isinstance(parent, ast.Attribute) and parent.obj is name
        node_param = node_parameter(name, parent, self.known.constraints)
        if kind == "node" and not is_attribute_base and node_param is None:
            self.report.error(
                name.span,
                f"`{name.name}` names a node, not a value; read its attributes as "
                f"`{name.name}.attr`",
            )
        elif kind != "node" and node_param is not None:
            assert isinstance(parent, ast.Call), "a node parameter is a constraint call's"
            self.report.error(
                name.span,
                f"`{name.name}` is a value, but constraint `{parent.func}` reads `{node_param}` "
                f"as a node (`{node_param}.attr`); pass a node named with `as`",
            )

    def _check_attribute(self, attribute: ast.Attribute) -> None:
        base = attribute.obj
        if not isinstance(base, ast.Name):
            self.report.error(attribute.span, f"`.{attribute.name}` needs a node named with `as`")
            return
        kind = self.scope.kinds.get(base.name)
        if kind is not None and kind != "node":
            self.report.error(
                attribute.span,
                f"`{base.name}` is a value, not a node: `.{attribute.name}` reads a node's "
                f"attribute; name the node with `as`",
            )

    # -- warnings ------------------------------------------------------------------------------

    def _warn_nothing_replaced(self, rewrite: ast.RewriteBlock) -> None:
        names = ", ".join(f"`{n}`" for n in self.match_outputs)
        span = rewrite.stmts[0].span if self.rule.one_line else head(rewrite.span, len("rewrite"))
        self.report.warning(
            span,
            f"the rewrite redefines none of the values the match defines ({names}), so the "
            "rule can only apply where they are unused",
        )

    def _warn_unused(self) -> None:
        for name, count in self.scope.uses.items():
            kind = self.scope.kinds[name]
            if count > 1 or name.startswith("_") or kind == "param":
                continue
            span = self.scope.first_span[name]
            if kind == "let":
                self.report.warning(span, f"`let {name}` is never used")
            elif kind == "node":
                self.report.warning(span, f"node name `{name}` is never used")
            elif kind == "attribute":
                self.report.warning(
                    span,
                    f"attribute variable `{name}` is never used; attributes that are not "
                    "named are unconstrained",
                )
            elif kind in ("input", "output"):
                self.report.warning(
                    span, f"`{name}` is bound but never used; write `_` (or `_{name}`) instead"
                )


class _RewriteScope:
    """Walks a rewrite block in order, defining `let` names and outputs as it goes."""

    def __init__(self, checker: ScopeChecker) -> None:
        self.checker = checker
        self.report = checker.report
        self.defined: dict[str, Span] = {}

    def run(self, block: ast.RewriteBlock) -> bool:
        """Check the block's statements in order; True when it redefines a match output."""
        for stmt in block.stmts:
            if isinstance(stmt, ast.LetStmt):
                self._let(stmt)
            elif isinstance(stmt, ast.NodeStmt):
                self._node(stmt)
            else:
                self._alias(stmt)
        self._check_reemitted_outputs(block)
        return any(name in self.checker.match_outputs for name in self.defined)

    def _let(self, stmt: ast.LetStmt) -> None:
        self.checker._check_expr(stmt.expr, "rewrite")
        span = self.report.locate(stmt.span, stmt.name, skip=len("let"))
        if self._refuse_redefinition(stmt.name, span, "let"):
            return
        self.defined[stmt.name] = span
        self.checker.scope.bind(stmt.name, "let", span)

    def _node(self, stmt: ast.NodeStmt) -> None:
        if isinstance(stmt.op, ast.NodeCopy):
            self._copy(ast.AttrCopy(stmt.op.node, span=stmt.op.span))
        for value in stmt.inputs:
            self.checker._check_expr(value, "rewrite")
        for entry in stmt.attrs:
            if isinstance(entry, ast.AttrEntry):
                self.checker._check_expr(entry.value, "rewrite")
            else:
                self._copy(entry)
        for output in stmt.outputs:
            if isinstance(output, ast.OutputVar):
                self._define(output.name, output.span)
        if stmt.as_name is not None:
            span = self.report.locate(stmt.span, stmt.as_name)
            if not self._refuse_redefinition(stmt.as_name, span, "node"):
                self.defined[stmt.as_name] = span
                self.checker.scope.bind(stmt.as_name, "node", span)
                self.checker.scope.use(stmt.as_name)

    def _alias(self, stmt: ast.AliasStmt) -> None:
        self.checker._check_expr(stmt.source, "rewrite")
        self._define(stmt.target, head(stmt.span, len(stmt.target)))

    def _copy(self, entry: ast.AttrCopy) -> None:
        if entry.source is None:
            self.report.error(
                entry.span,
                "`...` in a rewrite copies from a node: write `<...name>` with a "
                "node named by `as`",
            )
            return
        kind = self.checker.scope.kinds.get(entry.source)
        if kind != "node":
            what = "is not bound" if kind is None else "is a value"
            self.report.error(
                entry.span, f"`...{entry.source}`: `{entry.source}` {what}; name a node with `as`"
            )
            return
        self.checker.scope.use(entry.source)

    def _define(self, name: str, span: Span) -> None:
        if self._refuse_redefinition(name, span, "output"):
            return
        scope = self.checker.scope
        if name in self.checker.match_outputs:
            scope.use(name)
        else:
            scope.bind(name, "rewrite", span)
            scope.use(name)
        self.defined[name] = span

    def _refuse_redefinition(self, name: str, span: Span, what: str) -> bool:
        first = self.defined.get(name)
        if first is not None:
            note = self.report.note(first, f"`{name}` is first defined here")
            self.report.error(span, f"`{name}` is defined twice in the rewrite", [note])
            return True
        kind = self.checker.scope.kinds.get(name)
        if kind is None or (kind == "output" and what == "output"):
            return False
        if kind == "output":
            self.report.error(
                span,
                f"`{name}` is a value the match defines; a `let` or node name needs a new name",
            )
        else:
            self.report.error(
                span,
                f"the rewrite cannot redefine `{name}`: the match binds it as "
                f"{_KIND_WORDS.get(kind, 'a variable')}",
            )
        return True

    def _check_reemitted_outputs(self, block: ast.RewriteBlock) -> None:
        """A rewrite line re-emitting a match line's outputs keeps at least their number."""
        patterns = self.checker.rule.match.patterns
        for stmt in block.stmts:
            if not isinstance(stmt, ast.NodeStmt):
                continue
            for pattern in patterns:
                if pattern.outputs_open or not _shares_leading_output(
                    pattern.outputs, stmt.outputs
                ):
                    continue
                # More outputs is fine (one node may redefine values of several match lines,
                # e.g. two Slices becoming one Split); fewer drops a matched output.
                if len(stmt.outputs) < len(pattern.outputs):
                    names = ", ".join(_output_text(o) for o in pattern.outputs)
                    self.report.error(
                        stmt.outputs[0].span,
                        f"this line redefines `{names}` from a match line with "
                        f"{len(pattern.outputs)} outputs, but has {len(stmt.outputs)}; "
                        "list as many outputs, or alias values one by one (`y = x`)",
                    )


def _attribute_variable(entry: ast.AttrEntry | ast.AttrCopy) -> ast.Name | None:
    """The variable of `<name = var>` in a match line (`<name = _>` binds nothing)."""
    if isinstance(entry, ast.AttrEntry) and isinstance(entry.value, ast.Name):
        return entry.value if entry.value.name != "_" else None
    return None


def _shares_leading_output(
    matched: tuple[ast.OutputPattern, ...], created: tuple[ast.OutputPattern, ...]
) -> bool:
    first_matched, first_created = matched[0] if matched else None, created[0] if created else None
    return (
        isinstance(first_matched, ast.OutputVar)
        and isinstance(first_created, ast.OutputVar)
        and first_matched.name == first_created.name
    )


def _output_text(output: ast.OutputPattern) -> str:
    return output.name if isinstance(output, ast.OutputVar) else "_"


def _unbound_message(name: str, context: str) -> str:
    if context == "where":
        return f"unbound variable `{name}`: the match does not bind it"
    return (
        f"unbound variable `{name}`: neither the match nor an earlier `let` or rewrite line "
        "defines it"
    )
