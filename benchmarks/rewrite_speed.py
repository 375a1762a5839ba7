"""Rewrite speed: this project against onnxscript's rewriter, onnxslim, onnxoptimizer and onnxsim.

Synthetic chain models (per layer: MatMul, Add, Transpose, Transpose, Identity, Relu, Mul by 1,
Add) of 1k to 100k nodes, plus any real models given on the command line. Every tool goes from
an in-memory ModelProto to an in-memory ModelProto; each measurement runs in a fresh
subprocess (so one tool's caches or memory do not affect another) with a timeout. Reports the
median of repeats, node counts after, per-node time and ratios to this project.

    pip install -e '.[bench]'
    python benchmarks/rewrite_speed.py                 # synthetic sizes
    python benchmarks/rewrite_speed.py --sizes 8000    # just the 8k-node chain
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "out"
TOOLS = ("rewrite", "onnxscript", "onnxslim", "onnxoptimizer", "onnxsim")


def chain_model(nodes: int, width: int = 16) -> onnx.ModelProto:
    """A chain of 8-node layers: MatMul, Add, Transpose, Transpose, Identity, Relu, Mul(1), Add."""
    layers = max(1, nodes // 8)
    rng = np.random.default_rng(0)
    graph_nodes = []
    initializers = [numpy_helper.from_array(np.array(1.0, dtype=np.float32), "one")]
    prev = "x"
    for i in range(layers):
        w = f"w{i}"
        b = f"b{i}"
        initializers.append(
            numpy_helper.from_array(rng.standard_normal((width, width)).astype(np.float32) * 0.1, w)
        )
        initializers.append(
            numpy_helper.from_array(rng.standard_normal(width).astype(np.float32) * 0.1, b)
        )
        n = f"l{i}"
        graph_nodes += [
            helper.make_node("MatMul", [prev, w], [f"{n}_mm"], name=f"{n}/MatMul"),
            helper.make_node("Add", [f"{n}_mm", b], [f"{n}_add"], name=f"{n}/Add"),
            helper.make_node(
                "Transpose", [f"{n}_add"], [f"{n}_t1"], perm=[1, 0], name=f"{n}/Transpose"
            ),
            helper.make_node(
                "Transpose", [f"{n}_t1"], [f"{n}_t2"], perm=[1, 0], name=f"{n}/Transpose_1"
            ),
            helper.make_node("Identity", [f"{n}_t2"], [f"{n}_id"], name=f"{n}/Identity"),
            helper.make_node("Relu", [f"{n}_id"], [f"{n}_relu"], name=f"{n}/Relu"),
            helper.make_node("Mul", [f"{n}_relu", "one"], [f"{n}_mul"], name=f"{n}/Mul"),
            helper.make_node("Add", [f"{n}_mul", prev], [f"{n}_out"], name=f"{n}/Add_1"),
        ]
        prev = f"{n}_out"
    graph = helper.make_graph(
        graph_nodes,
        "chain",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [4, width])],
        [helper.make_tensor_value_info(prev, onnx.TensorProto.FLOAT, [4, width])],
        initializers,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


_WORKER = r"""
import json, sys, time, tracemalloc, resource
import onnx
tool, path, repeats = sys.argv[1], sys.argv[2], int(sys.argv[3])
data = open(path, "rb").read()

def run_once():
    model = onnx.ModelProto()
    model.ParseFromString(data)
    t0 = time.perf_counter()
    if tool == "rewrite":
        import ir, rewriter
        result = rewriter.rewrite(model)
        out = ir.to_onnx(result.model)
    elif tool == "onnxscript":
        import onnxscript.rewriter
        out = onnxscript.rewriter.rewrite(model)
    elif tool == "onnxslim":
        import onnxslim
        out = onnxslim.slim(model)
    elif tool == "onnxoptimizer":
        import onnxoptimizer
        out = onnxoptimizer.optimize(model)
    elif tool == "onnxsim":
        import onnxsim
        out, _ = onnxsim.simplify(model)
    else:
        raise SystemExit("unknown tool " + tool)
    return time.perf_counter() - t0, out

times = []
for _ in range(repeats):
    seconds, out = run_once()
    times.append(seconds)
nodes = len(out.graph.node)
peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"times": times, "nodes": nodes, "peak_rss_mb": peak_kb / 1024}))
"""


def measure(tool: str, path: Path, repeats: int, timeout: float) -> dict[str, object]:
    """Run one tool on one model in a fresh interpreter."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", _WORKER, tool, str(path), str(repeats)],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=ROOT,
            env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        )
    except subprocess.TimeoutExpired:
        return {"error": f"timeout after {timeout:.0f}s"}
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["failed"])[-1]
        return {"error": last[:120]}
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["median"] = statistics.median(result["times"])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="*", default=[1000, 8000, 10000, 100000])
    parser.add_argument("--models", type=Path, nargs="*", default=[], help="real models to add")
    parser.add_argument("--tools", nargs="*", default=list(TOOLS))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=600)
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        cases = []
        for size in args.sizes:
            path = Path(tmp) / f"chain_{size}.onnx"
            onnx.save(chain_model(size), path)
            cases.append((f"chain {size}", path))
        cases += [(p.name, p) for p in args.models]
        for label, path in cases:
            nodes_before = len(onnx.load(path, load_external_data=False).graph.node)
            for tool in args.tools:
                repeats = 1 if nodes_before > 20000 and tool != "rewrite" else args.repeats
                t0 = time.perf_counter()
                result = measure(tool, path, repeats, args.timeout)
                print(
                    f"{label:>14} {tool:>13}: {result}  ({time.perf_counter() - t0:.1f}s)",
                    flush=True,
                )
                rows.append({"model": label, "nodes_before": nodes_before, "tool": tool, **result})
    (OUT / "rewrite_speed.json").write_text(json.dumps(rows, indent=2))
    write_markdown(rows, OUT / "rewrite_speed.md")
    print((OUT / "rewrite_speed.md").read_text())


def write_markdown(rows: list[dict[str, object]], path: Path) -> None:
    """A table per model: time, ratio to this project, nodes after, per-node time."""
    lines = [
        "# Rewrite speed",
        "",
        "Median wall time of ModelProto -> ModelProto, fresh process per tool.",
        "",
    ]
    models = list(dict.fromkeys(str(r["model"]) for r in rows))
    for model in models:
        mine = next(
            (r for r in rows if r["model"] == model and r["tool"] == "rewrite" and "median" in r),
            None,
        )
        lines += [
            f"## {model}",
            "",
            "| tool | time (s) | tool / rewrite | nodes after | µs per node | peak RSS (MB) |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for r in (r for r in rows if r["model"] == model):
            if "median" not in r:
                lines.append(f"| {r['tool']} | {r.get('error')} | | | | |")
                continue
            ratio = f"{float(r['median']) / float(mine['median']):.1f}x" if mine else "-"
            per_node = 1e6 * float(r["median"]) / max(1, int(r["nodes_before"]))
            cells = [
                str(r["tool"]),
                f"{float(r['median']):.3f}",
                ratio,
                str(r["nodes"]),
                f"{per_node:.1f}",
                f"{float(r['peak_rss_mb']):.0f}",
            ]
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    path.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
