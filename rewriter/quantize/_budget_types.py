"""The accuracy budget's values: what it is told (`AccuracyBudget`) and what it found.

`BudgetResult` holds one `SiteResult` per candidate site (most sensitive first) and the
greedy steps (`BudgetStep`), renders them as a table (text, `rich`, HTML cells) and as JSON.
The algorithm is in `_budget`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from rewriter.verification import (
    Acceptance,
    AccuracyResult,
    acceptances,
    format_metric,
)

if TYPE_CHECKING:
    from rich.table import Table

Array = npt.NDArray[np.generic]


@dataclasses.dataclass(frozen=True)
class AccuracyBudget:
    """An accuracy budget for a rewrite with approximate rules, and how to measure it.

    Attributes:
        accept: what the rewritten model must meet over all outputs: `("snr>=35",)` or
            `Acceptance` values (parsed on construction; ValueError when malformed).
        examples: generated inputs for tuning, and as many (another seed) for the final check.
        seed: seed of the tuning inputs; the final check's are drawn with `seed + 1`.
        samples: the caller's inputs (as `verify`'s `samples`): every second one tunes, the
            others are held out for the final check (a single sample does both).
        input_ranges / dims: as for `verify`; input shapes come from `RewriteOptions`.
        ort_enable_all: the final check also runs the result with onnxruntime's
            optimizations (as deployed). Tuning measures layers that compute in float until
            onnxruntime fuses them (static QDQ, int4) with those optimizations either way.
        confidence: while tuning, a model meets the budget only when the pessimistic
            bootstrap bound of each metric over the tuning inputs does, at this confidence
            (`verification.pessimistic_bound`): a choice that barely meets it on these
            inputs would miss it on others about half the time. None: the measured value.
        jobs: processes for the measurements (None or 1: this process, one onnxruntime
            session; each measurement is a run of one switchable model, so more processes
            pay off only for large models and many tuning inputs). They are spawned, so a
            script that rewrites with jobs > 1 runs its work under
            `if __name__ == "__main__":`, as multiprocessing requires.
        ray_address: run the measurements on the Ray cluster at this address instead
            (`"auto"`, `"ray://host:10001"`, `"host:6379"`); Ray must be installed.
        providers: onnxruntime execution providers (default: CPU).
        progress: called with a few words at each phase of the tuning (for a status line).
    """

    accept: tuple[Acceptance, ...]
    examples: int = 16
    seed: int = 0
    samples: tuple[Mapping[str, Array], ...] = ()
    input_ranges: Mapping[str, tuple[float, float]] = dataclasses.field(default_factory=dict)
    dims: Mapping[str, int] = dataclasses.field(default_factory=dict)
    ort_enable_all: bool = True
    confidence: float | None = 0.9
    jobs: int | None = None
    ray_address: str | None = None
    providers: tuple[str, ...] | None = None
    progress: Callable[[str], None] | None = dataclasses.field(default=None, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "accept", acceptances(tuple(self.accept)))
        samples = tuple(self.samples)
        if any(not isinstance(sample, Mapping) for sample in samples):
            raise TypeError("samples must be a sequence of {input name: array} mappings")
        object.__setattr__(self, "samples", samples)
        if isinstance(self.examples, bool) or self.examples < 0:
            raise ValueError(f"examples must be an int >= 0, got {self.examples!r}")
        if not self.examples and not samples:
            raise ValueError("an accuracy budget needs examples > 0 or samples to measure on")
        if self.jobs is not None and (isinstance(self.jobs, bool) or self.jobs < 1):
            raise ValueError(f"jobs must be at least 1, got {self.jobs!r}")
        if self.confidence is not None and not 0.0 < self.confidence < 1.0:
            raise ValueError(f"confidence must be between 0 and 1, got {self.confidence!r}")

    @property
    def ranking_metric(self) -> str:
        """The metric candidates are ranked by: the first acceptance's."""
        return self.accept[0].metric


