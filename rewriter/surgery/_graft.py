"""`graft(a, b, connect)`: B fed by A's values, as one model (see `ir.graft`).

Connections are written as the command line takes them: `A_OUT=B_IN` or `A_OUT=B_IN:ADAPTER`,
where ADAPTER is an op with optional attributes in the rule language's syntax (`Flatten`,
`Reshape`, `Transpose <perm = [0, 2, 3, 1]>`; Reshape takes B's input's declared shape).
When the two models import different default-domain opsets, the older one is converted with
onnx's version converter first, and the result says so.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence

import onnx

import ir
from rewriter._errors import RewriteError, RuleError
from rewriter.api import as_model
from rewriter.dsl import _ast as ast
from rewriter.dsl import parse

ModelLike = str | os.PathLike[str] | ir.Model | onnx.ModelProto


@dataclasses.dataclass(frozen=True)
class Grafted:
    """The grafted model and what was done to make it fit (opset conversions)."""

    model: ir.Model
    notes: tuple[str, ...]


def graft(
    a: ModelLike,
    b: ModelLike,
    connect: Sequence[str | ir.Connection],
    *,
    keep_outputs: Sequence[str] = (),
) -> Grafted:
    """The model that runs A, the connections' adapters, then B (A and B are not changed).

    Args:
        a: the model whose values feed B (a path, a ModelProto or an IR model).
        b: the model fed.
        connect: `A_OUT=B_IN[:ADAPTER]` texts or `ir.Connection`s; every input of B not
            connected stays an input of the result.
        keep_outputs: values of A that stay outputs of the result, after B's outputs.

    Raises:
        RewriteError: a malformed connection, an unknown name, opsets that cannot be
            reconciled, or a result that fails onnx's checker.
    """
    connections = [c if isinstance(c, ir.Connection) else parse_connection(c) for c in connect]
    if not connections:
        raise RewriteError("graft: give at least one connection (--connect A_OUT=B_IN)")
    first, second = as_model(a), as_model(b)
    first, second, notes = _same_default_opset(first, second)
    ir.infer_types(first)
    for connection in connections:
        if connection.adapter is None:
            _check_types_meet(first, second, connection)
    try:
        model = ir.graft(first, second, connections, keep_outputs=keep_outputs)
    except ir.GraftError as exc:
        raise RewriteError(f"graft: {exc}") from None
    problem = ir.check_model(model)
    if problem is not None:
        raise RewriteError(f"the grafted model fails onnx's checker: {problem}")
    return Grafted(model, tuple(notes))


def _check_types_meet(a: ir.Model, b: ir.Model, connection: ir.Connection) -> None:
    """Refuse a direct connection whose value cannot be what B's input takes.

    The dtype must be the input's, and so must the rank and every dim that both know.
    """
    given = next((v for v in a.graph.values() if v.name == connection.a_output), None)
    taken = next((v for v in b.graph.inputs if v.name == connection.b_input), None)
    if given is None or taken is None:
        return  # ir.graft names the unknown one
    have, want = ir.fact_type(given), taken.type
    if not isinstance(have, ir.TensorType) or not isinstance(want, ir.TensorType):
        return
    clash = have.dtype != want.dtype
    if have.shape is not None and want.shape is not None:
        clash = clash or len(have.shape) != len(want.shape)
        clash = clash or any(
            isinstance(x, int) and isinstance(y, int) and x >= 0 and y >= 0 and x != y
            for x, y in zip(have.shape, want.shape, strict=False)
        )
    if clash:
        raise RewriteError(
            f"--connect {connection.a_output}={connection.b_input}: "
            f"{connection.a_output!r} is {have} but {connection.b_input!r} takes {want}; "
            "give an adapter (A_OUT=B_IN:Flatten, :Reshape, ...)"
        )


def parse_connection(text: str) -> ir.Connection:
    """`A_OUT=B_IN` or `A_OUT=B_IN:ADAPTER` as a connection.

    Raises:
        RewriteError: the text is not of that form, or the adapter is not an op with
            literal attributes.
    """
    source, equals, rest = text.partition("=")
    target, colon, adapter = rest.partition(":")
    if not equals or not source.strip() or not target.strip():
        raise RewriteError(f"--connect {text!r}: expected A_OUT=B_IN or A_OUT=B_IN:ADAPTER")
    found = _adapter(text, adapter.strip()) if colon else None
    return ir.Connection(source.strip(), target.strip(), found)


def _adapter(connection: str, spec: str) -> ir.Adapter:
    """An adapter op from `Op` or `Op <name = literal, ...>`, read by the rule language."""
    usage = (
        f"--connect {connection!r}: the adapter {spec!r} is not an op with literal attributes "
        "(e.g. `Flatten`, `Transpose <perm = [0, 2, 1]>`)"
    )
    try:
        file = parse(f"rule adapter: y = Identity (x) => y = {spec} (x)", "--connect")
    except RuleError:
        raise RewriteError(usage) from None
    (rule,) = file.items
    assert isinstance(rule, ast.Rule), "a one-line rule parses to a rule"
    stmt = rule.rewrite.stmts[0] if isinstance(rule.rewrite, ast.RewriteBlock) else None
    if not isinstance(stmt, ast.NodeStmt):
        raise RewriteError(usage)
    attributes = {}
    for entry in stmt.attrs:
        if not isinstance(entry, ast.AttrEntry):
            raise RewriteError(usage)
        value = _literal(entry.value)
        if value is None:
            raise RewriteError(usage)
        attributes[entry.name] = value
    return ir.Adapter(stmt.op.op_type, attributes, stmt.op.domain)


def _literal(expr: ast.Expr) -> object:
    if isinstance(expr, ast.Const):
        return expr.value
    if isinstance(expr, ast.ListExpr):
        items = [_literal(item) for item in expr.items]
        return None if any(item is None for item in items) else items
    return None


def _same_default_opset(a: ir.Model, b: ir.Model) -> tuple[ir.Model, ir.Model, list[str]]:
    """Convert the model with the older default-domain opset to the newer one."""
    first, second = _default_opset(a), _default_opset(b)
    if first is None or second is None or first == second:
        return a, b, []
    try:
        if first < second:
            note = f"converted the first model from opset {first} to {second}"
            return ir.convert_version(a, second), b, [note]
        note = f"converted the second model from opset {second} to {first}"
        return a, ir.convert_version(b, first), [note]
    except ir.ConversionError as exc:
        raise RewriteError(f"graft: the models import opsets {first} and {second}: {exc}") from None


def _default_opset(model: ir.Model) -> int | None:
    return model.opset_imports.get("", model.opset_imports.get("ai.onnx"))
