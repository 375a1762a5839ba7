"""Benchmark: attention and rotary fusions on real transformer exports (issue 18).

Run: ``python benchmarks/attention_exports.py [DIR] [--only NAME,...] [--rules PATH ...]``.

DIR (default benchmarks/.cache/attention) holds what tests/models/make_attention_exports.py
writes: `<name>.onnx`, the framework's inputs and outputs `<name>.npz` and `<name>.json` (the
number of attention layers and rotated tensors of the source model). Each model is rewritten
with the library (`--rules patterns/`, `--target-opset 23`, as a user would run it), then
this prints per model: Softmax before and after, Attention nodes against attention layers,
RotaryEmbedding nodes against rotated tensors, nodes before and after, and the worst absolute
difference of the rewritten model's outputs from the original's (both on onnxruntime, every
graph optimization off) and from the framework's. With `--ort` the models stay at their own
opset and are rewritten with `--rules patterns/ --rules patterns/ort --add-opset
com.microsoft=1`: the attention counted is onnxruntime's MultiHeadAttention. `--check` exits
non-zero when a model keeps a Softmax, has fewer Attention (RotaryEmbedding) nodes than
layers (rotations), or differs from the original by more than `--atol`.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

import rewriter

DEFAULT_DIR = Path(__file__).resolve().parent / ".cache" / "attention"


@dataclass(frozen=True)
class Row:
    name: str
    softmax_before: int
    softmax_after: int
    attention: int
    layers: int
    rotary: int
    rotations: int
    nodes_before: int
    nodes_after: int
    diff_original: float
    diff_framework: float

    def ok(self, atol: float, rotary: bool = True) -> bool:
        """Fully fused (RotaryEmbedding only asked for at opset 23) and equal."""
        return (
            self.softmax_after == 0
            and self.attention == self.layers
            and (not rotary or self.rotary == self.rotations)
            and self.diff_original <= atol
        )


def run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    names = [i.name for i in session.get_inputs()]
    return session.run(None, {n: feeds[n] for n in names})


def worst(a: list[np.ndarray], b: list[np.ndarray]) -> float:
    return max(float(np.abs(x.astype(np.float64) - y).max()) for x, y in zip(a, b, strict=False))


def measure(path: Path, rules: list[str], ort_contrib: bool = False) -> Row:
    facts = json.loads(path.with_suffix(".json").read_text())
    data = np.load(path.with_suffix(".npz"))
    feeds = {k.removeprefix("input_"): data[k] for k in data.files if k.startswith("input_")}
    framework = [data[k] for k in sorted(k for k in data.files if k.startswith("output_"))]
    original = onnx.load(path)
    options = (
        rewriter.RewriteOptions(add_opsets={"com.microsoft": 1})
        if ort_contrib
        else rewriter.RewriteOptions(target_opset=23)
    )
    result = rewriter.rewrite(original, rules, options)
    fused = "com.microsoft.MultiHeadAttention" if ort_contrib else "Attention"
    before, after = result.ops_before, result.ops_after
    expected = run(original, feeds)
    got = run(result.proto, feeds)
    return Row(
        name=path.stem,
        softmax_before=before.get("Softmax", 0),
        softmax_after=after.get("Softmax", 0),
        attention=after.get(fused, 0),
        layers=facts["attention_layers"],
        rotary=after.get("RotaryEmbedding", 0),
        rotations=facts["rotations"],
        nodes_before=result.nodes_before,
        nodes_after=result.nodes_after,
        diff_original=worst(got, expected),
        diff_framework=worst(got, framework),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", nargs="?", type=Path, default=DEFAULT_DIR)
    parser.add_argument("--only", default="", help="comma-separated export names")
    parser.add_argument("--rules", action="append", help="rule paths (default: patterns/)")
    parser.add_argument("--atol", type=float, default=1e-4)
    parser.add_argument("--check", action="store_true", help="fail on a miss")
    parser.add_argument(
        "--ort", action="store_true", help="onnxruntime contrib ops below opset 23 (patterns/ort)"
    )
    args = parser.parse_args(argv)
    only = {s for s in args.only.split(",") if s}
    library = rewriter.library_path()
    rules = args.rules or [str(library)] + ([str(library / "ort")] if args.ort else [])
    paths = sorted(p for p in args.dir.glob("*.onnx") if not only or p.stem in only)
    if not paths:
        print(f"no exports in {args.dir}: run tests/models/make_attention_exports.py first")
        return 1
    print(
        "| export | Softmax before -> after | Attention / layers | RotaryEmbedding / rotations "
        "| nodes before -> after | max abs diff vs original | vs framework |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- |")
    failed = []
    for path in paths:
        row = measure(path, rules, args.ort)
        print(
            f"| {row.name} | {row.softmax_before} -> {row.softmax_after} "
            f"| {row.attention} / {row.layers} | {row.rotary} / {row.rotations} "
            f"| {row.nodes_before} -> {row.nodes_after} | {row.diff_original:.1e} "
            f"| {row.diff_framework:.1e} |",
            flush=True,
        )
        if not row.ok(args.atol, rotary=not args.ort):
            failed.append(row.name)
    if args.check and failed:
        print(f"not fully fused or not equal: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
