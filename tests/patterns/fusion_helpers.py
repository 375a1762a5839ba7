"""Shared helpers for the tests of the fusion rule library (patterns/fusion, patterns/ort)."""

from __future__ import annotations

import collections
import json
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx.helper
import onnx.numpy_helper
import onnx.parser
import onnxruntime as ort

import ir
import rewriter
from tests.helpers import assert_same_outputs, op_types, random_feeds, session

LIBRARY = rewriter.library_path()
FUSION = LIBRARY / "fusion"
ORT_RULES = LIBRARY / "ort"
MODELS = Path(__file__).resolve().parents[1] / "models"
OPT_IN_FOLDERS = (
    "loops",
    "ort",
    "quantize",
    "relaxed",
)  # shipped, but only applied when asked for with --rules

__all__ = [
    "FUSION",
    "LIBRARY",
    "MODELS",
    "ORT_RULES",
    "assert_same_outputs",
    "build",
    "check_fired",
    "default_library",
    "fired",
    "manifest_entry",
    "op_types",
    "random_feeds",
    "rewrite",
    "run_npz_samples",
    "session",
]


def build(text: str, seed: int = 0, check: bool = True, **arrays: Any) -> onnx.ModelProto:
    """A checked model from ONNX text; `arrays` become initializers (names as keywords).

    An array given as a tuple `(shape, low, high)` is drawn uniformly with a seeded generator.
    `check=False` for a model of ops onnx does not know (onnxruntime's in the default domain).
    """
    model = onnx.parser.parse_model(text)
    rng = np.random.default_rng(seed)
    for name, spec in arrays.items():
        if isinstance(spec, tuple):
            shape, low, high = spec
            spec = rng.uniform(low, high, shape).astype(np.float32)
        model.graph.initializer.append(onnx.numpy_helper.from_array(np.asarray(spec), name))
    if check:
        onnx.checker.check_model(model, full_check=True)
    return model


def default_library() -> list[Path]:
    """The default rule library: every folder of patterns/ except the opt-in ones."""
    return sorted(
        p
        for p in LIBRARY.iterdir()
        if p.is_dir() and p.name not in OPT_IN_FOLDERS and any(p.rglob("*.rw"))
    )


WITH_PASSES = rewriter.RewriteOptions()
"""Options of a standard run: the rules with the default pipeline of built-in passes."""


def rewrite(
    model: onnx.ModelProto | str | Path, *rule_paths: Path, **kwargs: Any
) -> rewriter.RewriteResult:
    """Rewrite with the given rule files or folders (default: patterns/fusion) alone.

    No built-in pass runs unless `options` names some: the rules are tested on their own.
    """
    paths = list(rule_paths) or [FUSION]
    kwargs.setdefault("options", rewriter.RewriteOptions(passes=()))
    return rewriter.rewrite(model, paths, **kwargs)


def fired(result: rewriter.RewriteResult) -> collections.Counter[str]:
    """How often each rule fired."""
    return collections.Counter(e.rule for e in result.trace.entries if e.kind == "rule")


def check_fired(
    original: onnx.ModelProto,
    result: rewriter.RewriteResult,
    counts: dict[str, int],
    ops: list[str] | None,
    rtol: float = 1e-4,
    atol: float = 1e-5,
) -> None:
    """The positive-test checks (STYLE 27): rewrites, op sequence, ir.verify, same outputs."""
    assert dict(fired(result)) == counts, result.trace.skips
    ir.verify(result.model)
    if ops is not None:
        assert op_types(result.proto) == ops
    assert_same_outputs(original, result.proto, rtol=rtol, atol=atol)


def manifest_entry(name: str) -> dict[str, Any]:
    """The manifest record of tests/models/<name>.onnx."""
    models = json.loads((MODELS / "manifest.json").read_text())["models"]
    return next(m for m in models if m["file"] == f"{name}.onnx")


def run_npz_samples(name: str, proto: onnx.ModelProto) -> float:
    """Run `proto` (a rewritten tests/models/<name>) on the saved samples; worst abs error.

    Asserts every output is within the manifest's tolerance of the source framework's output.
    """
    entry = manifest_entry(name)
    tol = entry["tolerance"]
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(
        proto.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    data = np.load(MODELS / entry["npz"])
    worst = 0.0
    for sample in entry["samples"]:
        feeds = {k: data[v] for k, v in sample["inputs"].items()}
        outputs = sess.run(list(sample["outputs"]), feeds)
        for got, key in zip(outputs, sample["outputs"].values(), strict=False):
            expected = data[key]
            np.testing.assert_allclose(got, expected, rtol=tol["rtol"], atol=tol["atol"])
            worst = max(worst, float(np.abs(got - expected).max()))
    return worst
