"""Benchmark: patterns/quantize against onnxruntime.quantization and onnxconverter-common.

Run: ``python benchmarks/quantize.py [--models mlp cnn] [--plot benchmarks/results/quantize.png]``
(needs onnxconverter-common: ``pip install -e '.[bench]'``).

For each model, side by side (the same model file, the same inputs):

* int8 (preset): ``rewrite --quantize int8 --calibration`` (dynamic MatMul/Gemm, static QDQ
  Conv, the speed check on), no peer of its own (the rows below are its peers per form);
* int8 dynamic: ``int8_dynamic.rw`` (per-channel weight scales) against
  ``quantize_dynamic`` (its defaults: per-tensor, QInt8 weights);
* int8 static (QDQ): ``int8_static.rw`` with ``--calibration`` against ``quantize_static``
  (QDQ, MinMax, QUInt8 activations, QInt8 weights), both calibrated on the same samples;
* int4 weight-only: ``rewrite --quantize int4`` against ``MatMulNBitsQuantizer`` (block 32,
  symmetric); the same model of ours once more with the session option
  ``session.qdq_matmulnbits_accuracy_level=0`` (onnxruntime fuses it into MatMulNBits with
  int8 activations, level 4, by default; MatMulNBitsQuantizer writes level 0);
* float16: ``rewrite --quantize float16 --no-speed-check`` against onnxconverter-common's
  ``convert_float_to_float16`` (``keep_io_types=True``), and ``--quantize float16`` with the
  speed check (which puts float16 layers slower than float32 back in float32).

Columns: file size, onnxruntime latency with ORT_ENABLE_ALL on one intra-op thread and on all
cores (median wall time per run; the variants' runs interleaved, so the machine's load falls on
all of them alike), SNR (dB) and cosine of the outputs against float32 on evaluation inputs
other than the calibration samples, and the tool's time (in this process, rule loading
included). The models are built here with random weights: a 4-layer MLP of hidden 768 and
intermediate 3072 whose weights have a few outlier output channels (20x), as trained
transformers have, and a small CNN. ``--exports`` also quantizes the BERT and GPT-2 exports
that ship in tests/models with int8_dynamic and reports the cosine against float32 on their
sample inputs. Prints a markdown section (benchmarks/run_all.py keeps it in
results/quantize.md).
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import logging
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper

import rewriter
import rewriter.api
from rewriter.quantize import collect_calibration
from rewriter.verification import measure

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
QUANTIZE = rewriter.library_path() / "quantize"
LIBRARY = rewriter.library_path()


# ---------------------------------------------------------------------------------- models


def mlp(
    hidden: int = 768, inner: int = 3072, layers: int = 4, outliers: int = 4
) -> onnx.ModelProto:
    """MatMul + Add (+ Relu) layers; `outliers` output channels per weight are 20x larger."""
    rng = np.random.default_rng(0)
    nodes, inits, current = [], [], "x"
    for layer in range(layers):
        for part, (k, n) in enumerate([(hidden, inner), (inner, hidden)]):
            w = (rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)
            w[:, rng.choice(n, outliers, replace=False)] *= 20
            b = (0.1 * rng.standard_normal(n)).astype(np.float32)
            name = f"{layer}_{part}"
            inits += [
                numpy_helper.from_array(w, f"w{name}"),
                numpy_helper.from_array(b, f"b{name}"),
            ]
            nodes += [
                helper.make_node("MatMul", [current, f"w{name}"], [f"m{name}"]),
                helper.make_node("Add", [f"m{name}", f"b{name}"], [f"a{name}"]),
            ]
            current = f"a{name}"
            if part == 0:
                nodes.append(helper.make_node("Relu", [current], [f"r{layer}"]))
                current = f"r{layer}"
    nodes.append(helper.make_node("Identity", [current], ["y"]))
    shape = ["batch", "seq", hidden]
    graph = helper.make_graph(
        nodes,
        "mlp",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, shape)],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])


def cnn(channels: tuple[int, ...] = (3, 32, 64, 64, 128)) -> onnx.ModelProto:
    """Conv + Relu blocks (3x3, padding 1, stride 2 from the second), global pool, Gemm head."""
    rng = np.random.default_rng(1)
    nodes, inits, current = [], [], "x"
    for i, (c_in, c_out) in enumerate(itertools.pairwise(channels)):
        w = (rng.standard_normal((c_out, c_in, 3, 3)) * np.sqrt(2.0 / (9 * c_in))).astype(
            np.float32
        )
        b = (0.05 * rng.standard_normal(c_out)).astype(np.float32)
        inits += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(b, f"b{i}")]
        strides = [1, 1] if i == 0 else [2, 2]
        nodes += [
            helper.make_node(
                "Conv", [current, f"w{i}", f"b{i}"], [f"c{i}"], pads=[1, 1, 1, 1], strides=strides
            ),
            helper.make_node("Relu", [f"c{i}"], [f"r{i}"]),
        ]
        current = f"r{i}"
    head = (rng.standard_normal((10, channels[-1])) / np.sqrt(channels[-1])).astype(np.float32)
    inits += [
        numpy_helper.from_array(head, "head"),
        numpy_helper.from_array(np.zeros(10, np.float32), "hb"),
    ]
    nodes += [
        helper.make_node("GlobalAveragePool", [current], ["pool"]),
        helper.make_node("Flatten", ["pool"], ["flat"]),
        helper.make_node("Gemm", ["flat", "head", "hb"], ["y"], transB=1),
    ]
    graph = helper.make_graph(
        nodes,
        "cnn",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["batch", 3, 64, 64])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["batch", 10])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])


MODELS: dict[str, tuple[Callable[[], onnx.ModelProto], tuple[int, ...]]] = {
    "mlp": (mlp, (4, 32, 768)),
    "cnn": (cnn, (2, 3, 64, 64)),
}


# ----------------------------------------------------------------------------------- tools

Tool = Callable[[Path, Path], None]
"""Writes the quantized model of a model file to a file."""


def ours(rules: str, calibration: Path | None = None, opset: int | None = None) -> Tool:
    """This project's rewrite with the default library and one quantize rule file.

    `opset`: convert up to it first when the model's is older (int4 needs opset 21's blocked
    DequantizeLinear: `rewrite --target-opset 21`).
    """

    def run(source: Path, target: Path) -> None:
        found = None
        if calibration is not None:
            with np.load(calibration) as data:
                samples = [{name: data[name] for name in data.files}]
            found = collect_calibration(source, samples)
        model = onnx.load(str(source), load_external_data=False)
        current = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
        target_opset = opset if opset is not None and current < opset else None
        options = rewriter.RewriteOptions(calibration=found, target_opset=target_opset)
        result = rewriter.rewrite(source, [LIBRARY, QUANTIZE / rules], options)
        onnx.save(result.proto, target)

    return run


def preset(name: str, calibration: Path | None = None, *, speed_check: bool = True) -> Tool:
    """This project's `rewrite MODEL --quantize NAME [--calibration SAMPLES]`.

    `speed_check=False` is `--no-speed-check` (every quantized layer kept, timed or not).
    """

    def run(source: Path, target: Path) -> None:
        samples = None
        if calibration is not None:
            with np.load(calibration) as data:
                stacked = {key: data[key] for key in data.files}
            count = next(iter(stacked.values())).shape[0]
            samples = rewriter.api.CalibrationSamples(
                tuple({k: v[i] for k, v in stacked.items()} for i in range(count))
            )
        check = None if speed_check else rewriter.api.SpeedCheck(enabled=False)
        options = rewriter.RewriteOptions(
            quantize=name, calibration_samples=samples, speed_check=check
        )
        result = rewriter.rewrite(source, options=options)
        onnx.save(result.proto, target)
        if result.speed is not None:
            print(f"  {source.name} --quantize {name}: {result.speed.summary()}", flush=True)

    return run


def their_dynamic(source: Path, target: Path) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(source, target, weight_type=QuantType.QInt8)


def their_static(calibration: Path) -> Callable[[Path, Path], None]:
    def run(source: Path, target: Path) -> None:
        from onnxruntime.quantization import (
            CalibrationDataReader,
            QuantFormat,
            QuantType,
            quantize_static,
        )

        class Reader(CalibrationDataReader):
            def __init__(self) -> None:
                with np.load(calibration) as data:
                    stacked = {name: data[name] for name in data.files}
                count = next(iter(stacked.values())).shape[0]
                self.samples = iter([{k: v[i] for k, v in stacked.items()} for i in range(count)])

            def get_next(self) -> dict[str, np.ndarray] | None:
                return next(self.samples, None)

        quantize_static(
            source,
            target,
            Reader(),
            quant_format=QuantFormat.QDQ,
            activation_type=QuantType.QUInt8,
            weight_type=QuantType.QInt8,
        )

    return run


def their_nbits(source: Path, target: Path) -> None:
    from onnxruntime.quantization.matmul_nbits_quantizer import (
        DefaultWeightOnlyQuantConfig,
        MatMulNBitsQuantizer,
    )

    config = DefaultWeightOnlyQuantConfig(block_size=32, is_symmetric=True)
    quantizer = MatMulNBitsQuantizer(onnx.load(source), algo_config=config)
    quantizer.process()
    quantizer.model.save_model_to_file(str(target))


def their_float16(source: Path, target: Path) -> None:
    from onnxconverter_common import float16

    onnx.save(float16.convert_float_to_float16(onnx.load(source), keep_io_types=True), target)


# ------------------------------------------------------------------------------- measuring


# Session options of rows that run a model under other settings than onnxruntime's defaults.
MATMULNBITS_LEVEL_0 = {"session.qdq_matmulnbits_accuracy_level": "0"}


def session(path: Path, threads: int, config: dict[str, str] | None = None) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = threads
    options.log_severity_level = 3
    for key, value in (config or {}).items():
        options.add_session_config_entry(key, value)
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def latencies(
    paths: dict[str, Path],
    feeds: dict[str, np.ndarray],
    threads: int,
    rounds: int,
    configs: dict[str, dict[str, str]],
) -> dict[str, float]:
    """Median milliseconds per run of each model, the models' runs interleaved.

    With one intra-op thread onnxruntime runs the graph on the calling thread, so its CPU time
    (`time.thread_time`) is measured, which leaves out waiting for a core on a shared machine;
    with more threads, wall time.
    """
    clock = time.thread_time if threads == 1 else time.perf_counter
    sessions = {name: session(path, threads, configs.get(name)) for name, path in paths.items()}
    for s in sessions.values():
        for _ in range(3):
            s.run(None, feeds)
    times: dict[str, list[float]] = {name: [] for name in sessions}
    for _ in range(rounds):
        for name, s in sessions.items():
            start = clock()
            s.run(None, feeds)
            times[name].append(clock() - start)
    return {name: 1000 * statistics.median(t) for name, t in times.items()}


def accuracy(
    path: Path,
    reference: list[np.ndarray],
    feeds: dict[str, np.ndarray],
    config: dict[str, str] | None = None,
) -> tuple[float, float]:
    actual = session(path, 0, config).run(None, feeds)
    return measure("snr", reference, actual), measure("cosine", reference, actual)


def domains(path: Path) -> str:
    found = sorted(
        {n.domain or "ai.onnx" for n in onnx.load(str(path), load_external_data=False).graph.node}
    )
    return ", ".join(found)


@dataclasses.dataclass
class Row:
    """One model through one tool: what it wrote and how that runs."""

    model: str
    method: str
    tool: str
    path: Path
    seconds: float
    size: int = 0
    one_thread: float = 0.0
    all_threads: float = 0.0
    snr: float = 0.0
    cosine: float = 0.0
    domains: str = ""
    # onnxruntime session config entries this row runs with (see `MATMULNBITS_LEVEL_0`).
    config: dict[str, str] = dataclasses.field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.method}/{self.tool}"


# Rows that run another row's model (ours) under session options: method -> (that row's
# method, the config entries). onnxruntime fuses the int4 form into MatMulNBits with accuracy
# level 4 (int8 activations) by default; MatMulNBitsQuantizer writes level 0 (float).
SESSION_ROWS = {
    "int4 weight-only (session accuracy level 0)": ("int4 weight-only", MATMULNBITS_LEVEL_0)
}


def variants(calibration: Path, has_matmul: bool) -> list[tuple[str, str, Tool]]:
    found: list[tuple[str, str, Tool]] = [
        ("int8 (preset)", "ours", preset("int8", calibration)),
        ("int8 dynamic", "ours", ours("int8_dynamic.rw")),
        ("int8 dynamic", "quantize_dynamic", their_dynamic),
        ("int8 static (QDQ)", "ours", ours("int8_static.rw", calibration)),
        ("int8 static (QDQ)", "quantize_static", their_static(calibration)),
    ]
    if has_matmul:  # 4-bit weight-only quantizes MatMuls only (both tools)
        found += [
            ("int4 weight-only", "ours", preset("int4")),
            ("int4 weight-only", "MatMulNBitsQuantizer", their_nbits),
        ]
    return [
        *found,
        # Like its peer, kept float16 whatever the speed (float16 is no faster on the CPU).
        ("float16", "ours", preset("float16", speed_check=False)),
        ("float16", "onnxconverter-common", their_float16),
        ("float16 (speed-checked)", "ours", preset("float16")),
    ]


def built_model(name: str, folder: Path) -> tuple[Path, Path, dict[str, np.ndarray]]:
    """The model file, its calibration samples (.npz) and evaluation inputs."""
    build, shape = MODELS[name]
    source = folder / f"{name}.onnx"
    onnx.save(build(), source)
    rng = np.random.default_rng(7)
    calibration = folder / f"{name}.calibration.npz"
    # Four samples of the evaluation shape, stacked along a new first axis.
    np.savez(calibration, x=rng.standard_normal((4, *shape)).astype(np.float32))
    feeds = {"x": np.random.default_rng(8).standard_normal(shape).astype(np.float32)}
    return source, calibration, feeds


def bert_model(given: Path, folder: Path) -> tuple[Path, Path, dict[str, np.ndarray]]:
    """make_bert_base.py's export, its calibration samples and evaluation inputs."""
    calibration = folder / "bert_base.calibration.npz"
    with np.load(given / "bert_base.npz") as data:
        prefix = "calibration_"
        np.savez(
            calibration, **{k[len(prefix) :]: data[k] for k in data.files if k.startswith(prefix)}
        )
        feeds = {k[len("input_") :]: data[k] for k in data.files if k.startswith("input_")}
    return given / "bert_base.onnx", calibration, feeds


