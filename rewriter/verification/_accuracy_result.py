"""The outcome of an accuracy check: metrics per output and overall, judged by a budget.

Shaped like `VerifyResult` where callers share code (`ok`, `summary()`, `notes()`,
`render_table()`, `rich_table()`, `table_header` / `table_rows()` / `numeric_columns` for
the HTML report, `to_json()`; no counterexample). One row per output and optimization level,
then an "all outputs" row per level: the metrics over every output element at once, which
the verdict is on. Per-output rows are for reading, not judged ("-" in the status column).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from rewriter.verification._metrics import METRICS, Acceptance

if TYPE_CHECKING:
    from rich.table import Table

ALL_OUTPUTS = "(all outputs)"
LEVEL_LABELS = {"ORT_DISABLE_ALL": "off", "ORT_ENABLE_ALL": "ORT_ENABLE_ALL"}
# Shown besides the budget's own metrics: what a reader of a quantized model looks at first.
_ALWAYS = ("snr", "cosine", "max_rel")


def table_metrics(accept: Sequence[Acceptance]) -> tuple[str, ...]:
    """The metrics a table shows: the budget's, and snr, cosine and max_rel, in METRICS order."""
    wanted = {a.metric for a in accept} | set(_ALWAYS)
    return tuple(metric for metric in METRICS if metric in wanted)


def format_metric(metric: str, value: float) -> str:
    """`38.2 dB`, `0.999870` (`1-1.7e-08` within 1e-5 of 1), `0.0123`, `97.5%`."""
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return ("inf" if value > 0 else "-inf") + (" dB" if metric == "snr" else "")
    if metric == "snr":
        return f"{value:.1f} dB"
    if metric == "cosine":
        # Near 1 the distance from 1 is what tells results apart (1-1.7e-08 vs 1-1.5e-12).
        gap = 1.0 - value
        return f"1-{gap:.2g}" if 0.0 < gap < 1e-5 else f"{value:.6f}"
    if metric == "top1":
        return f"{100 * value:.1f}%"
    return f"{value:.3g}"


@dataclasses.dataclass(frozen=True, slots=True)
class MetricRow:
    """The metrics of one output (or `ALL_OUTPUTS`) at one optimization level.

    `shape` is the output's shape over the inputs measured, None where a dim's size varied.
    """

    output: str
    level: str
    values: tuple[tuple[str, float], ...]
    shape: tuple[int | None, ...] = ()
    note: str = ""
    # Pessimistic bootstrap bounds of the budget's metrics, when asked for (`score`).
    bounds: tuple[tuple[str, float], ...] = ()
    # Elements that are NaN where the original's are not: a failure whatever the budget.
    new_nans: int = 0

    @property
    def nan_text(self) -> str:
        """`NaN in 512 elements where the original has none`, or ''."""
        if not self.new_nans:
            return ""
        count = f"{self.new_nans} element{'s' * (self.new_nans != 1)}"
        return f"NaN in {count} where the original has none"

    def value(self, metric: str) -> float:
        """The value of `metric` in this row (KeyError when it was not measured)."""
        return dict(self.values)[metric]


