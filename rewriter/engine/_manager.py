"""The pass manager: applies rules and built-in passes to a fixed point, with a budget.

Rules are indexed by their anchor op, so a node is tried only against rules that can match
it; `priority` (higher first) then file order decide between rules on the same node. A
worklist revisits only nodes near each change. Declared passes run when the worklist is
empty; if they change anything, the rules run again on what they touched. The run stops when
nothing changes (SATURATED), when the rewrite budget is spent (BUDGET), after the iteration
cap (ITERATION_LIMIT), when a whole-graph state repeats (OSCILLATION), or when a replay limit
for bisection is reached (REPLAY_LIMIT). Stopping early always leaves a valid model.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import gc
import hashlib
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

import ir
from rewriter._errors import RewriteError
from rewriter.dsl import _ast as ast
from rewriter.engine import _trace
from rewriter.engine._builder import Builder, RewriteDeclinedError, RewriteRejectedError
from rewriter.engine._compile import CompiledRule, compile_rule
from rewriter.engine._evaluate import evaluate
from rewriter.engine._matcher import Match, Matcher, MatchFailure
from rewriter.engine._pass import PassDefinition, PassResult
from rewriter.engine._passes import BUILTIN_PASSES
from rewriter.engine._trace import SkipEntry, StopReason, Trace, TraceEntry
from rewriter.engine._values import EvalContext

logger = logging.getLogger(__name__)

ProgressCallback = Callable[[int, int], None]

Applicability = Callable[[CompiledRule], "str | None"]
"""Why a compiled rule cannot apply to the model being rewritten (None when it can)."""


class BlockRulesResult(Protocol):
    """What block rules did: trace entries of applied rolls, skips with reasons."""

    @property
    def entries(self) -> tuple[TraceEntry, ...]:
        """One entry per rolled chain."""
        ...

    @property
    def skips(self) -> tuple[SkipEntry, ...]:
        """Rules or chains that were not rolled, with the reasons."""
        ...


class BlockRules(Protocol):
    """Applies `match repeat ... rewrite loop` rules (`rewriter.loops.apply_repeat_rules`)."""

    def __call__(
        self,
        model: ir.Model,
        rules: Sequence[ast.Rule],
        matcher: Matcher,
        names: ir.NameAllocator | None = None,
        applicability: Applicability | None = None,
        record_subgraphs: bool = False,
    ) -> BlockRulesResult:
        """Roll the chains the rules match; returns what was applied and skipped."""
        ...


@dataclasses.dataclass(frozen=True, slots=True)
class RewriteOptions:
    """Options of one run (all optional).

    `exclude_sites` leaves a rule out at single places: (rule, graph label, anchor site) as
    a `TraceEntry` records them (`graph`, `anchor`).
    """

    max_rewrites: int | None = None
    max_iterations: int = 8
    infer_shapes: bool = True
    replay_limit: int | None = None
    exclude_rules: frozenset[str] = frozenset()
    exclude_sites: frozenset[tuple[str, str, str]] = frozenset()
    progress: ProgressCallback | None = None
    target_opset: int | None = None
    record_subgraphs: bool = False


@dataclasses.dataclass(frozen=True, slots=True)
class WhyNot:
    """For `--why-not RULE`: the outcome at every node where the rule's anchor op occurs."""

    rule: str
    location: str
    outcomes: tuple[tuple[str, str], ...]  # (node label, "matched" or the failure reason)
    skipped: str = ""

    def render(self) -> str:
        """A readable report."""
        lines = [f"why not `{self.rule}` ({self.location}):"]
        if self.skipped:
            lines.append(f"  skipped for this model: {self.skipped}")
        if not self.outcomes:
            lines.append("  the model has no node with the rule's anchor op")
        for label, outcome in self.outcomes:
            lines.append(f"  {label}: {outcome}")
        return "\n".join(lines)


