"""Helpers shared by make_torch_models.py and make_tf_models.py.

Imports onnx and numpy only (both venvs have them), plus onnxruntime where a model is run.
Keeps `tests/models/manifest.json` and renders `tests/models/README.md` from it, so the table
always matches the committed files.
"""

from __future__ import annotations

import collections
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import onnx

REPO = Path(__file__).resolve().parents[2]
TEST_MODELS = REPO / "tests" / "models"
BENCH_CACHE = REPO / "benchmarks" / ".cache" / "corpus"

# Op types whose counts tests of the rewrite rules look at.
KEY_OPS = (
    "BatchNormalization",
    "LayerNormalization",
    "ReduceMean",
    "Erf",
    "Tanh",
    "Softmax",
    "MatMul",
    "Gemm",
    "Conv",
    "ExtractImagePatches",
)

DTYPE_NAMES = {
    onnx.TensorProto.FLOAT: "float32",
    onnx.TensorProto.INT64: "int64",
    onnx.TensorProto.INT32: "int32",
    onnx.TensorProto.BOOL: "bool",
    onnx.TensorProto.FLOAT16: "float16",
    onnx.TensorProto.DOUBLE: "float64",
}


def all_nodes(graph: onnx.GraphProto):
    """Yield every node of a graph, nested subgraphs included."""
    for node in graph.node:
        yield node
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from all_nodes(attr.g)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for g in attr.graphs:
                    yield from all_nodes(g)


def op_histogram(model: onnx.ModelProto) -> dict[str, int]:
    """Count op types over the main graph, subgraphs and local functions."""
    counts: collections.Counter[str] = collections.Counter()
    for node in all_nodes(model.graph):
        counts[node.op_type] += 1
    for fn in model.functions:
        for node in fn.node:
            counts[node.op_type] += 1
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def value_info_dict(vi: onnx.ValueInfoProto) -> dict[str, Any]:
    """Name, dtype and shape (ints and symbolic names) of a graph input or output."""
    tt = vi.type.tensor_type
    shape: list[int | str | None] = []
    for d in tt.shape.dim:
        if d.HasField("dim_value"):
            shape.append(d.dim_value)
        elif d.HasField("dim_param"):
            shape.append(d.dim_param)
        else:
            shape.append(None)
    return {
        "name": vi.name,
        "dtype": DTYPE_NAMES.get(tt.elem_type, str(tt.elem_type)),
        "shape": shape,
    }


def check_and_infer(path: Path, *, strict_shapes: bool = True) -> onnx.ModelProto:
    """Run onnx.checker (full) and onnx shape inference; return the loaded model."""
    onnx.checker.check_model(str(path), full_check=True)
    model = onnx.load(str(path))
    onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=strict_shapes)
    return model


def describe(path: Path, model: onnx.ModelProto | None = None) -> dict[str, Any]:
    """The manifest fields that can be read off the file itself."""
    if model is None:
        model = onnx.load(str(path))
    hist = op_histogram(model)
    opsets = {imp.domain or "ai.onnx": imp.version for imp in model.opset_import}
    init_names = {t.name for t in model.graph.initializer}
    return {
        "file": path.name,
        "size_bytes": path.stat().st_size,
        "opset": opsets.get("ai.onnx"),
        "opset_imports": opsets,
        "ir_version": model.ir_version,
        "producer": f"{model.producer_name} {model.producer_version}".strip(),
        "inputs": [value_info_dict(v) for v in model.graph.input if v.name not in init_names],
        "outputs": [value_info_dict(v) for v in model.graph.output],
        "node_count": sum(hist.values()),
        "initializer_count": len(model.graph.initializer),
        "key_op_counts": {op: hist.get(op, 0) for op in KEY_OPS},
        "op_histogram": hist,
    }


def max_abs_err(got: list[np.ndarray], want: list[np.ndarray]) -> float:
    """Max abs error over outputs, NaN/inf positions required to match exactly."""
    worst = 0.0
    for g, w in zip(got, want, strict=True):
        g = np.asarray(g)
        w = np.asarray(w)
        assert g.shape == w.shape, (g.shape, w.shape)
        if g.dtype.kind == "f":
            same_nonfinite = (np.isnan(g) == np.isnan(w)).all() and (
                g[np.isinf(g)] == w[np.isinf(g)]
            ).all()
            assert same_nonfinite, "NaN/inf positions differ"
            finite = np.isfinite(w) & np.isfinite(g)
            if finite.any():
                worst = max(worst, float(np.max(np.abs(g[finite] - w[finite]))))
        else:
            worst = max(worst, float(np.max(np.abs(g.astype(np.int64) - w.astype(np.int64)))))
    return worst


def assert_close(got, want, *, atol: float, rtol: float, what: str) -> None:
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        finite = np.isfinite(w)
        np.testing.assert_allclose(
            np.where(finite, g, 0),
            np.where(finite, w, 0),
            atol=atol,
            rtol=rtol,
            err_msg=f"{what}: output {i}",
        )


