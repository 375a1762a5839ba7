"""The rewrite trace: what fired where, what was skipped and why, and why the run stopped."""

from __future__ import annotations

import dataclasses
import enum
import re
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
    """One applied rewrite, or what one run of a built-in pass changed in one graph.

    For a rule, `matched` and `created` are the matched and the new nodes. For a pass
    (`kind` "pass"), `matched` names what it removed or replaced (nodes, and initializers as
    `%name`) and `created` what took their place: new nodes or initializers, or the node kept
    when duplicates were merged. `graph` is the graph's label (see `graph_label`); it is empty
    for changes to the whole model (an opset conversion). `anchor` tells a rule application
    apart within its graph (the anchor node's first output name, see `site_of`).

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
    anchor: str = ""
    # Op types (`domain.Op` outside the default domain) of the matched and the new nodes, in
    # order: what the rewrite did, without pictures (see `rewriter.engine.rewrite_kind`).
    matched_ops: tuple[str, ...] = ()
    created_ops: tuple[str, ...] = ()
    # The rule's `approximate` clause (`snr >= 30`) when it declares one: this rewrite
    # changed numerics on purpose, and the accuracy budget may undo it.
    approximate: str = ""
    # Which step of the run made this entry, counted from 1: one rule rewrite, one roll of
    # `match repeat` rules, or one run of a built-in pass that changed the model (its
    # entries, one per graph, share the step). What `RunOptions.replay_steps` counts; 0 for
    # what no pass manager step made (an opset conversion around the run).
    step: int = 0

    @property
    def site(self) -> tuple[str, str]:
        """(rule, anchor): what `RunOptions.excluded_sites` names to leave this rewrite out."""
        return (self.rule, self.anchor)

    # What the rule declared it assumes of the inputs (`finite`, `nonempty`) and the run did
    # not prove: the rewrite is exact only on such inputs (RewriteOptions.exact refuses it).
    assumed: tuple[str, ...] = ()

    def describe(self) -> str:
        """`rule (file:line) in graph: a, b -> c, d` (passes: long lists shortened)."""
        limit = _DESCRIBE_LIMIT if self.kind == "pass" else None
        matched = _listing(self.matched, limit) or "-"
        created = _listing(self.created, limit) or "(removed)"
        where = f" in {self.graph}" if self.graph else ""
        approximate = f" [approximate {self.approximate}]" if self.approximate else ""
        return f"{self.rule} ({self.location}){where}: {matched} -> {created}{approximate}"


_DESCRIBE_LIMIT = 8


def _listing(items: Sequence[str], limit: int | None) -> str:
    """`a, b, c` or, past `limit` items, `a, b, +N more`."""
    if limit is None or len(items) <= limit:
        return ", ".join(items)
    return ", ".join(items[:limit]) + f", +{len(items) - limit} more"


@dataclasses.dataclass(frozen=True, slots=True)
class SkipEntry:
    """A rule that was not applied: unmet requirement, unavailable op, or a rewrite not made.

    A rewrite that would have broken the model has a reason starting "rolled back"; one that
    would have changed nothing (declined) has a reason ending "nothing to do". One the caller
    excluded (`RunOptions.excluded_sites`) has the caller's reason and the anchor as `node`.
    """

    rule: str
    location: str
    reason: str
    node: str = ""


@dataclasses.dataclass(frozen=True, slots=True)
class NewerOpsetMatch:
    """A match of a rule the model's opset ruled out, on the model as the run first saw it.

    `nodes` are the matched nodes' labels (anchor last), `graph` "" for the main graph.
    """

    rule: str
    graph: str
    nodes: tuple[str, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class Trace:
    """Everything a run did, in order.

    `newer_opset_matches` are the matches of the rules the model's opset ruled out, on the
    model before any rewrite (`RunOptions.match_newer_opset`; empty unless asked).
    """

    entries: tuple[TraceEntry, ...]
    skips: tuple[SkipEntry, ...]
    stop_reason: StopReason
    warnings: tuple[str, ...] = ()
    newer_opset_matches: tuple[NewerOpsetMatch, ...] = ()

    def followed_by(self, later: Trace) -> Trace:
        """This trace, then `later` (its stop reason and warnings added).

        The newer-opset matches stay this trace's (on the earlier model) when it has any;
        `later`'s steps are numbered on from this trace's.
        """
        offset = self.steps
        moved = tuple(
            dataclasses.replace(e, step=e.step + offset) if e.step else e for e in later.entries
        )
        return Trace(
            self.entries + moved,
            self.skips + later.skips,
            later.stop_reason,
            self.warnings + later.warnings,
            self.newer_opset_matches or later.newer_opset_matches,
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

    @property
    def steps(self) -> int:
        """How many steps the run took (`TraceEntry.step`; 0 when it changed nothing)."""
        return max((e.step for e in self.entries), default=0)

    def step_entries(self, step: int) -> tuple[TraceEntry, ...]:
        """The entries step number `step` made (one for a rule, one per graph for a pass)."""
        return tuple(e for e in self.entries if e.step == step)

    def approximate_sites(self) -> tuple[tuple[str, str], ...]:
        """(rule, anchor) of every rewrite made by an `approximate` rule, in order."""
        return tuple(dict.fromkeys(e.site for e in self.entries if e.approximate))

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
        by_opset, others = _opset_skips(self.skips)
        if by_opset:
            lines.append(_opset_summary(by_opset))
        if others:
            lines.append("skipped:")
            seen: set[tuple[str, str]] = set()
            for skip in others:
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

    def newer_opset_rules(self) -> dict[str, int]:
        """Rules skipped because the model's default-domain opset is too old, and what each needs.

        The opset comes from a `requires opset >= N`, or from an op the rule emits that only
        opset N defines.
        """
        needs: dict[str, int] = {}
        for skip in self.skips:
            needed = newer_opset(skip.reason)
            if needed is not None:
                needs[skip.rule] = max(needed, needs.get(skip.rule, 0))
        return needs

    def to_json(self) -> dict[str, object]:
        """A JSON-ready dict of the trace."""
        return {
            "applied": [dataclasses.asdict(e) for e in self.entries],
            "skipped": [dataclasses.asdict(s) for s in self.skips],
            "stop_reason": self.stop_reason.value,
            "warnings": list(self.warnings),
            "counts": dict(self.counts()),
        }


# The reasons `_applicability` gives for a rule the model's opset rules out.
_REQUIRES = re.compile(r"^requires opset (?P<domain>\S+) (?P<op>[<>=]=?) (?P<version>\d+), ")
_EMITS = re.compile(r"^emits `[^`]+`, which needs opset (?P<version>\d+); ")


def _opset_skips(
    skips: tuple[SkipEntry, ...],
) -> tuple[dict[str, dict[str, None]], list[SkipEntry]]:
    """Rules skipped for the model's opset, by requirement (`opset >= 23`), and the others."""
    by_requirement: dict[str, dict[str, None]] = {}
    others = []
    for skip in skips:
        requirement = _requirement(skip.reason)
        if requirement is None:
            others.append(skip)
        else:
            by_requirement.setdefault(requirement, {})[skip.rule] = None
    return by_requirement, others