def _requirement_holds(req: ast.Requirement, opsets: Mapping[str, int]) -> bool:
    domain = ir.schemas.normalize_domain(req.domain)
    version = opsets.get(domain)
    if version is None and domain == "":
        version = opsets.get("ai.onnx")
    if version is None:
        return False
    return {
        ">=": version >= req.version,
        ">": version > req.version,
        "<=": version <= req.version,
        "<": version < req.version,
        "==": version == req.version,
        "!=": version != req.version,
    }.get(req.op, False)


def applicability(
    rule: CompiledRule, opsets: Mapping[str, int], target: int | None = None
) -> str | None:
    """Why `rule` cannot apply to a model with these opsets (None when it can).

    With a conversion `target`, `requires` is judged at the target opset and emitted ops must
    exist both now and at the target (the result is converted afterwards).
    """
    judged = dict(opsets)
    if target is not None:
        judged[""] = target
    for req in rule.rule.requires:
        if not _requirement_holds(req, judged):
            domain = req.domain or "ai.onnx"
            have = judged.get(ir.schemas.normalize_domain(req.domain))
            what = (
                "the target opset is"
                if target is not None and req.domain in ("", "ai.onnx")
                else "the model has"
            )
            return f"requires opset {domain} {req.op} {req.version}, {what} {have or 'none'}"
    for op in rule.emitted_ops:
        domain = ir.schemas.normalize_domain(op.domain)
        if not ir.schemas.is_known_domain(domain):
            continue
        version = opsets.get(domain) or (opsets.get("ai.onnx") if domain == "" else None)
        label = f"{domain}.{op.op_type}" if domain else op.op_type
        if version is None:
            return f"emits `{label}` but the model does not import domain {domain or 'ai.onnx'}"
        versions = [version] if target is None or domain != "" else [version, target]
        for v in versions:
            if ir.schemas.find_schema(op.op_type, domain, v) is None:
                since = ir.schemas.since_version(op.op_type, domain)
                return f"emits `{label}`, which needs opset {since}; the model has {v}"
    return None


class _RuleIndex:
    """Rules by anchor op; wildcard-anchored rules apply to every node."""

    def __init__(self, rules: Iterable[CompiledRule]) -> None:
        self.by_op: dict[tuple[str, str], list[CompiledRule]] = collections.defaultdict(list)
        self.wildcard: list[CompiledRule] = []
        for rule in rules:
            if not rule.anchor_ops:
                self.wildcard.append(rule)
            for ref in rule.anchor_ops:
                self.by_op[(ir.schemas.normalize_domain(ref.domain), ref.op_type)].append(rule)
        key = _priority_key
        for bucket in self.by_op.values():
            bucket.sort(key=key)
        self.wildcard.sort(key=key)
        self._merged: dict[tuple[str, str], list[CompiledRule]] = {}
        self._reach: dict[tuple[str, str], int] = {}
        every = [*self.wildcard, *(r for bucket in self.by_op.values() for r in bucket)]
        self.max_reach = max((r.reach for r in every), default=0)

    def candidates(self, node: ir.Node) -> list[CompiledRule]:
        key = (ir.schemas.normalize_domain(node.domain), node.op_type)
        found = self._merged.get(key)
        if found is None:
            found = sorted(self.by_op.get(key, []) + self.wildcard, key=_priority_key)
            self._merged[key] = found
            self._reach[key] = max((r.reach for r in found), default=-1)
        return found

    def reach(self, node: ir.Node) -> int:
        """How far upstream of `node` a change can complete a match anchored at it (-1: none)."""
        key = (ir.schemas.normalize_domain(node.domain), node.op_type)
        found = self._reach.get(key)
        if found is None:
            self.candidates(node)
            found = self._reach[key]
        return found


def _priority_key(rule: CompiledRule) -> tuple[int, int]:
    return (-rule.priority, rule.order)


