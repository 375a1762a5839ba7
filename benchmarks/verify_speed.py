"""Verification speed: a full `check_equivalence` of a transformer-sized model.

Times `check_equivalence(m, m, examples=20)` (two onnxruntime sessions, 20 hypothesis
examples, comparison of every output) on exported models from `tests/models`, and, for
reference, the same run against the model's onnxruntime-optimized version. Reports the median
of a few repeats, split into the one-off cost (loading, analysis, sessions) and the
per-example cost.

    python benchmarks/verify_speed.py                      # bert_ts14
    python benchmarks/verify_speed.py gpt2_ts14 vit_ts14   # other models in tests/models
    python benchmarks/verify_speed.py --repeats 5 --examples 50
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import onnx
import onnxruntime as ort

from rewriter.verification import InputOptions, VerifyOptions, check_equivalence

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "tests" / "models"


def ort_optimized(path: Path, folder: Path) -> Path:
    """The model after onnxruntime's extended graph optimizations, saved to `folder`."""
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    target = folder / f"{path.stem}.ort.onnx"
    options.optimized_model_filepath = str(target)
    ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    return target


def timed(original: Path, rewritten: Path, examples: int, repeats: int) -> tuple[float, int]:
    times = []
    runs = 0
    for seed in range(repeats):
        start = time.perf_counter()
        result = check_equivalence(
            original,
            rewritten,
            VerifyOptions(
                inputs=InputOptions(examples=examples, seed=seed), save_counterexample=False
            ),
        )
        times.append(time.perf_counter() - start)
        assert result.ok, result.render_table()
        runs = result.examples_run
    return statistics.median(times), runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=["bert_ts14"])
    parser.add_argument("--examples", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(
        f"{'model':<24} {'nodes':>6} {'pair':<14} {'examples':>8} {'median s':>9} {'s/example':>10}"
    )
    with tempfile.TemporaryDirectory() as folder:
        for name in args.models:
            path = MODELS / f"{name}.onnx"
            if not path.exists():
                print(f"{name}: not in tests/models, skipped")
                continue
            nodes = len(onnx.load(str(path), load_external_data=False).graph.node)
            optimized = ort_optimized(path, Path(folder))
            one, _ = timed(path, path, 1, args.repeats)
            for label, other in (("self", path), ("ort-optimized", optimized)):
                seconds, runs = timed(path, other, args.examples, args.repeats)
                per_example = (seconds - one) / max(runs - 1, 1)
                print(
                    f"{name:<24} {nodes:>6} {label:<14} {runs:>8} {seconds:>9.2f} "
                    f"{per_example:>10.4f}"
                )
            print(f"{name:<24} {nodes:>6} {'self, 1 ex.':<14} {1:>8} {one:>9.2f}")


if __name__ == "__main__":
    main()
