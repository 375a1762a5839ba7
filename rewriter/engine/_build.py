"""Building a rule's `rewrite` block for one match: new nodes and constants, detached.

Order of work (STYLE 8): evaluate `let` values, build the new nodes detached from the graph,
check their ops against the model's opsets and infer their output types with onnx's
per-node inference (which also checks each node against its schema), then check the
replacements' types against the values they replace. Nothing here touches the graph: a
failure leaves it exactly as it was.

A function body cannot hold initializers, so there a literal or `let` value becomes a
`Constant` node instead; a rewrite that would only put back an equal Constant (or the same
output Identity) is declined as "nothing to do", which is not a failure of the rule.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

import ir
from rewriter import rules
from rewriter.engine import _facts
from rewriter.engine._applicability import may_write_runtime_op
from rewriter.engine._commit import can_take_output_name
from rewriter.engine._constants import ConstantPool
from rewriter.engine._matcher import Match, Matcher
from rewriter.engine._pending import (
    RULE_TAG,
    SOURCE_TAG,
    Pending,
    RewriteDeclinedError,
    RewriteRejectedError,
)
from rewriter.engine._rewrite_values import literal_dtype, make_attr
from rewriter.engine._typecheck import check_replacements
from rewriter.engine._values import (
    UNKNOWN,
    Array,
    EvalContext,
    EvalError,
    EvalValue,
    NodeRef,
)


class RewriteBuilder:
    """Builds the rewrites of one model's matches (see the module docstring)."""

    def __init__(self, model: ir.Model, matcher: Matcher, names: ir.NameAllocator) -> None:
        self.model = model
        self.matcher = matcher
        self.names = names
        self.constants = ConstantPool(model, names)
        # The rewrites of one rule across a model's layers build alike nodes: inferred once.
        self.node_types = ir.NodeTypeInference()

    def build(self, match: Match) -> Pending:
        """The new objects of the rewrite of `match`, built and checked, not in the graph.

        Raises:
            RewriteRejectedError: the rewrite cannot be built or is ill-typed (or
                `RewriteDeclinedError`: it would change nothing).
        """
        rule = match.rule.rule
        if not isinstance(rule.rewrite, rules.Rewrite):
            raise RewriteRejectedError(f"rule `{rule.name}` has no node rewrite")
        pending = Pending(match.rule)
        try:
            # New constants must be what the unfused graph computes for every input: an
            # overflow (a float16 BatchNorm fold with a zero variance), an underflow (a float16
            # weight product that becomes subnormal or zero), a NaN made from numbers (a zero
            # weight times an infinite scale) or a division by zero in the rewrite's
            # arithmetic and casts raises here (`exact_numpy`) and declines the rewrite.
            # Functions may still give infinities on purpose (`log(0.0)` for a -inf mask).
            with np.errstate(all="raise"):
                self._statements(match, rule.rewrite, pending)
            check_replacements(pending)
        except FloatingPointError as exc:
            pending.discard()
            raise RewriteDeclinedError(
                f"computing the rewrite's constants is not exact ({exc}): the unfused graph"
                " computes something else, nothing to do"
            ) from exc
        except RewriteRejectedError:
            pending.discard()
            raise
        except (EvalError, ir.NodeInferenceError) as exc:
            pending.discard()
            raise RewriteRejectedError(str(exc)) from exc
        return pending

    def _statements(self, match: Match, block: rules.Rewrite, pending: Pending) -> None:
        ctx = self.matcher.eval_context(match.bindings)
        env = ctx.bindings
        compiled = match.rule.expressions
        for stmt in block.stmts:
            if isinstance(stmt, rules.Let):
                result = compiled(stmt.expr)(ctx)
                if result is UNKNOWN:
                    raise RewriteRejectedError(f"`let {stmt.name}` depends on an unknown fact")
                env[stmt.name] = result
            elif isinstance(stmt, rules.NewNode):
                node = self._build_node(match, stmt, ctx, pending)
                for pattern, value in zip(stmt.outputs, node.outputs, strict=False):
                    if isinstance(pattern, rules.OutputVar):
                        old = match.bindings.get(pattern.name)
                        if isinstance(old, ir.Value):
                            pending.replacements.append((old, value))
                        env[pattern.name] = value
                if stmt.node_var:
                    env[stmt.node_var] = NodeRef(node, self.matcher.opset_of(node.domain))
            else:
                env[stmt.target] = self._build_replacement(match, stmt, ctx, pending)

    def _build_replacement(
        self, match: Match, stmt: rules.Alias, ctx: EvalContext, pending: Pending
    ) -> ir.Value:
        """`y = expr`: the value that takes the place of the matched value `y`."""
        source = match.rule.expressions(stmt.source)(ctx)
        old = match.bindings.get(stmt.target)
        if not isinstance(old, ir.Value):
            raise RewriteRejectedError(f"`{stmt.target}` is not a value the match bound")
        new = self._as_value(source, match, stmt.target, None, 0, [], pending)
        if new is None:
            raise RewriteRejectedError(f"`{stmt.target}` cannot become an absent value")
        if new is old:
            raise RewriteDeclinedError(f"`{old.name}` would stay as it is: nothing to do")
        if _is_output_copy_kept(match, old, new):
            raise RewriteDeclinedError(
                f"graph output `{old.name}` must stay an Identity of `{new.name}`: nothing to do"
            )
        if _is_equal_constant_put_back(match, old, new, pending):
            raise RewriteDeclinedError(
                f"`{old.name}` would become an equal Constant (a function body cannot hold "
                "initializers): nothing to do"
            )
        pending.replacements.append((old, new))
        return new

    def _build_node(
        self, match: Match, stmt: rules.NewNode, ctx: EvalContext, pending: Pending
    ) -> ir.Node:
        op = _resolved_op(stmt.op, ctx)
        opset = self._check_op(op, match, pending)
        compiled = match.rule.expressions
        attrs: dict[str, ir.Attr] = {}
        for entry in stmt.attrs:
            if isinstance(entry, rules.CopyAttrs):
                source = ctx.bindings.get(entry.node_var)
                if not isinstance(source, NodeRef):
                    raise RewriteRejectedError(
                        f"`...{entry.node_var}` does not name a matched node"
                    )
                for attr in source.node.attributes.values():
                    attrs[attr.name] = attr
                continue
            value = compiled(entry.value)(ctx)
            if value is UNKNOWN:
                raise RewriteRejectedError(f"attribute `{entry.name}` depends on an unknown fact")
            if value is None:
                attrs.pop(entry.name, None)
                continue
            try:
                attrs[entry.name] = make_attr(op.op_type, op.domain, opset, entry.name, value)
            except ValueError as exc:
                raise RewriteRejectedError(str(exc)) from exc
        raw_inputs: list[EvalValue] = []
        for expr in stmt.inputs:
            value = compiled(expr)(ctx)
            if value is UNKNOWN:
                raise RewriteRejectedError("a node input depends on an unknown fact")
            raw_inputs.append(value)
        schema = ir.schemas.find_schema(op.op_type, op.domain, opset) if opset else None
        inputs: list[ir.Value | None] = []
        for index, (expr, raw) in enumerate(zip(stmt.inputs, raw_inputs, strict=False)):
            stem = expr.name if isinstance(expr, rules.Name) else f"{op.op_type}_in{index}"
            inputs.append(self._as_value(raw, match, stem, schema, index, raw_inputs, pending))
        while inputs and inputs[-1] is None:
            inputs.pop()
        outputs = [ir.Value(self._value_name(match, o)) for o in stmt.outputs]
        node = ir.Node(
            op.op_type,
            inputs,
            list(attrs.values()),
            domain=op.domain,
            outputs=outputs,
            name=self.names.fresh(f"{match.rule.name}/{_anchor_label(match)}"),
        )
        node.set_metadata(RULE_TAG, match.rule.name)
        node.set_metadata(SOURCE_TAG, match.rule.location)
        pending.nodes.append(node)
        # Infer now, so later statements (and their literals' dtypes) see this node's types.
        self._infer(node, pending)
        return node

    def _infer(self, node: ir.Node, pending: Pending) -> None:
        opsets = dict(self.model.opset_imports)
        opsets.update(pending.new_opsets)
        types = self.node_types(node, opsets)
        if types is None:
            return
        for value, t in zip(node.outputs, types, strict=False):
            if t is not None:
                ir.record_inferred_type(value, t)

    def _check_op(self, op: rules.OpId, match: Match, pending: Pending) -> int | None:
        domain = op.domain
        version = self.matcher.opset_of(domain)
        if not ir.schemas.is_known_domain(domain):
            if version is None:
                pending.new_opsets[domain] = 1
            return version or 1
        if version is None:
            raise RewriteRejectedError(f"the model does not import domain `{domain or 'ai.onnx'}`")
        if ir.schemas.find_schema(op.op_type, domain, version) is None and not (
            may_write_runtime_op(match.rule, op.op_type, domain, version)
        ):
            since = ir.schemas.since_version(op.op_type, domain)
            label = f"{domain}.{op.op_type}" if domain else op.op_type
            raise RewriteRejectedError(
                f"`{label}` is not available at the model's opset {version}"
                + (f" (it needs opset {since})" if since else "")
            )
        return version

    def _value_name(self, match: Match, pattern: rules.OutputPattern) -> str:
        if isinstance(pattern, rules.OutputVar):
            old = match.bindings.get(pattern.name)
            if isinstance(old, ir.Value) and old.name:
                return self.names.fresh(f"{old.name}/{match.rule.name}")
            return self.names.fresh(f"{_anchor_value(match)}/{match.rule.name}/{pattern.name}")
        return self.names.fresh(f"{_anchor_value(match)}/{match.rule.name}/unused")

    # constants -------------------------------------------------------------------------------
    def _as_value(
        self,
        raw: EvalValue,
        match: Match,
        stem: str,
        schema: object,
        index: int,
        siblings: Sequence[EvalValue],
        pending: Pending,
    ) -> ir.Value | None:
        if raw is None:
            return None
        if isinstance(raw, ir.Value):
            return raw
        if isinstance(raw, NodeRef):
            raise RewriteRejectedError("a node name cannot be a node input")
        if isinstance(raw, tuple):
            raise RewriteRejectedError("a variadic binding cannot be a single input")
        array = self._literal_array(raw, schema, index, siblings)
        return self.constants.constant(
            match.graph, array, f"{_anchor_value(match)}/{match.rule.name}/{stem}", pending
        )

    def _literal_array(
        self,
        raw: EvalValue,
        schema: object,
        index: int,
        siblings: Sequence[EvalValue],
    ) -> Array:
        if isinstance(raw, np.ndarray) and raw.ndim > 0:
            return raw
        if isinstance(raw, np.generic | np.ndarray):
            return np.asarray(raw)
        target = literal_dtype(raw, schema, index, siblings)
        try:
            return np.asarray(raw, dtype=ir.numpy_dtype(target))
        except (TypeError, ValueError) as exc:
            message = f"literal {raw!r} is not a valid {target.onnx_name}"
            raise RewriteRejectedError(message) from exc