def bench_model(
    name: str,
    source: Path,
    calibration: Path,
    feeds: dict[str, np.ndarray],
    folder: Path,
    rounds: int,
) -> list[Row]:
    reference = session(source, 0).run(None, feeds)
    model = onnx.load(str(source), load_external_data=False)
    has_matmul = any(node.op_type == "MatMul" for node in model.graph.node)
    rows = [Row(name, "float32", "original", source, 0.0)]
    for method, tool, run in variants(calibration, has_matmul):
        slug = "".join(c if c.isalnum() else "_" for c in method)
        target = folder / f"{name}.{slug}.{tool}.onnx"
        start = time.perf_counter()
        run(source, target)
        rows.append(Row(name, method, tool, target, time.perf_counter() - start))
    ours = {row.method: row for row in rows if row.tool == "ours"}
    for method, (base, config) in SESSION_ROWS.items():
        if base in ours:
            rows.append(Row(name, method, "ours", ours[base].path, 0.0, config=config))
    paths = {row.key: row.path for row in rows}
    configs = {row.key: row.config for row in rows}
    one = latencies(paths, feeds, 1, rounds, configs)
    every = latencies(paths, feeds, os.cpu_count() or 1, rounds, configs)
    for row in rows:
        row.size = row.path.stat().st_size
        row.one_thread, row.all_threads = one[row.key], every[row.key]
        row.snr, row.cosine = accuracy(row.path, reference, feeds, row.config)
        row.domains = domains(row.path)
    return rows


