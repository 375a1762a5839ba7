"""The one-line summary of a rewrite run: what changed, in the user's words.

`685 -> 320 nodes: fused 13 LayerNormalization, 12 Gelu; folded 52 BatchNormalization;
40 other rewrites, 112 cleanups; built-in passes: fold_constants 37; wrote out.onnx`
"""

from __future__ import annotations

import dataclasses
import logging
from collections import Counter
from collections.abc import Iterable, Sequence

import ir
from rewriter import rules as ir_rules
from rewriter.api import RewriteResult
from rewriter.engine import KINDS, StopReason, TraceEntry, find_matches, rewrite_kind

logger = logging.getLogger(__name__)

# How many op types a category lists before "and N more".
_SHOWN = 3
_STOPPED = {
    StopReason.BUDGET: "stopped early: the rewrite budget was spent (see the warning)",
    StopReason.ITERATION_LIMIT: "stopped early: the rules and passes were still changing the model",
    StopReason.OSCILLATION: "stopped early: rules kept undoing each other (see the warning)",
    StopReason.REPLAY_LIMIT: "stopped at the replay limit",
}
_NO_WORK = frozenset({"Constant", "Identity"})


def summary_line(result: RewriteResult, destination: str, hint: str = "") -> str:
    """`before -> after nodes: what changed; wrote destination`, then a hint if any."""
    parts = _changes(result.trace.entries)
    assumed = _assumed(result.trace.entries)
    if assumed:
        parts.append(assumed)
    stopped = _STOPPED.get(result.trace.stop_reason)
    if stopped:
        parts.append(stopped)
    parts.extend(_speed(result))
    changes = "; ".join(parts) if parts else "nothing to rewrite"
    line = f"{result.nodes_before} -> {result.nodes_after} nodes: {changes}; wrote {destination}"
    return f"{line}\n{hint}" if hint else line


def opset_hint(result: RewriteResult, ruleset: ir_rules.RuleSet) -> str:
    """What `--target-opset N` would add: fusions the model's opset ruled out that match.

    The rules skipped for the opset are matched (matching does not look at `requires`) on the
    input model, as a run at opset N first sees it (the run matched them there:
    `RunOptions.match_newer_opset`), and on the rewritten one, where folding has lined
    patterns up; each as a run would try them (by priority, then file order, each node taken
    by one match), and per op the larger count is said: `with --target-opset 23, rules would
    also fuse 13 LayerNormalization (17 suffices), 6 Gelu (20 suffices), 6 Attention`. A
    fusion that needs another first (an affine part absorbed into a fused
    LayerNormalization) is not counted.
    """
    try:
        return _opset_hint(result, ruleset)
    except Exception:  # a hint must never fail a run that succeeded: say nothing instead
        logger.debug("no opset hint", exc_info=True)
        return ""


def _opset_hint(result: RewriteResult, ruleset: ir_rules.RuleSet) -> str:
    needs = result.trace.newer_opset_rules()
    candidates = [rule for rule in ruleset.rules if rule.name in needs and _fuses(rule)]
    if not candidates:
        return ""
    subset = dataclasses.replace(ruleset, rules=tuple(candidates), passes=())
    # The rewritten model's facts are those the run kept up to date.
    on_input = [(m.rule, m.graph, m.nodes) for m in result.trace.newer_opset_matches]
    on_output = [
        (m.rule, m.graph, m.nodes) for m in find_matches(subset, result.model, infer_shapes=False)
    ]
    counts: dict[tuple[int, str], int] = {}
    for matches in (on_input, on_output):
        for key, count in _fusions(subset, needs, matches).items():
            counts[key] = max(count, counts.get(key, 0))
    if not counts:
        return ""
    target = max(opset for opset, _ in counts)
    by_opset: dict[int, Counter[str]] = {}
    for (opset, op), count in counts.items():
        by_opset.setdefault(opset, Counter())[op] += count
    parts = [
        _ops(ops.elements()) + ("" if opset == target else f" ({opset} suffices)")
        for opset, ops in sorted(by_opset.items())
    ]
    return f"with --target-opset {target}, rules would also fuse {', '.join(parts)}"


def _fusions(
    rules: ir_rules.RuleSet,
    needs: dict[str, int],
    matches: Sequence[tuple[str, str, tuple[str, ...]]],
) -> Counter[tuple[int, str]]:
    """(opset needed, op fused into) -> how many, of non-overlapping `matches` of `rules`.

    `matches` are (rule, graph, nodes); those of rules not in `rules` and in subgraphs are
    left out.
    """
    order = {rule.name: (-rule.priority, index) for index, rule in enumerate(rules.rules)}
    by_name = {rule.name: rule for rule in rules.rules}
    taken: set[str] = set()
    found: Counter[tuple[int, str]] = Counter()
    for rule, graph, nodes in sorted(
        (m for m in matches if m[0] in order), key=lambda m: order[m[0]]
    ):
        if graph or taken.intersection(nodes):
            continue
        taken.update(nodes)
        for op in _fused_ops(by_name[rule]):
            found[(needs[rule], op)] += 1
    return found


def _fuses(rule: ir_rules.Rule) -> bool:
    return rewrite_kind(_matched_ops(rule), _created_ops(rule)) == "fusion"


