"""Rewrite speed: this project against onnxscript's rewriter, onnxslim, onnxoptimizer and onnxsim.

Synthetic chain models (per layer: MatMul, Add, Transpose, Transpose, Identity, Relu, Mul by 1,
Add) of 1k to 100k nodes, plus any real models given on the command line. Every tool goes from
an in-memory ModelProto to an in-memory ModelProto; each measurement runs in a fresh
subprocess (so one tool's caches or memory do not affect another) with a timeout. Reports the
median of repeats, node counts after, per-node time and ratios to this project.

    pip install -e '.[bench]'
    python benchmarks/rewrite_speed.py                 # synthetic sizes
    python benchmarks/rewrite_speed.py --sizes 8000    # just the 8k-node chain

`--whole-process` times what a user waits for instead: the `rewrite` command against onnxsim
(its command line, and a three-line script calling `onnxsim.simplify` then `onnx.save`),
each a whole process from start to exit, imports included, file to file; the commands run
in rounds (rewrite, onnxsim, the script, rewrite, ...) and a ratio is the median of the
rounds' ratios. `--baseline DIR` adds the `rewrite` of another checkout (an earlier commit:
`git worktree add DIR COMMIT`) to the same rounds, for a before/after in one run. Each
checkout's `ir` and `rewriter` are byte-compiled first, as `pip install` does for the peers'
packages: where PYTHONDONTWRITEBYTECODE is set, an uncompiled checkout would otherwise
compile its sources again in every process and be timed doing it.

    python benchmarks/rewrite_speed.py --whole-process --sizes 8000 16000 \
        --models tests/models/bert_ts14.onnx tests/models/gpt2_ts14.onnx --runs 5
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import resource
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


# What the whole-process peers run after the interpreter (MODEL and OUT are appended).
_SIMPLIFY_SCRIPT = (
    "import sys, onnx, onnxsim\n"
    "model, _ = onnxsim.simplify(onnx.load(sys.argv[1]))\n"
    "onnx.save(model, sys.argv[2])\n"
)
WHOLE_PROCESS = {
    "rewrite": ["-m", "rewriter.cli", "{model}", "-o", "{out}", "--force", "--no-progress"],
    "onnxsim": ["-m", "onnxsim", "{model}", "{out}"],
    "onnxsim.simplify": ["-c", _SIMPLIFY_SCRIPT, "{model}", "{out}"],
}


def chain_cases(sizes: list[int], folder: Path) -> list[tuple[str, Path]]:
    """(label, path) of the synthetic chain of each size, saved in `folder`."""
    cases = []
    for size in sizes:
        path = folder / f"chain_{size}.onnx"
        onnx.save(chain_model(size), path)
        cases.append((f"chain {size}", path))
    return cases


def command(tool: str, model: Path, out: Path) -> list[str]:
    """The interpreter arguments that run `tool` on `model`, writing `out`."""
    return [arg.format(model=model, out=out) for arg in WHOLE_PROCESS[tool]]


def run_process(argv: list[str], timeout: float, source: Path | None) -> dict[str, float]:
    """One whole process: its wall seconds and CPU seconds (user + system, children included).

    `source`: the checkout whose `rewriter` and `ir` the process imports (None: as installed);
    it is also the working folder, which `python -m` puts first on the import path.
    """
    env = dict(os.environ)
    if source is not None:
        env["PYTHONPATH"] = str(source)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=source,
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["failed"])[-1]
        raise RuntimeError(f"{' '.join(argv[:3])}: {last[:200]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall": wall, "cpu": cpu}


def whole_process(
    cases: list[tuple[str, Path]],
    peers: list[str],
    runs: int,
    timeout: float,
    tmp: Path,
    baseline: Path | None = None,
) -> list[dict[str, object]]:
    """`rewrite` (and a baseline checkout's) against each peer on each model (see the docstring).

    Each round runs every command once, in turn; a ratio is the median over the rounds of
    the round's ratio.
    """
    contenders = {"rewrite": ROOT}
    if baseline is not None:
        contenders[f"rewrite at {baseline.name}"] = baseline
    for source in contenders.values():
        for package in ("ir", "rewriter"):
            compileall.compile_dir(source / package, quiet=1)
    rows: list[dict[str, object]] = []
    for label, path in cases:
        nodes = len(onnx.load(path, load_external_data=False).graph.node)
        rounds: list[dict[str, dict[str, float]]] = []
        for _ in range(runs):
            times = {}
            for name, source in contenders.items():
                argv = command("rewrite", path, tmp / "rw.onnx")
                times[name] = run_process(argv, timeout, source)
            for peer in peers:
                times[peer] = run_process(command(peer, path, tmp / "peer.onnx"), timeout, None)
            rounds.append(times)
        for name in contenders:
            for peer in peers:
                row: dict[str, object] = {
                    "model": label,
                    "nodes_before": nodes,
                    "rewrite": name,
                    "peer": peer,
                    "runs": runs,
                }
                for clock in ("wall", "cpu"):
                    ours = [r[name][clock] for r in rounds]
                    theirs = [r[peer][clock] for r in rounds]
                    row[f"rewrite_{clock}"] = statistics.median(ours)
                    row[f"peer_{clock}"] = statistics.median(theirs)
                    row[f"ratio_{clock}"] = statistics.median(
                        a / b for a, b in zip(ours, theirs, strict=True)
                    )
                print(
                    f"{label:>14} {name} vs {peer}: {row['ratio_wall']:.2f} (wall), "
                    f"{row['ratio_cpu']:.2f} (CPU)",
                    flush=True,
                )
                rows.append(row)
    return rows


def write_whole_process_markdown(rows: list[dict[str, object]], path: Path) -> None:
    """One table: per model, rewrite and peer, medians of wall and CPU seconds and ratios."""
    lines = [
        "# Whole-process rewrite time against onnxsim",
        "",
        f"Each command a fresh process, imports included, file to file; every round runs each "
        f"command once, in turn; medians over the rounds; ratios are medians of the rounds' "
        f"ratios (below 1: `rewrite` is faster). {os.cpu_count()} CPUs, load average "
        f"{os.getloadavg()[0]:.1f} at the end.",
        "",
        "| model | nodes | rewrite | peer | rewrite wall (s) | peer wall (s) | ratio wall | "
        "rewrite CPU (s) | peer CPU (s) | ratio CPU |",
        "|---|---:|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    keys = ("rewrite_wall", "peer_wall", "ratio_wall", "rewrite_cpu", "peer_cpu", "ratio_cpu")
    for r in rows:
        cells = [str(r["model"]), str(r["nodes_before"]), str(r["rewrite"]), str(r["peer"])]
        cells += [f"{float(r[key]):.2f}" for key in keys]  # type: ignore[arg-type]
        lines.append("| " + " | ".join(cells) + " |")
    path.write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="*", default=[1000, 8000, 10000, 100000])
    parser.add_argument("--models", type=Path, nargs="*", default=[], help="real models to add")
    parser.add_argument("--tools", nargs="*", default=list(TOOLS))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument(
        "--whole-process", action="store_true", help="time whole commands against onnxsim"
    )
    parser.add_argument(
        "--peers",
        nargs="*",
        default=["onnxsim", "onnxsim.simplify"],
        choices=[name for name in WHOLE_PROCESS if name != "rewrite"],
        help="with --whole-process: the peers to run against",
    )
    parser.add_argument("--runs", type=int, default=5, help="with --whole-process: runs of each")
    parser.add_argument(
        "--baseline",
        type=Path,
        help="with --whole-process: also run `rewrite` from this checkout (an earlier commit, "
        "e.g. from `git worktree add`), in the same rounds",
    )
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    if args.whole_process:
        with tempfile.TemporaryDirectory() as tmp:
            cases = chain_cases(args.sizes, Path(tmp))
            cases += [(p.name, p.resolve()) for p in args.models]
            baseline = args.baseline.resolve() if args.baseline else None
            rows = whole_process(cases, args.peers, args.runs, args.timeout, Path(tmp), baseline)
        (OUT / "rewrite_whole_process.json").write_text(json.dumps(rows, indent=2))
        write_whole_process_markdown(rows, OUT / "rewrite_whole_process.md")
        print((OUT / "rewrite_whole_process.md").read_text())
        return
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        cases = chain_cases(args.sizes, Path(tmp)) + [(p.name, p) for p in args.models]
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