def _samples(npz: Path) -> list[dict[str, np.ndarray]]:
    """The input sets of a tests/models `.npz` (keys `input_<s>_<name>` per sample s)."""
    with np.load(npz) as data:
        numbers = sorted({k.split("_")[1] for k in data.files if k.startswith("input_")})
        return [
            {k.split("_", 2)[2]: data[k] for k in data.files if k.startswith(f"input_{s}_")}
            for s in numbers
        ]


def exports(folder: Path) -> list[str]:
    lines = [
        "",
        "Real exports (tests/models), `int8_dynamic.rw` after the default library, on their "
        "sample inputs:",
        "",
        "| model | layers quantized | size (MB) float32 -> int8 | cosine vs float32 | SNR (dB) |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name in ("bert_ts14", "gpt2_ts14"):
        source = ROOT / "tests" / "models" / f"{name}.onnx"
        result = rewriter.rewrite(source, [LIBRARY, QUANTIZE / "int8_dynamic.rw"])
        target = folder / f"{name}.int8.onnx"
        onnx.save(result.proto, target)
        reference: list[np.ndarray] = []
        actual: list[np.ndarray] = []
        for feeds in _samples(source.with_suffix(".npz")):
            reference += session(source, 0).run(None, feeds)
            actual += session(target, 0).run(None, feeds)
        count = sum(1 for e in result.trace.entries if "int8_dynamic" in e.rule)
        before, after = source.stat().st_size / 1e6, target.stat().st_size / 1e6
        cosine, snr = measure("cosine", reference, actual), measure("snr", reference, actual)
        lines.append(
            f"| {name} | {count} | {before:.2f} -> {after:.2f} | {cosine:.5f} | {snr:.1f} |"
        )
    return lines


def table(rows: list[Row]) -> list[str]:
    lines = [
        "| model | method | tool | size (MB) | size / float32 | latency 1 thread (ms) "
        "| latency all threads (ms) | SNR (dB) | cosine | tool time (s) | domains |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    base = {r.model: r.size for r in rows if r.method == "float32"}
    for r in rows:
        lines.append(
            f"| {r.model} | {r.method} | {r.tool} | {r.size / 1e6:.2f} "
            f"| {r.size / base[r.model]:.3f} | {r.one_thread:.2f} | {r.all_threads:.2f} "
            f"| {r.snr:.1f} | {r.cosine:.5f} | {r.seconds:.2f} | {r.domains} |"
        )
    return lines


def ratios(rows: list[Row]) -> list[str]:
    """Ours against the peer of each method: size, latency and SNR difference."""
    lines = [
        "| model | method | size ours / theirs | latency 1 thread ours / theirs "
        "| latency all threads ours / theirs | SNR ours - theirs (dB) |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    peers = {(r.model, r.method): r for r in rows if r.tool not in ("ours", "original")}
    for mine in rows:
        method = SESSION_ROWS.get(mine.method, (mine.method,))[0]
        if mine.tool != "ours" or (mine.model, method) not in peers:
            continue
        theirs = peers[(mine.model, method)]
        lines.append(
            f"| {mine.model} | {mine.method} | {mine.size / theirs.size:.3f} "
            f"| {mine.one_thread / theirs.one_thread:.2f} "
            f"| {mine.all_threads / theirs.all_threads:.2f} | {mine.snr - theirs.snr:+.1f} |"
        )
    return lines


def acceptance(rows: list[Row]) -> list[str]:
    """The issue's targets on the MLP, each with the figure measured and whether it holds."""
    found = {(r.method, r.tool): r for r in rows if r.model == "mlp"}
    if not found:
        return []
    base = found[("float32", "original")]
    int8 = found[("int8 (preset)", "ours")]
    int4, nbits = (
        found[("int4 weight-only", "ours")],
        found[("int4 weight-only", "MatMulNBitsQuantizer")],
    )
    half = found[("float16", "ours")]
    level_0 = found.get(("int4 weight-only (session accuracy level 0)", "ours"))
    # (what, measured, "<=" or ">=", limit)
    targets = [
        (
            "--quantize int8 latency, 1 thread / float32",
            int8.one_thread / base.one_thread,
            "<=",
            0.4,
        ),
        (
            "--quantize int4 latency, 1 thread / MatMulNBitsQuantizer's",
            int4.one_thread / nbits.one_thread,
            "<=",
            1.0,
        ),
        (
            "--quantize int4 latency, 1 thread / float32",
            int4.one_thread / base.one_thread,
            "<=",
            1.0,
        ),
        ("--quantize int4 SNR - MatMulNBitsQuantizer's (dB)", int4.snr - nbits.snr, ">=", -0.5),
        *(
            [
                (
                    "--quantize int4 run at accuracy level 0, 1 thread / MatMulNBitsQuantizer's",
                    level_0.one_thread / nbits.one_thread,
                    "<=",
                    1.0,
                )
            ]
            if level_0 is not None
            else []
        ),
        ("--quantize float16 SNR (dB), float32 inputs and outputs", half.snr, ">=", 45.0),
    ]
    lines = ["", "Acceptance targets on the MLP (this run):", ""]
    for what, value, comparison, limit in targets:
        holds = value <= limit if comparison == "<=" else value >= limit
        verdict = "met" if holds else "NOT met"
        lines.append(f"- {what} {comparison} {limit:g}: {value:.3g} ({verdict})")
    return lines


def plot(rows: list[Row], path: Path) -> None:
    """Per model: SNR against latency relative to float32, one point per tool and method."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = sorted({r.model for r in rows})
    figure, axes = plt.subplots(1, len(models), figsize=(6 * len(models), 4.5), squeeze=False)
    for axis, model in zip(axes[0], models, strict=True):
        base = next(r for r in rows if r.model == model and r.method == "float32")
        for r in rows:
            if r.model != model or r.method == "float32":
                continue
            snr = min(r.snr, 80.0)  # float16's SNR is far above the others
            x = r.one_thread / base.one_thread
            axis.scatter(x, snr, marker="o" if r.tool == "ours" else "x", s=60)
            label = f"{r.method}\n{r.tool}"
            axis.annotate(label, (x, snr), fontsize=7, xytext=(4, 2), textcoords="offset points")
        axis.set_xlabel("latency / float32 (1 thread, ORT_ENABLE_ALL)")
        axis.set_ylabel("SNR vs float32 (dB, capped at 80)")
        axis.set_title(f"{model}: o this project, x peer")
        axis.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=90)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument(
        "--bert",
        type=Path,
        metavar="FOLDER",
        help="also the BERT-base export that benchmarks/corpus/make_bert_base.py wrote there",
    )
    parser.add_argument(
        "--rounds", type=int, default=60, help="timed runs per variant and thread setting"
    )
    parser.add_argument("--exports", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--plot", type=Path, default=RESULTS / "quantize.png")
    parser.add_argument(
        "--section",
        type=Path,
        default=RESULTS / "quantization.md",
        help="also write the markdown section here (run.py splices it into RESULTS.md)",
    )
    args = parser.parse_args()
    logging.disable(logging.WARNING)  # onnxruntime.quantization logs every layer
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as folder:
        for name in args.models:
            source, calibration, feeds = built_model(name, Path(folder))
            rows += bench_model(name, source, calibration, feeds, Path(folder), args.rounds)
        if args.bert is not None:
            source, calibration, feeds = bert_model(args.bert, Path(folder))
            rows += bench_model("bert-base", source, calibration, feeds, Path(folder), args.rounds)
        extra = exports(Path(folder)) if args.exports else []
    bert = " --bert FOLDER" if args.bert else ""
    section = [
        "## Quantization",
        "",
        f"`python benchmarks/quantize.py --models {' '.join(args.models)}{bert} "
        f"--rounds {args.rounds}`; onnxruntime {ort.__version__}, {os.cpu_count()} cores "
        "(shared: latencies are medians of interleaved runs; one thread: CPU time of the "
        "calling thread, all threads: wall time). SNR and cosine against float32 "
        "on inputs other than the calibration samples.",
        "",
        *table(rows),
        "",
        "Ours against the peer of each method:",
        "",
        *ratios(rows),
        *acceptance(rows),
        *extra,
        "",
        f"![quantization]({os.path.relpath(args.plot, ROOT / 'benchmarks')})",
    ]
    text = "\n".join(section) + "\n"
    print(text, end="")
    args.section.write_text(text)
    plot(rows, args.plot)


if __name__ == "__main__":
    main()