def _requirement(reason: str) -> str | None:
    found = _REQUIRES.match(reason)
    if found is not None:
        domain = found["domain"]
        shown = "opset" if domain in ("ai.onnx", "") else f"opset {domain}"
        return f"{shown} {found['op']} {found['version']}"
    found = _EMITS.match(reason)
    if found is not None:
        return f"opset >= {found['version']}"
    return None


def newer_opset(reason: str) -> int | None:
    """The default-domain opset a skip reason asks for, when it asks for a newer one."""
    found = _REQUIRES.match(reason)
    if found is not None and found["domain"] in ("ai.onnx", ""):
        version = int(found["version"])
        return {">=": version, ">": version + 1, "==": version}.get(found["op"])
    found = _EMITS.match(reason)
    return int(found["version"]) if found is not None else None


def _opset_summary(by_requirement: dict[str, dict[str, None]]) -> str:
    """One line for every rule the model's opset rules out: how many need which opset."""
    rules = {rule for names in by_requirement.values() for rule in names}
    parts = [
        f"{len(names)} {'needs' if len(names) == 1 else 'need'} {requirement}"
        for requirement, names in sorted(
            by_requirement.items(), key=lambda item: (-len(item[1]), item[0])
        )
    ]
    noun = "rule" if len(rules) == 1 else "rules"
    return (
        f"skipped for the model's opset: {len(rules)} {noun} ({', '.join(parts)}); "
        "--json lists each"
    )


def node_label(node: ir.Node) -> str:
    """How a node is named in traces: its name, or `<op>` when it has none."""
    return node.name or f"<{node.op_type}>"


def distinct_label(node: ir.Node) -> str:
    """A node's name, else `<op>(first output)`: unnamed nodes told apart.

    Used where many nodes are listed at once (what a pass changed, `--why-not`), so `<op>`
    alone would be ambiguous.
    """
    if node.name:
        return node.name
    for out in node.outputs:
        if out.name:
            return f"<{node.op_type}>({out.name})"
    return node_label(node)


def value_label(value: ir.Value) -> str:
    """How a value (an initializer a pass added or removed) is named in traces: `%name`."""
    return f"%{value.name}"


def graph_label(graph: ir.Graph) -> str:
    """How a graph is named in traces: its name, else where it sits (function or node)."""
    if graph.name:
        return graph.name
    owner = graph.owner
    if isinstance(owner, ir.Function):
        return f"function {owner.name}"
    if isinstance(owner, ir.Node):
        return f"subgraph of {node_label(owner)}"
    return "main graph"


def site_of(node: ir.Node) -> str:
    """What tells a rule application apart in its graph: the anchor's first output name."""
    for out in node.outputs:
        if out.name:
            return out.name
    return node_label(node)


def one_line(text: str) -> str:
    """A multi-line message (onnx's checker, inference errors) joined into one line."""
    return " ".join(line.strip() for line in text.splitlines() if line.strip())


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


def op_types(nodes: Sequence[ir.Node]) -> tuple[str, ...]:
    """`Op`, or `domain.Op` outside the default domain, of each node."""
    return tuple(
        f"{n.domain}.{n.op_type}" if n.domain not in ("", "ai.onnx") else n.op_type for n in nodes
    )


def labels(nodes: Sequence[ir.Node]) -> tuple[str, ...]:
    """Trace labels of several nodes."""
    return tuple(node_label(n) for n in nodes)
