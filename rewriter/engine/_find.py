"""`rewrite find`: every place a rule (or a query) matches in a model, without rewriting.

Each rule is tried at every node with its anchor op, in every graph (subgraphs and function
bodies too), as the pass manager would try it on the unchanged model. A rule's match counts
as the pass manager counts it (the outside-uses rule and `where` included); a query
(`find -e`) has no rewrite, so only its lines and `where` decide.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import ir
from rewriter import rules
from rewriter.engine import _trace
from rewriter.engine._compile import CompiledRule
from rewriter.engine._matcher import Match, Matcher
from rewriter.engine._rule_index import compile_rules
from rewriter.engine._shape_facts import infer_facts
from rewriter.engine._values import EvalValue


@dataclasses.dataclass(frozen=True, slots=True)
class Binding:
    """One name a match bound: a value (with its type as the facts know it) or an attribute."""

    name: str
    kind: str  # "value", "absent" (an optional input not given), "node" or "attribute"
    text: str  # the value's or node's name, or the attribute as the rule language writes it
    type: str = ""  # a value's type, `float[batch,128]` (empty when nothing is known)

    def render(self) -> str:
        """`x = %input: float[batch,128]`, `alpha = 0.2`."""
        if self.kind == "value":
            return f"{self.name} = %{self.text}" + (f": {self.type}" if self.type else "")
        return f"{self.name} = {self.text}"

    def as_json(self) -> dict[str, str]:
        """The binding as a JSON object."""
        found = {"name": self.name, "kind": self.kind, "text": self.text}
        if self.kind == "value":
            found["type"] = self.type
        return found


@dataclasses.dataclass(frozen=True, slots=True)
class Found:
    """One match: the rule, where it is written, the graph, the matched nodes, the bindings."""

    rule: str
    location: str
    graph: str  # "" for the main graph
    nodes: tuple[str, ...]  # the matched nodes, anchor last
    bindings: tuple[Binding, ...]

    def as_json(self) -> dict[str, Any]:
        """The match as a JSON object."""
        return {
            "rule": self.rule,
            "location": self.location,
            "graph": self.graph,
            "nodes": list(self.nodes),
            "bindings": [b.as_json() for b in self.bindings],
        }


def find_matches(
    ruleset: rules.RuleSet, model: ir.Model, *, infer_shapes: bool = True
) -> list[Found]:
    """Every match of every rule of `ruleset` in `model`, in graph order then rule order.

    The model is not changed, except that inferred facts are recorded on its values (as a
    rewrite run records them).
    """
    if infer_shapes:
        infer_facts(model)
    matcher = Matcher(model.opset_imports, ruleset.functions)
    return match_compiled(compile_rules(ruleset), model, matcher)


def match_compiled(rules: Sequence[CompiledRule], model: ir.Model, matcher: Matcher) -> list[Found]:
    """Every match of compiled `rules` in `model` (its facts as they are), as `find_matches`."""
    by_op = _rules_by_anchor_op(rules)
    found: list[Found] = []
    for graph in model.graphs():
        # The main graph goes unnamed in listings; a subgraph or function body is named.
        label = "" if graph is model.graph else _trace.graph_label(graph)
        for node in graph:
            key = (ir.schemas.normalize_domain(node.domain), node.op_type)
            for rule in by_op.get(key, ()) + by_op.get(None, ()):
                result = matcher.match(rule, node, explain=False)
                if isinstance(result, Match):
                    found.append(_found(rule, label, result))
    return found


def _rules_by_anchor_op(
    rules: Sequence[CompiledRule],
) -> dict[tuple[str, str] | None, tuple[CompiledRule, ...]]:
    """Rules by the (domain, op) their anchor line accepts; None for an anchor `_`."""
    table: dict[tuple[str, str] | None, list[CompiledRule]] = {}
    for rule in rules:
        ops = rule.anchor_ops
        keys: list[tuple[str, str] | None] = [(op.domain, op.op_type) for op in ops]
        for key in keys or [None]:
            table.setdefault(key, []).append(rule)
    return {key: tuple(found) for key, found in table.items()}


def _found(rule: CompiledRule, graph: str, match: Match) -> Found:
    anchor = match.anchor
    others = [n for n in match.nodes if n is not None and n is not anchor]
    nodes = tuple(_trace.distinct_label(n) for n in [*others, anchor])
    return Found(rule.name, rule.location, graph, nodes, tuple(_bindings(match.bindings)))


def _bindings(bindings: Mapping[str, EvalValue]) -> Iterator[Binding]:
    for name, bound in bindings.items():
        if name.startswith("_"):
            continue
        if isinstance(bound, ir.Value):
            yield _value_binding(name, bound)
        elif bound is None:
            yield Binding(name, "absent", "none")
        elif isinstance(bound, ir.Node):
            yield Binding(name, "node", _trace.distinct_label(bound))
        else:
            yield Binding(name, "attribute", _attribute_text(bound))


def _value_binding(name: str, value: ir.Value) -> Binding:
    fact = ir.fact_type(value)
    return Binding(name, "value", value.name, str(fact) if fact is not None else "")


def _attribute_text(bound: object) -> str:
    """An attribute value as the rule language would write it (`[3, 3]`, `0.2`, `"SAME"`)."""
    if isinstance(bound, ir.Tensor):
        return f"tensor {ir.TensorType(bound.dtype, tuple(bound.shape))}"
    literal = _literal(bound)
    return rules.expression_text(literal) if literal is not None else repr(bound)


def _literal(bound: object) -> rules.Expr | None:
    """`bound` as a literal of the rule language, if it is one (numbers, strings, lists)."""
    if bound is None or isinstance(bound, int | float | str | bool):
        return rules.Const(bound)
    if isinstance(bound, list | tuple):
        items = [_literal(item) for item in bound]
        if all(item is not None for item in items):
            return rules.ListExpr(tuple(item for item in items if item is not None))
    return None
