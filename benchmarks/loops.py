"""Loop rolling and outlining: graph size, file size, session creation and latency in ORT.

For each real model (tests/models) three variants are measured: the original, the model after
`roll_loops` and the model after `outline_functions`. Reported per variant: nodes of the main
graph and in total (Loop bodies and function bodies included), serialized size, the time the
pass took, onnxruntime session-creation time (median of `--sessions` creations) and inference
latency (median of `--runs` runs after `--warmup` runs, on the first stored input sample,
and of a quarter as many on that sample repeated `--batch` times along the batch axis), each
with graph optimizations ORT_ENABLE_ALL and ORT_DISABLE_ALL, on one intra-op thread (so
the figures compare the graphs, not the scheduling). Timings alternate between the variants
in rounds, so load from other processes affects all of them alike. Every variant's outputs
are compared with the original's (`max err`). A second table times detection and rolling on
synthetic chains of growing size (the search must stay near-linear).

    python benchmarks/loops.py                    # all models, writes benchmarks/out/loops.md
    python benchmarks/loops.py --models bert_ts14 --runs 50
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper

import ir
from rewriter.loops import outline_functions, roll_loops

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "tests" / "models"
OUT = ROOT / "benchmarks" / "out"
DEFAULT_MODELS = (
    "bert_ts14",
    "bert_dynamo18",
    "conv1d_ln_gelu_x6_ts17",
    "conv1d_ln_gelu_x6_ts14",
    "gpt2_ts14",
    "vit_ts14",
)
LEVELS = {
    "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
    "none": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
}


def feeds_for(name: str, proto: onnx.ModelProto) -> dict[str, np.ndarray]:
    """The first input sample stored beside the model."""
    data = np.load(MODELS / f"{name}.npz")
    sample = sorted({k.split("_")[1] for k in data.files if k.startswith("input_")})[0]
    names = [vi.name for vi in proto.graph.input]
    if len(names) == 1:
        return {names[0]: data[f"input_{sample}"]}
    return {n: data[f"input_{sample}_{n}"] for n in names}


def session(blob: bytes, level: str) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.graph_optimization_level = LEVELS[level]
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    return ort.InferenceSession(blob, options, providers=["CPUExecutionProvider"])


def interleaved_medians(actions: list[Callable[[], Any]], repeats: int, rounds: int) -> list[float]:
    """Median time of each action, run in `rounds` alternating rounds (load drift hits all)."""
    times: list[list[float]] = [[] for _ in actions]
    per_round = max(1, repeats // rounds)
    for _ in range(rounds):
        for action, bucket in zip(actions, times, strict=True):
            for _ in range(per_round):
                start = time.perf_counter()
                action()
                bucket.append(time.perf_counter() - start)
    return [statistics.median(bucket) for bucket in times]


def count_nodes(model: ir.Model) -> tuple[int, int]:
    """(main graph nodes, all nodes including subgraphs and function bodies)."""
    total = sum(1 for _ in model.graph.all_nodes())
    total += sum(sum(1 for _ in fn.graph.all_nodes()) for fn in model.functions.values())
    return len(model.graph), total


def variant(name: str, kind: str) -> tuple[ir.Model, float]:
    model = ir.load(MODELS / f"{name}.onnx")
    ir.infer_types(model)
    start = time.perf_counter()
    if kind == "rolled":
        roll_loops(model, {})
    elif kind == "outlined":
        outline_functions(model, {})
    elapsed = time.perf_counter() - start
    ir.verify(model)
    return model, elapsed


VARIANTS = ("original", "rolled", "outlined")


def measure(name: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    """All variants of one model; session and latency timings interleaved across variants."""
    rows: list[dict[str, Any]] = []
    blobs: list[bytes] = []
    feeds: dict[str, np.ndarray] = {}
    for kind in VARIANTS:
        model, pass_time = variant(name, kind)
        proto = ir.to_onnx(model)
        blobs.append(proto.SerializeToString())
        feeds = feeds_for(name, proto)
        main, total = count_nodes(model)
        rows.append(
            {
                "model": name,
                "variant": kind,
                "main": main,
                "total": total,
                "bytes": len(blobs[-1]),
                "pass_s": pass_time,
            }
        )
    for level in LEVELS:
        creations = [functools.partial(session, blob, level) for blob in blobs]
        created = interleaved_medians(creations, args.sessions, args.sessions)
        sessions = [session(blob, level) for blob in blobs]
        outputs = [sess.run(None, feeds) for sess in sessions]
        for sess in sessions:
            for _ in range(args.warmup):
                sess.run(None, feeds)
        runs = [functools.partial(sess.run, None, feeds) for sess in sessions]
        latencies = interleaved_medians(runs, args.runs, args.rounds)
        big = {key: np.repeat(value, args.batch, axis=0) for key, value in feeds.items()}
        big_runs = [functools.partial(sess.run, None, big) for sess in sessions]
        big_latencies = interleaved_medians(big_runs, max(1, args.runs // 4), args.rounds)
        for row, made, latency, big_latency, result in zip(
            rows, created, latencies, big_latencies, outputs, strict=True
        ):
            row[f"create_{level}"] = made
            row[f"latency_{level}"] = latency
            row[f"big_{level}"] = big_latency
            row[f"err_{level}"] = max(
                float(np.max(np.abs(a - b))) for a, b in zip(outputs[0], result, strict=True)
            )
    for row in rows:
        print(_format_row(row), flush=True)
    return rows


def synthetic_chain(layers: int, width: int = 16) -> onnx.ModelProto:
    """`layers` x [MatMul, Add, Relu] with different weights."""
    rng = np.random.default_rng(0)
    nodes, inits = [], []
    previous = "x"
    for k in range(layers):
        inits.append(
            numpy_helper.from_array(
                (rng.standard_normal((width, width)) * 0.1).astype(np.float32), f"w{k}"
            )
        )
        inits.append(
            numpy_helper.from_array((rng.standard_normal(width) * 0.1).astype(np.float32), f"b{k}")
        )
        out = "y" if k == layers - 1 else f"h{k}"
        nodes += [
            helper.make_node("MatMul", [previous, f"w{k}"], [f"mm{k}"]),
            helper.make_node("Add", [f"mm{k}", f"b{k}"], [f"add{k}"]),
            helper.make_node("Relu", [f"add{k}"], [out]),
        ]
        previous = out
    float_t = onnx.TensorProto.FLOAT
    graph = helper.make_graph(
        nodes,
        "chain",
        [helper.make_tensor_value_info("x", float_t, ["batch", width])],
        [helper.make_tensor_value_info("y", float_t, ["batch", width])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def scaling(sizes: list[int]) -> list[dict[str, Any]]:
    rows = []
    for layers in sizes:
        model = ir.from_onnx(synthetic_chain(layers))
        ir.infer_types(model)
        nodes = len(model.graph)
        start = time.perf_counter()
        roll_loops(model, {})
        elapsed = time.perf_counter() - start
        rows.append(
            {
                "nodes": nodes,
                "seconds": elapsed,
                "us_per_node": elapsed / nodes * 1e6,
                "after": len(model.graph),
            }
        )
        per_node = elapsed / nodes * 1e6
        print(
            f"synthetic {nodes:>7} nodes: roll {elapsed:8.3f} s ({per_node:6.1f} us/node)"
            f" -> {len(model.graph)} nodes",
            flush=True,
        )
    return rows


def _format_row(row: dict[str, Any]) -> str:
    return (
        f"{row['model']:<24} {row['variant']:<9} main {row['main']:>4} total {row['total']:>4} "
        f"{row['bytes'] / 1024:8.1f} KiB  "
        f"create {row['create_all'] * 1e3:7.1f}/{row['create_none'] * 1e3:7.1f} ms  "
        f"latency {row['latency_all'] * 1e3:7.3f}/{row['latency_none'] * 1e3:7.3f} ms  "
        f"batched {row['big_all'] * 1e3:7.2f}/{row['big_none'] * 1e3:7.2f} ms  "
        f"err {max(row['err_all'], row['err_none']):.1e}"
    )


def markdown(
    rows: list[dict[str, Any]], scale: list[dict[str, Any]], args: argparse.Namespace
) -> str:
    lines = [
        "# Loop rolling and outlining in onnxruntime",
        "",
        f"onnxruntime {ort.__version__}, CPU, one intra-op thread; latency = median of "
        f"{args.runs} runs (in {args.rounds} rounds alternating between the variants) after "
        f"{args.warmup} warm-up runs on the first stored sample; "
        f"session creation = median of {args.sessions}. `all` = ORT_ENABLE_ALL, "
        "`none` = ORT_DISABLE_ALL. `main` = nodes of the main graph, `total` = with Loop "
        "bodies and function bodies. `max err` = largest absolute difference from the "
        "original's outputs at the same optimization level. "
        f"`x{args.batch}`: the same sample repeated {args.batch} times along the batch axis "
        f"(median of {max(1, args.runs // 4)} runs). Rows of one model are measured "
        "interleaved and compare well; on a shared machine absolute figures move by tens of "
        "percent from one run to the next, so compare within a model, not across runs.",
        "",
        "| model | variant | main | total | size KiB | pass ms | create all ms | create none ms "
        f"| latency all ms | latency none ms | x{args.batch} all ms | x{args.batch} none ms "
        "| max err |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
        "| ---: |",
    ]
    for row in rows:
        lines.append(
            f"| {row['model']} | {row['variant']} | {row['main']} | {row['total']} | "
            f"{row['bytes'] / 1024:.1f} | {row['pass_s'] * 1e3:.0f} | "
            f"{row['create_all'] * 1e3:.1f} | "
            f"{row['create_none'] * 1e3:.1f} | {row['latency_all'] * 1e3:.3f} | "
            f"{row['latency_none'] * 1e3:.3f} | {row['big_all'] * 1e3:.3f} | "
            f"{row['big_none'] * 1e3:.3f} | {max(row['err_all'], row['err_none']):.1e} |"
        )
    lines += [
        "",
        "## Detection and rolling time on synthetic chains (MatMul, Add, Relu per layer)",
        "",
        "| nodes | roll s | us per node | nodes after |",
        "| ---: | ---: | ---: | ---: |",
    ]
    for row in scale:
        lines.append(
            f"| {row['nodes']} | {row['seconds']:.3f} | {row['us_per_node']:.1f} | {row['after']} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="*", default=list(DEFAULT_MODELS))
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--sessions", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=10, help="alternating timing rounds")
    parser.add_argument("--batch", type=int, default=16, help="batch repeat for the big input")
    parser.add_argument(
        "--sizes",
        type=int,
        nargs="*",
        default=[300, 1000, 3000, 10000],
        help="synthetic chain layers",
    )
    parser.add_argument("--out", type=Path, default=OUT / "loops.md")
    args = parser.parse_args(argv)
    rows = []
    for name in args.models:
        rows += measure(name, args)
    scale = scaling(args.sizes)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(markdown(rows, scale, args))
    shown = args.out.resolve()
    print(f"wrote {shown.relative_to(ROOT) if shown.is_relative_to(ROOT) else shown}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
