"""`rewrite stats MODEL`: IR version, opsets, node counts by op type, parameters.

Parameters are the elements of initializers and of Constant nodes' values, so a rewrite that
turns Constants into initializers does not change the count. `--json` and `--report` are
written atomically, never over the model or its external data, and over an existing file
only with `--force`.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import ir
from rewriter.api._stats import collect, describe_counts, human_bytes
from rewriter.cli import _files
from rewriter.cli._arguments import positive_int


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `rewrite stats`."""
    parser.add_argument("model", help="the ONNX model")
    parser.add_argument("--json", metavar="FILE", help="also write the statistics as JSON")
    parser.add_argument(
        "--top", type=positive_int, default=10, help="how many of the largest tensors to list"
    )
    parser.add_argument(
        "--report", metavar="FILE", help="also write the statistics as a self-contained HTML page"
    )
    parser.add_argument(
        "--force", action="store_true", help="overwrite existing --json / --report files"
    )


def run(args: argparse.Namespace) -> int:
    """Print the statistics."""
    from rich.console import Console
    from rich.table import Table

    source = _files.input_model_path(args.model)
    _files.refuse_unsafe_targets(
        {"--json": args.json, "--report": args.report},
        protected={source: "the model"},
        models=[source],
        force=args.force,
    )
    model = ir.load(source)
    stats = collect(model, args.top)
    console = Console()
    console.print(f"[bold]{args.model}[/bold]")
    console.print(f"IR version {stats['ir_version']}, producer {stats['producer'] or '?'}")
    opsets: dict[str, int] = stats["opsets"]  # type: ignore[assignment]
    console.print("opsets: " + ", ".join(f"{d or 'ai.onnx'} {v}" for d, v in opsets.items()))
    for line in describe_counts(stats):
        console.print(line, markup=False, soft_wrap=True)
    ops = Table(title="nodes by op type")
    ops.add_column("op")
    ops.add_column("count", justify="right")
    for op, count in sorted(stats["ops"].items(), key=lambda kv: (-kv[1], kv[0])):  # type: ignore[attr-defined]
        ops.add_row(op, str(count))
    console.print(ops)
    largest = Table(title=f"largest tensors (top {args.top})")
    for column in ("name", "dtype", "shape", "size"):
        largest.add_column(column)
    for item in stats["largest_tensors"]:  # type: ignore[attr-defined]
        largest.add_row(item["name"], item["dtype"], str(item["shape"]), human_bytes(item["bytes"]))
    console.print(largest)
    if args.json:
        _files.write_text_atomically(args.json, json.dumps(stats, indent=2) + "\n")
    if args.report:
        from rewriter.report import write_stats_report

        write_stats_report(args.report, model, name=Path(args.model).name, top=args.top)
    return 0
