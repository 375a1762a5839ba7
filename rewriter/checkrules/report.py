"""Showing `check-rules` results: a rich table (one row per rule), counterexamples, JSON."""

from __future__ import annotations

import collections
import json
from collections.abc import Mapping, Sequence
from typing import IO, TYPE_CHECKING

from rewriter.checkrules._result import RuleReport, Status

if TYPE_CHECKING:
    from rich.table import Table

_STYLES = {
    Status.VERIFIED: "green",
    Status.FAILED: "bold red",
    Status.NOT_INSTANTIABLE: "yellow",
}
DETAIL_WIDTH = 160


def _short(text: str, width: int = DETAIL_WIDTH) -> str:
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 3] + "..."


_PROOF_STYLES = {"proved": "green", "refuted": "bold red", "unsupported": "yellow"}


def table(reports: Sequence[RuleReport], proofs: Mapping[str, str] | None = None) -> Table:
    """One row per rule: name, file:line, status, instances, examples, detail.

    `proofs` (rule name -> `rewrite prove`'s status) adds a column with each rule's.
    """
    from rich import box
    from rich.table import Table

    result = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    result.add_column("rule")
    result.add_column("location")
    result.add_column("status")
    if proofs is not None:
        result.add_column("proof")
    result.add_column("instances", justify="right")
    result.add_column("examples", justify="right")
    result.add_column("detail", overflow="fold")
    for report in reports:
        style = _STYLES[report.status]
        name = report.name if report.kind == "rule" else f"{report.name} (pass)"
        cells = [name, report.location, f"[{style}]{report.status.value}[/]"]
        if proofs is not None:
            proof = proofs.get(report.name, "") if report.kind == "rule" else ""
            cells.append(f"[{_PROOF_STYLES[proof]}]{proof}[/]" if proof in _PROOF_STYLES else "")
        cells += [str(report.instances), str(report.examples), _short(report.detail)]
        result.add_row(*cells)
    return result


def summary(reports: Sequence[RuleReport], seconds: float) -> str:
    """One line: how many rules were verified, failed, not instantiable."""
    counts = collections.Counter(r.status for r in reports if r.kind == "rule")
    parts = [f"{counts[status]} {status.value}" for status in Status]
    text = f"{sum(counts.values())} rules: " + ", ".join(parts)
    passes = collections.Counter(r.status for r in reports if r.kind != "rule")
    if passes:
        text += f"; {sum(passes.values())} passes: " + ", ".join(
            f"{passes[status]} {status.value}" for status in Status
        )
    return f"{text} ({seconds:.1f}s)"


def failures(reports: Sequence[RuleReport]) -> str:
    """The counterexample of every failed rule, as text."""
    blocks = []
    for report in reports:
        if report.status is Status.FAILED and report.counterexample is not None:
            header = f"FAILED {report.name} ({report.location}):"
            blocks.append(header + "\n" + report.counterexample.render())
    return "\n\n".join(blocks)


def write_json(
    reports: Sequence[RuleReport],
    stream: IO[str],
    *,
    seed: int,
    proofs: Mapping[str, str] | None = None,
) -> None:
    """The results as JSON: the seed and one object per rule (with `proof` when given)."""
    rules = [r.to_json() for r in reports]
    if proofs is not None:
        for report, entry in zip(reports, rules, strict=True):
            entry["proof"] = proofs.get(report.name) if report.kind == "rule" else None
    data = {"seed": seed, "rules": rules}
    json.dump(data, stream, indent=2)
    stream.write("\n")