def compile_rules(ruleset: ast.RuleSet) -> list[CompiledRule]:
    """Compile every node-rewriting rule of a rule set (in load order)."""
    # The same RuleSet object compiles to the same plans: kept for the next run. The entry
    # holds the RuleSet itself, so its id cannot be reused while it is cached.
    cached = _COMPILED.get(id(ruleset))
    if cached is not None and cached[0] is ruleset:
        return list(cached[1])
    compiled = []
    for order, rule in enumerate(ruleset.rules):
        if rule.match.repeat is not None:
            continue  # loop rolling rules are applied by the loop pass
        compiled.append(compile_rule(rule, order))
    if len(_COMPILED) >= 8:
        _COMPILED.pop(next(iter(_COMPILED)))
    _COMPILED[id(ruleset)] = (ruleset, tuple(compiled))
    return compiled


_COMPILED: dict[int, tuple[ast.RuleSet, tuple[CompiledRule, ...]]] = {}


class PassManager:
    """Runs a rule set on models.

    `passes` are the passes a rule file may declare (the engine's own by default; the API
    adds the loop passes), `block_rules` what applies `match repeat` rules (none by default:
    such rules are then skipped with a reason).
    """

    def __init__(
        self,
        ruleset: ast.RuleSet,
        options: RewriteOptions | None = None,
        *,
        passes: Mapping[str, PassDefinition[Any]] = BUILTIN_PASSES,
        block_rules: BlockRules | None = None,
    ) -> None:
        self.ruleset = ruleset
        self.options = options or RewriteOptions()
        self.rules = compile_rules(ruleset)
        self.passes = passes
        self.block_rules = block_rules

    # --------------------------------------------------------------------------------------------
    def run(self, model: ir.Model) -> Trace:
        """Rewrite `model` in place to a fixed point; returns the trace."""
        run = _Run(self, model)
        gc_was_enabled = gc.isenabled()
        gc.disable()  # rewriting allocates many small acyclic objects; see ir._serde
        try:
            return run.execute()
        finally:
            if gc_was_enabled:
                gc.enable()

    def why_not(self, model: ir.Model, rule_name: str) -> WhyNot:
        """Where the rule's anchor op occurs, how far the match got and why it failed."""
        rule = next((r for r in self.rules if r.name == rule_name), None)
        if rule is None:
            names = ", ".join(sorted(r.name for r in self.rules)[:20])
            raise RewriteError(f"no rule named `{rule_name}` is loaded (loaded: {names})")
        if self.options.infer_shapes:
            ir.infer_types(model)
        skipped = applicability(rule, model.opset_imports) or ""
        matcher = Matcher(model.opset_imports, self.ruleset.functions)
        builder = Builder(model, matcher, ir.NameAllocator(model))
        outcomes = []
        anchors = {(ir.schemas.normalize_domain(r.domain), r.op_type) for r in rule.anchor_ops}
        for graph in model.graphs():
            for node in graph:
                key = (ir.schemas.normalize_domain(node.domain), node.op_type)
                if anchors and key not in anchors:
                    continue
                result = matcher.match(rule, node)
                if isinstance(result, Match):
                    outcome = _describe_match(builder.try_rewrite(result))
                else:
                    outcome = _describe_failure(result)
                outcomes.append((_trace.distinct_label(node), outcome))
        return WhyNot(rule.name, rule.location, tuple(outcomes), skipped)


def _describe_failure(failure: MatchFailure) -> str:
    return f"{failure.reason} (matched {max(failure.depth, 0)} line(s) first)"


def _describe_match(problem: RewriteRejectedError | None) -> str:
    """A match, and whether its rewrite would be declined or rolled back."""
    if problem is None:
        return "matches"
    if isinstance(problem, RewriteDeclinedError):
        return f"matches, but the rewrite is declined: {_trace.one_line(str(problem))}"
    return f"matches, but the rewrite would be rolled back: {_trace.one_line(str(problem))}"


def _skip_reason(problem: RewriteRejectedError) -> str:
    """How a rewrite that was not applied is reported (a decline is not a rollback)."""
    if isinstance(problem, RewriteDeclinedError):
        return _trace.one_line(str(problem))
    return f"rolled back: {_trace.one_line(str(problem))}"