@dataclasses.dataclass(frozen=True, slots=True)
class SiteResult:
    """One candidate layer: how sensitive it is, and whether it stayed approximate.

    `rule` at `anchor` is the rewrite the unconstrained run made there; `alternatives` the
    rewrites that take its place when it is left out (see `_budget`).

    `alone` holds the metrics over all outputs with only this site approximate; `loss` is
    how much worse the ranking metric is than the float baseline (NaN when the baseline is
    exact and the metric has no finite distance to it, as snr's infinity).
    """

    rule: str
    anchor: str
    nodes: tuple[str, ...]
    location: str
    clause: str
    rank: int
    alone: tuple[tuple[str, float], ...]
    loss: float
    kept_float: bool
    reason: str
    failure: str = ""
    # Sites of other approximate rules that take this one's nodes when it is left out; they
    # are kept float together with it.
    alternatives: tuple[tuple[str, str], ...] = ()
    # The rule whose rewrite the final model has here, with its form when the rule has several
    # (`Option.title`; "" when the layer stayed float).
    applied: str = ""

    def value(self, metric: str) -> float:
        """A metric with only this site approximate."""
        return dict(self.alone).get(metric, math.nan)

    @property
    def rule_text(self) -> str:
        """The rule, and the one that approximates the layer instead when it was left out."""
        if not self.applied or self.applied == self.rule:
            return self.rule
        if self.applied.startswith(f"{self.rule} ("):
            return self.applied  # the same rule, in the form the budget chose
        return f"{self.rule} -> {self.applied}"

    @property
    def layer(self) -> str:
        """The matched nodes, for tables (`layer1`, or `a, b, +2 more`)."""
        if len(self.nodes) <= 2:
            return ", ".join(self.nodes) or self.anchor
        return f"{self.nodes[0]}, {self.nodes[1]}, +{len(self.nodes) - 2} more"


@dataclasses.dataclass(frozen=True)
class BudgetStep:
    """The whole model with the `left_out` most sensitive sites left out (tuning inputs)."""

    left_out: int
    values: tuple[tuple[str, float], ...]
    met: bool
    bytes: int = 0
    # The pessimistic bounds the step was judged by (empty: judged by `values`).
    bounds: tuple[tuple[str, float], ...] = ()


