"""Explicit loop rules: `match repeat (n >= K) from h to out { ... } rewrite loop`.

Semantics (DSL.md leaves them to loop rolling):

* The body lines describe one block. They are compiled into a normal matching plan anchored
  at the line defining `out` and matched by the engine's `Matcher` (so attributes, literals,
  commutative operands, `where` conditions and the outside-uses rule work as in any rule;
  only `out` may be read outside a block). `where` lines are checked for each block; the
  count variable `n` is not bound in `where`.
* Blocks form a chain when a block's `h` is the previous block's `out`. Each maximal chain
  (blocks taken in topological order of their anchors, a node in at most one block) whose
  length `n` satisfies the count condition is rolled, all of it (`n == K` rolls only chains
  of exactly K blocks). When its blocks cannot be rolled together (one block's stride or
  weight shape differs), the longest contiguous run that can, and whose length satisfies the
  count, is rolled instead (earliest first); the blocks left out are named in a skip entry
  and may form a chain of their own.
* The blocks are then validated and rolled exactly like the blocks `roll_loops` finds:
  pattern variables bound to constants are stacked when they differ and shared when equal;
  every other value read from outside must be the same value in every block; `out` must be
  the only value threaded from a block to the next.

Rules apply to the main graph and its nested graphs (not to function bodies, which cannot
hold the stacked weights as initializers).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import ir
from rewriter import rules
from rewriter._errors import RuleCheckError
from rewriter.engine import (
    SOURCE_TAG,
    CompiledRule,
    Match,
    Matcher,
    SkipEntry,
    SnapshotNode,
    TraceEntry,
    compile_rule,
    labels,
    node_label,
    op_types,
    snapshot,
)
from rewriter.loops._chain import ChainPlan, analyze_chain
from rewriter.loops._roll import roll_chain, stacking_refusal

Applicability = Callable[[CompiledRule], str | None]


@dataclasses.dataclass(frozen=True, slots=True)
class RepeatResult:
    """What the repeat rules did: applied rolls and skipped rules or chains (with reasons)."""

    entries: tuple[TraceEntry, ...]
    skips: tuple[SkipEntry, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class _Block:
    """One matched block: its nodes (by match line), the value it reads and the one it makes."""

    nodes: tuple[ir.Node, ...]
    head: ir.Value
    out: ir.Value


def _defines(line: rules.NodePattern, name: str) -> bool:
    return name in line.output_names


def compile_block_rule(rule: rules.Rule, order: int) -> CompiledRule | str:
    """A matching plan for one block, anchored at the line defining `out` (or why not)."""
    repeat = rule.pattern.repeat
    assert repeat is not None, "only repeat rules are compiled here"
    defining = [line for line in repeat.body if _defines(line, repeat.to_var)]
    if len(defining) != 1:
        return f"`{repeat.to_var}` must be defined by exactly one line of the block"
    others = tuple(line for line in repeat.body if line is not defining[0])
    body = (*others, defining[0])
    reordered = dataclasses.replace(
        rule,
        pattern=dataclasses.replace(rule.pattern, repeat=dataclasses.replace(repeat, body=body)),
    )
    try:
        compiled = compile_rule(reordered, order)
    except RuleCheckError as exc:
        return f"cannot compile the block: {exc}"
    if compiled.anchor != len(body) - 1:
        return f"another line of the block reads `{repeat.to_var}`"
    # The block's result is read by the next block or after the chain: it is "redefined".
    return dataclasses.replace(compiled, redefined=frozenset({repeat.to_var}))


def count_holds(repeat: rules.RepeatPattern, n: int) -> bool:
    """Whether a chain of `n` blocks satisfies `repeat (n OP K)`."""
    k = repeat.count
    return {
        ">=": n >= k,
        ">": n > k,
        "==": n == k,
        "<=": n <= k,
        "<": n < k,
        "!=": n != k,
    }.get(repeat.count_op, False)


def _find_blocks(graph: ir.Graph, compiled: CompiledRule, matcher: Matcher) -> list[_Block]:
    repeat = compiled.rule.pattern.repeat
    assert repeat is not None, "only repeat rules are matched here"
    anchors = {(op.domain, op.op_type) for op in compiled.anchor_ops}
    claimed: dict[ir.Node, None] = {}
    blocks: list[_Block] = []
    for node in ir.topological_order(graph):
        key = (ir.schemas.normalize_domain(node.domain), node.op_type)
        if anchors and key not in anchors:
            continue
        found = matcher.match(compiled, node)
        if not isinstance(found, Match):
            continue
        nodes = tuple(found.nodes)
        head = found.bindings.get(repeat.from_var)
        out = found.bindings.get(repeat.to_var)
        if not isinstance(head, ir.Value) or not isinstance(out, ir.Value):
            continue
        if any(n in claimed for n in nodes):
            continue
        claimed.update(dict.fromkeys(nodes))
        blocks.append(_Block(nodes, head, out))
    return blocks


def _chains(blocks: list[_Block]) -> list[list[_Block]]:
    by_head: dict[ir.Value, _Block] = {}
    for block in blocks:
        by_head.setdefault(block.head, block)
    outs = {block.out: None for block in blocks}
    chains = []
    for block in blocks:
        if block.head in outs or by_head.get(block.head) is not block:
            continue  # not the start of a chain
        chain = [block]
        seen = {block.out: None}
        follower = by_head.get(block.out)
        while follower is not None and follower.out not in seen:
            chain.append(follower)
            seen[follower.out] = None
            follower = by_head.get(follower.out)
        chains.append(chain)
    return chains


def _aligned(graph: ir.Graph, chain: list[_Block]) -> list[tuple[ir.Node, ...]]:
    """The chain's blocks with their nodes in the first block's topological order."""
    position = {node: i for i, node in enumerate(ir.topological_order(graph))}
    first = chain[0].nodes
    order = sorted(range(len(first)), key=lambda i: position[first[i]])
    return [tuple(block.nodes[i] for i in order) for block in chain]


def _plan_chain(graph: ir.Graph, chain: list[_Block]) -> ChainPlan | str:
    blocks = _aligned(graph, chain)
    plan = analyze_chain(graph, blocks)
    if not isinstance(plan, ChainPlan):
        return plan.reason
    if len(plan.carried) != 1:
        names = ", ".join(repr(s.values[0].name) for s in plan.carried)
        return f"the blocks thread {len(plan.carried)} values ({names}); the rule names one"
    slot = plan.carried[0]
    if slot.values[-1] is not chain[-1].out or slot.init is not chain[0].head:
        return "the value threaded between blocks is not the rule's `from`/`to` pair"
    return stacking_refusal(plan) or plan


def _longest_run(
    graph: ir.Graph, chain: list[_Block], repeat: rules.RepeatPattern
) -> tuple[list[_Block], ChainPlan, str] | str:
    """The longest run of the chain's blocks that rolls, with its plan.

    The whole chain first; when its blocks differ (one strided block in a stack), the longest
    contiguous run of at least two blocks whose count the rule accepts, earliest first.
    Returns (run, plan, why the whole chain did not roll or "") or the whole chain's refusal.
    """
    whole = _plan_chain(graph, chain)
    if isinstance(whole, ChainPlan):
        return chain, whole, ""
    if len(chain) > _MAX_RUN_SEARCH:
        return whole
    for length in range(len(chain) - 1, 1, -1):
        if not count_holds(repeat, length):
            continue
        for start in range(len(chain) - length + 1):
            run = chain[start : start + length]
            plan = _plan_chain(graph, run)
            if isinstance(plan, ChainPlan):
                return run, plan, whole
    return whole


# Chains longer than this are rolled whole or not at all (the search for a run that rolls
# plans O(n^2) candidate runs).
_MAX_RUN_SEARCH = 64


def _picture_of_blocks(plan: ChainPlan) -> tuple[SnapshotNode, ...]:
    """The first two blocks of a chain, as the report draws a matched subgraph.

    Two show the threading from one block to the next; all of them (12 transformer layers)
    would make a picture nobody can read.
    """
    shown = [node for block in plan.blocks[:_BLOCKS_PICTURED] for node in block]
    return snapshot(shown, "matched")


_BLOCKS_PICTURED = 2


def _apply_rule(
    model: ir.Model,
    compiled: CompiledRule,
    matcher: Matcher,
    names: ir.NameAllocator,
    record: bool = False,
) -> tuple[list[TraceEntry], list[SkipEntry]]:
    repeat = compiled.rule.pattern.repeat
    assert repeat is not None, "only repeat rules are applied here"
    entries: list[TraceEntry] = []
    skips: list[SkipEntry] = []
    for graph in list(model.graph.all_graphs()):
        rolled = True
        while rolled:
            # Rolling changes the graph: blocks are found again after each roll, so the
            # blocks a run left out can form a chain of their own.
            rolled = False
            for chain in _chains(_find_blocks(graph, compiled, matcher)):
                if len(chain) < 2 or not count_holds(repeat, len(chain)):
                    continue
                label = node_label(chain[0].nodes[-1])
                found = _longest_run(graph, chain, repeat)
                if isinstance(found, str):
                    skips.append(SkipEntry(compiled.name, compiled.location, found, label))
                    continue
                run, plan, why_not_all = found
                if why_not_all:
                    left = len(chain) - len(run)
                    skips.append(
                        SkipEntry(
                            compiled.name,
                            compiled.location,
                            f"rolled {len(run)} of {len(chain)} blocks; {left} left out: "
                            f"{why_not_all}",
                            label,
                        )
                    )
                matched = labels(plan.nodes())
                matched_ops = op_types(plan.nodes())
                before = _picture_of_blocks(plan) if record else ()
                loop = roll_chain(plan, names, tag=compiled.name)
                loop.set_metadata(SOURCE_TAG, compiled.location)
                after = snapshot([loop], "created") if record else ()
                entries.append(
                    TraceEntry(
                        compiled.name,
                        compiled.location,
                        graph.name,
                        matched,
                        (loop.name,),
                        "rule",
                        before=before,
                        after=after,
                        matched_ops=matched_ops,
                        created_ops=("Loop",),
                    )
                )
                rolled = True
                break
    return entries, skips


def apply_repeat_rules(
    model: ir.Model,
    block_rules: Sequence[rules.Rule],
    matcher: Matcher,
    names: ir.NameAllocator | None = None,
    applicability: Applicability | None = None,
    record_subgraphs: bool = False,
) -> RepeatResult:
    """Apply `repeat` rules once each, in order; returns trace entries and skips.

    Args:
        model: the model to rewrite (main graph and nested graphs).
        block_rules: rules whose match is a `repeat` block and whose rewrite is
            `rewrite loop` (other rules are ignored).
        matcher: the engine's matcher for this model.
        names: the run's name allocator (a new one when omitted).
        applicability: why a compiled rule cannot apply to this model (`requires`), or None.
        record_subgraphs: keep pictures (the first two blocks before, the Loop after) in the
            trace entries, for reports.
    """
    names = names or ir.NameAllocator(model)
    entries: list[TraceEntry] = []
    skips: list[SkipEntry] = []
    for order, rule in enumerate(block_rules):
        if rule.pattern.repeat is None or not isinstance(rule.rewrite, rules.RollLoop):
            continue
        location = rule.location
        compiled = compile_block_rule(rule, order)
        if isinstance(compiled, str):
            skips.append(SkipEntry(rule.name, location, compiled))
            continue
        reason = applicability(compiled) if applicability is not None else None
        if reason is not None:
            skips.append(SkipEntry(rule.name, location, reason))
            continue
        applied, skipped = _apply_rule(model, compiled, matcher, names, record_subgraphs)
        entries.extend(applied)
        skips.extend(skipped)
    return RepeatResult(tuple(entries), tuple(skips))
