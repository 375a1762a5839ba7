"""Benchmark: peak memory of `rewrite --target-opset N` against the same rewrite without it.

The version converter is given the model without its weights (`ir._held_weights`), so a
conversion should cost no more memory than the run without one. Acceptance (issue 26): peak
RSS with `--target-opset 23` at most 1.1x the default run's on a BERT-base export.

    # the model (torch venv, see benchmarks/corpus/README.md): BERT-base sizes, random
    # weights, TorchScript exporter at opset 14 -> benchmarks/.cache/corpus/bert_base/
    python benchmarks/corpus/make_bert_base.py benchmarks/.cache/corpus/bert_base --opset 14
    python benchmarks/target_opset_memory.py [--model PATH] [--target 23] [--repeats 3]

Each run is `rewrite MODEL -o OUT` in a fresh interpreter that reports its own peak RSS
(VmHWM: the whole process, imports and rule library included); the two variants alternate
(default, converted, default, ...) and the medians and the median of the pairwise ratios are
printed and written to benchmarks/out/target_opset_memory.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT_DIR = ROOT / "benchmarks" / "out"
DEFAULT_MODEL = ROOT / "benchmarks" / ".cache" / "corpus" / "bert_base" / "bert_base_ts14.onnx"

# Runs the command line in this interpreter, then prints its peak RSS (bytes) and wall time.
_WORKER = """
import json, sys, time
from rewriter.cli import main

start = time.perf_counter()
code = main(sys.argv[1:])
seconds = time.perf_counter() - start
with open("/proc/self/status") as status:
    peak = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmHWM:"))
print(json.dumps({"code": code, "peak_rss": peak, "seconds": seconds}))
"""


def run(model: Path, out: Path, extra: list[str]) -> dict[str, float]:
    """One `rewrite` in a fresh interpreter: its peak RSS and wall time."""
    argv = [str(model), "-o", str(out), "--force", "--no-progress", *extra]
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    done = subprocess.run(
        [sys.executable, "-c", _WORKER, *argv], capture_output=True, text=True, env=env, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"rewrite {' '.join(extra)} failed:\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if result["code"] != 0:
        raise RuntimeError(f"rewrite {' '.join(extra)} exited with {result['code']}")
    return result  # type: ignore[no-any-return]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL)
    parser.add_argument("--target", type=int, default=23, help="the opset to convert to")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each variant")
    args = parser.parse_args(argv)
    if not args.model.exists():
        parser.error(f"{args.model} not found: make it with benchmarks/corpus/make_bert_base.py")
    variants = {
        "default": [],
        f"--target-opset {args.target}": ["--target-opset", str(args.target)],
    }
    results: dict[str, list[dict[str, float]]] = {name: [] for name in variants}
    with tempfile.TemporaryDirectory(prefix="target_opset_memory_") as work:
        for repeat in range(args.repeats):
            for name, extra in variants.items():
                result = run(args.model, Path(work) / "out.onnx", extra)
                results[name].append(result)
                print(f"run {repeat + 1} {name}: {result}", flush=True)
    default, converted = results.values()
    ratios = [c["peak_rss"] / d["peak_rss"] for d, c in zip(default, converted, strict=True)]
    lines = [
        "# Peak memory of `--target-opset` (benchmarks/target_opset_memory.py)",
        "",
        f"Model: {args.model.name} ({args.model.stat().st_size / 2**20:,.0f} MiB); "
        f"{args.repeats} runs of each variant, alternating; {time.strftime('%Y-%m-%d %H:%M')}, "
        f"load average {os.getloadavg()[0]:.1f}.",
        "",
        "| variant | median peak RSS | median wall time |",
        "| --- | ---: | ---: |",
    ]
    for name, runs in results.items():
        peak = statistics.median(r["peak_rss"] for r in runs) / 2**20
        seconds = statistics.median(r["seconds"] for r in runs)
        lines.append(f"| {name} | {peak:,.0f} MiB | {seconds:.1f} s |")
    lines += [
        "",
        f"Peak RSS ratio (converted / default, median of pairs): {statistics.median(ratios):.3f}",
    ]
    print("\n".join(lines))
    OUT_DIR.mkdir(exist_ok=True)
    (OUT_DIR / "target_opset_memory.md").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
