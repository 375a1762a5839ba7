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
from typing import TYPE_CHECKING

import onnx

import ir
from rewriter import dsl
from rewriter._errors import OptionError, RewriteError, RuleError
from rewriter.api import as_model
from rewriter.surgery._graft_verify import GraftPlan, GraftVerification, verify_grafted
from rewriter.surgery._validity import check_valid, give_types

if TYPE_CHECKING:
    from rewriter.verification import VerifyProgress

ModelLike = str | os.PathLike[str] | ir.Model | onnx.ModelProto


@dataclasses.dataclass(frozen=True)
class Grafted:
    """The grafted model, what was done to make it fit (opset conversions), where A meets B."""

    model: ir.Model
    notes: tuple[str, ...]
    plan: GraftPlan


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
        raise OptionError("connect", "graft needs at least one connection (A_OUT=B_IN)")
    first, second = as_model(a), as_model(b)
    first, second, notes = _same_default_opset(first, second)
    ir.infer_types(first)
    for connection in connections:
        if connection.adapter is None:
            _check_types_meet(first, second, connection)
    b_inputs = {value.name: value for value in second.graph.inputs}
    b_outputs = list(second.graph.outputs)
    # Where each connected input of B is read: after the graft, those places read its feed.
    places = {c.b_input: _first_place(b_inputs.get(c.b_input), b_outputs) for c in connections}
    try:
        model = ir.graft(first, second, connections, keep_outputs=keep_outputs)
    except ir.GraftError as exc:
        raise RewriteError(f"graft: {exc}") from None
    # A kept value of A may be an intermediate no value_info types: its fact does.
    give_types(model, "graft")
    check_valid(model, "the grafted model")
    plan = _plan(model, connections, places, [v.name for v in b_outputs], keep_outputs)
    return Grafted(model, tuple(notes), plan)


def verify(
    a: ModelLike,
    b: ModelLike,
    grafted: Grafted,
    *,
    examples: int = 20,
    seed: int = 0,
    progress: VerifyProgress | None = None,
) -> GraftVerification:
    """Check `grafted` against A and B on generated inputs (see `verify_grafted`)."""
    first, second = as_model(a), as_model(b)
    return verify_grafted(
        first,
        second,
        as_model(grafted.model),
        grafted.plan,
        examples=examples,
        seed=seed,
        progress=progress,
    )


# Where a B input is read: (node, input index), its output position, or None if unread.
_Place = tuple[ir.Node, int] | int | None


def _first_place(value: ir.Value | None, outputs: Sequence[ir.Value]) -> _Place:
    if value is None:
        return None
    uses = value.uses
    if uses:
        return uses[0].node, uses[0].index
    return next((i for i, v in enumerate(outputs) if v is value), None)


def _plan(
    model: ir.Model,
    connections: Sequence[ir.Connection],
    places: dict[str, _Place],
    b_output_names: Sequence[str],
    keep_outputs: Sequence[str],
) -> GraftPlan:
    """Where A's and B's parts meet in the grafted model, by name."""
    b_inputs, feeds = [], []
    for connection in connections:
        place = places[connection.b_input]
        if place is None:
            continue  # B never reads this input: nothing of B depends on it
        if isinstance(place, int):
            feed = model.graph.outputs[place]
        else:
            node, index = place
            read = node.inputs[index]
            assert read is not None, "a connected input is read by its feed"
            feed = read
        b_inputs.append(connection.b_input)
        feeds.append(feed.name)
    b_outputs = [v.name for v in list(model.graph.outputs)[: len(b_output_names)]]
    a_values = dict.fromkeys([*(c.a_output for c in connections), *keep_outputs])
    return GraftPlan(
        tuple(b_inputs), tuple(feeds), tuple(b_output_names), tuple(b_outputs), tuple(a_values)
    )


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
        raise OptionError(
            "connect",
            f"{connection.a_output!r} is {have} but {connection.b_input!r} takes {want}; "
            "give an adapter (A_OUT=B_IN:Flatten, :Reshape, ...)",
            value=f"{connection.a_output}={connection.b_input}",
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
        raise OptionError("connect", "expected A_OUT=B_IN or A_OUT=B_IN:ADAPTER", value=repr(text))
    found = _adapter(text, adapter.strip()) if colon else None
    return ir.Connection(source.strip(), target.strip(), found)


def _adapter(connection: str, spec: str) -> ir.Adapter:
    """An adapter op from `Op` or `Op <name = literal, ...>`, read by the rule language."""
    usage = OptionError(
        "connect",
        f"the adapter {spec!r} is not an op with literal attributes "
        "(e.g. `Flatten`, `Transpose <perm = [0, 2, 1]>`)",
        value=repr(connection),
    )
    try:
        file = dsl.parse(f"rule adapter: y = Identity (x) => y = {spec} (x)", "adapter")
    except RuleError:
        raise usage from None
    (rule,) = file.items
    assert isinstance(rule, dsl.Rule), "a one-line rule parses to a rule"
    stmt = rule.rewrite.stmts[0] if isinstance(rule.rewrite, dsl.RewriteBlock) else None
    if not isinstance(stmt, dsl.NodeStmt) or not isinstance(stmt.op, dsl.OpRef):
        raise usage
    attributes = {}
    for entry in stmt.attrs:
        if not isinstance(entry, dsl.AttrEntry):
            raise usage
        value = _literal(entry.value)
        if value is None:
            raise usage
        attributes[entry.name] = value
    return ir.Adapter(stmt.op.op_type, attributes, stmt.op.domain)


def _literal(expr: dsl.Expr) -> object:
    if isinstance(expr, dsl.Const):
        return expr.value
    if isinstance(expr, dsl.ListExpr):
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
