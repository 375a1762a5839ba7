"""How shape/dtype facts are kept current: full inference once, then per-node inference.

The pass manager runs onnx's shape inference over the whole model once, then infers only the
nodes each rewrite creates (`ir.infer_node_types`). This script measures both on the synthetic
chain models of `rewrite_speed.py` and on real exports, and compares the per-rewrite cost with
re-running full inference after every rewrite (what a naive implementation would do).

    python benchmarks/facts_inference.py
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from rewrite_speed import chain_model  # noqa: E402

import ir  # noqa: E402


def measure(label: str, model: ir.Model) -> str:
    t0 = time.perf_counter()
    ir.infer_types(model)
    full = time.perf_counter() - t0
    per_node = []
    for node in list(model.graph)[:2000]:
        t0 = time.perf_counter()
        ir.infer_node_types(node, model.opset_imports)
        per_node.append(time.perf_counter() - t0)
    one = statistics.median(per_node)
    nodes = len(model.graph)
    return f"| {label} | {nodes} | {full * 1e3:.1f} | {one * 1e6:.0f} | {full / one:.0f}x |"


def main() -> None:
    rows = [
        "| model | nodes | full inference (ms) | one node (µs) | full / one node |",
        "|---|---:|---:|---:|---:|",
    ]
    for size in (1000, 10000, 100000):
        rows.append(measure(f"chain {size}", ir.from_onnx(chain_model(size))))
    for name in ("bert_ts14", "gpt2_ts14", "vit_ts14"):
        path = ROOT / "tests" / "models" / f"{name}.onnx"
        if path.exists():
            rows.append(measure(name, ir.load(path)))
    print("\n".join(rows))


if __name__ == "__main__":
    main()
