"""Profile one whole `rewrite` command (imports included) and say where its CPU time goes.

    python benchmarks/profile_rewrite.py --chain 16000          # rewrite_speed.chain_model
    python benchmarks/profile_rewrite.py tests/models/bert_ts14.onnx --top 20
    python benchmarks/profile_rewrite.py --chain 16000 --save out.prof   # for snakeviz etc.

Runs `rewrite MODEL -o OUT` in this interpreter under cProfile, from before the command
line's imports to its exit. cProfile's clock is the wall clock by default (cheap to read);
`--cpu-clock` reads the process's CPU time instead, so that other work on a shared machine
does not count, at the price of a slower clock read on every call and return. Prints the
top functions by own time and by cumulative time, and the share of each part of the
pipeline (`PARTS`): each function's own time goes to the innermost part on its heaviest
call path. cProfile's overhead inflates code that makes many small Python calls (the
matcher more than onnx's C++): the shares are for comparing runs and finding hot spots;
the whole-process ratio to onnxsim is `benchmarks/rewrite_speed.py`'s.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# (label, module path suffix, function name): a call path is charged to the last of these it
# passes through.
PARTS = (
    ("imports", "<frozen importlib._bootstrap>", "_find_and_load"),
    ("load rules", "rewriter/api/_library.py", "load_rules"),
    ("load model", "rewriter/api/_models.py", "as_model"),
    ("shape inference", "rewriter/engine/_shape_facts.py", "infer_facts"),
    ("matcher and conditions", "rewriter/engine/_matcher.py", "match"),
    ("apply: build (rewrite block)", "rewriter/engine/_build.py", "build"),
    ("apply: per-node type inference", "rewriter/engine/_build.py", "_infer"),
    ("apply: replacement type check", "rewriter/engine/_typecheck.py", "check_replacements"),
    ("apply: kernel check", "rewriter/engine/_builder.py", "_check_runnable"),
    ("apply: commit", "rewriter/engine/_commit.py", "commit"),
    ("apply: validate", "rewriter/engine/_validate.py", "find_problem"),
    ("apply: finish", "rewriter/engine/_commit.py", "finish"),
    ("apply: trace and worklist", "rewriter/engine/_manager.py", "_apply"),
    ("worklist: downstream", "rewriter/engine/_worklist.py", "downstream"),
    ("built-in passes", "rewriter/engine/_fold.py", "fold_constants"),
    ("built-in passes", "rewriter/engine/_passes.py", "eliminate_dead_code"),
    ("built-in passes", "rewriter/engine/_passes.py", "eliminate_common_subexpressions"),
    ("built-in passes", "rewriter/engine/_transposes.py", "optimize_transposes"),
    ("built-in passes", "rewriter/engine/_structure.py", "flatten_concats"),
    ("built-in passes", "rewriter/engine/_structure.py", "inline_constant_ifs"),
    ("manager (other)", "rewriter/engine/_manager.py", "execute"),
    ("drain loop", "rewriter/engine/_manager.py", "_drain_timed"),
    ("check (onnx checker)", "rewriter/api/_rewrite.py", "_checker_problem"),
    ("save", "ir/_serde_io.py", "save"),
)


def profile(model: Path, out: Path, *, cpu_clock: bool) -> cProfile.Profile:
    """Run the command line on `model` under cProfile; returns the profiler."""
    profiler = cProfile.Profile(time.process_time) if cpu_clock else cProfile.Profile()
    profiler.enable()
    from rewriter.cli import main

    code = main([str(model), "-o", str(out), "--force", "--no-progress"])
    profiler.disable()
    if code != 0:
        raise SystemExit(f"rewrite exited with {code}")
    return profiler


def parts(stats: pstats.Stats) -> dict[str, float]:
    """CPU seconds per part of `PARTS` (plus `other`), from cProfile's caller graph.

    Each function's own time is charged to the innermost part among its callers, found by
    walking the caller graph upwards (the most expensive caller first, as the graph keeps
    no call paths).
    """
    raw = stats.stats  # type: ignore[attr-defined]
    labels = {}
    for key in raw:
        filename, _, name = key
        for label, suffix, function in PARTS:
            if name == function and filename.replace("\\", "/").endswith(suffix):
                labels[key] = label
    memo: dict[tuple[str, int, str], str] = {}

    def part_of(key: tuple[str, int, str], depth: int = 0) -> str:
        if key in labels:
            return labels[key]
        if key in memo:
            return memo[key]
        memo[key] = "other"  # cuts recursion
        callers = raw[key][4]
        if callers and depth < 200:
            heaviest = max(callers, key=lambda caller: callers[caller][3])
            memo[key] = part_of(heaviest, depth + 1)
        return memo[key]

    seconds = dict.fromkeys((label for label, _, _ in PARTS), 0.0)
    seconds["other"] = 0.0
    for key, (_, _, own, _, _) in raw.items():
        seconds[part_of(key)] += own
    return seconds


def chain_file(nodes: int, folder: Path) -> Path:
    """`rewrite_speed.chain_model(nodes)` saved in `folder`."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import onnx
    from rewrite_speed import chain_model

    path = folder / f"chain_{nodes}.onnx"
    onnx.save(chain_model(nodes), path)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("model", nargs="?", type=Path)
    parser.add_argument("--chain", type=int, help="profile chain_model(N) instead of MODEL")
    parser.add_argument("--top", type=int, default=10, help="functions to list")
    parser.add_argument("--save", type=Path, help="also write the raw profile here")
    parser.add_argument("--cpu-clock", action="store_true", help="time with process CPU time")
    args = parser.parse_args()
    if (args.model is None) == (args.chain is None):
        parser.error("give MODEL or --chain N")
    with tempfile.TemporaryDirectory() as tmp:
        model = args.model or chain_file(args.chain, Path(tmp))
        profiler = profile(model, Path(tmp) / "out.onnx", cpu_clock=args.cpu_clock)
    if args.save:
        profiler.dump_stats(args.save)
    stats = pstats.Stats(profiler)
    total = sum(entry[2] for entry in stats.stats.values())  # type: ignore[attr-defined]
    clock = "CPU" if args.cpu_clock else "wall"
    print(f"{model.name if args.model else f'chain {args.chain}'}: {total:.2f} {clock} s profiled")
    print("\nCPU share by part:")
    for label, seconds in sorted(parts(stats).items(), key=lambda item: -item[1]):
        print(f"  {label:34s} {seconds:7.2f} s  {100 * seconds / total:5.1f}%")
    for order in ("tottime", "cumulative"):
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).strip_dirs().sort_stats(order).print_stats(args.top)
        lines = text.getvalue().splitlines()
        start = next(i for i, line in enumerate(lines) if line.lstrip().startswith("ncalls"))
        print(f"\nTop {args.top} by {order}:")
        print("\n".join(lines[start:]).rstrip())


if __name__ == "__main__":
    main()
