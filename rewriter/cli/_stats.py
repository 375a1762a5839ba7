"""`rewrite stats MODEL`: IR version, opsets, node counts by op type, parameters.

Parameters are the elements of initializers and of Constant nodes' values, so a rewrite that
turns Constants into initializers does not change the count. `--json` and `--report` are
written atomically, never over the model or its external data, and over an existing file
only with `--force`.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

import ir
from rewriter.api import Profile, describe_counts, human_bytes, profile
from rewriter.api import collect_stats as collect
from rewriter.cli import _files

if TYPE_CHECKING:
    from rich.console import Console


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
    shapes = dict(args.input_shape)
    costs = profile(model, input_shapes=shapes)
    console = Console(file=_files.human_stream(args.json))
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
    _print_profile(console, costs, args.top, bool(shapes))
    if args.json:
        _files.write_json(args.json, {**stats, **costs.as_json()})
    if args.report:
        from rewriter.report import write_stats_report

        write_stats_report(
            args.report, model, name=Path(args.model).name, top=args.top, profile=costs
        )
    return 0


def _print_profile(console: Console, costs: Profile, top: int, shaped: bool) -> None:
    from rich.table import Table

    per = "" if shaped else " (symbolic dims counted as 1: per example)"
    console.print(
        f"estimated cost of one run{per}: {costs.flops:,} FLOPs, "
        f"{human_bytes(costs.bytes_moved)} moved",
        markup=False,
    )
    table = Table(title=f"cost by op type (top {top} by FLOPs)")
    for column in ("op", "nodes", "FLOPs", "share", "bytes moved"):
        table.add_column(column, justify="left" if column == "op" else "right")
    total = costs.flops or 1
    for op, count, flops, moved in costs.by_op()[:top]:
        table.add_row(
            op, str(count), f"{flops:,}", f"{100 * flops / total:.1f}%", human_bytes(moved)
        )
    console.print(table)
    layers = Table(title=f"parameter bytes by layer (top {top})")
    layers.add_column("layer")
    layers.add_column("bytes", justify="right")
    for layer, size in costs.layers[:top]:
        layers.add_row(layer, human_bytes(size))
    console.print(layers)
    flagged = [w for w in costs.weights if w.flags]
    if flagged:
        console.print(f"weights that stand out ({len(flagged)} of {len(costs.weights)}):")
        for weight in flagged:
            console.print(f"  {weight.name}: {', '.join(weight.flags)}", markup=False)
    else:
        console.print(f"weights: none of {len(costs.weights)} float tensors stands out")
    for line in costs.disagreements:
        console.print(f"shape inference disagrees: {line}", markup=False)
