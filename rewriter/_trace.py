"""The rewrite trace: what fired where, what was skipped and why, and why the run stopped."""

from __future__ import annotations

import dataclasses
import enum
from collections import Counter
from collections.abc import Sequence

import ir


class StopReason(enum.Enum):
    """Why the fixed-point loop stopped."""

    SATURATED = "saturated"
    ITERATION_LIMIT = "iteration limit"
    BUDGET = "rewrite budget"
    OSCILLATION = "oscillation"
    REPLAY_LIMIT = "replay limit"


@dataclasses.dataclass(frozen=True, slots=True)
class SnapshotNode:
    """A node as it was when a rewrite applied (for pictures of before/after).

    `role` is "matched" (replaced by the rule), "created" (made by the rule) or "context"
    (a neighbour, drawn greyed).
    """

    name: str
    op: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    role: str


@dataclasses.dataclass(frozen=True, slots=True)
class TraceEntry:
    """One applied rewrite (or one change made by a built-in pass).

    `before` / `after` hold the matched subgraph and its replacement with their neighbours,
    recorded only when the run asks for them (`RewriteOptions.record_subgraphs`).
    """

    rule: str
    location: str
    graph: str
    matched: tuple[str, ...]
    created: tuple[str, ...]
    kind: str = "rule"
    before: tuple[SnapshotNode, ...] = ()
    after: tuple[SnapshotNode, ...] = ()

    def describe(self) -> str:
        """`rule (file:line) in graph: a, b -> c, d`."""
        matched = ", ".join(self.matched) or "-"
        created = ", ".join(self.created) or "(removed)"
        return f"{self.rule} ({self.location}) in {self.graph or 'main'}: {matched} -> {created}"


@dataclasses.dataclass(frozen=True, slots=True)
class SkipEntry:
    """A rule that was not applied: unmet requirement, unavailable op, or a rolled-back rewrite."""

    rule: str
    location: str
    reason: str
    node: str = ""


@dataclasses.dataclass(frozen=True, slots=True)
class Trace:
    """Everything a run did, in order."""

    entries: tuple[TraceEntry, ...]
    skips: tuple[SkipEntry, ...]
    stop_reason: StopReason
    warnings: tuple[str, ...] = ()

    def followed_by(self, later: Trace) -> Trace:
        """This trace, then `later` (its stop reason and warnings added)."""
        return Trace(
            self.entries + later.entries,
            self.skips + later.skips,
            later.stop_reason,
            self.warnings + later.warnings,
        )

    @staticmethod
    def conversion(source: int, target: int) -> Trace:
        """A trace holding one opset conversion."""
        entry = TraceEntry(
            "convert_version",
            "onnx version converter",
            "",
            (f"opset {source}",),
            (f"opset {target}",),
            "convert",
        )
        return Trace((entry,), (), StopReason.SATURATED)

    def counts(self) -> Counter[str]:
        """How many times each rule (or pass) fired."""
        return Counter(e.rule for e in self.entries)

    def explain(self) -> str:
        """A readable report: rules grouped with counts, then every application in order."""
        lines = []
        counts = self.counts()
        if not counts:
            lines.append("no rule fired")
        else:
            lines.append("rules applied:")
            locations = {e.rule: e.location for e in self.entries}
            width = max(len(name) for name in counts)
            for name, count in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
                lines.append(f"  {name:<{width}}  {count:>5}x  {locations[name]}")
        if self.skips:
            lines.append("skipped:")
            seen: set[tuple[str, str]] = set()
            for skip in self.skips:
                key = (skip.rule, skip.reason)
                if key in seen:
                    continue
                seen.add(key)
                where = f" at {skip.node}" if skip.node else ""
                lines.append(f"  {skip.rule} ({skip.location}){where}: {skip.reason}")
        if self.entries:
            lines.append("details:")
            for i, entry in enumerate(self.entries, 1):
                lines.append(f"  {i:>4}. {entry.describe()}")
        lines.append(f"stopped: {self.stop_reason.value}")
        lines.extend(f"warning: {w}" for w in self.warnings)
        return "\n".join(lines)

    def to_json(self) -> dict[str, object]:
        """A JSON-ready dict of the trace."""
        return {
            "applied": [dataclasses.asdict(e) for e in self.entries],
            "skipped": [dataclasses.asdict(s) for s in self.skips],
            "stop_reason": self.stop_reason.value,
            "warnings": list(self.warnings),
            "counts": dict(self.counts()),
        }


def node_label(node: ir.Node) -> str:
    """How a node is named in traces: its name, or `<op>` when it has none."""
    return node.name or f"<{node.op_type}>"


def op_histogram(model: ir.Model) -> dict[str, int]:
    """Node counts by op type over the main graph and its subgraphs (domain-qualified)."""
    counts: Counter[str] = Counter()
    for node in model.graph.all_nodes():
        counts[f"{node.domain}.{node.op_type}" if node.domain else node.op_type] += 1
    return dict(sorted(counts.items()))


def count_nodes(model: ir.Model) -> int:
    """Total nodes in the main graph and its subgraphs."""
    return sum(1 for _ in model.graph.all_nodes())


_CONTEXT_LIMIT = 8


def snapshot(nodes: Sequence[ir.Node], role: str) -> tuple[SnapshotNode, ...]:
    """`nodes` (with `role`) plus up to a few neighbours each side (role "context")."""
    chosen = dict.fromkeys(nodes)
    context: dict[ir.Node, None] = {}
    for node in nodes:
        for value in node.inputs:
            producer = value.producer() if value is not None else None
            if producer is not None and producer not in chosen:
                context[producer] = None
        for out in node.outputs:
            for user in out.users():
                if user not in chosen:
                    context[user] = None
    picked = list(context)[:_CONTEXT_LIMIT]
    return tuple(_snap(n, role) for n in chosen) + tuple(_snap(n, "context") for n in picked)


def snapshot_after(
    created: Sequence[ir.Node], neighbours: Sequence[ir.Node]
) -> tuple[SnapshotNode, ...]:
    """The replacement: created nodes with neighbours, or (for `y = x`) the rewired users."""
    if created:
        return snapshot(created, "created")
    return tuple(_snap(n, "context") for n in list(neighbours)[:_CONTEXT_LIMIT])


def _snap(node: ir.Node, role: str) -> SnapshotNode:
    return SnapshotNode(
        node_label(node),
        f"{node.domain}.{node.op_type}" if node.domain else node.op_type,
        tuple(v.name if v is not None else "" for v in node.inputs),
        tuple(v.name for v in node.outputs),
        role,
    )


def labels(nodes: Sequence[ir.Node]) -> tuple[str, ...]:
    """Trace labels of several nodes."""
    return tuple(node_label(n) for n in nodes)
