"""The outcome of a verification: per-output figures, the counterexample, and how to show them.

Results are frozen: the counterexample is a read-only mapping of read-only arrays.
`render_table()` is plain text for logs; `rich_table()` builds the same table with `rich` for
a terminal; `table_rows()` gives its cells to other renderers (the HTML report).

Each output gets one row per optimization level the rewritten model ran at. A row shows how
the output was judged: against the float64 oracle (the original's error, the rewritten
model's, their ratio; errors as defined in `_compare`), as within a few ULPs of the original
(no oracle needed), or directly (the largest relative difference from the original, against
`rtol`/`atol`), with the criterion it had to meet.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from rewriter.verification._compare import FLOOR_ULPS

if TYPE_CHECKING:
    from rich.table import Table

LEVEL_LABELS = {"ORT_DISABLE_ALL": "off", "ORT_ENABLE_ALL": "ORT_ENABLE_ALL"}
HEADER = (
    "output",
    "dtype",
    "shape",
    "ORT opt.",
    "original err",
    "rewritten err",
    "ratio",
    "criterion",
    "status",
)
NUMERIC_COLUMNS = (4, 5, 6)


@dataclasses.dataclass(frozen=True, slots=True)
class OutputStats:
    """Figures for one output at one optimization level of the rewritten model.

    `basis` says how the output was judged ("oracle", "close", "direct" or "exact", see
    `_compare.Comparison`); `original_err`, `rewritten_err` and `ratio` are those of the
    oracle comparison shown (the failing example's, else the largest ratio seen), and for
    "close" `rewritten_err` is the distance from the original's output. `max_abs_err` /
    `max_rel_err` are the largest direct differences from the original seen over every
    example (None when they do not apply, e.g. strings). `mismatched` counts the elements
    that failed in the counterexample; `shape` is the output's shape in the example shown;
    `note` says what went wrong.
    """

    name: str
    dtype: str
    shape: tuple[int, ...]
    max_abs_err: float | None
    max_rel_err: float | None
    mismatched: int
    criterion: str
    level: str = "ORT_DISABLE_ALL"
    basis: str = "direct"
    original_err: float | None = None
    rewritten_err: float | None = None
    ratio: float | None = None
    floor: float | None = None
    note: str = ""

    @property
    def ok(self) -> bool:
        """True when this output agreed on every example."""
        return self.mismatched == 0 and not self.note

    def cells(self) -> tuple[str, str, str]:
        """The original err, rewritten err and ratio cells (see the module docstring)."""
        if self.basis == "oracle":
            return (
                _number(self.original_err),
                _number(self.rewritten_err),
                "-" if self.ratio is None else _ratio(self.ratio),
            )
        if self.basis == "close":
            if not self.rewritten_err or self.floor is None:
                return ("-", "= original", "-")
            ulps = self.rewritten_err / (self.floor / FLOOR_ULPS)
            return ("-", f"~original ({ulps:.2g} ULP)", "-")
        if self.basis == "exact" or self.criterion == "exact":
            return ("-", "exact" if not self.max_abs_err else _number(self.max_abs_err), "-")
        rel = _number(self.max_rel_err)
        return ("-", "-" if rel == "-" else f"rel {rel}", "-")


@dataclasses.dataclass(frozen=True, slots=True)
class VerifyResult:
    """The verdict of comparing an original and a rewritten model.

    Attributes:
        ok: every output agreed on every example.
        examples_run: examples on which both models ran (shrinking runs included).
        outputs: one entry per graph output and optimization level, in the original model's
            output order, the levels one after the other.
        counterexample: the shrunk inputs of the first disagreement, or None.
        counterexample_path: where the counterexample was saved (`.npz`), or None.
        original_runtime / rewritten_runtime: "onnxruntime" or "onnx.reference".
        seed: the hypothesis seed used.
        examples_rejected: drawn inputs the original model itself refused (skipped).
        shrink_runs: how many of `examples_run` were spent shrinking the counterexample.
        message: one line summarizing the verdict.
        inputs: how each input was generated (`name: policy`), in input order.
        compare: "accuracy" or "direct".
        factor: the accuracy criterion's factor.
        oracle_runs: examples on which the float64 oracle ran (0: every float output was
            within a few ULPs of the original's, or none was judged by accuracy).
        failing_level: the optimization level that disagreed ("" when none did).
        extra_notes: what else the reader should know (the oracle's precision, a level not
            checked).
    """

    ok: bool
    examples_run: int
    outputs: tuple[OutputStats, ...]
    counterexample: Mapping[str, npt.NDArray[np.generic]] | None
    counterexample_path: str | None
    original_runtime: str
    rewritten_runtime: str
    seed: int = 0
    examples_rejected: int = 0
    shrink_runs: int = 0
    message: str = ""
    inputs: tuple[str, ...] = ()
    compare: str = "accuracy"
    factor: float = 8.0
    oracle_runs: int = 0
    failing_level: str = ""
    extra_notes: tuple[str, ...] = ()

    @property
    def mismatched_outputs(self) -> tuple[str, ...]:
        """Names of the outputs that disagreed (at any level)."""
        return tuple(dict.fromkeys(o.name for o in self.outputs if not o.ok))

    @property
    def levels(self) -> tuple[str, ...]:
        """The optimization levels the rewritten model ran at."""
        return tuple(dict.fromkeys(o.level for o in self.outputs))

    def to_json(self) -> dict[str, object]:
        """The verdict and per-output figures, ready for json.dump (`rewrite --json`)."""
        return {
            "ok": self.ok,
            "summary": self.summary(),
            "compare": self.compare,
            "factor": self.factor,
            "examples_run": self.examples_run,
            "examples_rejected": self.examples_rejected,
            "oracle_runs": self.oracle_runs,
            "seed": self.seed,
            "original_runtime": self.original_runtime,
            "rewritten_runtime": self.rewritten_runtime,
            "failing_level": self.failing_level,
            "counterexample_path": self.counterexample_path,
            "notes": list(self.notes()),
            "outputs": [
                {
                    "name": o.name,
                    "dtype": o.dtype,
                    "shape": list(o.shape),
                    "optimization": o.level,
                    "basis": o.basis,
                    "original_err": o.original_err,
                    "rewritten_err": o.rewritten_err,
                    "ratio": _finite(o.ratio),
                    "criterion": o.criterion,
                    "max_abs_err": _finite(o.max_abs_err),
                    "max_rel_err": _finite(o.max_rel_err),
                    "mismatched": o.mismatched,
                    "ok": o.ok,
                    "note": o.note,
                }
                for o in self.outputs
            ],
        }

    @property
    def table_header(self) -> tuple[str, ...]:
        """The table's column names (numeric columns: `numeric_columns`)."""
        return HEADER

    @property
    def numeric_columns(self) -> tuple[int, ...]:
        """Indices of the table's columns that hold numbers (aligned right)."""
        return NUMERIC_COLUMNS

    def table_rows(self) -> list[tuple[str, ...]]:
        """The table's rows (without the header), as text cells."""
        rows: list[tuple[str, ...]] = []
        for out in self.outputs:
            rows.append(
                (
                    out.name,
                    out.dtype,
                    "x".join(map(str, out.shape)) if out.shape else "scalar",
                    LEVEL_LABELS.get(out.level, out.level),
                    *out.cells(),
                    out.criterion,
                    "ok" if out.ok else "MISMATCH",
                )
            )
        return rows

    def notes(self) -> tuple[str, ...]:
        """Lines under the table: how each output disagreed, the hint, what else to know."""
        bad = [o for o in self.outputs if not o.ok and o.note]
        lines: list[str] = []
        if len(bad) > 1 and len({o.note for o in bad}) == 1:
            lines.append(f"all outputs: {bad[0].note}")
        else:
            for out in bad:
                where = "" if out.level == "ORT_DISABLE_ALL" else f" (with {out.level})"
                lines.append(f"`{out.name}`{where}: {out.note}")
        hint = self.hint()
        if hint:
            lines.append(hint)
        lines.extend(self.extra_notes)
        return tuple(lines)

    def hint(self) -> str:
        """Which option would accept a mismatch, or what a level's disagreement means."""
        if self.ok:
            return ""
        if self.failing_level == "ORT_ENABLE_ALL" and any(
            "cannot load" in o.note for o in self.outputs if not o.ok
        ):
            return (
                "onnxruntime cannot load the rewritten model with its graph optimizations "
                "(ORT_ENABLE_ALL), although it runs it with them off (--no-ort-enable-all "
                "skips that check)"
            )
        if self.failing_level == "ORT_ENABLE_ALL":
            return (
                "the difference appears only under onnxruntime's graph optimizations: with them "
                "off (ORT_DISABLE_ALL) the rewritten model agrees with the original; with "
                "ORT_ENABLE_ALL it does not, where the original stays accurate, so onnxruntime's "
                "own optimizations change the rewritten model's result (--no-ort-enable-all "
                "skips that check)"
            )
        failed = [o for o in self.outputs if not o.ok]
        if failed and all(o.note.startswith("the rewritten model failed") for o in failed):
            return ""  # no tolerance accepts a model that does not run
        only_positions = failed and all("less accurate" not in o.note for o in failed)
        if only_positions and any("NaN/inf positions differ" in o.note for o in failed):
            return (
                "NaN or infinity where the original has a number, or the reverse: no "
                "--factor accepts that; --no-special-values draws no NaN or infinities"
            )
        ratios = [o.ratio for o in failed if o.ratio is not None and "less accurate" in o.note]
        if ratios:
            worst = max(ratios)
            return (
                f"criterion: at most {_ratio(self.factor)} the original's error against "
                f"float64; this is {_ratio(worst)}. A larger --factor (factor=) would accept "
                "it; --compare direct compares with the original's outputs instead"
            )
        if any(o.basis == "direct" and not o.ok and o.ratio is None for o in self.outputs):
            return (
                "compared directly with the original's outputs: --rtol/--atol loosen or tighten "
                "that; --compare accuracy judges float32 outputs against float64 instead"
            )
        return ""

    def render_table(self) -> str:
        """The per-output table, the notes and the verdict, as plain text (for logs)."""
        rows = [HEADER, *self.table_rows()]
        widths = [max(len(row[i]) for row in rows) for i in range(len(HEADER) - 1)]
        lines = []
        for index, row in enumerate(rows):
            cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
            lines.append("  ".join([*cells, row[-1]]).rstrip())
            if index == 0:
                lines.append("  ".join("-" * w for w in [*widths, len(HEADER[-1])]))
        lines.extend(self.notes())
        lines.append(self.summary())
        return "\n".join(lines)

    def rich_table(self) -> Table:
        """The per-output table as a `rich` Table; print `notes()` and `summary()` after it."""
        from rich import box
        from rich.table import Table

        table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
        for index, column in enumerate(HEADER[:-1]):
            table.add_column(column, justify="right" if index in NUMERIC_COLUMNS else "left")
        table.add_column(HEADER[-1])
        for row in self.table_rows():
            style = "green" if row[-1] == "ok" else "bold red"
            table.add_row(*row[:-1], f"[{style}]{row[-1]}[/]")
        return table

    def criterion_text(self) -> str:
        """The float criterion in a few words."""
        if self.compare == "direct":
            return "direct comparison with the original"
        oracle = (
            f"float64 oracle ran on {self.oracle_runs}" if self.oracle_runs else "no oracle needed"
        )
        return f"accuracy: <= {_ratio(self.factor)} the original's error ({oracle})"

    def summary(self) -> str:
        """One line: the verdict, how many examples, the criterion, the runtimes."""
        runtimes = f"original on {self.original_runtime}, rewritten on {self.rewritten_runtime}"
        counts = f"{self.examples_run} example{'' if self.examples_run == 1 else 's'}"
        if self.examples_rejected:
            counts += f", {self.examples_rejected} rejected by the original model"
        if self.shrink_runs:
            counts += f", {self.shrink_runs} spent shrinking"
        names = ", ".join(f"`{name}`" for name in self.mismatched_outputs)
        verdict = "equivalent" if self.ok else f"MISMATCH in {names or 'the outputs'}"
        if not self.ok and self.failing_level == "ORT_ENABLE_ALL":
            verdict += " with ORT_ENABLE_ALL"
        return f"{verdict} ({counts}; seed {self.seed}; {self.criterion_text()}; {runtimes})"


def _number(value: float | None) -> str:
    if value is None:
        return "-"
    if math.isinf(value):
        return "inf"
    return f"{value:.3g}"


def _ratio(value: float) -> str:
    if not math.isfinite(value):
        return "inf x"
    if value >= 100:
        return f"{value:.0f}x"
    return f"{value:.2g}x"


def _finite(value: float | None) -> float | str | None:
    if value is None or math.isfinite(value):
        return value
    return str(value)
