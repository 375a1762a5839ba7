"""The pass manager: applies rules and built-in passes to a fixed point, with a budget.

Rules are indexed by their anchor op, so a node is tried only against rules that can match
it; `priority` (higher first) then file order decide between rules on the same node. A
worklist revisits only nodes near each change. Declared passes run when the worklist is
empty; if they change anything, the rules run again on what they touched. The run stops when
nothing changes (SATURATED), when the rewrite budget is spent (BUDGET), after the iteration
cap (ITERATION_LIMIT), when a whole-graph state repeats (OSCILLATION), or when a replay limit
for bisection is reached (REPLAY_LIMIT). Stopping early always leaves a valid model.

`RunOptions.excluded_sites` names rule applications not to make, by rule and anchor
(`TraceEntry.site`): such a match is skipped with the caller's reason and the node's next
candidate rule is tried. It is how the accuracy budget (`rewriter.quantize`) leaves the
most sensitive approximate rewrites out; it is an option of one run, never shared state.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import ir
from rewriter import rules
from rewriter._cache import user_cache
from rewriter._errors import RewriteError
from rewriter.engine import _fingerprint, _trace
from rewriter.engine._applicability import applicability
from rewriter.engine._builder import Builder, Runnable
from rewriter.engine._calibration import Calibration
from rewriter.engine._compile import CompiledRule
from rewriter.engine._find import match_compiled
from rewriter.engine._matcher import Match, Matcher
from rewriter.engine._options import RunOptions
from rewriter.engine._pass import PassContext, PassDefinition, PassResult, run_checked
from rewriter.engine._passes import BUILTIN_PASSES
from rewriter.engine._pending import RewriteDeclinedError, RewriteRejectedError
from rewriter.engine._rule_index import RuleIndex, compile_rules
from rewriter.engine._runtime import KernelAvailability
from rewriter.engine._shape_facts import infer_facts
from rewriter.engine._trace import SkipEntry, StopReason, Trace, TraceEntry
from rewriter.engine._why_not import WhyNot, why_not
from rewriter.engine._worklist import Worklist

logger = logging.getLogger(__name__)


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
        block_rules: Sequence[rules.Rule],
        matcher: Matcher,
        names: ir.NameAllocator | None = None,
        applicability: Applicability | None = None,
        record_subgraphs: bool = False,
    ) -> BlockRulesResult:
        """Roll the chains the rules match; returns what was applied and skipped."""
        ...


class PassManager:
    """Runs a rule set on models.

    `passes` are the passes a rule file may declare (the engine's own by default; the API
    adds the loop passes), `block_rules` what applies `match repeat` rules (none by default:
    such rules are then skipped with a reason).
    """

    def __init__(
        self,
        ruleset: rules.RuleSet,
        options: RunOptions | None = None,
        *,
        passes: Mapping[str, PassDefinition[Any]] = BUILTIN_PASSES,
        block_rules: BlockRules | None = None,
    ) -> None:
        self.ruleset = ruleset
        self.options = options or RunOptions()
        # Asked whether onnxruntime runs a node a rewrite or a pass would create; its answers
        # depend on the node's kind and the onnxruntime build only, so they are kept in the
        # user's cache folder.
        self.runnable: Runnable | None = None
        if self.options.keep_runnable:
            self.runnable = KernelAvailability(user_cache())
        self.rules = compile_rules(ruleset)
        self.passes = passes
        self.block_rules = block_rules

    def run(self, model: ir.Model) -> Trace:
        """Rewrite `model` in place to a fixed point; returns the trace."""
        return _Run(self, model).execute()

    def why_not(self, model: ir.Model, rule_name: str) -> WhyNot:
        """Where the rule's anchor op occurs, how far the match got and why it failed."""
        return why_not(
            self.ruleset,
            self.rules,
            model,
            rule_name,
            infer_shapes=self.options.infer_shapes,
            target_opset=self.options.target_opset,
            calibration=_renamed_by(self.options.calibration, self.ruleset),
        )


