"""Finding chains of repeated blocks in a graph by canonical structural hashing.

The graph's non-`Constant` nodes are put in topological order and each gets an interned local
signature (op, attributes, kinds of inputs; see `_signature`). Exporters write each layer
contiguously, so repeated layers show up as *tandem repeats* of this sequence:

1. Candidate periods are the most common distances between consecutive occurrences of one
   signature (no pairwise comparison of subgraphs).
2. For each period `p`, position `i` is *periodic* when nodes `i` and `i + p` have the same
   signature and are wired alike: each input comes from the producer `p` positions earlier,
   or is the very same value (something every block reads), or a constant of one kind.
   Maximal runs of periodic positions are candidate chains.
3. Within a run, block boundaries (phases) are pre-filtered in O(run) by counting, at each
   cut, the values produced in the block before it and read in the block after it (a clean
   cut threads between 1 and `max_carried` values), then validated by `analyze_chain`. A
   block the validation blames is dropped (the chain is cut there) and the rest retried.
4. A chain is then extended backwards while the block before it matches the template by a
   walk from the chain's input (`_extend`): exporters often merge the first layer's shape
   computations with the code before the stack.

The chain covering the most nodes wins (then more blocks, fewer carried values, earlier).
What this cannot find: blocks whose nodes the topological order interleaves with unrelated
nodes, repeats inside nested graphs or functions, blocks holding subgraphs, and stacks whose
layers differ in any attribute (they roll only if a longer period makes the blocks equal).
"""

from __future__ import annotations

import collections
import dataclasses
import logging

import ir
from rewriter.loops._chain import ChainPlan, Refusal, analyze_chain
from rewriter.loops._extend import extend_backward
from rewriter.loops._options import DetectOptions
from rewriter.loops._signature import SignatureTable, StructureCache, is_constant_node

logger = logging.getLogger(__name__)

_MAX_PERIODS = 24
_MAX_TRUNCATIONS = 6


@dataclasses.dataclass(frozen=True, slots=True)
class Detection:
    """The best chain found (or None) and why the other candidates were refused."""

    plan: ChainPlan | None
    refusals: tuple[str, ...]


class _Sequence:
    """The graph's non-Constant nodes in topological order, with positions and signatures."""

    def __init__(self, graph: ir.Graph, skip_domains: tuple[str, ...] = ()) -> None:
        self.cache = StructureCache()
        table = SignatureTable(self.cache)
        self.graph = graph
        self.nodes = [n for n in ir.topological_order(graph) if not is_constant_node(n)]
        self.pos = {node: i for i, node in enumerate(self.nodes)}
        self.sigs = [
            -1 - i if node.domain in skip_domains else table.signature(node)
            for i, node in enumerate(self.nodes)
        ]

    def __len__(self) -> int:
        return len(self.nodes)

    def producer_position(self, value: ir.Value) -> int | None:
        producer = value.producer()
        return None if producer is None else self.pos.get(producer)


def candidate_periods(sigs: list[int], options: DetectOptions) -> list[int]:
    """The most common distances between consecutive occurrences of a signature."""
    last: dict[int, int] = {}
    counts: collections.Counter[int] = collections.Counter()
    for i, sig in enumerate(sigs):
        previous = last.get(sig)
        if previous is not None:
            counts[i - previous] += 1
        last[sig] = i
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    periods = [
        distance
        for distance, count in ranked
        if distance >= options.min_block_nodes and count >= options.min_repeats - 1
    ]
    return periods[:_MAX_PERIODS]


def _wired_alike(seq: _Sequence, i: int, p: int) -> bool:
    a, b = seq.nodes[i], seq.nodes[i + p]
    for va, vb in zip(a.inputs, b.inputs, strict=True):
        if va is vb:
            continue
        if va is None or vb is None:
            return False
        cache = seq.cache
        if cache.constant_kind(va) is not None and cache.constant_kind(vb) is not None:
            continue
        pa, pb = seq.producer_position(va), seq.producer_position(vb)
        if pa is None or pb is None or pb != pa + p or va.index != vb.index:
            return False
    return True


def periodic_runs(seq: _Sequence, p: int) -> list[tuple[int, int]]:
    """Maximal runs [a, b) of positions i where node i + p repeats node i."""
    runs: list[tuple[int, int]] = []
    start: int | None = None
    limit = len(seq) - p
    for i in range(limit + 1):
        ok = i < limit and seq.sigs[i] == seq.sigs[i + p] and _wired_alike(seq, i, p)
        if ok and start is None:
            start = i
        elif not ok and start is not None:
            runs.append((start, i))
            start = None
    return runs


