"""How long the HTML rewrite report takes for a real model (issue 10: well under 5 s).

Rewrites tests/models/bert_ts14.onnx (a 6-layer BERT export, 685 nodes) with the shipped
library at opset 20 (LayerNormalization fusions fire), recording subgraphs, then times
`render_rewrite_report` (stats of both models, charts, every picture with one `dot` run,
the HTML). Also reports what recording subgraphs costs the rewrite itself.

    python benchmarks/report_speed.py [--model PATH] [--runs N] [--target-opset N]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import rewriter
from rewriter.report import render_rewrite_report

ROOT = Path(__file__).resolve().parents[1]
T = TypeVar("T")


def _timed(function: Callable[[], T], runs: int) -> tuple[T, list[float]]:
    """The value of the first call and the time of each of `runs` calls (at least one)."""
    start = time.perf_counter()
    value = function()
    times = [time.perf_counter() - start]
    for _ in range(runs - 1):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return value, times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(ROOT / "tests/models/bert_ts14.onnx"))
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--target-opset", type=int, default=20)
    args = parser.parse_args()

    rules = rewriter.load_rules(rewriter.library_path())
    plain = rewriter.RewriteOptions(target_opset=args.target_opset)
    recorded = rewriter.RewriteOptions(target_opset=args.target_opset, record_subgraphs=True)
    _, plain_times = _timed(
        lambda: rewriter.rewrite(args.model, rules, plain),
        args.runs,
    )
    result, recorded_times = _timed(
        lambda: rewriter.rewrite(args.model, rules, recorded),
        args.runs,
    )
    html, report_times = _timed(lambda: render_rewrite_report(result, source=args.model), args.runs)
    applied = sum(1 for e in result.trace.entries if e.kind == "rule")
    model = Path(args.model).resolve()
    print(f"model: {model.relative_to(ROOT) if model.is_relative_to(ROOT) else model}")
    print(f"  {result.nodes_before} -> {result.nodes_after} nodes, {applied} rewrites")
    print(f"  dot: {shutil.which('dot') or 'not found (text fallback)'}")
    pictures = html.count('<svg class="subgraph"')
    print(f"  pictures: {pictures}, page: {len(html) / 1e6:.2f} MB")
    for label, times in (
        ("rewrite", plain_times),
        ("rewrite, record_subgraphs=True", recorded_times),
        ("render_rewrite_report", report_times),
    ):
        print(
            f"  {label:<32} median {statistics.median(times):.3f} s, "
            f"min {min(times):.3f} s over {len(times)} runs"
        )


if __name__ == "__main__":
    main()
