"""Convert TensorFlow `tf.image.extract_patches` models to ONNX with tf2onnx.

Run with the TensorFlow venv (tensorflow-cpu 2.21, tf2onnx 1.17, onnx, onnxruntime):

    /work/venv-tf/bin/python benchmarks/corpus/make_tf_models.py --size test   # tests/models
    /work/venv-tf/bin/python benchmarks/corpus/make_tf_models.py --size bench  # .cache
    ... --raw      # also probe tf2onnx's native conversion (no --custom-ops) into
                   # benchmarks/.cache/corpus/tf_raw/ and print what it does

Each model is a SavedModel whose signature takes an NHWC float32 input with a dynamic batch and
returns `tf.image.extract_patches(x, ...)`. It is converted with the CLI

    python -m tf2onnx.convert --saved-model DIR --custom-ops ExtractImagePatches --output X

which keeps one `ExtractImagePatches` node (domain `ai.onnx.converters.tensorflow`, with an
opset import for that domain). onnxruntime cannot run it, so TensorFlow's own outputs are
saved next to it as `<name>.npz` (input_<s> / output_<s>), the ground truth for any
decomposition: random normal input, a different batch with larger values, and an input with
NaN / +inf / -inf (patches copy values; a Conv-based decomposition would smear NaN).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import onnx
import onnxruntime as ort
import tensorflow as tf
import tf2onnx

sys.path.insert(0, str(Path(__file__).resolve().parent))
import corpus_common as cc

SEED = 4321
CUSTOM_DOMAIN = "ai.onnx.converters.tensorflow"


@dataclass(frozen=True)
class EIP:
    k: tuple[int, int]
    s: tuple[int, int]
    r: tuple[int, int]
    padding: str  # "VALID" | "SAME"
    c: int
    hw: tuple[int, int]
    why: str

    @property
    def name(self) -> str:
        return (
            f"eip_k{self.k[0]}x{self.k[1]}_s{self.s[0]}x{self.s[1]}_r{self.r[0]}x{self.r[1]}"
            f"_{self.padding.lower()}"
        )

    def out_hw(self) -> tuple[int, int]:
        out = []
        for n, k, s, r in zip(self.hw, self.k, self.s, self.r, strict=True):
            eff = (k - 1) * r + 1
            out.append(-(-n // s) if self.padding == "SAME" else (n - eff) // s + 1)
        return out[0], out[1]

    def same_pads(self) -> list[tuple[int, int]]:
        """(before, after) SAME padding per spatial axis, TF's rule (extra goes after)."""
        pads = []
        for n, k, s, r, o in zip(self.hw, self.k, self.s, self.r, self.out_hw(), strict=True):
            eff = (k - 1) * r + 1
            total = max((o - 1) * s + eff - n, 0)
            pads.append((total // 2, total - total // 2))
        return pads


TEST_CONFIGS = [
    EIP((1, 1), (1, 1), (1, 1), "VALID", 3, (8, 8), "1x1 kernel: a reshape in disguise"),
    EIP((2, 2), (2, 2), (1, 1), "VALID", 3, (8, 8), "non-overlapping patchify"),
    EIP((3, 3), (1, 1), (1, 1), "SAME", 1, (7, 7), "stride 1 SAME, symmetric pads"),
    EIP((3, 3), (2, 2), (1, 1), "SAME", 3, (9, 10), "stride 2 SAME, asymmetric pad in W"),
    EIP((2, 2), (1, 1), (1, 1), "SAME", 3, (7, 7), "even kernel SAME: pad only after"),
    EIP((2, 3), (1, 2), (1, 1), "VALID", 3, (7, 9), "non-square kernel and stride"),
    EIP((2, 3), (2, 1), (1, 1), "SAME", 1, (7, 8), "non-square kernel/stride, SAME"),
    EIP((3, 3), (1, 1), (2, 2), "VALID", 3, (9, 9), "dilation (rates) 2"),
    EIP((3, 3), (2, 2), (2, 2), "SAME", 3, (11, 10), "rates 2 + stride 2 SAME, asymmetric"),
    EIP((2, 2), (3, 3), (1, 1), "VALID", 1, (8, 8), "stride > kernel: skipped pixels"),
    EIP((3, 2), (1, 1), (2, 1), "SAME", 3, (7, 6), "non-square rates, SAME"),
    EIP((1, 1), (2, 2), (1, 1), "SAME", 3, (7, 7), "1x1 kernel strided: subsampling"),
]

BENCH_CONFIGS = [
    EIP((3, 3), (1, 1), (1, 1), "SAME", 64, (56, 56), "bench: 3x3 SAME on a feature map"),
    EIP((16, 16), (16, 16), (1, 1), "VALID", 3, (224, 224), "bench: ViT-style patchify"),
    EIP((3, 3), (2, 2), (2, 2), "SAME", 32, (63, 65), "bench: dilated strided SAME"),
]


def make_saved_model(cfg: EIP, path: Path, batch: int | None) -> None:
    sizes = [1, cfg.k[0], cfg.k[1], 1]
    strides = [1, cfg.s[0], cfg.s[1], 1]
    rates = [1, cfg.r[0], cfg.r[1], 1]
    spec = tf.TensorSpec([batch, cfg.hw[0], cfg.hw[1], cfg.c], tf.float32, name="images")

    class Patches(tf.Module):
        @tf.function(input_signature=[spec])
        def __call__(self, images):
            return tf.image.extract_patches(
                images, sizes=sizes, strides=strides, rates=rates, padding=cfg.padding
            )

    mod = Patches()
    tf.saved_model.save(mod, str(path), signatures=mod.__call__)


def tf2onnx_cli(saved_model: Path, out: Path, extra: list[str]) -> subprocess.CompletedProcess:
    # Run from the SavedModel's folder with a relative path: tf2onnx writes "converted from
    # <path>" into graph.doc_string, and a temp path would make the output differ per run.
    cmd = [
        sys.executable,
        "-m",
        "tf2onnx.convert",
        "--saved-model",
        saved_model.name,
        *extra,
        "--output",
        str(out.resolve()),
    ]
    return subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=saved_model.parent)


def make_inputs(cfg: EIP, rng: np.random.Generator) -> list[tuple[np.ndarray, str]]:
    h, w = cfg.hw
    x0 = rng.standard_normal((2, h, w, cfg.c)).astype(np.float32)
    x1 = rng.uniform(-50, 50, (1, h, w, cfg.c)).astype(np.float32)
    x2 = rng.standard_normal((3, h, w, cfg.c)).astype(np.float32)
    flat = x2.reshape(-1)
    idx = rng.choice(flat.size, size=6, replace=False)
    flat[idx[:2]] = np.nan
    flat[idx[2:4]] = np.inf
    flat[idx[4:]] = -np.inf
    return [
        (x0, "batch 2, standard normal"),
        (x1, "batch 1, uniform(-50, 50)"),
        (x2, "batch 3, standard normal with 2 NaN, 2 +inf, 2 -inf"),
    ]


def tf_reference(saved_model: Path, x: np.ndarray) -> np.ndarray:
    fn = tf.saved_model.load(str(saved_model)).signatures["serving_default"]
    out = fn(images=tf.constant(x))
    return next(iter(out.values())).numpy()


def convert_one(cfg: EIP, out_dir: Path, work: Path, rng: np.random.Generator) -> dict[str, Any]:
    t0 = time.time()
    sm = work / f"{cfg.name}_sm"
    make_saved_model(cfg, sm, batch=None)
    path = out_dir / f"{cfg.name}.onnx"
    res = tf2onnx_cli(sm, path, ["--custom-ops", "ExtractImagePatches"])
    if res.returncode != 0:
        raise RuntimeError(f"tf2onnx failed:\n{res.stderr[-3000:]}")

    proto = cc.check_and_infer(path)
    desc = cc.describe(path, proto)
    nodes = list(proto.graph.node)
    assert [n.op_type for n in nodes] == ["ExtractImagePatches"], [n.op_type for n in nodes]
    assert nodes[0].domain == CUSTOM_DOMAIN, nodes[0].domain
    assert desc["opset_imports"].get(CUSTOM_DOMAIN) == 1, desc["opset_imports"]
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in nodes[0].attribute}
    assert attrs["ksizes"] == [1, *cfg.k, 1], attrs
    assert attrs["strides"] == [1, *cfg.s, 1], attrs
    assert attrs["rates"] == [1, *cfg.r, 1], attrs
    assert attrs["padding"] == cfg.padding.encode(), attrs
    in_shape = desc["inputs"][0]["shape"]
    assert isinstance(in_shape[0], str), in_shape
    assert in_shape[1:] == [*cfg.hw, cfg.c], in_shape
    oh, ow = cfg.out_hw()
    out_shape = desc["outputs"][0]["shape"]
    assert out_shape[1:] == [oh, ow, cfg.k[0] * cfg.k[1] * cfg.c], out_shape

    samples = []
    for x, note in make_inputs(cfg, rng):
        y = tf_reference(sm, x)
        assert y.shape == (x.shape[0], oh, ow, cfg.k[0] * cfg.k[1] * cfg.c), y.shape
        samples.append(
            {
                "inputs": {desc["inputs"][0]["name"]: x},
                "outputs": {desc["outputs"][0]["name"]: y},
                "note": note,
            }
        )
    layout = cc.save_samples(out_dir / f"{cfg.name}.npz", samples)

    entry = {
        **desc,
        "what": f"tf.image.extract_patches {cfg.padding}, kernel {cfg.k[0]}x{cfg.k[1]}, "
        f"stride {cfg.s[0]}x{cfg.s[1]}, rate {cfg.r[0]}x{cfg.r[1]}, NHWC input "
        f"{cfg.hw[0]}x{cfg.hw[1]}x{cfg.c}: {cfg.why}",
        "source": "tf",
        "family": "extract_image_patches",
        "exporter": "python -m tf2onnx.convert --saved-model DIR --custom-ops ExtractImagePatches",
        "exporter_short": "tf2onnx CLI --custom-ops",
        "generator": f"tensorflow {tf.__version__}, tf2onnx {tf2onnx.__version__}, "
        f"onnx {onnx.__version__}",
        "script": "benchmarks/corpus/make_tf_models.py",
        "layers": 1,
        "config": {
            "ksizes": [1, *cfg.k, 1],
            "strides": [1, *cfg.s, 1],
            "rates": [1, *cfg.r, 1],
            "padding": cfg.padding,
            "channels": cfg.c,
            "height": cfg.hw[0],
            "width": cfg.hw[1],
            "out_hw": [oh, ow],
            "same_pads_hw": cfg.same_pads() if cfg.padding == "SAME" else None,
        },
        "expected": {"extract_image_patches": 1},
        "npz": f"{cfg.name}.npz",
        "samples": layout,
        "max_abs_err": None,
    }
    print(
        f"{cfg.name}: in {in_shape} -> out {out_shape}, {desc['size_bytes']} B, "
        f"{time.time() - t0:.1f}s",
        flush=True,
    )
    return entry


