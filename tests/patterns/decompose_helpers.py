"""Shared helpers for the tests of the decomposition rules (patterns/decompose)."""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx.helper

import ir
import rewriter
from rewriter.api import load_rules
from rewriter.verification import extract_image_patches
from tests.helpers import session

LIBRARY = rewriter.library_path()
DECOMPOSE = LIBRARY / "decompose"
EIP_RULES = DECOMPOSE / "extract_image_patches.rw"
MODELS = Path(__file__).resolve().parents[1] / "models"
TF_DOMAIN = "ai.onnx.converters.tensorflow"


@functools.cache
def loaded_rules(*paths: Path) -> rewriter.RuleSet:
    """Rules loaded once per test session (loading the whole library takes a second).

    As the main command loads them: a folder's opt-in subfolders (ort, loops, relaxed,
    quantize) are left out.
    """
    return load_rules(list(paths))


def fired(result: rewriter.RewriteResult) -> list[str]:
    """Names of the rules applied, in order."""
    return [e.rule for e in result.trace.entries if e.kind == "rule"]


def op_types(model: onnx.ModelProto) -> list[str]:
    """Op types of the main graph, in order."""
    return [n.op_type for n in model.graph.node]


def checked(result: rewriter.RewriteResult) -> onnx.ModelProto:
    """The rewritten model after ir.verify and onnx's full checker."""
    ir.verify(result.model)
    proto = result.proto
    onnx.checker.check_model(proto, full_check=True)
    return proto


def eip_model(
    ksizes: Sequence[int],
    strides: Sequence[int],
    rates: Sequence[int] | None,
    padding: str,
    height: int | str,
    width: int | str,
    channels: int | str,
    elem_type: int = onnx.TensorProto.FLOAT,
    opset: int = 15,
) -> onnx.ModelProto:
    """One tf2onnx-style ExtractImagePatches node on an NHWC input with a symbolic batch."""
    attrs: dict[str, Any] = {
        "ksizes": [1, *ksizes, 1],
        "strides": [1, *strides, 1],
        "padding": padding,
    }
    if rates is not None:
        attrs["rates"] = [1, *rates, 1]
    node = onnx.helper.make_node(
        "ExtractImagePatches", ["images"], ["patches"], domain=TF_DOMAIN, name="eip", **attrs
    )
    graph = onnx.helper.make_graph(
        [node],
        "eip",
        [onnx.helper.make_tensor_value_info("images", elem_type, ["N", height, width, channels])],
        [onnx.helper.make_tensor_value_info("patches", elem_type, ["N", "OH", "OW", "K"])],
    )
    model = onnx.helper.make_model(
        graph,
        opset_imports=[onnx.helper.make_opsetid("", opset), onnx.helper.make_opsetid(TF_DOMAIN, 1)],
    )
    model.ir_version = 8
    return model


def assert_bitwise_equal(got: np.ndarray, expected: np.ndarray) -> None:
    """Same dtype, shape and bytes: NaN at the same places, infinities and signed zeros kept."""
    assert got.dtype == expected.dtype
    assert got.shape == expected.shape
    assert np.ascontiguousarray(got).tobytes() == np.ascontiguousarray(expected).tobytes()


def run_ort(model: onnx.ModelProto, images: np.ndarray) -> np.ndarray:
    """The single output of `model` on `images` (onnxruntime, optimizations off)."""
    return session(model).run(None, {model.graph.input[0].name: images})[0]


def expected_patches(model: onnx.ModelProto, images: np.ndarray) -> np.ndarray:
    """The reference kernel applied with the attributes of the model's ExtractImagePatches."""
    (node,) = [n for n in model.graph.node if n.op_type == "ExtractImagePatches"]
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    padding = attrs["padding"]
    return extract_image_patches(
        images,
        attrs["ksizes"],
        attrs["strides"],
        attrs.get("rates"),
        padding.decode() if isinstance(padding, bytes) else padding,
    )


def special_floats(shape: Sequence[int], dtype: Any, seed: int) -> np.ndarray:
    """Standard normal values with NaN, +inf, -inf and -0.0 planted at seeded positions."""
    rng = np.random.default_rng(seed)
    values = rng.standard_normal(shape).astype(dtype)
    flat = values.reshape(-1)
    specials = np.array([np.nan, np.inf, -np.inf, -0.0], dtype=dtype)
    if flat.size:
        where = rng.integers(0, flat.size, size=min(flat.size, 8))
        flat[where] = specials[np.arange(where.size) % specials.size]
    return values


def manifest_entry(filename: str) -> dict[str, Any]:
    """The tests/models/manifest.json entry of a model file."""
    manifest = json.loads((MODELS / "manifest.json").read_text())
    (entry,) = [m for m in manifest["models"] if m["file"] == filename]
    return entry