def _resolved_op(op: rules.OpId | rules.MatchedOp, ctx: EvalContext) -> rules.OpId:
    """The op a new node gets: the one written, or the op of the matched node it names."""
    if isinstance(op, rules.OpId):
        return op
    found = ctx.bindings.get(op.node_var)
    if not isinstance(found, NodeRef):
        raise RewriteRejectedError(f"`...{op.node_var}` does not name a matched node")
    node = found.node
    return rules.OpId(ir.schemas.normalize_domain(node.domain), node.op_type)


def _is_output_copy_kept(match: Match, old: ir.Value, new: ir.Value) -> bool:
    """`y = x` on a graph output `y = Identity(x)` where `x` cannot take the output's name.

    Committing would put back the same Identity (see `_move_graph_outputs`), so a rule like
    `Identity(x) -> x` would rewrite it forever on a graph input that is also copied to an
    output.
    """
    if not old.is_graph_output():
        return False
    if can_take_output_name(new, match.graph):
        return False
    producer = old.producer()
    return (
        producer is not None
        and producer in match.nodes
        and producer.op_type == "Identity"
        and producer.domain in ("", "ai.onnx")
        and tuple(producer.inputs) == (new,)
    )


def _is_equal_constant_put_back(
    match: Match, old: ir.Value, new: ir.Value, pending: Pending
) -> bool:
    """`y = value(y)` on a matched Constant where the new value is an equal new Constant.

    In a function body a constant cannot become an initializer (see `Builder._constant`), so
    `constant_to_initializer` would replace a Constant by the same Constant, forever.
    """
    made = new.producer()
    kept = old.producer()
    return (
        made is not None
        and made in pending.nodes
        and made.op_type == "Constant"
        and kept is not None
        and kept in match.nodes
        and kept.op_type == "Constant"
        and _facts.same_constant(old, new)
    )


def _anchor_label(match: Match) -> str:
    anchor = match.anchor
    return anchor.name or anchor.op_type


def _anchor_value(match: Match) -> str:
    anchor = match.anchor
    for out in anchor.outputs:
        if out.name:
            return out.name
    return anchor.name or anchor.op_type
