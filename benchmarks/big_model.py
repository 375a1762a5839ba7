"""Benchmark: peak memory and time of rewriting a model with more than 2 GB of weights.

Run: ``python benchmarks/big_model.py [--layers 4] [--side 12288] [--work DIR]``.

The model is `tests/robustness/big_model.py`'s: four MatMul weights of side x side float32
(2.25 GiB at the defaults) in one external data file, plus a small Conv + BatchNormalization
branch. Each task runs in a fresh interpreter that reports its own peak RSS (VmHWM, which
belongs to the process's address space, unlike ru_maxrss that a child inherits):

* ``baseline``: import the rewriter and load the shipped rule library (no model);
* ``rewrite (same folder)``: ``rewrite MODEL -o OUT`` beside the model (references kept);
* ``rewrite (other folder)``: the same into another folder (weights streamed into OUT.data);
* ``ir.load + ir.save``: lifting and saving elsewhere, no rules;
* ``onnx.load + save``: onnx loading the weights and saving them with external data (what
  a tool without lazy weights does), for comparison;
* ``rewrite --verify``: the same-folder run with verification by onnxruntime (which holds
  both models' weights), for information.

Results are printed and written to ``benchmarks/out/big_model.md`` and ``.json``.
Acceptance (DESIGN.md): peak memory of a rewrite far below the weights' size.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT_DIR = ROOT / "benchmarks" / "out"
TASKS = {
    "baseline": "baseline (imports + rule library)",
    "rewrite_same": "rewrite, same folder",
    "rewrite_other": "rewrite, other folder",
    "ir_roundtrip": "ir.load + ir.save, other folder",
    "onnx_roundtrip": "onnx.load + onnx.save, other folder",
    "rewrite_verify": "rewrite --verify (onnxruntime), same folder",
}


def _peak_rss_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def _rss_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def worker(task: str, model: str, folder: str) -> dict[str, Any]:
    """Run one task in this (fresh) process; returns peak RSS, baseline RSS and wall time."""
    import rewriter
    import rewriter.api._rewrite
    from rewriter.cli import main

    rewriter.load_rules(*rewriter.api.default_library_files())  # part of the baseline
    baseline = _rss_bytes()
    same = str(Path(model).parent / "out.onnx")
    other = str(Path(folder) / "out.onnx")
    start = time.perf_counter()
    if task == "rewrite_same":
        code = main([model, "-o", same, "--force", "--no-progress"])
    elif task == "rewrite_other":
        code = main([model, "-o", other, "--force", "--no-progress"])
    elif task == "rewrite_verify":
        code = main([model, "-o", same, "--force", "--no-progress", "--verify", "--examples", "3"])
    elif task == "ir_roundtrip":
        import ir

        ir.save(ir.load(model), other)
        code = 0
    elif task == "onnx_roundtrip":
        import onnx

        proto = onnx.load(model)
        onnx.save(proto, other, save_as_external_data=True, location="out.onnx.data")
        code = 0
    else:
        code = 0
    seconds = time.perf_counter() - start
    if code != 0:
        raise RuntimeError(f"{task} exited with {code}")
    return {"peak_rss": _peak_rss_bytes(), "baseline_rss": baseline, "seconds": seconds}


def measure(task: str, model: Path, folder: Path) -> dict[str, Any]:
    """Run `worker` in a fresh interpreter and return its JSON result."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    cmd = [sys.executable, __file__, "--worker", task, str(model), str(folder)]
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{task} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _gib(n: float) -> str:
    return f"{n / 2**30:.2f} GiB"


def _mib(n: float) -> str:
    return f"{n / 2**20:,.0f} MiB"


def report(results: dict[str, Any], weights: int, layers: int, build_seconds: float) -> list[str]:
    lines = [
        "# Big-model benchmark (benchmarks/big_model.py)",
        "",
        f"Python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} CPUs; "
        f"load average {os.getloadavg()[0]:.1f} (other work on the machine adds noise).",
        "",
        f"Weights: {_gib(weights)} of float32 in one external data file ({layers} MatMul "
        f"weights of {_mib(weights / layers)} each, plus small Conv/BatchNormalization tensors); "
        f"written in {build_seconds:.0f} s.",
        "Peak RSS is the process's VmHWM, which includes the interpreter with onnx, numpy and",
        "the rewriter imported and the shipped rule library loaded (the baseline).",
        "",
        "| task | wall time | peak RSS | peak - baseline | peak / weights |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for task, label in TASKS.items():
        if task not in results:
            continue
        r = results[task]
        lines.append(
            f"| {label} | {r['seconds']:.1f} s | {_mib(r['peak_rss'])} | "
            f"{_mib(r['peak_rss'] - r['baseline_rss'])} | {r['peak_rss'] / weights:.1%} |"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="peak memory of rewriting a >2 GB model")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--side", type=int, default=12288)
    parser.add_argument("--work", type=Path, help="folder for the model (default: a temp dir)")
    parser.add_argument("--tasks", nargs="*", default=list(TASKS), choices=list(TASKS))
    parser.add_argument("--worker", nargs=3, metavar=("TASK", "MODEL", "FOLDER"))
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(*args.worker)))
        return 0
    sys.path.insert(0, str(ROOT))
    from tests.robustness.big_model import build_big_model

    with tempfile.TemporaryDirectory(prefix="big_model_", dir=args.work) as work:
        start = time.perf_counter()
        big = build_big_model(Path(work) / "model", layers=args.layers, side=args.side)
        build_seconds = time.perf_counter() - start
        results = {}
        for task in args.tasks:
            results[task] = measure(task, big.path, Path(work) / "other")
            print(task, results[task], flush=True)
    lines = report(results, big.weight_bytes, args.layers, build_seconds)
    print("\n".join(lines))
    OUT_DIR.mkdir(exist_ok=True)
    (OUT_DIR / "big_model.md").write_text("\n".join(lines) + "\n")
    payload = {"weights_bytes": big.weight_bytes, "results": results}
    (OUT_DIR / "big_model.json").write_text(json.dumps(payload, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
