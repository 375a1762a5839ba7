"""Applying a rule's `rewrite` block to a match: validate everything, then mutate.

Order of work (STYLE 8): evaluate `let` values, build new nodes detached from the graph,
check their ops against the model's opsets, infer their output types with onnx's inference
and compare them with the values they replace. Only then is the graph changed: initializers
added, nodes inserted, uses redirected, graph outputs kept under their names, dead matched
nodes removed. A failure before mutation leaves the graph exactly as it was.

A function body cannot hold initializers, so there a literal or `let` value becomes a
`Constant` node instead; a rewrite that would only put back an equal Constant (or the same
output Identity) is declined as "nothing to do", which is not a failure of the rule.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterable
from typing import Any

import numpy as np

import ir
from rewriter._errors import RewriteError
from rewriter.dsl import _ast as ast
from rewriter.engine import _facts
from rewriter.engine._compile import CompiledRule
from rewriter.engine._evaluate import evaluate
from rewriter.engine._matcher import Match, Matcher
from rewriter.engine._values import UNKNOWN, EvalError, NodeRef

RULE_TAG = "rewriter.rule"
SOURCE_TAG = "rewriter.source"
_DEDUP_MAX_ELEMENTS = 4096


class RewriteRejectedError(RewriteError):
    """A rewrite could not be applied; the graph was not changed."""


class RewriteDeclinedError(RewriteRejectedError):
    """A rewrite would change nothing (its message ends with "nothing to do"); not a failure."""


@dataclasses.dataclass(frozen=True, slots=True)
class Applied:
    """What one rewrite did."""

    matched: tuple[ir.Node, ...]
    created: tuple[ir.Node, ...]
    removed: tuple[ir.Node, ...]
    neighbours: tuple[ir.Node, ...]
    # Producers of what the removed nodes read: those values lost a use, so a `uses(v) == 1`
    # condition downstream may hold now (revisited, not drawn as neighbours in reports).
    lost_uses: tuple[ir.Node, ...] = ()


class _Pending:
    """New objects built for one rewrite, not yet in the graph."""

    def __init__(self, rule: CompiledRule) -> None:
        self.rule = rule
        self.nodes: list[ir.Node] = []
        self.initializers: list[ir.Value] = []
        self.replacements: list[tuple[ir.Value, ir.Value]] = []
        self.new_opsets: dict[str, int] = {}

    def discard(self) -> None:
        for node in self.nodes:
            node.detach_inputs()


class Builder:
    """Builds and applies rewrites for one model."""

    def __init__(self, model: ir.Model, matcher: Matcher, names: ir.NameAllocator) -> None:
        self.model = model
        self.matcher = matcher
        self.names = names
        self._constants: dict[ir.Graph, dict[tuple[str, tuple[int, ...], bytes], ir.Value]] = {}

    # entry point -----------------------------------------------------------------------------
    def apply(self, match: Match) -> Applied:
        """Apply the rewrite of `match.rule`.

        Raises:
            RewriteRejectedError: the rewrite cannot be applied; nothing was changed.
        """
        return self._commit(match, self._prepare(match))

    def try_rewrite(self, match: Match) -> RewriteRejectedError | None:
        """Why the rewrite of `match` would be declined or rejected (None: it would apply).

        Builds and checks the rewrite like `apply`, then discards it: the graph is unchanged.
        """
        try:
            pending = self._prepare(match)
        except RewriteRejectedError as exc:
            return exc
        pending.discard()
        return None

    def _prepare(self, match: Match) -> _Pending:
        """The new objects of the rewrite, built and checked but not in the graph yet."""
        rule = match.rule.rule
        if not isinstance(rule.rewrite, ast.RewriteBlock):
            raise RewriteRejectedError(f"rule `{rule.name}` has no node rewrite")
        pending = _Pending(match.rule)
        try:
            # An overflow while computing new constants (a float16 BatchNorm fold with a zero
            # variance) would put an inf the original never computed into the model; numpy's
            # overflow flag turns it into a decline. Deliberate infinities (`log(0.0)` for a
            # -inf mask) raise no overflow.
            with np.errstate(over="raise"):
                self._build(match, rule.rewrite, pending)
            self._check_types(match, pending)
        except FloatingPointError as exc:
            pending.discard()
            raise RewriteDeclinedError(
                f"computing the rewrite's constants overflows ({exc}): not representable,"
                " nothing to do"
            ) from exc
        except RewriteRejectedError:
            pending.discard()
            raise
        except (EvalError, ir.NodeInferenceError) as exc:
            pending.discard()
            raise RewriteRejectedError(str(exc)) from exc
        return pending

    # building --------------------------------------------------------------------------------
    def _build(self, match: Match, block: ast.RewriteBlock, pending: _Pending) -> None:
        ctx = self.matcher.eval_context(match.bindings)
        env = ctx.bindings
        for stmt in block.stmts:
            if isinstance(stmt, ast.LetStmt):
                result = evaluate(stmt.expr, ctx)
                if result is UNKNOWN:
                    raise RewriteRejectedError(f"`let {stmt.name}` depends on an unknown fact")
                env[stmt.name] = result
            elif isinstance(stmt, ast.NodeStmt):
                node = self._build_node(match, stmt, ctx, pending)
                for pattern, value in zip(stmt.outputs, node.outputs, strict=False):
                    if isinstance(pattern, ast.OutputVar):
                        old = match.bindings.get(pattern.name)
                        if isinstance(old, ir.Value):
                            pending.replacements.append((old, value))
                        env[pattern.name] = value
                if stmt.as_name:
                    env[stmt.as_name] = NodeRef(node, self.matcher.opset_of(node.domain))
            else:
                env[stmt.target] = self._build_replacement(match, stmt, ctx, pending)

    def _build_replacement(
        self, match: Match, stmt: ast.AliasStmt, ctx: Any, pending: _Pending
    ) -> ir.Value:
        """`y = expr`: the value that takes the place of the matched value `y`."""
        source = evaluate(stmt.source, ctx)
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

    def _build_node(self, match: Match, stmt: ast.NodeStmt, ctx: Any, pending: _Pending) -> ir.Node:
        domain = ir.schemas.normalize_domain(stmt.op.domain)
        opset = self._check_op(stmt.op, pending)
        attrs: dict[str, ir.Attr] = {}
        for entry in stmt.attrs:
            if isinstance(entry, ast.AttrCopy):
                source = ctx.bindings.get(entry.source) if entry.source else None
                if not isinstance(source, NodeRef):
                    raise RewriteRejectedError(f"`...{entry.source}` does not name a matched node")
                for attr in source.node.attributes.values():
                    attrs[attr.name] = attr
                continue
            value = evaluate(entry.value, ctx)
            if value is UNKNOWN:
                raise RewriteRejectedError(f"attribute `{entry.name}` depends on an unknown fact")
            if value is None:
                attrs.pop(entry.name, None)
                continue
            attrs[entry.name] = _make_attr(stmt.op.op_type, domain, opset, entry.name, value)
        raw_inputs = []
        for expr in stmt.inputs:
            value = evaluate(expr, ctx)
            if value is UNKNOWN:
                raise RewriteRejectedError("a node input depends on an unknown fact")
            raw_inputs.append(value)
        schema = ir.schemas.find_schema(stmt.op.op_type, domain, opset) if opset else None
        inputs: list[ir.Value | None] = []
        for index, (expr, raw) in enumerate(zip(stmt.inputs, raw_inputs, strict=False)):
            stem = expr.name if isinstance(expr, ast.Name) else f"{stmt.op.op_type}_in{index}"
            inputs.append(self._as_value(raw, match, stem, schema, index, raw_inputs, pending))
        while inputs and inputs[-1] is None:
            inputs.pop()
        outputs = [ir.Value(self._value_name(match, o)) for o in stmt.outputs]
        node = ir.Node(
            stmt.op.op_type,
            inputs,
            list(attrs.values()),
            domain=stmt.op.domain,
            outputs=outputs,
            name=self.names.fresh(f"{match.rule.name}/{_anchor_label(match)}"),
        )
        node.set_metadata(RULE_TAG, match.rule.name)
        node.set_metadata(SOURCE_TAG, match.rule.location)
        pending.nodes.append(node)
        # Infer now, so later statements (and their literals' dtypes) see this node's types.
        self._infer(node, pending)
        return node

    def _infer(self, node: ir.Node, pending: _Pending) -> None:
        opsets = dict(self.model.opset_imports)
        opsets.update(pending.new_opsets)
        types = ir.infer_node_types(node, opsets)
        if types is None:
            return
        for value, t in zip(node.outputs, types, strict=False):
            if t is not None:
                ir.record_inferred_type(value, t)

    def _check_op(self, op: ast.OpRef, pending: _Pending) -> int | None:
        domain = ir.schemas.normalize_domain(op.domain)
        version = self.matcher.opset_of(domain)
        if not ir.schemas.is_known_domain(domain):
            if version is None:
                pending.new_opsets[domain] = 1
            return version or 1
        if version is None:
            raise RewriteRejectedError(f"the model does not import domain `{domain or 'ai.onnx'}`")
        if ir.schemas.find_schema(op.op_type, domain, version) is None:
            since = ir.schemas.since_version(op.op_type, domain)
            label = f"{domain}.{op.op_type}" if domain else op.op_type
            raise RewriteRejectedError(
                f"`{label}` is not available at the model's opset {version}"
                + (f" (it needs opset {since})" if since else "")
            )
        return version

    def _value_name(self, match: Match, pattern: ast.OutputVar | ast.Wildcard) -> str:
        if isinstance(pattern, ast.OutputVar):
            old = match.bindings.get(pattern.name)
            if isinstance(old, ir.Value) and old.name:
                return self.names.fresh(f"{old.name}/{match.rule.name}")
            return self.names.fresh(f"{_anchor_value(match)}/{match.rule.name}/{pattern.name}")
        return self.names.fresh(f"{_anchor_value(match)}/{match.rule.name}/unused")

    # constants -------------------------------------------------------------------------------
    def _as_value(
        self,
        raw: Any,
        match: Match,
        stem: str,
        schema: Any,
        index: int,
        siblings: list[Any],
        pending: _Pending,
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
        return self._constant(
            match.graph, array, f"{_anchor_value(match)}/{match.rule.name}/{stem}", pending
        )

    def _literal_array(
        self, raw: Any, schema: Any, index: int, siblings: list[Any]
    ) -> np.ndarray[Any, Any]:
        if isinstance(raw, np.ndarray) and raw.ndim > 0:
            return raw
        if isinstance(raw, np.generic | np.ndarray):
            return np.asarray(raw)
        target = _literal_dtype(raw, schema, index, siblings)
        try:
            return np.asarray(raw, dtype=ir.numpy_dtype(target))
        except (TypeError, ValueError) as exc:
            message = f"literal {raw!r} is not a valid {target.onnx_name}"
            raise RewriteRejectedError(message) from exc

    def _constant(
        self, graph: ir.Graph, array: np.ndarray[Any, Any], stem: str, pending: _Pending
    ) -> ir.Value:
        dtype = ir.DataType.from_numpy(array.dtype)
        key = None
        if array.size <= _DEDUP_MAX_ELEMENTS and array.dtype != object:
            key = (dtype.onnx_name, tuple(array.shape), np.ascontiguousarray(array).tobytes())
        else:
            digest = hashlib.sha256(np.ascontiguousarray(array).tobytes()).digest()
            key = (dtype.onnx_name, tuple(array.shape), digest)
        known = self._known_constants(graph)
        found = known.get(key)
        if found is not None and (found.graph is graph or _is_pending(found, pending)):
            return found
        name = self.names.fresh(stem)
        tensor = ir.NumpyTensor(array, name, dtype)
        if _facts.can_hold_initializers(graph, self.model):
            value = ir.Value(name, const_value=tensor)
            pending.initializers.append(value)
        else:
            value = self._constant_node(name, tensor, pending)
        known[key] = value
        return value

    def _constant_node(self, name: str, tensor: ir.Tensor, pending: _Pending) -> ir.Value:
        """A `Constant` node computing `tensor` (where initializers are not allowed)."""
        value = ir.Value(name)
        node = ir.Node(
            "Constant",
            [],
            [ir.attr_tensor("value", tensor)],
            outputs=[value],
            name=self.names.fresh(f"{name}/Constant"),
        )
        node.set_metadata(RULE_TAG, pending.rule.name)
        node.set_metadata(SOURCE_TAG, pending.rule.location)
        ir.record_inferred_type(value, ir.TensorType(tensor.dtype, tuple(tensor.shape)))
        pending.nodes.append(node)
        return value

    def _known_constants(
        self, graph: ir.Graph
    ) -> dict[tuple[str, tuple[int, ...], bytes], ir.Value]:
        table = self._constants.get(graph)
        if table is None:
            table = {}
            for value in graph.initializers.values():
                tensor = value.const_value
                if (
                    tensor is None
                    or not value.name  # a node reads the empty name as an absent input
                    or tensor.size > 64
                    or tensor.is_external
                    or value.is_graph_input()
                ):
                    continue
                try:
                    array = np.asarray(tensor.numpy())
                except ir.IRError:
                    continue
                if array.dtype == object:
                    continue
                key = (
                    tensor.dtype.onnx_name,
                    tuple(array.shape),
                    np.ascontiguousarray(array).tobytes(),
                )
                table.setdefault(key, value)
            self._constants[graph] = table
        return table

    # checking --------------------------------------------------------------------------------
    def _check_types(self, match: Match, pending: _Pending) -> None:
        created = {id(out) for node in pending.nodes for out in node.outputs}
        for old, new in pending.replacements:
            _check_compatible(old, new)
            if id(new) in created:
                _inherit_type(old, new)

    # committing ------------------------------------------------------------------------------
    def _commit(self, match: Match, pending: _Pending) -> Applied:
        graph = match.graph
        for domain, version in pending.new_opsets.items():
            self.model.opset_imports.setdefault(domain, version)
        for value in pending.initializers:
            graph.add_initializer(value)
        for node in pending.nodes:
            graph.append(node)
        matched = tuple(n for n in match.nodes if n is not None)
        keep = set(matched) | set(pending.nodes)
        neighbours: dict[ir.Node, None] = {}
        for old, new in pending.replacements:
            for use in old.uses:
                if use.node not in keep:
                    use.node.replace_input_with(use.index, new)
                    neighbours[use.node] = None
        renames = [
            self._move_graph_outputs(graph, old, new, pending, match)
            for old, new in pending.replacements
        ]
        removed = _remove_dead(graph, matched)
        lost_uses: dict[ir.Node, None] = {}
        for node in removed:
            for read in node.inputs:
                producer = read.producer() if read is not None else None
                if producer is not None and producer.graph is graph:
                    lost_uses[producer] = None
        for rename in renames:
            if rename is not None:
                old, target, name = rename
                if old.graph is not None:
                    old.name = self.names.fresh(f"{name}/replaced")
                target.name = name
        for node in pending.nodes:
            for read in node.inputs:
                producer = read.producer() if read is not None else None
                if producer is not None:
                    neighbours[producer] = None
            for out in node.outputs:
                for user in out.users():
                    neighbours[user] = None
        return Applied(matched, tuple(pending.nodes), removed, tuple(neighbours), tuple(lost_uses))

    def _move_graph_outputs(
        self, graph: ir.Graph, old: ir.Value, new: ir.Value, pending: _Pending, match: Match
    ) -> tuple[ir.Value, ir.Value, str] | None:
        """Point graph outputs held by `old` at `new`; returns the renaming still to do."""
        slots = [i for i, v in enumerate(graph.outputs) if v is old]
        if not slots:
            return None
        name = old.name
        # `new` can take the output's name if it is a node output that is not itself a graph
        # output; otherwise (a graph input, an initializer, another output) add an Identity.
        renamable = new.producer() is not None and not new.is_graph_output()
        target = new
        if not renamable:
            identity_out = ir.Value(self.names.fresh(f"{name}/identity"))
            identity = ir.Node(
                "Identity", [new], outputs=[identity_out], name=self.names.fresh(f"{name}/Identity")
            )
            identity.set_metadata(RULE_TAG, match.rule.name)
            identity.set_metadata(SOURCE_TAG, match.rule.location)
            graph.append(identity)
            pending.nodes.append(identity)
            t = ir.fact_type(new)
            if t is not None:
                ir.record_inferred_type(identity_out, t)
            target = identity_out
        for i in slots:
            graph.set_output(i, target)
        if old.type is not None and target.type is None:
            target.type = old.type
        return (old, target, name)


def _is_output_copy_kept(match: Match, old: ir.Value, new: ir.Value) -> bool:
    """`y = x` on a graph output `y = Identity(x)` where `x` cannot take the output's name.

    Committing would put back the same Identity (see `_move_graph_outputs`), so a rule like
    `Identity(x) -> x` would rewrite it forever on a graph input that is also copied to an
    output.
    """
    if not old.is_graph_output():
        return False
    if new.producer() is not None and not new.is_graph_output():
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
    match: Match, old: ir.Value, new: ir.Value, pending: _Pending
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


def _is_pending(value: ir.Value, pending: _Pending) -> bool:
    """True when `value` was made for this rewrite (a new initializer or Constant output)."""
    if value in pending.initializers:
        return True
    producer = value.producer()
    return producer is not None and producer in pending.nodes


def _anchor_label(match: Match) -> str:
    anchor = match.anchor
    return anchor.name or anchor.op_type


def _anchor_value(match: Match) -> str:
    anchor = match.anchor
    for out in anchor.outputs:
        if out.name:
            return out.name
    return anchor.name or anchor.op_type


def _literal_dtype(raw: Any, schema: Any, index: int, siblings: list[Any]) -> ir.DataType:
    """The dtype a Python literal takes as input `index` of a node (DSL.md's dtype rules)."""
    if schema is not None:
        formals = list(schema.inputs)
        if formals:
            formal = formals[min(index, len(formals) - 1)]
            type_str = formal.type_str
            constraints = {c.type_param_str: c for c in schema.type_constraints}
            if type_str in constraints:
                for j, other in enumerate(siblings):
                    if j == index or not isinstance(other, ir.Value):
                        continue
                    other_formal = formals[min(j, len(formals) - 1)]
                    if other_formal.type_str == type_str:
                        found = _value_dtype(other)
                        if found is not None:
                            return found
                allowed = list(constraints[type_str].allowed_type_strs)
                if len(allowed) == 1:
                    return _dtype_from_type_str(allowed[0]) or _default_dtype(raw)
                # No input shares the type variable (Slice's `Tind`, Gather's indices): the
                # literal keeps its own dtype when the schema allows it, rather than copying
                # an unrelated input's (a float `x` must not make Slice's starts float).
                default = _default_dtype(raw)
                if f"tensor({default.onnx_name})" in allowed:
                    return default
            else:
                fixed = _dtype_from_type_str(type_str)
                if fixed is not None:
                    return fixed
    for other in siblings:
        if isinstance(other, ir.Value):
            found = _value_dtype(other)
            if found is not None:
                return found
            break
    return _default_dtype(raw)


def _value_dtype(value: ir.Value) -> ir.DataType | None:
    from rewriter.engine._facts import dtype_of

    return dtype_of(value)


def _dtype_from_type_str(type_str: str) -> ir.DataType | None:
    if type_str.startswith("tensor(") and type_str.endswith(")"):
        inner = type_str[len("tensor(") : -1]
        try:
            return ir.DataType.from_name(inner)
        except ValueError:
            return None
    return None


def _default_dtype(raw: Any) -> ir.DataType:
    flat = raw
    while isinstance(flat, list) and flat:
        flat = flat[0]
    if isinstance(flat, bool):
        return ir.DataType.BOOL
    if isinstance(raw, list):
        return ir.DataType.INT64 if all(_is_int(v) for v in _flatten(raw)) else ir.DataType.FLOAT
    if isinstance(flat, int):
        return ir.DataType.INT64
    return ir.DataType.FLOAT


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _flatten(items: Iterable[Any]) -> Iterable[Any]:
    for item in items:
        if isinstance(item, list):
            yield from _flatten(item)
        else:
            yield item


def _make_attr(op_type: str, domain: str, opset: int | None, name: str, value: Any) -> ir.Attr:
    kind = ir.schemas.attribute_type(op_type, name, domain, opset)
    try:
        if kind is None:
            if isinstance(value, np.ndarray):
                return ir.attr_tensor(name, ir.NumpyTensor(value))
            return ir.infer_attr(name, value)
        return _convert_attr(name, kind, value)
    except (TypeError, ValueError) as exc:
        raise RewriteRejectedError(f"attribute `{name}`: {exc}") from exc


def _convert_attr(name: str, kind: ir.AttrType, value: Any) -> ir.Attr:
    if kind == ir.AttrType.INT:
        if isinstance(value, str):
            return ir.attr_int(name, int(ir.DataType.from_name(value)))
        return ir.attr_int(
            name,
            int(np.asarray(value).reshape(-1)[0]) if isinstance(value, np.ndarray) else int(value),
        )
    if kind == ir.AttrType.FLOAT:
        return ir.attr_float(name, float(np.asarray(value).reshape(-1)[0]))
    if kind == ir.AttrType.STRING:
        return ir.attr_str(name, str(value))
    if kind == ir.AttrType.INTS:
        return ir.attr_ints(name, [int(v) for v in np.asarray(value).reshape(-1)])
    if kind == ir.AttrType.FLOATS:
        return ir.attr_floats(name, [float(v) for v in np.asarray(value).reshape(-1)])
    if kind == ir.AttrType.STRINGS:
        return ir.attr_strs(name, [str(v) for v in value])
    if kind == ir.AttrType.TENSOR:
        return ir.attr_tensor(name, ir.NumpyTensor(np.asarray(value)))
    raise TypeError(f"cannot build a {kind.name} attribute from an expression")


def _check_compatible(old: ir.Value, new: ir.Value) -> None:
    """Refuse a replacement whose known type contradicts the replaced value's known type."""
    from rewriter.engine._facts import value_type

    a = value_type(old)
    b = value_type(new)
    if not isinstance(a, ir.TensorType) or not isinstance(b, ir.TensorType):
        return
    if a.dtype and b.dtype and a.dtype != b.dtype:
        raise RewriteRejectedError(
            f"the rewrite would change `{old.name}` from {a.dtype.onnx_name} to {b.dtype.onnx_name}"
        )
    if a.shape is None or b.shape is None:
        return
    if len(a.shape) != len(b.shape):
        raise RewriteRejectedError(f"the rewrite would change the rank of `{old.name}`: {a} -> {b}")
    for da, db in zip(a.shape, b.shape, strict=False):
        if isinstance(da, int) and isinstance(db, int) and da != db:
            raise RewriteRejectedError(
                f"the rewrite would change the shape of `{old.name}`: {a} -> {b}"
            )


def _inherit_type(old: ir.Value, new: ir.Value) -> None:
    """Give a new value every fact known about the value it replaces (they are one tensor).

    onnx's inference cannot type custom-domain ops (com.microsoft.*), and for standard ops it
    invents fresh symbols; keeping the replaced value's facts lets later rules still prove
    ranks and symbolic shape equalities downstream of a rewrite.
    """
    from rewriter.engine._facts import value_type

    a = value_type(old)
    if not isinstance(a, ir.TensorType):
        return
    b = value_type(new)
    ir.record_inferred_type(new, ir.merge_types(a, b) if isinstance(b, ir.TensorType) else a)


def _remove_dead(graph: ir.Graph, matched: tuple[ir.Node, ...]) -> tuple[ir.Node, ...]:
    """Remove matched nodes left without uses, then constants only they read."""
    removed: list[ir.Node] = []
    progress = True
    alive = [n for n in matched if n.graph is graph]
    while progress:
        progress = False
        for node in reversed(alive):
            if node in removed:
                continue
            if any(out.num_uses() or out.is_graph_output() for out in node.outputs):
                continue
            inputs = [v for v in node.inputs if v is not None]
            graph.remove(node)
            removed.append(node)
            progress = True
            _drop_orphan_constants(graph, inputs)
    return tuple(removed)


def _drop_orphan_constants(graph: ir.Graph, values: list[ir.Value]) -> None:
    for value in values:
        if value.num_uses() or value.is_graph_output():
            continue
        producer = value.producer()
        if producer is not None:
            if producer.op_type == "Constant" and producer.graph is graph:
                graph.remove(producer)
            continue
        if value.is_initializer() and not value.is_graph_input() and value.graph is graph:
            graph.remove_initializer(value.name)
