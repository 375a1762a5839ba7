"""Benchmark: lift + lower (`ir.load` + `ir.save`) against onnx's own load and save.

Run: ``python benchmarks/roundtrip.py [--sizes 1000 10000 100000] [--weights-gb 1.0]``.

Part 1 times, on synthetic graphs of 1k, 10k and 100k nodes (a mix of ops with attributes,
value_info for every value as shape inference would add, some initializers):

* ``ir``: ``ir.load(path)`` + ``ir.save(model, out)``;
* ``ir rebuilt``: the same with what lifting recorded of the file dropped before saving, so
  that lowering builds every node, attribute and value_info entry from the IR (what lowering
  costs after a rewrite touched everything; for information);
* ``onnx ser``: ``onnx.load(path)`` + ``SerializeToString()`` (the target's reference);
* ``onnx save``: ``onnx.load(path)`` + ``onnx.save(model, out)``.

Part 2 loads and saves a model with at least 1 GB of external weights (written in chunks, never
held in memory) and reports peak RSS during ``ir.load`` + ``ir.save`` into the same folder and
into another folder (which streams the data), next to onnx's load + save with external data.

Every measurement runs in a fresh subprocess, so peak RSS (``ru_maxrss``) belongs to it alone;
timings are the best of a few repetitions inside that subprocess. Results are printed and
written to ``benchmarks/out/roundtrip.md``. Acceptance targets (issue 2): 100k-node lift+lower
within 3x of onnx.load+SerializeToString; per-node time flat within 1.5x from 1k to 100k;
external-weights peak RSS below 25% of the weights' size.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx.helper

ROOT = Path(__file__).resolve().parent.parent
OUT_DIR = ROOT / "benchmarks" / "out"
CACHE_DIR = ROOT / "benchmarks" / ".cache" / "roundtrip"
TASKS = ("ir", "ir_rebuilt", "onnx_serialize", "onnx_save")
TASK_LABELS = {
    "ir": "ir load+save",
    "ir_rebuilt": "ir rebuilt",
    "onnx_serialize": "onnx load+ser",
    "onnx_save": "onnx load+save",
}
CHUNK = 1 << 24


# ---------------------------------------------------------------------------------------------
# Synthetic models


def _shape_info(name: str, dims: list[int]) -> onnx.ValueInfoProto:
    return onnx.helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, dims)


def synthetic_model(n_nodes: int, seed: int = 0) -> onnx.ModelProto:
    """A valid graph of `n_nodes` nodes over [1, 16, 8, 8] activations, fully typed.

    Ops cycle through a mix with attributes (Conv, Transpose, LeakyRelu, Softmax, Cast,
    ReduceMean, Concat + Slice-like Split, Gemm-free Mul/Add with small initializers), each
    node reads the previous value and sometimes one from further back.
    """
    rng = np.random.default_rng(seed)
    shape = [1, 16, 8, 8]
    nodes: list[onnx.NodeProto] = []
    infos: list[onnx.ValueInfoProto] = []
    inits: list[onnx.TensorProto] = []
    weight = onnx.helper.make_tensor(
        "conv_w", onnx.TensorProto.FLOAT, [16, 16, 1, 1], rng.standard_normal(256).tolist()
    )
    scale = onnx.helper.make_tensor("scale", onnx.TensorProto.FLOAT, [16, 1, 1], [0.5] * 16)
    inits.extend([weight, scale])
    values = ["x"]
    i = 0
    while len(nodes) < n_nodes:
        prev = values[-1]
        back = values[max(0, len(values) - 1 - int(rng.integers(1, 8)))]
        out = f"v{i}"
        kind = i % 10
        name = f"n{i}"
        if kind == 0:
            node = onnx.helper.make_node(
                "Conv",
                [prev, "conv_w"],
                [out],
                name=name,
                kernel_shape=[1, 1],
                pads=[0, 0, 0, 0],
                strides=[1, 1],
                dilations=[1, 1],
                group=1,
            )
        elif kind == 1:
            node = onnx.helper.make_node("LeakyRelu", [prev], [out], name=name, alpha=0.1)
        elif kind == 2:
            node = onnx.helper.make_node("Add", [prev, back], [out], name=name)
        elif kind == 3:
            node = onnx.helper.make_node("Mul", [prev, "scale"], [out], name=name)
        elif kind == 4:
            node = onnx.helper.make_node("Transpose", [prev], [out], name=name, perm=[0, 1, 3, 2])
        elif kind == 5:
            node = onnx.helper.make_node("Softmax", [prev], [out], name=name, axis=1)
        elif kind == 6:
            node = onnx.helper.make_node(
                "Cast", [prev], [out], name=name, to=onnx.TensorProto.FLOAT, saturate=1
            )
        elif kind == 7:
            node = onnx.helper.make_node(
                "HardSigmoid", [prev], [out], name=name, alpha=0.2, beta=0.5
            )
        elif kind == 8:
            node = onnx.helper.make_node("Clip", [prev, "", ""], [out], name=name)
        else:
            node = onnx.helper.make_node(
                "Sub", [prev, back], [out], name=name, doc_string="residual difference"
            )
        nodes.append(node)
        infos.append(_shape_info(out, shape))
        values.append(out)
        i += 1
    graph = onnx.helper.make_graph(
        nodes,
        f"synthetic_{n_nodes}",
        [_shape_info("x", shape)],
        [_shape_info(values[-1], shape)],
        inits,
        value_info=infos[:-1],
    )
    model = onnx.helper.make_model(
        graph, opset_imports=[onnx.helper.make_opsetid("", 21)], producer_name="bench"
    )
    model.ir_version = 10
    return model


def weights_model(folder: Path, total_bytes: int) -> tuple[Path, int]:
    """A model whose MatMul weights (float32, 16 MiB each) fill `total_bytes` of external data.

    The data file is written chunk by chunk; no tensor's bytes are ever held in a proto.
    """
    folder.mkdir(parents=True, exist_ok=True)
    side = 2048  # 2048 x 2048 float32 = 16 MiB per weight
    per_tensor = side * side * 4
    count = max(1, -(-total_bytes // per_tensor))
    data_name = "weights.bin"
    rng = np.random.default_rng(0)
    block = rng.standard_normal(side * side // 16, dtype=np.float32).tobytes()
    tensors = []
    with open(folder / data_name, "wb") as f:
        for k in range(count):
            offset = f.tell()
            for _ in range(16):
                f.write(block)
            tensor = onnx.TensorProto()
            tensor.name = f"w{k}"
            tensor.data_type = onnx.TensorProto.FLOAT
            tensor.dims.extend([side, side])
            tensor.data_location = onnx.TensorProto.EXTERNAL
            for key, value in (("location", data_name), ("offset", offset), ("length", per_tensor)):
                entry = tensor.external_data.add()
                entry.key = key
                entry.value = str(value)
            tensors.append(tensor)
    nodes = []
    current = "x"
    for k in range(count):
        out = "y" if k == count - 1 else f"h{k}"
        nodes.append(onnx.helper.make_node("MatMul", [current, f"w{k}"], [out], name=f"mm{k}"))
        current = out
    graph = onnx.helper.make_graph(
        nodes,
        "weights",
        [_shape_info("x", [1, side])],
        [_shape_info("y", [1, side])],
        tensors,
    )
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 21)])
    path = folder / "model.onnx"
    path.write_bytes(model.SerializeToString())
    return path, count * per_tensor


# ---------------------------------------------------------------------------------------------
# Worker (runs in a fresh subprocess)


def _peak_rss_bytes() -> int:
    """This process's peak RSS since it started running this program.

    On Linux, ru_maxrss survives fork and exec, so a child spawned by a big parent would
    report the parent's size; VmHWM belongs to the process's own address space.
    """
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def _rss_bytes() -> int:
    try:
        import psutil

        return int(psutil.Process().memory_info().rss)
    except ImportError:
        return _peak_rss_bytes()


def _force_rebuild(model: Any) -> None:
    """Make lowering build every message from the IR (nothing is reused from the file)."""
    from ir import _serde_origin

    _serde_origin.forget(model)


def _task(name: str, path: str, out: str) -> Callable[[], None]:
    import ir

    if name == "ir":

        def run() -> None:
            ir.save(ir.load(path), out)

    elif name == "ir_rebuilt":

        def run() -> None:
            model = ir.load(path)
            _force_rebuild(model)
            ir.save(model, out)

    elif name == "onnx_serialize":

        def run() -> None:
            onnx.load(path).SerializeToString()

    elif name == "onnx_save":

        def run() -> None:
            model = onnx.load(path)
            if any(t.data_location == onnx.TensorProto.EXTERNAL for t in model.graph.initializer):
                onnx.save(model, out, save_as_external_data=True, location=Path(out).name + ".data")
            else:
                onnx.save(model, out)

    else:
        raise ValueError(f"unknown task {name!r}")
    return run


def worker(name: str, path: str, out: str, repeats: int) -> dict[str, float]:
    """Run one task: the first run gives peak RSS, the best of all runs gives the time."""
    import gc

    import ir  # noqa: F401  (import cost is not part of the measurement)

    run = _task(name, path, out)
    baseline = _rss_bytes()
    cpu_times = []
    wall_times = []
    for attempt in range(repeats):
        gc.collect()
        wall = time.perf_counter()
        cpu = time.process_time()
        run()
        cpu_times.append(time.process_time() - cpu)
        wall_times.append(time.perf_counter() - wall)
        if attempt == 0:
            peak = _peak_rss_bytes()
    return {
        "seconds": min(cpu_times),
        "wall_seconds": min(wall_times),
        "peak_rss": peak,
        "baseline_rss": baseline,
    }


def measure(name: str, path: Path, out: Path, repeats: int) -> dict[str, float]:
    """Run `worker` in a fresh interpreter and return its JSON result."""
    cmd = [sys.executable, __file__, "--worker", name, str(path), str(out), str(repeats)]
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"worker {name} on {path} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


# ---------------------------------------------------------------------------------------------
# Reports


def _mib(n: float) -> str:
    return f"{n / 2**20:,.0f} MiB"


def _size(n: float) -> str:
    return f"{n / 2**10:,.0f} KiB" if n < 2**20 else f"{n / 2**20:,.1f} MiB"


def graph_benchmark(sizes: list[int], work: Path) -> tuple[list[str], dict[str, Any]]:
    lines = [
        "## Lift + lower of synthetic graphs",
        "",
        "Times are the best of several runs in a fresh process: CPU time (user + system, so",
        "that other processes on a shared machine do not count) and wall time. Per node and",
        "ratio (against onnx load+SerializeToString) use CPU time. Peak RSS is that process's",
        "maximum resident set during the first run.",
        "",
        "| nodes | model size | task | CPU time | wall time | per node | ratio | peak RSS |",
        "| ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    results: dict[str, Any] = {}
    for n in sizes:
        path = work / f"synthetic_{n}.onnx"
        onnx.save(synthetic_model(n), path)
        # Many runs of the small graphs, so that their best run is a quiet one too.
        repeats = max(3, 50_000 // n)
        row = {task: measure(task, path, work / f"out_{task}_{n}.onnx", repeats) for task in TASKS}
        results[str(n)] = row
        reference = row["onnx_serialize"]["seconds"]
        for task in TASKS:
            r = row[task]
            lines.append(
                f"| {n:,} | {_size(path.stat().st_size)} | {TASK_LABELS[task]} | "
                f"{r['seconds'] * 1e3:,.1f} ms | {r['wall_seconds'] * 1e3:,.1f} ms | "
                f"{r['seconds'] / n * 1e6:.2f} µs | "
                f"{r['seconds'] / reference:.2f}x | {_mib(r['peak_rss'])} |"
            )
        print(f"  {n:>7,} nodes: ir {row['ir']['seconds']:.3f}s, onnx {reference:.3f}s", flush=True)
    first, last = str(sizes[0]), str(sizes[-1])
    lines.append("")
    lines.append(f"Flatness (per-node time at {int(last):,} / at {int(first):,} nodes):")
    lines.append("")
    for task in TASKS:
        a = results[first][task]["seconds"] / int(first)
        b = results[last][task]["seconds"] / int(last)
        lines.append(f"- {TASK_LABELS[task]}: {b / a:.2f}")
        results.setdefault("flatness", {})[task] = b / a
    flatness = results["flatness"]
    relative = flatness["ir"] / flatness["onnx_serialize"]
    lines.append("")
    lines.append(
        f"ir's flatness relative to onnx load+SerializeToString's own: {relative:.2f} "
        "(the part of the growth that is the IR's, not the machine's memory hierarchy)."
    )
    return lines, results


def weights_benchmark(gigabytes: float, work: Path) -> tuple[list[str], dict[str, Any]]:
    folder = work / "weights"
    if folder.exists():
        shutil.rmtree(folder)
    path, size = weights_model(folder, int(gigabytes * 2**30))
    other = work / "weights_elsewhere"
    if other.exists():
        shutil.rmtree(other)
    other.mkdir()
    cases = [
        ("ir load+save, same folder", "ir", folder / "copy.onnx"),
        ("ir load+save, other folder (streams)", "ir", other / "model.onnx"),
        ("onnx load+save (external data)", "onnx_save", other / "onnx_copy.onnx"),
    ]
    lines = [
        "## Peak memory with external weights",
        "",
        f"Weights: {size / 2**30:.2f} GiB in one external data file. Peak RSS includes the",
        "Python interpreter with onnx, numpy and the IR imported (baseline shown).",
        "",
        "| case | wall time | peak RSS | baseline RSS | peak / weights |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    results: dict[str, Any] = {"weights_bytes": size}
    for label, task, out in cases:
        r = measure(task, path, out, 1)
        results[label] = r
        lines.append(
            f"| {label} | {r['wall_seconds']:.2f} s | {_mib(r['peak_rss'])} | "
            f"{_mib(r['baseline_rss'])} | {r['peak_rss'] / size:.1%} |"
        )
        print(f"  {label}: peak {_mib(r['peak_rss'])}", flush=True)
    streamed = other / "model.onnx.data"
    results["streamed_ok"] = streamed.exists() and streamed.stat().st_size >= size
    shutil.rmtree(folder)
    shutil.rmtree(other)
    return lines, results


def targets(graph: dict[str, Any], weights: dict[str, Any] | None, sizes: list[int]) -> list[str]:
    lines = ["## Acceptance targets", ""]
    largest = graph[str(sizes[-1])]
    ratio = largest["ir"]["seconds"] / largest["onnx_serialize"]["seconds"]
    flat = graph["flatness"]["ir"]
    checks = [
        (f"lift+lower of {sizes[-1]:,} nodes within 3x of onnx load+serialize", ratio, ratio <= 3),
        (f"per-node time flat within 1.5x from {sizes[0]:,} to {sizes[-1]:,}", flat, flat <= 1.5),
    ]
    if weights is not None:
        size = weights["weights_bytes"]
        for label in ("ir load+save, same folder", "ir load+save, other folder (streams)"):
            share = weights[label]["peak_rss"] / size
            checks.append((f"{label}: peak RSS below 25% of weights", share, share < 0.25))
    for text, value, ok in checks:
        lines.append(f"- {'PASS' if ok else 'FAIL'}: {text} (measured {value:.2f})")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    parser.add_argument("--weights-gb", type=float, default=1.0, help="0 skips part 2")
    parser.add_argument("--keep", action="store_true", help="keep generated models")
    args = parser.parse_args(argv)

    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="run-", dir=CACHE_DIR))
    load_before = os.getloadavg()[0]
    try:
        print("graphs:", flush=True)
        graph_lines, graph_results = graph_benchmark(args.sizes, work)
        weights_lines: list[str] = []
        weights_results = None
        if args.weights_gb > 0:
            print("external weights:", flush=True)
            weights_lines, weights_results = weights_benchmark(args.weights_gb, work)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    header = [
        "# Round-trip benchmark (benchmarks/roundtrip.py)",
        "",
        f"Python {platform.python_version()}, onnx {onnx.__version__}, "
        f"{platform.machine()}, {os.cpu_count()} CPUs; load average {load_before:.1f} at the",
        f"start and {os.getloadavg()[0]:.1f} at the end (other work on the machine adds noise).",
        "",
    ]
    report = [
        *header,
        *graph_lines,
        "",
        *weights_lines,
        "",
        *targets(graph_results, weights_results, args.sizes),
    ]
    text = "\n".join(report) + "\n"
    print()
    print(text)
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    (OUT_DIR / "roundtrip.md").write_text(text)
    (OUT_DIR / "roundtrip.json").write_text(
        json.dumps({"graphs": graph_results, "weights": weights_results}, indent=2)
    )
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        name, path, out, repeats = sys.argv[2:6]
        sys.path.insert(0, str(ROOT))
        print(json.dumps(worker(name, path, out, int(repeats))))
        sys.exit(0)
    sys.exit(main())
