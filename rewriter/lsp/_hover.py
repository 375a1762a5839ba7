"""Hover text and definitions: what the name under the cursor is, and where it is defined."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from rewriter import dsl
from rewriter._errors import Span
from rewriter.api import VOCABULARY
from rewriter.lsp._analysis import Analysis, include_target
from rewriter.lsp._lookup import Spot, definition_of, on_call_name, spot_at
from rewriter.lsp._schemas import op_documentation


@dataclasses.dataclass(frozen=True, slots=True)
class Hover:
    """Markdown about what is under the cursor, and the span it describes."""

    markdown: str
    span: Span


def hover_at(analysis: Analysis, line: int, col: int) -> Hover | None:
    """What to show for (line, col): an op's schema, a built-in, a constraint, a value."""
    if analysis.file is None:
        return None
    spot = spot_at(analysis.file, line, col)
    if spot is None:
        return None
    node = spot.node
    if isinstance(node, dsl.OpRef):
        opsets = _opsets(spot.item, node.domain)
        text = op_documentation(node.op_type, node.domain, opsets)
        return Hover(text, node.span) if text is not None else None
    if isinstance(node, dsl.Call) and on_call_name(node, line, col):
        text = _call_documentation(analysis, node.func)
        return Hover(text, _call_name_span(node)) if text is not None else None
    if isinstance(node, dsl.Name | dsl.InputVar | dsl.OutputVar | dsl.Param):
        return _value_hover(analysis, spot, node.name, node.span)
    if isinstance(node, dsl.IncludeDecl):
        target = include_target(analysis.file, node)
        return Hover(f"includes `{target}`", node.path_span)
    return None


def definition_at(analysis: Analysis, line: int, col: int) -> Span | None:
    """Where the name at (line, col) is defined: a constraint, an included file, a binding."""
    if analysis.file is None:
        return None
    spot = spot_at(analysis.file, line, col)
    if spot is None:
        return None
    node = spot.node
    if isinstance(node, dsl.Call) and on_call_name(node, line, col):
        constraint = analysis.constraints().get(node.func)
        return constraint.name_span if constraint is not None else None
    if isinstance(node, dsl.IncludeDecl):
        target = include_target(analysis.file, node)
        return Span(str(target), 1, 1, 1, 1) if Path(target).is_file() else None
    if isinstance(node, dsl.Name | dsl.InputVar | dsl.OutputVar | dsl.Param) and isinstance(
        spot.item, dsl.Rule | dsl.Constraint
    ):
        return definition_of(spot.item, node.name, analysis.text)
    return None


def _opsets(item: dsl.Item, domain: str) -> dsl.OpsetRange:
    return dsl.opset_range(item, domain) if isinstance(item, dsl.Rule) else dsl.OpsetRange()


def _call_documentation(analysis: Analysis, name: str) -> str | None:
    constraint = analysis.constraints().get(name)
    if constraint is not None:
        return _constraint_documentation(analysis, constraint)
    signature = VOCABULARY.functions.get(name)
    if signature is None:
        return None
    where = " (rewrite `let` lines only)" if signature.let_only else ""
    return f"```\n{signature.usage}\n```\n\nbuilt-in{where}: {signature.summary}"


def _constraint_documentation(analysis: Analysis, constraint: dsl.Constraint) -> str:
    """The constraint's definition as written, and where."""
    lines = analysis.source_of(constraint.span.path).splitlines()
    text = "\n".join(lines[constraint.span.line - 1 : constraint.span.end_line])
    return f"```\n{text}\n```\n\nconstraint defined at {constraint.name_span}"


def _value_hover(analysis: Analysis, spot: Spot, name: str, span: Span) -> Hover | None:
    if not isinstance(spot.item, dsl.Rule | dsl.Constraint):
        return None
    defined = definition_of(spot.item, name, analysis.text)
    if defined is None:
        return None
    kind = "parameter" if isinstance(spot.item, dsl.Constraint) else "value"
    owner = "constraint" if isinstance(spot.item, dsl.Constraint) else "rule"
    text = f"{kind} `{name}` of {owner} `{spot.item.name}`, bound at line {defined.line}"
    return Hover(text, Span(span.path, span.line, span.col, span.line, span.col + len(name)))


def _call_name_span(call: dsl.Call) -> Span:
    span = call.span
    return Span(span.path, span.line, span.col, span.line, span.col + len(call.func))