def _crossings(seq: _Sequence, p: int, lo: int, end: int) -> list[int]:
    """For each cut c in [lo, end]: values made in [c-p, c) and read in [c, c+p)."""
    diff = [0] * (end - lo + 2)
    for j in range(lo, end):
        for value in seq.nodes[j].outputs:
            uses = sorted(
                {seq.pos[u] for u in value.users() if u in seq.pos and j < seq.pos[u] < end}
            )
            covered_to = j  # cuts up to here are already counted for this value
            for u in uses:
                first = max(u - p + 1, j + 1, covered_to + 1)
                last = min(u, j + p)
                if first > last:
                    continue
                diff[first - lo] += 1
                diff[last - lo + 1] -= 1
                covered_to = last
    counts = []
    running = 0
    for delta in diff[:-1]:
        running += delta
        counts.append(running)
    return counts


def _phases(seq: _Sequence, p: int, run: tuple[int, int], options: DetectOptions) -> list[int]:
    """Block starts worth validating for one run, most blocks first."""
    a, b = run
    lo = max(0, a - p + 1)
    end = min(b + p, len(seq))
    crossing = _crossings(seq, p, lo, end)
    phases = []
    for s in range(lo, min(a + p, end)):
        count = (end - s) // p
        if count < options.min_repeats:
            continue
        cuts = (crossing[s + k * p - lo] for k in range(1, count))
        if all(1 <= c <= options.max_carried for c in cuts):
            phases.append(s)
    phases.sort(key=lambda s: (-((end - s) // p), s))
    return phases


def _blocks_at(seq: _Sequence, p: int, s: int, end: int) -> list[tuple[ir.Node, ...]]:
    count = (end - s) // p
    return [tuple(seq.nodes[s + k * p : s + (k + 1) * p]) for k in range(count)]


def best_subchain(
    seq: _Sequence,
    blocks: list[tuple[ir.Node, ...]],
    options: DetectOptions,
    refusals: list[str],
) -> ChainPlan | None:
    """Validate `blocks`, cutting the chain at blocks the validation blames."""
    pending = [blocks]
    for _ in range(_MAX_TRUNCATIONS):
        if not pending:
            return None
        pending.sort(key=len, reverse=True)
        current = pending.pop(0)
        if len(current) < max(options.min_repeats, 2):
            continue
        result = analyze_chain(seq.graph, current, max_carried=options.max_carried, cache=seq.cache)
        if isinstance(result, ChainPlan):
            return result
        refusals.append(result.reason)
        pending.extend(_cut(current, result))
    return None


def _cut(blocks: list[tuple[ir.Node, ...]], refusal: Refusal) -> list[list[tuple[ir.Node, ...]]]:
    k = refusal.block
    if k is None:
        return []
    return [part for part in (blocks[:k], blocks[k + 1 :]) if part]


def _score(plan: ChainPlan, seq: _Sequence) -> tuple[int, int, int, int]:
    first = seq.pos.get(plan.blocks[0][0], 0)
    return (plan.length * plan.block_size, plan.length, -len(plan.carried), -first)


@dataclasses.dataclass(frozen=True, slots=True)
class _Candidate:
    period: int
    start: int
    end: int

    @property
    def count(self) -> int:
        return (self.end - self.start) // self.period

    def order(self) -> tuple[int, int, int]:
        return (-self.count * self.period, -self.count, self.start)


def _candidates(seq: _Sequence, options: DetectOptions) -> list[_Candidate]:
    found: dict[_Candidate, None] = {}
    for p in candidate_periods(seq.sigs, options):
        for run in periodic_runs(seq, p):
            end = min(run[1] + p, len(seq))
            for s in _phases(seq, p, run, options):
                found[_Candidate(p, s, end)] = None
    return sorted(found, key=_Candidate.order)


def detect_chain(graph: ir.Graph, options: DetectOptions) -> Detection:
    """The chain of repeated blocks covering the most nodes of `graph` (not nested graphs).

    Candidates (period, first block) are tried from the largest possible coverage down; the
    search stops when no remaining candidate can beat the best chain found, even extended.
    """
    seq = _Sequence(graph, options.skip_domains)
    refusals: list[str] = []
    best: ChainPlan | None = None
    best_score: tuple[int, int, int, int] | None = None
    for candidate in _candidates(seq, options):
        p = candidate.period
        # Extension rarely adds more than one block: stop when even that cannot win.
        if best_score is not None and (candidate.count + 1) * p <= best_score[0]:
            break
        blocks = _blocks_at(seq, p, candidate.start, candidate.end)
        plan = best_subchain(seq, blocks, options, refusals)
        if plan is None:
            continue
        plan = extend_backward(plan, options.max_carried, seq.cache)
        score = _score(plan, seq)
        if best_score is None or score > best_score:
            best, best_score = plan, score
    if best is not None:
        logger.debug("best chain: %d blocks of %d nodes", best.length, best.block_size)
    return Detection(best, tuple(dict.fromkeys(refusals)))