class _Run:
    """State of one run of the pass manager on one model."""

    def __init__(self, manager: PassManager, model: ir.Model) -> None:
        self.manager = manager
        self.options = manager.options
        self.model = model
        self.entries: list[TraceEntry] = []
        self.skips: list[SkipEntry] = []
        self.warnings: list[str] = []
        self.applied = 0
        self.recent: collections.deque[str] = collections.deque(maxlen=200)
        self.names = ir.NameAllocator(model)
        targets = {"": manager.options.target_opset} if manager.options.target_opset else {}
        self.matcher = Matcher(model.opset_imports, manager.ruleset.functions, targets)
        self.builder = Builder(model, self.matcher, self.names)
        self.timings: dict[str, float] = collections.defaultdict(float)

    def execute(self) -> Trace:
        start = time.perf_counter()
        if self.options.infer_shapes:
            ir.infer_types(self.model)
        self.timings["infer_shapes"] += time.perf_counter() - start
        rules = self._applicable_rules()
        index = _RuleIndex(rules)
        budget = self.options.max_rewrites
        if budget is None:
            budget = 1000 + 10 * _trace.count_nodes(self.model)
        passes = self._declared_passes()
        worklist = _Worklist(n for g in self.model.graphs() for n in ir.topological_order(g))
        fingerprints: set[str] = set()
        stop = StopReason.SATURATED
        # Which passes (and whether rules) changed the model, per round: named when the
        # rounds do not settle.
        changers: dict[str, None] = {}
        for iteration in range(self.options.max_iterations):
            applied_before = self.applied
            stop = self._drain(worklist, index, budget)
            if stop is not StopReason.SATURATED:
                break
            changed_nodes: dict[ir.Node, None] = {}
            changed = False
            round_changers: dict[str, None] = {}
            if self.applied > applied_before:
                round_changers["the rules"] = None
            if iteration == 0 and self._apply_repeat_rules():
                # Rolled once, after the local rules: a block rule names fused ops (Gelu,
                # LayerNormalization) that the rules write first. The new bodies are visited.
                changed = True
                changed_nodes.update(dict.fromkeys(n for g in self.model.graphs() for n in g))
            for definition, options in passes:
                name = definition.name
                t0 = time.perf_counter()
                result = definition.run(self.model, options)
                self.timings[f"pass {name}"] += time.perf_counter() - t0
                if result.changed:
                    changed = True
                    round_changers[f"pass `{name}`"] = None
                    self._record_pass(result)
                    changed_nodes.update(dict.fromkeys(result.touched))
            if not changed:
                break
            changers = round_changers
            fingerprint = _fingerprint(self.model)
            if fingerprint in fingerprints:
                stop = StopReason.OSCILLATION
                self.warnings.append(
                    "the passes keep undoing each other; stopped (changing the model in the "
                    f"last round: {', '.join(changers)})"
                )
                break
            fingerprints.add(fingerprint)
            worklist.extend(_downstream(changed_nodes, index))
            if iteration == self.options.max_iterations - 1:
                stop = StopReason.ITERATION_LIMIT
                self.warnings.append(
                    f"stopped after {self.options.max_iterations} rounds of passes and rules "
                    f"(still changing the model in the last round: {', '.join(changers)})"
                )
        return Trace(tuple(self.entries), tuple(self.skips), stop, tuple(self.warnings))

    def _apply_repeat_rules(self) -> bool:
        """`match repeat ... rewrite loop` rules roll their chains; True when one did.

        They run once, when the local rules first saturate, before the built-in passes.
        """
        rules = [
            rule
            for rule in self.manager.ruleset.rules
            if rule.match.repeat is not None and rule.name not in self.options.exclude_rules
        ]
        if not rules:
            return False
        block_rules = self.manager.block_rules
        if block_rules is None:
            for rule in rules:
                location = f"{rule.span.path}:{rule.span.line}"
                reason = "this run applies no `match repeat` rules (no block-rule applier)"
                self.skips.append(SkipEntry(rule.name, location, reason))
            return False
        check = functools.partial(
            applicability, opsets=self.model.opset_imports, target=self.options.target_opset
        )
        t0 = time.perf_counter()
        result = block_rules(
            self.model,
            rules,
            self.matcher,
            self.names,
            check,
            record_subgraphs=self.options.record_subgraphs,
        )
        self.timings["repeat rules"] += time.perf_counter() - t0
        self.entries.extend(result.entries)
        self.skips.extend(result.skips)
        self.applied += len(result.entries)
        return bool(result.entries)

    def _applicable_rules(self) -> list[CompiledRule]:
        usable = []
        for rule in self.manager.rules:
            if rule.name in self.options.exclude_rules:
                continue
            reason = applicability(rule, self.model.opset_imports, self.options.target_opset)
            if reason is not None:
                self.skips.append(SkipEntry(rule.name, rule.location, reason))
                continue
            usable.append(rule)
        return usable

    def _declared_passes(self) -> list[tuple[PassDefinition[Any], object]]:
        declared: list[tuple[PassDefinition[Any], object]] = []
        ctx = EvalContext({}, self.model.opset_imports)
        for decl in self.manager.ruleset.passes:
            definition = self.manager.passes.get(decl.name)
            if definition is None:
                raise RewriteError(
                    f"{decl.span}: pass `{decl.name}` is not available in this run "
                    f"(available: {', '.join(sorted(self.manager.passes))})"
                )
            values = {key: evaluate(expr, ctx) for key, expr in decl.options}
            try:
                declared.append((definition, definition.make_options(values)))
            except ValueError as exc:
                raise RewriteError(f"{decl.span}: {exc}") from exc
        return declared

    def _drain(self, worklist: _Worklist, index: _RuleIndex, budget: int) -> StopReason:
        match_time: dict[str, float] = collections.defaultdict(float)
        try:
            return self._drain_timed(worklist, index, budget, match_time)
        finally:
            for name, seconds in match_time.items():
                self.timings[f"match {name}"] += seconds

    def _drain_timed(
        self,
        worklist: _Worklist,
        index: _RuleIndex,
        budget: int,
        match_time: dict[str, float],
    ) -> StopReason:
        matcher = self.matcher
        progress = self.options.progress
        replay_limit = self.options.replay_limit
        excluded = self.options.exclude_sites
        perf_counter = time.perf_counter
        tick = 0
        while worklist:
            node = worklist.pop()
            if node.graph is None:
                continue
            tick += 1
            if progress is not None and tick % 256 == 0:
                progress(self.applied, len(worklist))
            for rule in index.candidates(node):
                t0 = perf_counter()
                result = matcher.match(rule, node, explain=False)
                match_time[rule.name] += perf_counter() - t0
                if not isinstance(result, Match):
                    continue
                if excluded and _site_key(result) in excluded:
                    continue
                if replay_limit is not None and self.applied >= replay_limit:
                    return StopReason.REPLAY_LIMIT
                if self._apply(result, worklist, index):
                    if self.applied >= budget:
                        self._warn_budget(budget)
                        return StopReason.BUDGET
                    break
        if progress is not None:
            progress(self.applied, 0)
        return StopReason.SATURATED

    def _apply(self, match: Match, worklist: _Worklist, index: _RuleIndex) -> bool:
        rule = match.rule
        t0 = time.perf_counter()
        before: tuple[_trace.SnapshotNode, ...] = ()
        if self.options.record_subgraphs:
            before = _trace.snapshot([n for n in match.nodes if n is not None], "matched")
        try:
            applied = self.builder.apply(match)
        except RewriteRejectedError as exc:
            self.skips.append(
                SkipEntry(
                    rule.name, rule.location, _skip_reason(exc), _trace.node_label(match.anchor)
                )
            )
            return False
        finally:
            self.timings[f"rewrite {rule.name}"] += time.perf_counter() - t0
        self.applied += 1
        self.recent.append(rule.name)
        self.entries.append(
            TraceEntry(
                rule.name,
                rule.location,
                _trace.graph_label(match.graph),
                _trace.labels(applied.matched),
                _trace.labels(applied.created),
                before=before,
                after=_trace.snapshot_after(applied.created, applied.neighbours) if before else (),
                anchor=_trace.site_of(match.anchor),
            )
        )
        worklist.extend(applied.created)
        worklist.extend(applied.neighbours)
        worklist.extend(
            _downstream([*applied.created, *applied.neighbours, *applied.lost_uses], index)
        )
        return True

    def _record_pass(self, result: PassResult) -> None:
        """One trace entry per graph the pass changed, naming what it removed and added."""
        for change in result.changes:
            self.entries.append(
                TraceEntry(
                    result.name,
                    "built-in pass",
                    change.graph,
                    change.removed,
                    change.created,
                    "pass",
                )
            )
        if not result.changes:
            # A pass that does not itemize its changes: its count, and the graph when one.
            graphs = dict.fromkeys(
                _trace.graph_label(n.graph) for n in result.touched if n.graph is not None
            )
            graph = next(iter(graphs)) if len(graphs) == 1 else ""
            self.entries.append(
                TraceEntry(
                    result.name, "built-in pass", graph, (f"{result.count} change(s)",), (), "pass"
                )
            )

    def _warn_budget(self, budget: int) -> None:
        counts = collections.Counter(self.recent)
        busiest = ", ".join(f"`{name}` ({n}x)" for name, n in counts.most_common(4))
        self.warnings.append(
            f"stopped after {budget} rewrites (the budget); the rules that kept firing: {busiest}"
        )


