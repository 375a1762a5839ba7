"""The generic matcher: finds one rule's pattern at one anchor node.

It walks the compiled plan with backtracking (commutative operand orders and consumer
candidates are the only choice points), then applies the outside-uses rule and the `where`
conditions. It returns a `Match` or the deepest `MatchFailure` with its reason, which is what
`--why-not` shows. No rule-specific code lives here.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterator, Mapping

import ir
from rewriter import rules
from rewriter.engine import _facts
from rewriter.engine._calibration import Calibration
from rewriter.engine._compile import CompiledRule
from rewriter.engine._explain import explain_condition, explain_line
from rewriter.engine._literals import attribute_matches, constant_matches
from rewriter.engine._values import (
    Bindings,
    EvalContext,
    EvalError,
    EvalValue,
    NodeRef,
    attr_to_python,
    equal,
    truth,
)

# A literal input is compared against constants up to this many elements; a bigger constant
# is never treated as a literal (reading a large weight to compare it would be wasteful).
LITERAL_SIZE_LIMIT = 1 << 16

# A failure reason: a str.format template and its arguments (see `_Tracker`).
_Reason = tuple[str, *tuple[object, ...]]


@dataclasses.dataclass(frozen=True, slots=True)
class Match:
    """A successful match: the bindings and the matched nodes (by match line)."""

    rule: CompiledRule
    graph: ir.Graph
    bindings: Mapping[str, EvalValue]
    nodes: tuple[ir.Node, ...]

    @property
    def anchor(self) -> ir.Node:
        """The node the match was anchored at."""
        return self.nodes[self.rule.anchor]


@dataclasses.dataclass(frozen=True, slots=True)
class MatchFailure:
    """Why a rule did not match at a node: the reason, the node it concerns, the depth reached."""

    reason: str
    node: ir.Node | None
    depth: int


@dataclasses.dataclass(slots=True)
class _State:
    bindings: Bindings
    nodes: list[ir.Node | None]

    def copy(self) -> _State:
        return _State(dict(self.bindings), list(self.nodes))


class _Tracker:
    """Remembers the deepest failure seen during one search.

    Reasons are given as a template and its arguments and formatted only when asked for:
    the pass manager tries tens of thousands of anchors and reads no reason, `--why-not`
    reads every one. Node arguments are shown as `name (OpType)`.
    """

    __slots__ = ("args", "depth", "node", "template")

    explains = True  # reasons are kept, so a failing `where` line is worth explaining

    def __init__(self) -> None:
        self.depth = -1
        self.node: ir.Node | None = None
        self.template = "no candidate"
        self.args: tuple[object, ...] = ()

    def fail(self, depth: int, node: ir.Node | None, template: str, *args: object) -> None:
        # The first failure at the deepest line wins: of a commutative op's two operand
        # orders, the order the rule writes is tried first and is the one a reader expects.
        if depth > self.depth:
            self.depth = depth
            self.node = node
            self.template = template
            self.args = args

    def result(self) -> MatchFailure:
        args = tuple(_node_label(a) if isinstance(a, ir.Node) else a for a in self.args)
        return MatchFailure(self.template.format(*args), self.node, self.depth)


class _QuietTracker(_Tracker):
    """A tracker that keeps no reasons (the pass manager only needs yes or no)."""

    __slots__ = ()

    explains = False

    def fail(self, depth: int, node: ir.Node | None, template: str, *args: object) -> None:
        return None

    def result(self) -> MatchFailure:
        return _NO_MATCH


_NO_MATCH = MatchFailure("no match (reasons not recorded)", None, -1)


@functools.cache
def _default_attr(op_type: str, name: str, domain: str, opset: int | None) -> ir.Attr | None:
    return ir.schemas.attribute_default(op_type, name, domain, opset)


def _node_label(node: ir.Node) -> str:
    return f"{node.name or '<unnamed>'} ({node.op_type})"


class Matcher:
    """Matches compiled rules in one model (knows its opsets and helper functions)."""

    def __init__(
        self,
        opset_imports: Mapping[str, int],
        functions: Mapping[str, rules.Helper] | None = None,
        target_opsets: Mapping[str, int] | None = None,
        calibration: Calibration | None = None,
    ) -> None:
        self.opset_imports = dict(opset_imports)
        self.functions = dict(functions or {})
        self.target_opsets = dict(target_opsets or {})
        self.calibration = calibration

    def opset_of(self, domain: str) -> int | None:
        """The model's opset version for `domain` (None when not imported)."""
        key = ir.schemas.normalize_domain(domain)
        found = self.opset_imports.get(key)
        if found is None and key == "":
            found = self.opset_imports.get("ai.onnx")
        return found

    def eval_context(self, bindings: Mapping[str, EvalValue]) -> EvalContext:
        """An evaluation context over match bindings."""
        return EvalContext(
            dict(bindings), self.opset_imports, self.functions, self.target_opsets, self.calibration
        )

    # entry point -----------------------------------------------------------------------------
    def match(
        self, rule: CompiledRule, node: ir.Node, *, explain: bool = True
    ) -> Match | MatchFailure:
        """Try `rule` with its anchor line at `node`.

        With `explain=False` a failure carries no reason (cheaper; the pass manager's mode).
        """
        graph = node.graph
        if graph is None:
            return MatchFailure("node is no longer in a graph", node, 0)
        if not explain and not _may_match(rule, node, graph):
            return _NO_MATCH
        tracker = _Tracker() if explain else _QuietTracker()
        start = _State({}, [None] * len(rule.lines))
        anchor_line = rule.lines[rule.anchor]
        for state in self._match_line(rule, anchor_line, rule.anchor, node, start, tracker, 0):
            for complete in self._search(rule, 0, state, tracker, graph):
                found = self._finish(rule, complete, tracker, graph)
                if found is not None:
                    return found
        return tracker.result()

    def _search(
        self, rule: CompiledRule, step_index: int, state: _State, tracker: _Tracker, graph: ir.Graph
    ) -> Iterator[_State]:
        if step_index == len(rule.plan):
            yield state
            return
        step = rule.plan[step_index]
        line = rule.lines[step.line]
        depth = step_index + 1
        value = state.bindings.get(step.var)
        if not isinstance(value, ir.Value):
            tracker.fail(depth, None, "`{}` is not a computed value", step.var)
            return
        if step.access == "producer":
            producer = value.producer()
            if producer is None or producer.graph is not graph:
                where = "a graph input or initializer" if producer is None else "outside the graph"
                tracker.fail(
                    depth, None, "`{}` ({}) is {}, not a node output", step.var, value.name, where
                )
                return
            if value.index != step.position:
                tracker.fail(
                    depth,
                    producer,
                    "`{}` is output {} of {}, not output {}",
                    step.var,
                    value.index,
                    producer,
                    step.position,
                )
                return
            candidates: tuple[ir.Node, ...] = (producer,)
        else:
            candidates = tuple(
                n for n in value.users() if n.graph is graph and n not in state.nodes
            )
            if not candidates:
                tracker.fail(
                    depth, None, "`{}` ({}) has no other user to match", step.var, value.name
                )
                return
        for candidate in candidates:
            for next_state in self._match_line(
                rule, line, step.line, candidate, state, tracker, depth
            ):
                yield from self._search(rule, step_index + 1, next_state, tracker, graph)

    # one line --------------------------------------------------------------------------------
    def _match_line(
        self,
        rule: CompiledRule,
        line: rules.NodePattern,
        line_index: int,
        node: ir.Node,
        state: _State,
        tracker: _Tracker,
        depth: int,
    ) -> Iterator[_State]:
        if node in state.nodes:
            tracker.fail(depth, node, "{} is already matched by another line", node)
            return
        ops = rule.line_ops[line_index]
        if ops is not None and (ir.schemas.normalize_domain(node.domain), node.op_type) not in ops:
            expected = " | ".join(str(op) for op in line.ops)
            tracker.fail(depth, node, "{} is not {}", node, expected)
            return
        state = state.copy()
        state.nodes[line_index] = node
        reason = self._bind_outputs(line, node, state)
        if reason is None:
            reason = self._bind_attributes(line, node, state)
        if reason is None and line.node_var is not None:
            state.bindings[line.node_var] = NodeRef(node, self.opset_of(node.domain))
        if reason is not None:
            tracker.fail(depth, node, *reason)
            return
        inputs = list(node.inputs)
        while inputs and inputs[-1] is None:
            inputs.pop()
        swappable = (
            len(inputs) == 2
            and len(line.inputs) == 2
            and ir.schemas.is_commutative(node.op_type, node.domain)
        )
        orders = [inputs, [inputs[1], inputs[0]]] if swappable else [inputs]
        for i, ordered in enumerate(orders):
            # The last order may bind into `state` itself: nothing else reads it afterwards.
            branch = state if i == len(orders) - 1 else state.copy()
            reason = self._bind_inputs(line, ordered, branch)
            if reason is None:
                yield branch
            else:
                template, *args = reason
                tracker.fail(depth, node, "{}: " + template, node, *args)

    def _bind_outputs(
        self, line: rules.NodePattern, node: ir.Node, state: _State
    ) -> _Reason | None:
        outputs = list(node.outputs)
        while outputs and not outputs[-1].name:
            outputs.pop()
        expected = len(line.outputs)
        if line.more_outputs:
            if len(outputs) < expected:
                return ("{} has {} outputs, at least {} expected", node, len(outputs), expected)
        elif len(outputs) != expected:
            return ("{} has {} outputs, {} expected", node, len(outputs), expected)
        for pattern, value in zip(line.outputs, outputs, strict=False):
            if isinstance(pattern, rules.AnyValue):
                continue
            if not value.name:
                return ("output `{}` of {} is absent", pattern.name, node)
            if not _bind(state.bindings, pattern.name, value):
                return ("output `{}` is bound to a different value", pattern.name)
        return None

    def _bind_attributes(
        self, line: rules.NodePattern, node: ir.Node, state: _State
    ) -> _Reason | None:
        if not line.attrs:
            return None
        opset = self.opset_of(node.domain)
        for entry in line.attrs:
            attr = node.attributes.get(entry.name)
            if attr is None:
                attr = _default_attr(node.op_type, entry.name, node.domain, opset)
            actual = None if attr is None else attr_to_python(attr)
            if isinstance(entry, rules.AttrBind):
                if not _bind(state.bindings, entry.var, actual):
                    return (
                        "attribute `{}` = {!r} differs from `{}`",
                        entry.name,
                        actual,
                        entry.var,
                    )
                continue
            expected = entry.value
            if actual is None or not attribute_matches(actual, expected):
                return ("attribute `{}` is {!r}, not {!r}", entry.name, actual, expected)
        return None

    def _bind_inputs(
        self, line: rules.NodePattern, inputs: list[ir.Value | None], state: _State
    ) -> _Reason | None:
        patterns = line.inputs
        last = patterns[-1] if patterns else None
        variadic = isinstance(last, rules.InputVar) and last.variadic
        fixed = patterns[:-1] if variadic else patterns
        if len(inputs) > len(fixed) and not variadic:
            return ("has {} inputs, the pattern has {}", len(inputs), len(fixed))
        for i, pattern in enumerate(fixed):
            value = inputs[i] if i < len(inputs) else None
            reason = self._bind_input(pattern, value, i, state)
            if reason is not None:
                return reason
        if isinstance(last, rules.InputVar) and variadic:
            rest = tuple(inputs[len(fixed) :])
            name = last.name
            if not _bind(state.bindings, name, rest):
                return ("variadic `{}...` is bound to different values", name)
        return None

    def _bind_input(
        self, pattern: rules.InputPattern, value: ir.Value | None, index: int, state: _State
    ) -> _Reason | None:
        if isinstance(pattern, rules.AnyValue):
            return None
        if isinstance(pattern, rules.InputConst):
            if value is None:
                return ("input {} is absent, a constant is expected", index)
            expected = pattern.value
            if not _constant_is(value, expected):
                return ("input {} ({}) is not the constant {!r}", index, value.name, expected)
            return None
        if value is None and not pattern.optional:
            return ("input {} (`{}`) is absent", index, pattern.name)
        if not _bind(state.bindings, pattern.name, value):
            return ("input {} is not the value already bound to `{}`", index, pattern.name)
        return None

    # completion ------------------------------------------------------------------------------
    def _finish(
        self, rule: CompiledRule, state: _State, tracker: _Tracker, graph: ir.Graph
    ) -> Match | None:
        depth = len(rule.lines)
        nodes = tuple(n for n in state.nodes if n is not None)
        var_of: dict[int, str] | None = None
        # A query (`rewrite find -e`) replaces nothing, so what else reads its values is moot.
        for node in () if rule.rule.is_query else nodes:
            for out in node.outputs:
                if not out.name:
                    continue
                outside = out.is_graph_output() or any(user not in nodes for user in out.users())
                if not outside:
                    continue
                if var_of is None:
                    var_of = {
                        id(v): k for k, v in state.bindings.items() if isinstance(v, ir.Value)
                    }
                var = var_of.get(id(out))
                if var is None or var not in rule.redefined:
                    what = f"`{var}`" if var is not None else "an unbound output"
                    tracker.fail(
                        depth,
                        node,
                        "{} ({}) of {} is used outside the match and the rewrite does not "
                        "redefine it",
                        what,
                        out.name,
                        node,
                    )
                    return None
        if rule.checks and not self._where_holds(rule, state, tracker, depth + 1, nodes):
            return None
        return Match(rule, graph, dict(state.bindings), tuple(state.nodes))  # type: ignore[arg-type]

    def _where_holds(
        self,
        rule: CompiledRule,
        state: _State,
        tracker: _Tracker,
        depth: int,
        nodes: tuple[ir.Node, ...],
    ) -> bool:
        """True when every `where` line is definitely true; else record why not."""
        ctx = self.eval_context(state.bindings)
        for index, (condition, check) in enumerate(
            zip(rule.rule.conditions, rule.checks, strict=True)
        ):
            try:
                result = truth(check(ctx))
            except EvalError as exc:
                message = _explained(condition, ctx, tracker) or exc.bare_message
                tracker.fail(depth, None, "{}: {}", _condition_label(condition, index), message)
                return False
            if result is True:
                continue
            node = nodes[-1] if nodes else None
            verdict = "unknown (a fact is not known)" if result is not False else "false"
            label = _condition_label(condition, index)
            if tracker.explains:
                explained = explain_line(condition, ctx, verdict)
                tracker.fail(depth, node, "{}: {}", label, explained)
            else:
                tracker.fail(depth, node, "{} is {}", label, verdict)
            return False
        return True