@dataclasses.dataclass(frozen=True, slots=True)
class AccuracyResult:
    """The verdict of measuring a rewritten model against an accuracy budget.

    Attributes:
        ok: every acceptance holds over all outputs at every optimization level.
        accept: the budget.
        rows: per output and level, then `ALL_OUTPUTS` per level (see the module docstring).
        examples_run: inputs both models ran on.
        failing: the acceptances not met, as text (`snr>=35 (31.2 dB)`).
    """

    ok: bool
    accept: tuple[Acceptance, ...]
    rows: tuple[MetricRow, ...]
    examples_run: int
    seed: int = 0
    original_runtime: str = "onnxruntime"
    rewritten_runtime: str = "onnxruntime"
    inputs: tuple[str, ...] = ()
    failing: tuple[str, ...] = ()
    failing_level: str = ""
    extra_notes: tuple[str, ...] = ()
    counterexample: None = None
    counterexample_path: None = None

    @classmethod
    def judged(
        cls, accept: tuple[Acceptance, ...], rows: tuple[MetricRow, ...], **fields: object
    ) -> AccuracyResult:
        """The result of these rows under `accept`: `ok`, `failing` and `failing_level` set."""
        failing: list[str] = []
        failing_level = ""
        for row in rows:
            if row.output != ALL_OUTPUTS:
                continue
            if row.new_nans:
                level = "" if row.level == "ORT_DISABLE_ALL" else f" with {row.level}"
                outputs = [
                    r.output
                    for r in rows
                    if r.level == row.level and r.output != ALL_OUTPUTS and r.new_nans
                ]
                named = ", ".join(f"`{name}`" for name in outputs) or "the outputs"
                failing.append(f"{row.nan_text} ({named}{level})")
                failing_level = failing_level or row.level
            for acceptance in accept:
                value = row.value(acceptance.metric)
                if not acceptance.met_by(value):
                    level = "" if row.level == "ORT_DISABLE_ALL" else f" with {row.level}"
                    failing.append(
                        f"{acceptance} ({format_metric(acceptance.metric, value)}{level})"
                    )
                    failing_level = failing_level or row.level
        return cls(
            not failing,
            accept,
            rows,
            failing=tuple(failing),
            failing_level=failing_level,
            **fields,  # type: ignore[arg-type]
        )

    @property
    def metrics(self) -> tuple[str, ...]:
        """The metrics measured (the table's metric columns)."""
        return tuple(metric for metric, _ in self.rows[0].values) if self.rows else ()

    def overall(self, metric: str) -> float:
        """The worst value of `metric` over all outputs across the optimization levels."""
        values = [r.value(metric) for r in self.rows if r.output == ALL_OUTPUTS]
        if not values:
            return math.nan
        return min(values) if METRICS[metric] == ">=" else max(values)

    @property
    def table_header(self) -> tuple[str, ...]:
        """The table's column names."""
        return ("output", "shape", "ORT opt.", *self.metrics, "budget")

    @property
    def numeric_columns(self) -> tuple[int, ...]:
        """Indices of the columns that hold numbers (aligned right)."""
        return tuple(range(3, 3 + len(self.metrics)))

    def table_rows(self) -> list[tuple[str, ...]]:
        """The table's rows as text cells; the last is "ok", "FAIL" or "-" (not judged)."""
        rows: list[tuple[str, ...]] = []
        for row in self.rows:
            status = "NaN" if row.new_nans else "-"
            if row.output == ALL_OUTPUTS:
                met = all(a.met_by(row.value(a.metric)) for a in self.accept)
                status = "ok" if met and not row.new_nans else "FAIL"
            rows.append(
                (
                    row.output,
                    "x".join("*" if d is None else str(d) for d in row.shape),
                    LEVEL_LABELS.get(row.level, row.level),
                    *(format_metric(metric, value) for metric, value in row.values),
                    status,
                )
            )
        return rows

    def budget_text(self) -> str:
        """`snr>=35, cosine>=0.999`."""
        return ", ".join(str(a) for a in self.accept)

    def notes(self) -> tuple[str, ...]:
        """Lines under the table: failures of a run, what else the reader should know."""
        lines = [f"{LEVEL_LABELS.get(r.level, r.level)}: {r.note}" for r in self.rows if r.note]
        lines.extend(
            f"{LEVEL_LABELS.get(r.level, r.level)}: output `{r.output}`: {r.nan_text}"
            for r in self.rows
            if r.new_nans and r.output != ALL_OUTPUTS
        )
        if not self.ok and not lines:
            lines.append(
                "the budget is judged on the (all outputs) rows; per-output rows are for reading"
            )
        return tuple(lines) + self.extra_notes

    def summary(self) -> str:
        """One line: the verdict against the budget, how many inputs, the runtimes."""
        counts = f"{self.examples_run} input{'' if self.examples_run == 1 else 's'}"
        runtimes = f"original on {self.original_runtime}, rewritten on {self.rewritten_runtime}"
        if self.ok:
            values = ", ".join(
                f"{a.metric} {format_metric(a.metric, self.overall(a.metric))}" for a in self.accept
            )
            verdict = f"within the accuracy budget {self.budget_text()} ({values})"
        else:
            verdict = f"OUTSIDE the accuracy budget: {'; '.join(self.failing)}"
        return f"{verdict} ({counts}; seed {self.seed}; {runtimes})"

    def render_table(self) -> str:
        """The table, the notes and the verdict, as plain text (for logs)."""
        rows = [self.table_header, *self.table_rows()]
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        lines = []
        for index, row in enumerate(rows):
            cells = [
                cell.rjust(width) if i in self.numeric_columns else cell.ljust(width)
                for i, (cell, width) in enumerate(zip(row, widths, strict=True))
            ]
            lines.append("  ".join(cells).rstrip())
            if index == 0:
                lines.append("  ".join("-" * w for w in widths))
        lines.extend(self.notes())
        lines.append(self.summary())
        return "\n".join(lines)

    def rich_table(self) -> Table:
        """The table as a `rich` Table; print `notes()` and `summary()` after it."""
        from rich import box
        from rich.table import Table

        table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
        for index, column in enumerate(self.table_header[:-1]):
            table.add_column(column, justify="right" if index in self.numeric_columns else "left")
        table.add_column(self.table_header[-1])
        styles = {"ok": "green", "FAIL": "bold red", "NaN": "bold red", "-": "dim"}
        for row in self.table_rows():
            table.add_row(*row[:-1], f"[{styles[row[-1]]}]{row[-1]}[/]")
        return table

    def to_json(self) -> dict[str, object]:
        """The verdict and every metric, ready for json.dump (non-finite values as text)."""
        return {
            "ok": self.ok,
            "summary": self.summary(),
            "accept": [str(a) for a in self.accept],
            "failing": list(self.failing),
            "examples_run": self.examples_run,
            "seed": self.seed,
            "original_runtime": self.original_runtime,
            "rewritten_runtime": self.rewritten_runtime,
            "inputs": list(self.inputs),
            "notes": list(self.notes()),
            "rows": [
                {
                    "output": r.output,
                    "optimization": r.level,
                    "shape": list(r.shape),
                    **{metric: _finite(value) for metric, value in r.values},
                    "note": r.note,
                    "new_nans": r.new_nans,
                }
                for r in self.rows
            ],
        }


def _finite(value: float) -> float | str:
    return value if math.isfinite(value) else str(value)
