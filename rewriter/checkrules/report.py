"""Showing `check-rules` results: a rich table (one row per rule), counterexamples, JSON."""

from __future__ import annotations

import collections
import json
from collections.abc import Sequence
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


def table(reports: Sequence[RuleReport]) -> Table:
    """One row per rule: name, file:line, status, instances, examples, detail."""
    from rich import box
    from rich.table import Table

    result = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    result.add_column("rule")
    result.add_column("location")
    result.add_column("status")
    result.add_column("instances", justify="right")
    result.add_column("examples", justify="right")
    result.add_column("detail", overflow="fold")
    for report in reports:
        style = _STYLES[report.status]
        name = report.name if report.kind == "rule" else f"{report.name} (pass)"
        result.add_row(
            name,
            report.location,
            f"[{style}]{report.status.value}[/]",
            str(report.instances),
            str(report.examples),
            _short(report.detail),
        )
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


def write_json(reports: Sequence[RuleReport], stream: IO[str], *, seed: int) -> None:
    """The results as JSON: the seed and one object per rule."""
    data = {"seed": seed, "rules": [r.to_json() for r in reports]}
    json.dump(data, stream, indent=2)
    stream.write("\n")
