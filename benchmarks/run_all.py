"""Run every benchmark script in turn and keep what each printed in benchmarks/results/.

Each script runs in its own interpreter, one after the other (they measure time and memory:
two at once would disturb each other); its output becomes `benchmarks/results/<name>.md`
with the command, the commit, the date and the machine's load before and after. The corpus
comparison with the peer tools (`run.py`) writes `benchmarks/RESULTS.md` and its plots itself.

    pip install -e '.[bench]'
    python benchmarks/run_all.py                      # everything (about two hours on 2 cores)
    python benchmarks/run_all.py --only parse_speed,roundtrip
    python benchmarks/run_all.py --skip run,big_model  # leave out the long ones

`big_model` writes a 2.25 GiB model into a temporary folder; `run` needs the bench corpus
(`benchmarks/corpus/make_torch_models.py --size bench`, or `--torch-python`).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"

# name -> (arguments, what the acceptance asks of it)
BENCHMARKS: dict[str, tuple[list[str], str]] = {
    "parse_speed": ([], "a 2,000-rule file loads in under 2 s"),
    "roundtrip": (
        [],
        "lift+lower of 100k nodes within 3x of onnx.load+SerializeToString; per-node time "
        "flat within 1.5x from 1k to 100k; peak RSS below 25% of 1 GiB of external weights",
    ),
    "rewrite_speed": (
        [],
        "per-node rewrite time flat within 1.5x from 1k to 100k nodes; at 8k nodes at least "
        "10x faster than onnxscript's rewriter and onnxslim, within 1.5x of onnxsim",
    ),
    "verify_speed": (["bert_ts14", "gpt2_ts14"], "--verify with 20 examples under a minute"),
    "loops": ([], "rolled main graph at most 1/4 of the original plus the Loop"),
    "report_speed": ([], "a report of a 6-layer transformer in under 5 s"),
    "big_model": ([], "peak memory far below the weights' size"),
    "transposes": ([], "no more Transposes than onnxruntime's transpose optimizer leaves"),
    "quantize": (
        [],
        "int8 dynamic vs quantize_dynamic on the 768/3072 MLP: size <= 1.02x, latency <= 1.05x, "
        "SNR >= +3 dB; int4 size <= 0.3x float32, SNR within 0.5 dB of MatMulNBitsQuantizer, "
        "latency <= 1.1x; float16 size <= 0.55x, SNR >= 45 dB; BERT/GPT-2 int8 cosine >= 0.99",
    ),
    "peer_tests": (
        ["--ort-markdown", "benchmarks/results/peer_ort_fusion.md"],
        "onnxoptimizer's own test models: at most its node count wherever its rewrite is "
        "exact, outputs equal; onnxruntime's transformer-fusion test models (with "
        "--ort-source, or skipped): at least the fused ops of onnxruntime's optimizer where "
        "its result is exact, standard Attention at opset 23",
    ),
    "peer_onnxscript": (
        ["--markdown", "benchmarks/results/onnxscript_tests.md"],
        "onnxscript's own rule tests: no result that computes something else, none refused "
        "where onnxruntime runs the original, at most its node count wherever its rewrite is "
        "exact (without --onnxscript-src it clones the installed onnxscript's release tag, "
        "or is skipped)",
    ),
    "run": ([], "the corpus against onnxscript, onnxsim, onnxslim, onnxoptimizer, onnxruntime"),
}


def _commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "ir", "rewriter", "patterns"],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
    except OSError:
        return "unknown"
    suffix = " (with uncommitted changes)" if dirty.stdout.strip() else ""
    return out.stdout.strip() + suffix


def _load() -> str:
    try:
        return " ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def run_one(name: str, arguments: list[str], goal: str) -> int:
    """Run one script; write its output to benchmarks/results/<name>.md; its exit code."""
    command = [sys.executable, str(ROOT / "benchmarks" / f"{name}.py"), *arguments]
    shown = " ".join(["python", f"benchmarks/{name}.py", *arguments])
    print(f"== {shown}", flush=True)
    load_before = _load()
    start = time.perf_counter()
    completed = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    output = completed.stdout.rstrip()
    if completed.returncode != 0:
        output += "\n\n[stderr]\n" + completed.stderr.rstrip()[-4000:]
    print(output, flush=True)
    if name == "run":
        return completed.returncode  # run.py writes benchmarks/RESULTS.md itself
    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    lines = [
        f"# `{shown}`",
        "",
        f"Goal: {goal}.",
        "",
        f"Run {stamp} at commit {_commit()} on {platform.machine()}, {os.cpu_count()} cores,"
        f" Python {platform.python_version()}; load average {load_before} before and"
        f" {_load()} after; {seconds:.0f} s; exit code {completed.returncode}.",
        "Regenerate with `python benchmarks/run_all.py --only " + name + "`.",
        "",
        "```",
        output,
        "```",
        "",
    ]
    (RESULTS / f"{name}.md").write_text("\n".join(lines))
    return completed.returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help="comma-separated names: " + ", ".join(BENCHMARKS))
    parser.add_argument("--skip", default="", help="comma-separated names to leave out")
    args = parser.parse_args(argv)
    names = args.only.split(",") if args.only else list(BENCHMARKS)
    unknown = [n for n in [*names, *filter(None, args.skip.split(","))] if n not in BENCHMARKS]
    if unknown:
        parser.error(f"unknown benchmark(s): {', '.join(unknown)}")
    skip = set(filter(None, args.skip.split(",")))
    failures = []
    for name in names:
        if name in skip:
            continue
        arguments, goal = BENCHMARKS[name]
        if run_one(name, arguments, goal) != 0:
            failures.append(name)
    if failures:
        print(f"failed: {', '.join(failures)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