def _fused_ops(rule: ir_rules.Rule) -> list[str]:
    """The ops the rule's rewrite creates that its match does not have (composite ones first)."""
    matched = set(_matched_ops(rule))
    new = [op for op in _created_ops(rule) if op not in matched and op not in _NO_WORK]
    return [op for op in new if ir.schemas.is_composite(op)] or new


def _matched_ops(rule: ir_rules.Rule) -> list[str]:
    pattern = rule.pattern
    nodes = pattern.repeat.body if pattern.repeat is not None else pattern.nodes
    return [node.ops[0].op_type for node in nodes if node.ops]


def _created_ops(rule: ir_rules.Rule) -> list[str]:
    if not isinstance(rule.rewrite, ir_rules.Rewrite):
        return []
    # A copy of a matched node (`...n`) creates nothing the match did not have.
    return [
        stmt.op.op_type
        for stmt in rule.rewrite.stmts
        if isinstance(stmt, ir_rules.NewNode) and isinstance(stmt.op, ir_rules.OpId)
    ]


def _changes(entries: Sequence[TraceEntry]) -> list[str]:
    by_kind: dict[str, list[TraceEntry]] = {kind: [] for kind in KINDS}
    passes: Counter[str] = Counter()
    approximated: list[str] = []
    for entry in entries:
        if entry.kind == "pass":
            passes[entry.rule] += max(len(entry.matched), 1)
        elif entry.kind == "rule":
            kind = rewrite_kind(entry.matched_ops, entry.created_ops)
            if entry.approximate and kind != "quantization":
                # Lower precision and other approximations: named by what was approximated,
                # whatever shape the replacement has.
                approximated.extend(op for op in entry.matched_ops if op not in _NO_WORK)
            else:
                by_kind[kind].append(entry)
    parts = []
    if approximated:
        parts.append(f"approximated {_ops(approximated)}")
    quantized = _ops(
        op for e in by_kind["quantization"] for op in e.matched_ops if op not in _NO_WORK
    )
    if quantized:
        parts.append(f"quantized {quantized}")
    fused = _ops(op for e in by_kind["fusion"] for op in _new_ops(e))
    if fused:
        parts.append(f"fused {fused}")
    folded = _ops(op for e in by_kind["folding"] for op in _gone_ops(e))
    if folded:
        parts.append(f"folded {folded}")
    decomposed = _ops(op for e in by_kind["decomposition"] for op in _gone_ops(e))
    if decomposed:
        parts.append(f"decomposed {decomposed}")
    counts = [
        _plural(len(by_kind["rewrite"]), "other rewrite"),
        _plural(len(by_kind["cleanup"]), "cleanup"),
    ]
    counts = [c for c in counts if not c.startswith("0 ")]
    if counts:
        parts.append(", ".join(counts))
    if passes:
        listed = ", ".join(f"{name} {count}" for name, count in passes.items())
        parts.append(f"built-in passes: {listed}")
    return parts


def _speed(result: RewriteResult) -> list[str]:
    """`0.62x the float model's latency`, and what the speed check kept float."""
    speed = result.speed
    if speed is None:
        return []
    from rewriter.quantize import kept_float_reason  # loaded by the run that measured

    parts = [f"{speed.ratio:.2f}x the float model's latency"]
    for group in speed.groups:
        if group.kept_float:
            layers = _plural(len(group.layers), "layer")
            parts.append(f"{kept_float_reason(group.rule, group.slower_by)} ({layers})")
    return parts


_ASSUMPTIONS = {"finite": "finite inputs", "nonempty": "non-empty tensors"}


def _assumed(entries: Sequence[TraceEntry]) -> str:
    """`12 rewrites assume non-empty tensors (--exact refuses them)`, or ''."""
    counts = Counter(a for e in entries for a in e.assumed)
    if not counts:
        return ""
    rewrites = len([e for e in entries if e.assumed])
    what = " and ".join(_ASSUMPTIONS[a] for a in sorted(counts))
    verb = "assumes" if rewrites == 1 else "assume"
    return f"{_plural(rewrites, 'rewrite')} {verb} {what} (--exact refuses them)"


def _new_ops(entry: TraceEntry) -> list[str]:
    """The ops a rewrite created whose type it did not match (what it fused into).

    When some are ops onnx defines as functions of others (RotaryEmbedding), only those:
    the shape plumbing around them is not what was fused.
    """
    matched = set(entry.matched_ops)
    new = [op for op in entry.created_ops if op not in matched and op not in _NO_WORK]
    return [op for op in new if ir.schemas.is_composite(op)] or new


def _gone_ops(entry: TraceEntry) -> list[str]:
    """The matched ops that no created op of the same type replaced."""
    left = Counter(entry.created_ops)
    gone = []
    for op in entry.matched_ops:
        if op in _NO_WORK:
            continue
        if left[op]:
            left[op] -= 1
        else:
            gone.append(op)
    return gone


def _ops(ops: Iterable[str]) -> str:
    """`13 LayerNormalization, 12 Gelu, 6 Attention and 2 more op types`."""
    counts = Counter(ops).most_common()
    if not counts:
        return ""
    shown = ", ".join(f"{n} {op}" for op, n in counts[:_SHOWN])
    rest = len(counts) - _SHOWN
    return shown + (f" and {rest} more op types" if rest > 0 else "")


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")