@dataclasses.dataclass(frozen=True)
class BudgetResult:
    """What the accuracy budget measured and decided (see the module docstring).

    Attributes:
        accept: the budget.
        sites: every candidate layer, most sensitive first.
        baseline: metrics with every candidate in float (tuning inputs).
        steps: the greedy steps measured, by number of sites left out.
        met: the chosen model meets the budget on the tuning inputs.
        final: the chosen model measured on independent inputs (its verdict is the run's).
        evaluations: measurements of the switchable model (choices of float and
            approximate layers) while tuning.
        runner: where they ran (`serially`, `on 2 local processes`, `on Ray at ...`).
        notes: what else the reader should know.
    """

    accept: tuple[Acceptance, ...]
    sites: tuple[SiteResult, ...]
    baseline: tuple[tuple[str, float], ...]
    steps: tuple[BudgetStep, ...]
    met: bool
    final: AccuracyResult
    evaluations: int = 0
    runner: str = "serially"
    notes: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """The budget was met while tuning and on the independent inputs."""
        return self.met and self.final.ok

    @property
    def approximate(self) -> tuple[SiteResult, ...]:
        """The sites left approximate."""
        return tuple(s for s in self.sites if not s.kept_float)

    @property
    def kept_float(self) -> tuple[SiteResult, ...]:
        """The sites kept as they were (float)."""
        return tuple(s for s in self.sites if s.kept_float)

    @property
    def metric(self) -> str:
        """The ranking metric."""
        return self.accept[0].metric

    def budget_text(self) -> str:
        """`snr>=35, cosine>=0.99`."""
        return ", ".join(str(a) for a in self.accept)

    def summary(self) -> str:
        """One line: layers approximate and kept float, the final metric, the verdict."""
        metric = self.metric
        final = format_metric(metric, self.final.overall(metric))
        count = len(self.sites)
        where = f"{self.final.examples_run} independent input{'s' * (self.final.examples_run != 1)}"
        verdict = "met" if self.ok else "NOT met"
        if not count:
            return (
                f"accuracy budget {self.budget_text()} {verdict}: no approximate rewrite; "
                f"final {metric} {final} on {where}"
            )
        return (
            f"accuracy budget {self.budget_text()} {verdict}: {len(self.approximate)} of "
            f"{count} layer{'s' * (count != 1)} approximate, {len(self.kept_float)} kept float; "
            f"final {metric} {final} on {where}"
        )

    @property
    def _losses(self) -> bool:
        # Against an exact float baseline no site has a finite loss: the column is left out.
        return any(not math.isnan(s.loss) for s in self.sites)

    @property
    def table_header(self) -> tuple[str, ...]:
        """Columns of the per-site table (the loss column only when a loss is finite)."""
        loss = ("loss vs float",) if self._losses else ()
        return ("#", "layer", "rule", f"{self.metric} alone", *loss, "kept", "why")

    @property
    def numeric_columns(self) -> tuple[int, ...]:
        """Columns holding numbers."""
        return (0, 3, 4) if self._losses else (0, 3)

    def table_rows(self) -> list[tuple[str, ...]]:
        """One row per site, most sensitive first; the last two cells: kept, why."""
        metric = self.metric
        rows = []
        for site in self.sites:
            loss = "-" if math.isnan(site.loss) else _loss_text(metric, site.loss)
            rows.append(
                (
                    str(site.rank),
                    site.layer,
                    site.rule_text,
                    format_metric(metric, site.value(metric)),
                    *((loss,) if self._losses else ()),
                    "float" if site.kept_float else "approximate",
                    site.reason,
                )
            )
        return rows

    def render_table(self) -> str:
        """The per-site table and the summary, as plain text."""
        rows = [self.table_header, *self.table_rows()]
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
        lines = []
        for index, row in enumerate(rows):
            cells = [
                cell.rjust(width) if i in self.numeric_columns else cell.ljust(width)
                for i, (cell, width) in enumerate(zip(row, widths, strict=False))
            ]
            lines.append("  ".join([*cells, row[-1]]).rstrip())
            if index == 0:
                lines.append("  ".join("-" * w for w in [*widths, len(row[-1])]))
        lines.extend(self.notes)
        lines.append(self.summary())
        return "\n".join(lines)

    def rich_table(self) -> Table:
        """The per-site table as a `rich` Table; print `notes` and `summary()` after it."""
        from rich import box
        from rich.table import Table

        table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
        for index, column in enumerate(self.table_header):
            table.add_column(column, justify="right" if index in self.numeric_columns else "left")
        for row in self.table_rows():
            style = "yellow" if row[-2] == "float" else "green"
            table.add_row(*row[:-2], f"[{style}]{row[-2]}[/]", row[-1])
        return table

    def to_json(self) -> dict[str, object]:
        """Everything measured, ready for json.dump (non-finite values as text)."""
        return {
            "ok": self.ok,
            "summary": self.summary(),
            "accept": [str(a) for a in self.accept],
            "runner": self.runner,
            "evaluations": self.evaluations,
            "baseline": _json_values(self.baseline),
            "sites": [
                {
                    "rank": s.rank,
                    "rule": s.rule,
                    "anchor": s.anchor,
                    "alternatives": [list(site) for site in s.alternatives],
                    "nodes": list(s.nodes),
                    "location": s.location,
                    "approximate": s.clause,
                    "alone": _json_values(s.alone),
                    "loss": None if math.isnan(s.loss) else _finite(s.loss),
                    "kept": "float" if s.kept_float else "approximate",
                    "applied": s.applied,
                    "reason": s.reason,
                    "failure": s.failure,
                }
                for s in self.sites
            ],
            "steps": [
                {
                    "left_out": step.left_out,
                    "values": _json_values(step.values),
                    "bounds": _json_values(step.bounds),
                    "met": step.met,
                    "bytes": step.bytes,
                }
                for step in self.steps
            ],
            "final": self.final.to_json(),
            "notes": list(self.notes),
        }


def _finite(value: float) -> float | str:
    return value if math.isfinite(value) else str(value)


def _json_values(values: Sequence[tuple[str, float]]) -> dict[str, float | str]:
    return {metric: _finite(value) for metric, value in values}


def _loss_text(metric: str, loss: float) -> str:
    if metric == "snr":
        return "inf dB" if math.isinf(loss) else f"{loss:.1f} dB"
    return f"{loss:.3g}"
