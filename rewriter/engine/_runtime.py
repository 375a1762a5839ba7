"""Running part of a model on constants with onnxruntime, for constant folding.

A folded value must be what onnxruntime computes for the node it replaces (onnx's reference
evaluator differs: NaN in ReduceMax, LogSoftmax far from the maximum, int64 Pow, number
formatting in Cast to string, the dtype of ReduceSumSquare on int32). So folding runs the
foldable nodes in one onnxruntime session, with graph optimizations off and on the CPU.
onnxruntime is imported here, when a fold runs, and used only through its public API.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

import ir
from rewriter._cache import CacheFolder, digest
from rewriter._errors import RewriteError
from rewriter.engine import _facts

logger = logging.getLogger(__name__)


class RuntimeEvaluationError(RewriteError):
    """onnxruntime could not load or run the nodes (no kernel, or a failure on the inputs)."""


def run_nodes(
    nodes: Sequence[ir.Node],
    inputs: Mapping[str, np.ndarray[Any, Any]],
    outputs: Sequence[str],
    opset_imports: Mapping[str, int],
) -> dict[str, np.ndarray[Any, Any]]:
    """The values `outputs` that `nodes` compute from `inputs`, computed by onnxruntime.

    Raises:
        RuntimeEvaluationError: onnxruntime cannot load the nodes or fails on these inputs,
            or an output is not a tensor.
    """
    import onnxruntime as ort

    model = ir.evaluation_model(nodes, inputs, outputs, opset_imports)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 3  # this session's own errors are reported by the caller
    try:
        session = ort.InferenceSession(
            model.SerializeToString(), options, providers=["CPUExecutionProvider"]
        )
        results = session.run(list(outputs), dict(inputs))
    except Exception as exc:  # onnxruntime raises its own untyped error classes
        raise RuntimeEvaluationError(f"onnxruntime cannot evaluate them: {exc}") from exc
    found: dict[str, np.ndarray[Any, Any]] = {}
    for name, result in zip(outputs, results, strict=True):
        if not isinstance(result, np.ndarray):
            raise RuntimeEvaluationError(f"`{name}` is not a tensor")
        found[name] = result
    return found


class KernelAvailability:
    """Whether onnxruntime's CPU provider has a kernel for a node, asked once per kind of node.

    A kind is the op, its domain and opset, and its input element types: a node of that kind
    is tried in a one-node model (its inputs typed from the facts), and onnxruntime either
    builds a session for it or says it has no implementation. Used to keep a rewrite from
    making a model onnxruntime could run into one it cannot (HardSigmoid has no double
    kernel).


    With a `store` (the user's cache folder), the answers are also kept across processes,
    one entry per onnxruntime build (named by its native library's path, size and time):
    a kernel is there or not for the build's whole life, and asking costs a session (and, in
    a process that runs no model, importing onnxruntime).
    """

    def __init__(self, store: CacheFolder | None = None) -> None:
        self._known: dict[tuple[object, ...], bool] = {}
        self._store = store
        self._entry: str | None = None  # the store's entry for this build, once read

    def __call__(self, node: ir.Node, opset_imports: Mapping[str, int]) -> bool | None:
        """True or False when onnxruntime was asked; None when the node's types are unknown."""
        dtypes: list[ir.DataType | None] = []
        for value in node.inputs:
            if value is None:
                dtypes.append(None)
                continue
            dtype = _facts.dtype_of(value)
            if dtype is None:
                return None
            dtypes.append(dtype)
        domain = ir.schemas.normalize_domain(node.domain)
        opset = opset_imports.get(domain, opset_imports.get("ai.onnx") if domain == "" else None)
        key = (domain, node.op_type, opset, tuple(dtypes), len(node.outputs))
        if self._store is not None and self._entry is None:
            self._entry = _store_entry()
            self._known.update(_read_answers(self._store, self._entry))
        found = self._known.get(key)
        if found is None:
            found = _builds_a_session(node, dtypes, opset_imports)
            self._known[key] = found
            if self._store is not None and self._entry:
                self._store.write(self._entry, _encode_answers(self._known))
        return found


def _store_entry() -> str:
    """The store's entry name for the installed onnxruntime ("" when it cannot be told).

    Found without importing onnxruntime: its native library's path, size and modification
    time stand for the build (a reinstall or upgrade gives another entry).
    """
    spec = importlib.util.find_spec("onnxruntime")
    if spec is None or spec.origin is None:
        return ""
    libraries = sorted(Path(spec.origin).parent.glob("capi/onnxruntime_pybind11_state*"))
    if not libraries:
        return ""
    stat = libraries[0].stat()
    return f"kernels-{digest(str(libraries[0]), str(stat.st_size), str(stat.st_mtime_ns))}.json"


def _read_answers(store: CacheFolder, entry: str) -> dict[tuple[object, ...], bool]:
    """The answers an earlier process kept (none when the entry is missing or unusable)."""
    data = store.read(entry) if entry else None
    if data is None:
        return {}
    try:
        return {_key_from_json(key): bool(found) for key, found in json.loads(data)}
    except (ValueError, TypeError) as exc:
        logger.debug("kernel answers %s are unusable (%s); asking again", entry, exc)
        return {}


def _encode_answers(known: Mapping[tuple[object, ...], bool]) -> bytes:
    rows = [[_key_to_json(key), found] for key, found in known.items()]
    return json.dumps(rows, separators=(",", ":")).encode()


def _key_to_json(key: tuple[object, ...]) -> list[object]:
    domain, op_type, opset, dtypes, outputs = key
    assert isinstance(dtypes, tuple), "the dtypes of a kernel key are a tuple"
    return [domain, op_type, opset, [None if d is None else int(d) for d in dtypes], outputs]


def _key_from_json(row: list[Any]) -> tuple[object, ...]:
    domain, op_type, opset, dtypes, outputs = row
    kinds = tuple(None if d is None else ir.DataType(d) for d in dtypes)
    return (str(domain), str(op_type), opset if opset is None else int(opset), kinds, int(outputs))


def _builds_a_session(
    node: ir.Node, dtypes: Sequence[ir.DataType | None], opset_imports: Mapping[str, int]
) -> bool:
    import onnxruntime as ort

    # Inputs of the right element type and rank (every dim 1): a session resolves kernels
    # from types, and some ops refuse a rank they cannot take before kernels are looked at.
    inputs = {}
    for value, dtype in zip(node.inputs, dtypes, strict=True):
        if value is None or dtype is None:
            continue
        dims = _facts.shape_of(value)
        shape = (1,) * len(dims) if dims is not None else ()
        inputs[value.name] = np.zeros(shape, dtype=ir.numpy_dtype(dtype))
    outputs = [out.name for out in node.outputs if out.name]
    model = ir.evaluation_model([node], inputs, outputs, opset_imports)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 4
    try:
        ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime raises its own untyped error classes
        text = str(exc)
        return not ("NOT_IMPLEMENTED" in text or "Could not find an implementation" in text)
    return True


# The probe's depth: many pairs of products, as a layer's reduction has.
_PROBE_DEPTH = 64


@functools.lru_cache(maxsize=1)
def int8_sums_saturate() -> bool:
    """Whether onnxruntime's uint8 x int8 matrix product loses sums on this machine.

    Its integer kernels (MatMulInteger, DynamicQuantizeMatMul, QLinearConv) on an x86 CPU
    without VNNI (AVX2 only: AMD EPYC before Zen 4, Intel before Cascade Lake) multiply with
    vpmaddubsw, which adds two products in 16 bits: 255 * 127 * 2 > 32767 saturates, and the
    model run is not the model written. Asked of the runtime itself, once per process: a
    MatMulInteger of uint8 255s by int8 127s, whose exact sums are depth * 255 * 127 (on one
    AMD EPYC with onnxruntime 1.32 every one came out as 32 * 32767). False when onnxruntime
    cannot run the probe.
    """
    import onnxruntime as ort

    activations = np.full((8, _PROBE_DEPTH), 255, np.uint8)
    weights = np.full((_PROBE_DEPTH, 8), 127, np.int8)
    node = ir.Node("MatMulInteger", [ir.Value("x"), ir.Value("w")], outputs=["y"])
    feeds = {"x": activations, "w": weights}
    model = ir.evaluation_model([node], feeds, ["y"], {"": 13})
    options = ort.SessionOptions()
    options.log_severity_level = 4
    try:
        session = ort.InferenceSession(
            model.SerializeToString(), options, providers=["CPUExecutionProvider"]
        )
        sums = session.run(None, feeds)[0]
    except Exception as exc:  # onnxruntime raises its own untyped error classes
        logger.debug("the int8 saturation probe did not run: %s", exc)
        return False
    return bool(np.any(sums != _PROBE_DEPTH * 255 * 127))
