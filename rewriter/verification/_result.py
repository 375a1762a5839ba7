"""The outcome of a verification: per-output figures, the counterexample, and how to show them.

Results are frozen: the counterexample is a read-only mapping of read-only arrays.
`render_table()` is plain text for logs; `rich_table()` builds the same table with `rich` for
a terminal.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from rewriter.verification._compare import Tolerance

if TYPE_CHECKING:
    from rich.table import Table


@dataclasses.dataclass(frozen=True, slots=True)
class OutputStats:
    """Figures for one output.

    `max_abs_err` / `max_rel_err` are the worst seen over every example run (None when they
    do not apply, e.g. strings); `mismatched` counts the elements outside tolerance in the
    counterexample (0 when the output always agreed); `shape` is the output's shape in the
    last example run (the counterexample, if there is one); `note` says what went wrong.
    """

    name: str
    dtype: str
    shape: tuple[int, ...]
    max_abs_err: float | None
    max_rel_err: float | None
    mismatched: int
    tolerance: Tolerance
    note: str = ""

    @property
    def ok(self) -> bool:
        """True when this output agreed on every example."""
        return self.mismatched == 0 and not self.note


@dataclasses.dataclass(frozen=True, slots=True)
class VerifyResult:
    """The verdict of comparing an original and a rewritten model.

    Attributes:
        ok: every output agreed on every example.
        examples_run: examples on which both models ran (shrinking runs included).
        outputs: one entry per graph output, in the original model's order.
        counterexample: the shrunk inputs of the first disagreement, or None.
        counterexample_path: where the counterexample was saved (`.npz`), or None.
        original_runtime / rewritten_runtime: "onnxruntime" or "onnx.reference".
        seed: the hypothesis seed used.
        examples_rejected: drawn inputs the original model itself refused (skipped).
        shrink_runs: how many of `examples_run` were spent shrinking the counterexample.
        message: one line summarizing the verdict.
        inputs: how each input was generated (`name: policy`), in input order.
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

    @property
    def mismatched_outputs(self) -> tuple[str, ...]:
        """Names of the outputs that disagreed."""
        return tuple(o.name for o in self.outputs if not o.ok)

    def to_json(self) -> dict[str, object]:
        """The verdict and per-output figures, ready for json.dump (`rewrite --json`)."""
        return {
            "ok": self.ok,
            "summary": self.summary(),
            "examples_run": self.examples_run,
            "examples_rejected": self.examples_rejected,
            "seed": self.seed,
            "original_runtime": self.original_runtime,
            "rewritten_runtime": self.rewritten_runtime,
            "counterexample_path": self.counterexample_path,
            "outputs": [
                {
                    "name": o.name,
                    "dtype": o.dtype,
                    "shape": list(o.shape),
                    "max_abs_err": o.max_abs_err,
                    "max_rel_err": o.max_rel_err,
                    "mismatched": o.mismatched,
                    "tolerance": str(o.tolerance),
                    "ok": o.ok,
                    "note": o.note,
                }
                for o in self.outputs
            ],
        }

    def _rows(self) -> list[tuple[str, ...]]:
        rows: list[tuple[str, ...]] = []
        for out in self.outputs:
            rows.append(
                (
                    out.name,
                    out.dtype,
                    "x".join(map(str, out.shape)) if out.shape else "scalar",
                    _number(out.max_abs_err),
                    _number(out.max_rel_err),
                    str(out.mismatched),
                    str(out.tolerance),
                    "ok" if out.ok else "MISMATCH",
                )
            )
        return rows

    def notes(self) -> tuple[str, ...]:
        """One line per output that disagreed, saying how (one line if all say the same)."""
        bad = [o for o in self.outputs if not o.ok and o.note]
        if len(bad) > 1 and len({o.note for o in bad}) == 1:
            return (f"all outputs: {bad[0].note}",)
        return tuple(f"`{o.name}`: {o.note}" for o in bad)

    def render_table(self) -> str:
        """The per-output table, the notes and the verdict, as plain text (for logs)."""
        header = (
            "output",
            "dtype",
            "shape",
            "max abs err",
            "max rel err",
            "mismatched",
            "tolerance",
            "status",
        )
        rows = [header, *self._rows()]
        widths = [max(len(row[i]) for row in rows) for i in range(len(header) - 1)]
        lines = []
        for index, row in enumerate(rows):
            cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
            lines.append("  ".join([*cells, row[-1]]).rstrip())
            if index == 0:
                lines.append("  ".join("-" * w for w in [*widths, len(header[-1])]))
        lines.extend(self.notes())
        lines.append(self.summary())
        return "\n".join(lines)

    def rich_table(self) -> Table:
        """The per-output table as a `rich` Table; print `notes()` and `summary()` after it."""
        from rich import box
        from rich.table import Table

        table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
        for column in ("output", "dtype", "shape"):
            table.add_column(column)
        for column in ("max abs err", "max rel err", "mismatched"):
            table.add_column(column, justify="right")
        table.add_column("tolerance")
        table.add_column("status")
        for row in self._rows():
            style = "green" if row[-1] == "ok" else "bold red"
            table.add_row(*row[:-1], f"[{style}]{row[-1]}[/]")
        return table

    def summary(self) -> str:
        """One line: the verdict, how many examples, and which runtimes ran the models."""
        runtimes = f"original on {self.original_runtime}, rewritten on {self.rewritten_runtime}"
        counts = f"{self.examples_run} example{'' if self.examples_run == 1 else 's'}"
        if self.examples_rejected:
            counts += f", {self.examples_rejected} rejected by the original model"
        if self.shrink_runs:
            counts += f", {self.shrink_runs} spent shrinking"
        names = ", ".join(f"`{name}`" for name in self.mismatched_outputs)
        verdict = "equivalent" if self.ok else f"MISMATCH in {names or 'the outputs'}"
        return f"{verdict} ({counts}; seed {self.seed}; {runtimes})"


def _number(value: float | None) -> str:
    if value is None:
        return "-"
    if math.isinf(value):
        return "inf"
    return f"{value:.3g}"
