"""`rewrite stats MODEL`: IR version, opsets, node counts by op type, parameters."""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

import ir
from rewriter._trace import op_histogram


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `rewrite stats`."""
    parser.add_argument("model", help="the ONNX model")
    parser.add_argument("--json", metavar="FILE", help="also write the statistics as JSON")
    parser.add_argument(
        "--top", type=int, default=10, help="how many of the largest tensors to list"
    )
    parser.add_argument(
        "--report", metavar="FILE", help="also write the statistics as a self-contained HTML page"
    )


def collect(model: ir.Model, top: int = 10) -> dict[str, object]:
    """The statistics of a model, without reading any weight bytes."""
    tensors = []
    for graph in model.graphs():
        for name, value in graph.initializers.items():
            tensor = value.const_value
            if tensor is None:
                continue
            tensors.append(
                (
                    name,
                    tensor.dtype.onnx_name,
                    list(tensor.shape),
                    tensor.size,
                    tensor.nbytes,
                    tensor.is_external,
                )
            )
    by_dtype: Counter[str] = Counter()
    for _, dtype, _, size, _, _ in tensors:
        by_dtype[dtype] += size
    largest = sorted(tensors, key=lambda t: (-t[4], t[0]))[:top]
    return {
        "ir_version": model.ir_version,
        "producer": f"{model.producer_name} {model.producer_version}".strip(),
        "opsets": dict(model.opset_imports),
        "nodes": sum(op_histogram(model).values()),
        "ops": op_histogram(model),
        "functions": [f"{f.domain}.{f.name}" for f in model.functions.values()],
        "inputs": [f"{v.name}: {v.type}" for v in model.graph.inputs],
        "outputs": [f"{v.name}: {v.type}" for v in model.graph.outputs],
        "initializers": len(tensors),
        "parameters": sum(t[3] for t in tensors),
        "parameter_bytes": sum(t[4] for t in tensors),
        "external_tensors": sum(1 for t in tensors if t[5]),
        "parameters_by_dtype": dict(by_dtype),
        "largest_tensors": [
            {"name": n, "dtype": d, "shape": s, "bytes": b, "external": e}
            for n, d, s, _, b, e in largest
        ],
    }


def _human_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.1f} {unit}" if unit != "B" else f"{int(size)} B"
        size /= 1024
    return f"{n} B"


def run(args: argparse.Namespace) -> int:
    """Print the statistics."""
    from rich.console import Console
    from rich.table import Table

    model = ir.load(args.model)
    stats = collect(model, args.top)
    console = Console()
    console.print(f"[bold]{args.model}[/bold]")
    console.print(f"IR version {stats['ir_version']}, producer {stats['producer'] or '?'}")
    opsets: dict[str, int] = stats["opsets"]  # type: ignore[assignment]
    console.print("opsets: " + ", ".join(f"{d or 'ai.onnx'} {v}" for d, v in opsets.items()))
    console.print(
        f"{stats['nodes']} nodes, {stats['initializers']} initializers, "
        f"{stats['parameters']:,} parameters ({_human_bytes(int(stats['parameter_bytes']))}), "  # type: ignore[call-overload]
        f"{stats['external_tensors']} external"
    )
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
        largest.add_row(
            item["name"], item["dtype"], str(item["shape"]), _human_bytes(item["bytes"])
        )
    console.print(largest)
    if args.json:
        Path(args.json).write_text(json.dumps(stats, indent=2) + "\n")
    if args.report:
        from rewriter.report import write_stats_report

        write_stats_report(args.report, model, name=Path(args.model).name, top=args.top)
    return 0