def _condition_label(condition: rules.Expr, index: int) -> str:
    """`where line 12` for a condition written in a file; `condition 2` for one built in code."""
    line = condition.span.line
    return f"where line {line}" if line else f"condition {index + 1}"


def _explained(condition: rules.Expr, ctx: EvalContext, tracker: _Tracker) -> str | None:
    """Which named constraint makes `condition` fail, when reasons are kept (`--why-not`)."""
    if not tracker.explains:
        return None
    return explain_condition(condition, ctx)


def _may_match(rule: CompiledRule, node: ir.Node, graph: ir.Graph) -> bool:
    """False when the anchor's inputs cannot come from the producers the rule names.

    A necessary condition only (`CompiledRule.anchor_producers`), checked in both operand
    orders where the matcher would try both; most anchors fail here, without a search.
    """
    checks = rule.anchor_producers
    if not checks:
        return True
    inputs = node.inputs
    if _producers_fit(checks, inputs, graph):
        return True
    count = len(inputs)
    while count and inputs[count - 1] is None:
        count -= 1
    return (
        count == 2
        and len(rule.lines[rule.anchor].inputs) == 2
        and ir.schemas.is_commutative(node.op_type, node.domain)
        and _producers_fit(checks, (inputs[1], inputs[0]), graph)
    )