class _Worklist:
    """A FIFO of nodes without duplicates (a deque plus a membership set)."""

    def __init__(self, nodes: Iterable[ir.Node]) -> None:
        self._queue: collections.deque[ir.Node] = collections.deque()
        self._pending: set[ir.Node] = set()
        self.extend(nodes)

    def __bool__(self) -> bool:
        return bool(self._pending)

    def __len__(self) -> int:
        return len(self._pending)

    def pop(self) -> ir.Node:
        node = self._queue.popleft()
        self._pending.discard(node)
        return node

    def extend(self, nodes: Iterable[ir.Node]) -> None:
        for node in nodes:
            if node.graph is not None and node not in self._pending:
                self._pending.add(node)
                self._queue.append(node)


def _downstream(nodes: Iterable[ir.Node], index: _RuleIndex) -> list[ir.Node]:
    """Nodes downstream of `nodes` where a rule could now match (the nodes included).

    A node `d` uses away is kept only when a rule anchored at its op reaches `d` lines up
    (`CompiledRule.reach`); the walk stops at the longest reach of any rule.
    """
    seen: dict[ir.Node, None] = dict.fromkeys(nodes)
    found = list(seen)
    frontier = list(seen)
    for distance in range(1, index.max_reach + 1):
        next_frontier = []
        for node in frontier:
            for out in node.outputs:
                for user in out.users():
                    if user not in seen:
                        seen[user] = None
                        next_frontier.append(user)
                        if index.reach(user) >= distance:
                            found.append(user)
        if not next_frontier:
            break
        frontier = next_frontier
    return found


def _site_key(match: Match) -> tuple[str, str, str]:
    """(rule, graph label, anchor site): how `RewriteOptions.exclude_sites` names a place."""
    return (match.rule.name, _trace.graph_label(match.graph), _trace.site_of(match.anchor))


def _fingerprint(model: ir.Model) -> str:
    digest = hashlib.sha256()
    for graph in model.graphs():
        for node in graph:
            digest.update(node.op_type.encode())
            for value in node.inputs:
                digest.update(b"|" + (value.name.encode() if value is not None else b"-"))
    return digest.hexdigest()