def save_samples(path: Path, samples: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Write expected outputs as an .npz; return the key layout for the manifest.

    Each sample is {"inputs": {name: array}, "outputs": {name: array}}. A model with one input
    and one output gets keys input_<s> / output_<s>; otherwise input_<s>_<name> /
    output_<s>_<name>. The manifest's "samples" entry spells the mapping out either way.
    """
    arrays: dict[str, np.ndarray] = {}
    layout = []
    for s, sample in enumerate(samples):
        entry: dict[str, Any] = {"inputs": {}, "outputs": {}}
        for kind in ("inputs", "outputs"):
            items = sample[kind]
            prefix = "input" if kind == "inputs" else "output"
            for name, arr in items.items():
                key = f"{prefix}_{s}" if len(items) == 1 else f"{prefix}_{s}_{name}"
                arrays[key] = np.asarray(arr)
                entry[kind][name] = key
        entry["shapes"] = {name: list(np.asarray(a).shape) for name, a in sample["inputs"].items()}
        if "note" in sample:
            entry["note"] = sample["note"]
        layout.append(entry)
    np.savez_compressed(path, **arrays)
    return layout


# ----------------------------------------------------------------------------- manifest


def load_manifest(out_dir: Path) -> dict[str, Any]:
    path = out_dir / "manifest.json"
    if path.exists():
        return json.loads(path.read_text())
    return {"format": 1, "models": []}


def update_manifest(out_dir: Path, entries: list[dict[str, Any]]) -> None:
    """Replace the manifest entries for these files, keep the others, rewrite README."""
    manifest = load_manifest(out_dir)
    by_file = {m["file"]: m for m in manifest["models"]}
    for e in entries:
        by_file[e["file"]] = e
    # Drop entries whose file is gone (renamed models).
    manifest["models"] = [by_file[f] for f in sorted(by_file) if (out_dir / f).exists()]
    tmp = out_dir / "manifest.json.tmp"
    tmp.write_text(json.dumps(manifest, indent=1, sort_keys=False) + "\n")
    os.replace(tmp, out_dir / "manifest.json")
    if out_dir.resolve() == TEST_MODELS.resolve():
        render_readme(out_dir, manifest)


def _highlights(m: dict[str, Any]) -> str:
    k = m["key_op_counts"]
    parts = [f"{op} {n}" for op, n in k.items() if n]
    return ", ".join(parts)


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    return f"{n / 1024:.0f} KiB" if n < 1024 * 1024 else f"{n / 1024 / 1024:.2f} MiB"


README_HEAD = """\
# Real exported models for tests

Generated files: do not edit by hand. Regenerate with the scripts in `benchmarks/corpus/`
(see `benchmarks/corpus/README.md`); this table and `manifest.json` are rewritten by them.

Every model here was written by a real exporter (TorchScript or dynamo `torch.onnx.export`,
or tf2onnx) from a model built from a config with random weights (no hub downloads).
Weights are made non-trivial: LayerNorm weights/biases carry small noise (so the exporter does
not turn them into Identity), BatchNorm running statistics are calibrated on random batches.
Each model passed `onnx.checker.check_model(full_check=True)` and strict shape inference, and
(except the custom-op ExtractImagePatches models, which onnxruntime cannot run) onnxruntime
agreed with the source framework on every sample; "max abs err" is the worst difference.

`<name>.npz` holds the source framework's own inputs and outputs for each model (several
samples: different batch / sequence sizes; for the TF models also negative values and an
input with NaN/inf). Keys: `input_<s>` / `output_<s>` for single-input single-output models,
else `input_<s>_<name>` / `output_<s>_<name>`; `manifest.json` lists the mapping per sample,
the inputs with symbolic dims, key op counts, the full op histogram and, for models with
LayerNorm/GELU, how many instances the source model has (`expected.layernorm`,
`expected.gelu`), which the fusion rules should find.

| file | what it is | exporter | opset | nodes | op highlights | size | max abs err |
| --- | --- | --- | --- | --- | --- | --- | --- |
"""


def render_readme(out_dir: Path, manifest: dict[str, Any]) -> None:
    rows = []
    for m in manifest["models"]:
        err = m.get("max_abs_err")
        err_s = "n/a (custom op)" if err is None else f"{err:.1e}"
        rows.append(
            f"| `{m['file']}` | {m['what']} | {m['exporter_short']} | {m['opset']} | "
            f"{m['node_count']} | {_highlights(m)} | {_size(m['size_bytes'])} | {err_s} |"
        )
    notes = manifest.get("notes", [])
    text = README_HEAD + "\n".join(rows) + "\n"
    total = sum(p.stat().st_size for p in out_dir.iterdir() if p.is_file())
    text += f"\nTotal size of this folder: {_size(total)}.\n"
    if notes:
        text += "\n## Notes\n\n" + "\n".join(f"- {n}" for n in notes) + "\n"
    (out_dir / "README.md").write_text(text)


def set_notes(out_dir: Path, key: str, notes: list[str]) -> None:
    """Store script-owned notes (keyed by script) in the manifest."""
    manifest = load_manifest(out_dir)
    blocks = manifest.get("notes_by_script", {})
    blocks[key] = notes
    manifest["notes_by_script"] = blocks
    manifest["notes"] = [n for k in sorted(blocks) for n in blocks[k]]
    (out_dir / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