def _producers_fit(
    checks: tuple[tuple[int, frozenset[tuple[str, str]] | None, int], ...],
    inputs: tuple[ir.Value | None, ...],
    graph: ir.Graph,
) -> bool:
    for position, ops, output in checks:
        value = inputs[position] if position < len(inputs) else None
        if value is None or value.index != output:
            return False
        producer = value.producer()
        if producer is None or producer.graph is not graph:
            return False
        if ops is not None and (
            (ir.schemas.normalize_domain(producer.domain), producer.op_type) not in ops
        ):
            return False
    return True


def _bind(bindings: Bindings, name: str, value: EvalValue) -> bool:
    if name not in bindings:
        bindings[name] = value
        return True
    bound = bindings[name]
    if isinstance(bound, ir.Value) or isinstance(value, ir.Value) or bound is None or value is None:
        return bound is value
    if isinstance(bound, tuple) and isinstance(value, tuple):
        return len(bound) == len(value) and all(a is b for a, b in zip(bound, value, strict=False))
    return equal(bound, value) is True


def _constant_is(value: ir.Value, expected: rules.LiteralValue) -> bool:
    """True when `value` is a constant equal to the literal (see `_literals`)."""
    size = _facts.const_size(value)
    if size is None or size > LITERAL_SIZE_LIMIT:
        return False
    array = _facts.const_array(value)
    return array is not None and constant_matches(array, expected)