def probe_raw(cfg: EIP, raw_dir: Path, work: Path, rng: np.random.Generator) -> list[str]:
    """tf2onnx without --custom-ops: static batch (works?) and dynamic batch (works?)."""
    lines = []
    x, _ = make_inputs(cfg, rng)[0]
    for batch, tag in ((2, "static batch 2"), (None, "dynamic batch")):
        sm = work / f"{cfg.name}_raw_{batch}"
        make_saved_model(cfg, sm, batch=batch)
        path = raw_dir / f"{cfg.name}_native_{'b2' if batch else 'dyn'}.onnx"
        res = tf2onnx_cli(sm, path, [])
        if res.returncode != 0:
            err = [ln for ln in res.stderr.splitlines() if "Error" in ln or "error" in ln]
            lines.append(f"{cfg.name} {tag}: converter FAILED: {(err or ['?'])[-1][:300]}")
            continue
        model = onnx.load(str(path))
        hist = cc.op_histogram(model)
        try:
            sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
            got = sess.run(None, {sess.get_inputs()[0].name: x})[0]
            want = tf_reference(sm, x)
            err = float(np.max(np.abs(got - want)))
            verdict = f"ORT runs it, max abs err vs TF {err:.1e}"
            xn = x.copy()
            xn.reshape(-1)[xn.size // 2] = np.nan
            got_n = sess.run(None, {sess.get_inputs()[0].name: xn})[0]
            want_n = tf_reference(sm, xn)
            verdict += (
                f"; one NaN in the input gives {int(np.isnan(got_n).sum())} NaN "
                f"outputs (TF: {int(np.isnan(want_n).sum())})"
            )
        except Exception as e:
            verdict = f"ORT FAILS: {type(e).__name__}: {str(e).splitlines()[0][:300]}"
        lines.append(f"{cfg.name} {tag}: converts to {hist}; {verdict}")
    return lines


NOTES = [
    "TF models (`eip_*.onnx`): SavedModels of `tf.image.extract_patches` with input "
    "`images` NHWC float32 `[unk__N, H, W, C]` (tf2onnx names the dynamic batch `unk__N`), "
    "converted by `python -m tf2onnx.convert --saved-model DIR --custom-ops "
    "ExtractImagePatches`: one `ExtractImagePatches` node in domain "
    "`ai.onnx.converters.tensorflow` (opset import version 1; tf2onnx also imports "
    "`ai.onnx.ml` 2), default ONNX opset 15, attributes `ksizes`/`strides`/`rates` as "
    "4-element NHWC INTS and `padding` as a string. onnxruntime cannot run them; the npz "
    "holds TensorFlow's outputs (sample 2 contains NaN and +/-inf: patches must copy them, "
    "a Conv-based decomposition would spread NaN). `config.same_pads_hw` gives TF's SAME "
    "(before, after) pads per spatial axis.",
    "tf2onnx without `--custom-ops` (not committed; `make_tf_models.py --raw`): with a static "
    "batch it writes an identity-kernel Conv over channels folded into the batch, exact on "
    "finite inputs but NaN/inf spread to kh*kw outputs per patch; with a dynamic batch and "
    "C > 1, VALID gives a model onnxruntime rejects and SAME crashes the converter (C = 1 "
    "works). Details in `benchmarks/corpus/README.md`.",
]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", choices=("test", "bench"), default="test")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--only", default="", help="comma-separated model names")
    ap.add_argument(
        "--raw",
        action="store_true",
        help="also probe tf2onnx's native conversion (no --custom-ops)",
    )
    args = ap.parse_args(argv)
    out = args.out or (cc.TEST_MODELS if args.size == "test" else cc.BENCH_CACHE / "bench")
    out.mkdir(parents=True, exist_ok=True)
    configs = TEST_CONFIGS if args.size == "test" else BENCH_CONFIGS
    names = [c.name for c in configs]
    assert len(set(names)) == len(names), names
    only = {x for x in args.only.split(",") if x}
    if only - set(names):
        ap.error(f"unknown models: {sorted(only - set(names))}")
    tf.random.set_seed(SEED)
    entries, failures, raw_lines = [], [], []
    with tempfile.TemporaryDirectory(prefix="eip_") as tmp:
        work = Path(tmp)
        for i, cfg in enumerate(configs):
            if only and cfg.name not in only:
                continue
            rng = np.random.default_rng(SEED + i)
            try:
                entries.append(convert_one(cfg, out, work, rng))
            except Exception as e:
                failures.append((cfg.name, f"{type(e).__name__}: {e}"))
                print(f"{cfg.name}: FAILED {type(e).__name__}: {e}", flush=True)
            if args.raw:
                raw_dir = cc.BENCH_CACHE / "tf_raw"
                raw_dir.mkdir(parents=True, exist_ok=True)
                for line in probe_raw(cfg, raw_dir, work, np.random.default_rng(SEED + i)):
                    print("  raw:", line, flush=True)
                    raw_lines.append(line)
    if raw_lines:
        report = cc.BENCH_CACHE / "tf_raw" / f"report_{args.size}.txt"
        report.write_text("\n".join(raw_lines) + "\n")
    cc.set_notes(out, "tf", NOTES)
    cc.update_manifest(out, entries)
    for name, err in failures:
        print(f"FAILED {name}: {err[:3000]}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