def _renamed_by(calibration: Calibration | None, ruleset: rules.RuleSet) -> Calibration | None:
    """The calibration, told which rules may rename values (see `Calibration.lookup`)."""
    if calibration is None:
        return None
    names = frozenset(rule.name for rule in ruleset.rules)
    return dataclasses.replace(calibration, renamed_by=calibration.renamed_by | names)


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
        self.newer_opset_matches: tuple[_trace.NewerOpsetMatch, ...] = ()
        self.applied = 0
        # Steps taken (`TraceEntry.step`): rule rewrites and the pass runs that changed the
        # model, what `RunOptions.replay_steps` counts.
        self.steps = 0
        self.excluded_seen: set[tuple[str, str]] = set()
        self.recent: collections.deque[str] = collections.deque(maxlen=200)
        self.names = ir.NameAllocator(model)
        targets = {"": manager.options.target_opset} if manager.options.target_opset else {}
        self.matcher = Matcher(
            model.opset_imports,
            manager.ruleset.functions,
            targets,
            calibration=_renamed_by(manager.options.calibration, manager.ruleset),
        )
        self.builder = Builder(
            model, self.matcher, self.names, manager.runnable, exact=manager.options.exact
        )
        self.timings: dict[str, float] = collections.defaultdict(float)
        self.pass_context = PassContext(runnable=manager.runnable)

    def execute(self) -> Trace:
        start = time.perf_counter()
        if self.options.infer_shapes:
            infer_facts(self.model)
        self.timings["infer_shapes"] += time.perf_counter() - start
        rules = self._applicable_rules()
        if self.options.match_newer_opset:
            self.newer_opset_matches = self._match_newer_opset()
        index = RuleIndex(rules)
        budget = self.options.max_rewrites
        if budget is None:
            budget = 1000 + 10 * _trace.count_nodes(self.model)
        passes = self._declared_passes()
        worklist = Worklist(
            (n for g in self.model.graphs() for n in ir.topological_order(g)), index
        )
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
            if self._replayed_enough():
                stop = StopReason.REPLAY_LIMIT
                break
            if iteration == 0 and self._apply_repeat_rules():
                # Rolled once, after the local rules: a block rule names fused ops (Gelu,
                # LayerNormalization) that the rules write first. The new bodies are visited.
                changed = True
                changed_nodes.update(dict.fromkeys(n for g in self.model.graphs() for n in g))
            for definition, options in passes:
                if self._replayed_enough():
                    stop = StopReason.REPLAY_LIMIT
                    break
                name = definition.name
                t0 = time.perf_counter()
                result = run_checked(definition, options, self.model, self.pass_context)
                self.timings[f"pass {name}"] += time.perf_counter() - t0
                if isinstance(result, str):
                    self._pass_rolled_back(name, result)
                    continue
                if result.changed:
                    changed = True
                    round_changers[f"pass `{name}`"] = None
                    self._record_pass(result)
                    changed_nodes.update(dict.fromkeys(result.touched))
            if stop is StopReason.REPLAY_LIMIT or not changed:
                break
            changers = round_changers
            fingerprint = _fingerprint.fingerprint(self.model)
            if fingerprint in fingerprints:
                stop = StopReason.OSCILLATION
                self.warnings.append(
                    "the passes keep undoing each other; stopped (changing the model in the "
                    f"last round: {', '.join(changers)})"
                )
                break
            fingerprints.add(fingerprint)
            worklist.revisit(changed_nodes)
            if iteration == self.options.max_iterations - 1:
                stop = StopReason.ITERATION_LIMIT
                self.warnings.append(
                    f"stopped after {self.options.max_iterations} rounds of passes and rules "
                    f"(still changing the model in the last round: {', '.join(changers)})"
                )
        return Trace(
            tuple(self.entries),
            tuple(self.skips),
            stop,
            tuple(self.warnings),
            self.newer_opset_matches,
        )

    def _match_newer_opset(self) -> tuple[_trace.NewerOpsetMatch, ...]:
        """The matches of the rules skipped so far for needing a newer opset."""
        skipped = {s.rule for s in self.skips if _trace.newer_opset(s.reason) is not None}
        rules = [rule for rule in self.manager.rules if rule.name in skipped]
        if not rules:
            return ()
        found = match_compiled(rules, self.model, self.matcher)
        return tuple(_trace.NewerOpsetMatch(f.rule, f.graph, f.nodes) for f in found)

    def _apply_repeat_rules(self) -> bool:
        """`match repeat ... rewrite loop` rules roll their chains; True when one did.

        They run once, when the local rules first saturate, before the built-in passes.
        """
        rules = [
            rule
            for rule in self.manager.ruleset.rules
            if rule.pattern.repeat is not None and rule.name not in self.options.exclude_rules
        ]
        if not rules:
            return False
        block_rules = self.manager.block_rules
        if block_rules is None:
            for rule in rules:
                reason = "this run applies no `match repeat` rules (no block-rule applier)"
                self.skips.append(SkipEntry(rule.name, rule.location, reason))
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
        if result.entries:
            self.steps += 1
        self.entries.extend(dataclasses.replace(e, step=self.steps) for e in result.entries)
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
        """The passes this run applies: its pipeline, then the ones rule files declare."""
        declared: list[tuple[PassDefinition[Any], object]] = []
        for use in pipeline(self.options.passes, self.manager.ruleset.passes):
            where = f"{use.span}: " if use.span.line else ""
            definition = self.manager.passes.get(use.name)
            if definition is None:
                raise RewriteError(
                    f"{where}pass `{use.name}` is not available in this run "
                    f"(available: {', '.join(sorted(self.manager.passes))})"
                )
            try:
                declared.append((definition, definition.make_options(dict(use.options))))
            except ValueError as exc:
                raise RewriteError(f"{where}{exc}") from exc
        return declared

    def _drain(self, worklist: Worklist, index: RuleIndex, budget: int) -> StopReason:
        # Seconds per rule, keyed by its load order: the loop adds to it on every attempt, so
        # the rules are named once, at the end.
        match_time: dict[int, float] = collections.defaultdict(float)
        try:
            return self._drain_timed(worklist, index, budget, match_time)
        finally:
            names = {rule.order: rule.name for rule in self.manager.rules}
            for order, seconds in match_time.items():
                self.timings[f"match {names[order]}"] += seconds

    def _drain_timed(
        self,
        worklist: Worklist,
        index: RuleIndex,
        budget: int,
        match_time: dict[int, float],
    ) -> StopReason:
        matcher = self.matcher
        progress = self.options.progress
        replay_limit = self.options.replay_limit
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
                match_time[rule.order] += perf_counter() - t0
                if not isinstance(result, Match):
                    continue
                if self._excluded(result):
                    continue
                if replay_limit is not None and self.applied >= replay_limit:
                    return StopReason.REPLAY_LIMIT
                if self._replayed_enough():
                    return StopReason.REPLAY_LIMIT
                if self._apply(result, worklist, index):
                    if self.applied >= budget:
                        self._warn_budget(budget)
                        return StopReason.BUDGET
                    break
        if progress is not None:
            progress(self.applied, 0)
        return StopReason.SATURATED

    def _excluded(self, match: Match) -> bool:
        """True when the caller excluded this rule at this anchor (recorded once as a skip)."""
        excluded = self.options.excluded_sites
        if not excluded:
            return False
        site = (match.rule.name, _trace.site_of(match.anchor))
        reason = excluded.get(site)
        if reason is None:
            return False
        if site not in self.excluded_seen:
            self.excluded_seen.add(site)
            self.skips.append(SkipEntry(match.rule.name, match.rule.location, reason, site[1]))
        return True

    def _apply(self, match: Match, worklist: Worklist, index: RuleIndex) -> bool:
        rule = match.rule
        t0 = time.perf_counter()
        before: tuple[_trace.SnapshotNode, ...] = ()
        if self.options.record_subgraphs:
            before = _trace.snapshot([n for n in match.nodes if n is not None], "matched")
        try:
            applied = self.builder.apply(match)
        except RewriteRejectedError as exc:
            self.skips.append(
                SkipEntry(rule.name, rule.location, _skip_reason(exc), _site_label(match))
            )
            return False
        finally:
            self.timings[f"rewrite {rule.name}"] += time.perf_counter() - t0
        self.applied += 1
        self.steps += 1
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
                matched_ops=_trace.op_types(applied.matched),
                created_ops=_trace.op_types(applied.created),
                approximate=str(rule.rule.approximate or ""),
                step=self.steps,
                assumed=() if self.options.exact else rule.rule.assumes,
            )
        )
        worklist.revisit([*applied.created, *applied.neighbours, *applied.lost_uses])
        return True

    def _replayed_enough(self) -> bool:
        """True when a replay of a prefix (`RunOptions.replay_steps`) has taken its steps."""
        limit = self.options.replay_steps
        return limit is not None and self.steps >= limit

    def _record_pass(self, result: PassResult) -> None:
        """One trace entry per graph the pass changed, naming what it removed and added.

        The pass's run is one step: its entries share the step number.
        """
        self.steps += 1
        for change in result.changes:
            self.entries.append(
                TraceEntry(
                    result.name,
                    "built-in pass",
                    change.graph,
                    change.removed,
                    change.created,
                    "pass",
                    step=self.steps,
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
                    result.name,
                    "built-in pass",
                    graph,
                    (f"{result.count} change(s)",),
                    (),
                    "pass",
                    step=self.steps,
                )
            )

    def _pass_rolled_back(self, name: str, problem: str) -> None:
        """A pass whose changes broke the model was undone: say so, like a rolled-back rule."""
        reason = f"rolled back: {_trace.one_line(problem)}"
        self.skips.append(SkipEntry(name, "built-in pass", reason))
        self.warnings.append(f"pass `{name}` was undone: {_trace.one_line(problem)}")

    def _warn_budget(self, budget: int) -> None:
        counts = collections.Counter(self.recent)
        busiest = ", ".join(f"`{name}` ({n}x)" for name, n in counts.most_common(4))
        self.warnings.append(
            f"stopped after {budget} rewrites (the budget); the rules that kept firing: {busiest}"
        )


def pipeline(
    run_passes: Sequence[rules.PassUse], declared: Sequence[rules.PassUse]
) -> list[rules.PassUse]:
    """Passes in order: `run_passes`, then the `declared` ones not among them.

    How a run's pipeline and rule files' `pass` declarations combine: a declared pass that
    `run_passes` already has keeps its place and takes the declared options; a pass declared
    twice keeps the last declaration.
    """
    order: dict[str, rules.PassUse] = {use.name: use for use in run_passes}
    for use in declared:
        order[use.name] = use
    return list(order.values())


def _site_label(match: Match) -> str:
    """The anchor node, and its graph when that is not the main graph."""
    label = _trace.node_label(match.anchor)
    graph = match.graph
    if graph.owner is None:
        return label
    return f"{label} in {graph.name or _trace.graph_label(graph)}"
