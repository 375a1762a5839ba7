"""Running one op on onnxruntime and on the prover's semantics, and comparing bit for bit."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

import ml_dtypes
import numpy as np
import onnx
import onnx.helper
import onnxruntime as ort
import pytest

import ir
from rewriter.prove import apply_op, concrete, constant

OPSET = 21


def _onnx_type(dtype: np.dtype) -> int:
    return onnx.helper.np_dtype_to_tensor_dtype(np.dtype(dtype))


def run_ort(
    op: str,
    inputs: Sequence[np.ndarray | None],
    attributes: Mapping[str, object] | None = None,
    *,
    outputs: int = 1,
) -> list[np.ndarray]:
    """The op's outputs on onnxruntime's CPU provider, optimizations off.

    Skips the test when onnxruntime has no kernel for these types.
    """
    names = [f"in{k}" if array is not None else "" for k, array in enumerate(inputs)]
    graph_inputs = [
        onnx.helper.make_tensor_value_info(name, _onnx_type(array.dtype), list(array.shape))
        for name, array in zip(names, inputs, strict=True)
        if array is not None
    ]
    out_names = [f"out{k}" for k in range(outputs)]
    graph_outputs = [onnx.helper.make_value_info(name, onnx.TypeProto()) for name in out_names]
    node = onnx.helper.make_node(op, names, out_names, **(attributes or {}))
    graph = onnx.helper.make_graph([node], "one_op", graph_inputs, graph_outputs)
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", OPSET)])
    model.ir_version = 10
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 4
    try:
        session = ort.InferenceSession(
            model.SerializeToString(), options, providers=["CPUExecutionProvider"]
        )
    except Exception as exc:  # onnxruntime's error types are not importable
        if "NOT_IMPLEMENTED" in str(exc) or "Could not find an implementation" in str(exc):
            pytest.skip(f"onnxruntime has no {op} kernel for these types")
        raise
    feeds = {n: a for n, a in zip(names, inputs, strict=True) if a is not None}
    return session.run(None, feeds)


def run_semantics(
    op: str,
    inputs: Sequence[np.ndarray | None],
    attributes: Mapping[str, object] | None = None,
) -> list:
    """The prover's outputs of the op on constant inputs, evaluated (values and poison)."""
    tensors = [constant(a) if a is not None else None for a in inputs]
    outputs = apply_op(op, "", dict(attributes or {}), tensors)
    return [concrete(t) for t in outputs]


def bits(array: np.ndarray) -> np.ndarray:
    """The array's raw bits (for floats: exact, -0 apart from +0)."""
    if array.dtype.kind == "f" or array.dtype == ml_dtypes.bfloat16:
        return array.view(f"u{array.dtype.itemsize}")
    return array


def assert_bitwise(
    op: str, inputs, attributes=None, *, allow_poison: bool = False, zero_sign: bool = True
) -> None:
    """The semantics equals onnxruntime bit for bit (NaN as NaN; poison elements skipped).

    `zero_sign=False` compares zeros as numbers (+0 == -0): for the results whose zero sign
    onnxruntime leaves to its code path (see `_elementwise`).
    """
    expected = run_ort(op, inputs, attributes)
    got = run_semantics(op, inputs, attributes)
    for ort_out, mine in zip(expected, got, strict=True):
        ort_out = np.asarray(ort_out)
        assert mine.values.shape == ort_out.shape, (op, mine.values.shape, ort_out.shape)
        assert mine.values.dtype == ort_out.dtype, (op, mine.values.dtype, ort_out.dtype)
        keep = ~mine.poison
        if not allow_poison:
            assert not mine.poison.any(), f"{op}: poison where onnxruntime computes a value"
        if ort_out.dtype.kind == "f":
            nan_ort = np.isnan(ort_out)
            nan_mine = np.isnan(mine.values)
            assert np.array_equal(nan_ort[keep], nan_mine[keep]), _diff(op, inputs, ort_out, mine)
            same = keep & ~nan_ort
            if not zero_sign:
                zeros = (ort_out == 0) & (mine.values == 0)
                same &= ~zeros
            equal = bits(ort_out)[same] == bits(mine.values)[same]
            assert equal.all(), _diff(op, inputs, ort_out, mine)
        else:
            assert np.array_equal(ort_out[keep], mine.values[keep]), _diff(
                op, inputs, ort_out, mine
            )


def _diff(op: str, inputs, ort_out: np.ndarray, mine) -> str:
    flat_ort = ort_out.reshape(-1)
    flat_mine = mine.values.reshape(-1)
    broadcast = [np.broadcast_to(a, ort_out.shape).reshape(-1) for a in inputs if a is not None]
    rows = []
    for k in range(flat_ort.size):
        a, b = flat_ort[k], flat_mine[k]
        differ = (np.isnan(a) != np.isnan(b)) if ort_out.dtype.kind == "f" else a != b
        if ort_out.dtype.kind == "f" and not np.isnan(a):
            differ = differ or bits(np.asarray(a)) != bits(np.asarray(b))
        if differ and not mine.poison.reshape(-1)[k]:
            rows.append(f"inputs {[x[k] for x in broadcast]}: ort {a!r}, semantics {b!r}")
        if len(rows) >= 5:
            break
    return f"{op}: " + "; ".join(rows)


def special_values(dtype: np.dtype) -> np.ndarray:
    """NaN, infinities, signed zeros, ones, halves, extremes, subnormals and ordinary values."""
    info = ml_dtypes.finfo(dtype)
    tiny = float(info.tiny)
    smallest = float(info.smallest_subnormal)
    values = [
        np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -1.5, 2.5, 3.0, 1 / 3, -7.0,
        float(info.max), -float(info.max), tiny, -tiny, smallest, -smallest,
        tiny - smallest, 6.0, -3.0,
    ]  # fmt: skip
    with np.errstate(over="ignore"):
        return np.array(values, dtype=np.float64).astype(dtype)


def pairs(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every pair of `values`, as two flat arrays."""
    first, second = zip(*itertools.product(values, values), strict=True)
    return np.array(first, dtype=values.dtype), np.array(second, dtype=values.dtype)


FLOATS = (np.float32, np.float64, np.float16)
DTYPES_BY_NAME = {
    "float": np.float32,
    "double": np.float64,
    "float16": np.float16,
}


def onnx_dtype(dtype: np.dtype) -> ir.DataType:
    """The IR's element type of a numpy dtype."""
    return ir.DataType(_onnx_type(dtype))
