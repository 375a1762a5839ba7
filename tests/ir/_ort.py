"""Running models with onnxruntime for the IR tests, including ml_dtypes tensors.

onnxruntime's `run` cannot take or return bfloat16 / float8 numpy arrays; those go through
`OrtValue`s and raw bytes. Sub-byte types (int4, float4, ...) are not supported here.
"""

from __future__ import annotations

import ctypes
import re
from typing import Any

import numpy as np
import onnx
import onnx.helper
import onnx.numpy_helper
import onnxruntime as ort

# numpy dtype name -> ONNX element type, for the ml_dtypes types ORT's `run` cannot convert.
_EXOTIC = {
    "bfloat16": onnx.TensorProto.BFLOAT16,
    "float8_e4m3fn": onnx.TensorProto.FLOAT8E4M3FN,
    "float8_e4m3fnuz": onnx.TensorProto.FLOAT8E4M3FNUZ,
    "float8_e5m2": onnx.TensorProto.FLOAT8E5M2,
    "float8_e5m2fnuz": onnx.TensorProto.FLOAT8E5M2FNUZ,
}
_SUB_BYTE = ("int4", "uint4", "float4_e2m1fn", "int2", "uint2", "float8_e8m0fnu")


class OrtUnsupportedError(Exception):
    """onnxruntime cannot load or feed this model (a limitation, not a round-trip bug)."""


def session(model_bytes: bytes) -> ort.InferenceSession:
    """A CPU session with graph optimizations disabled (so ORT cannot mask a bug)."""
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 4
    try:
        return ort.InferenceSession(model_bytes, options, providers=["CPUExecutionProvider"])
    except Exception as exc:
        raise OrtUnsupportedError(f"onnxruntime cannot load it: {first_line(exc)}") from exc


_REASONS = (
    (re.compile(r"Could not find an implementation for (\S+) node"), "no CPU kernel for {}"),
    (re.compile(r"Failed to find kernel for (\S+) "), "no CPU kernel for {}"),
    (re.compile(r"(\S+) is not a registered function/op"), "unknown op {}"),
    (re.compile(r"Type Error: Type '([^']+)'"), "rejects type {}"),
    (
        re.compile(r"Exception during initialization: \S*/(\w+\.(?:cc|h)):"),
        "kernel setup failed ({})",
    ),
    (
        re.compile(r"No corresponding Numpy type for Tensor Type\. (\S+)"),
        "cannot return {} to numpy",
    ),
    (re.compile(r"while running (\S+) node"), "failed while running {}"),
)


def first_line(exc: BaseException) -> str:
    """A short reason for an onnxruntime error, normalized so that like errors group."""
    text = str(exc).strip()
    for pattern, template in _REASONS:
        found = pattern.search(text)
        if found:
            return template.format(found.group(1))
    line = text.splitlines()[0] if text else type(exc).__name__
    return line[:120]


def normalize(value: Any) -> Any:
    """Turn TensorProto / SequenceProto / OptionalProto / numpy scalars into numpy and lists."""
    if isinstance(value, onnx.TensorProto):
        return onnx.numpy_helper.to_array(value)
    if isinstance(value, onnx.SequenceProto):
        return [normalize(v) for v in onnx.numpy_helper.to_list(value)]
    if isinstance(value, onnx.OptionalProto):
        return normalize(onnx.numpy_helper.to_optional(value))
    if isinstance(value, list | tuple):
        return [normalize(v) for v in value]
    if isinstance(value, np.generic):
        return np.asarray(value)
    return value


def _is_exotic(value: Any) -> bool:
    return isinstance(value, np.ndarray) and value.dtype.name in _EXOTIC


def _feed(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        if value.dtype.name in _SUB_BYTE:
            raise OrtUnsupportedError(f"onnxruntime cannot take {value.dtype.name} inputs")
        if value.dtype.name in _EXOTIC:
            raw = np.ascontiguousarray(value).view(f"u{value.dtype.itemsize}")
            return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(raw, _EXOTIC[value.dtype.name])
    return value


def _from_ort_value(value: ort.OrtValue) -> np.ndarray:
    element = value.element_type() if value.is_tensor() else None
    dtype = onnx.helper.tensor_dtype_to_np_dtype(element) if element else None
    if dtype is None or dtype.name not in _EXOTIC:
        return np.asarray(value.numpy())
    size = value.tensor_size_in_bytes()
    data = ctypes.string_at(value.data_ptr(), size)
    return np.frombuffer(data, dtype=dtype).reshape(value.shape()).copy()


def run(sess: ort.InferenceSession, inputs: list[Any]) -> list[Any]:
    """Run `sess` on positional inputs; outputs come back as numpy arrays, lists or None."""
    names = [i.name for i in sess.get_inputs()]
    if len(names) != len(inputs):
        raise OrtUnsupportedError(
            f"onnxruntime expects {len(names)} inputs, the test data has {len(inputs)}"
        )
    exotic = any(_is_exotic(v) for v in inputs)
    feeds = {name: _feed(v) for name, v in zip(names, inputs, strict=True)}
    try:
        if not exotic:
            return list(sess.run(None, feeds))
    except Exception as exc:
        if "Numpy type" not in str(exc) and "Numpy_type" not in str(exc):
            raise OrtUnsupportedError(f"onnxruntime cannot run it: {first_line(exc)}") from exc
    try:
        ort_feeds = {
            k: v if isinstance(v, ort.OrtValue) else ort.OrtValue.ortvalue_from_numpy(v)
            for k, v in feeds.items()
        }
        values = sess.run_with_ort_values(None, ort_feeds)
        return [_from_ort_value(v) for v in values]
    except Exception as exc:
        raise OrtUnsupportedError(f"onnxruntime cannot run it: {first_line(exc)}") from exc


def compare(expected: Any, actual: Any, rtol: float, atol: float, where: str = "output") -> None:
    """Assert `actual` matches `expected` (numpy arrays, nested lists, None)."""
    if expected is None:
        assert actual is None, f"{where}: expected no value, got {type(actual).__name__}"
        return
    if isinstance(expected, list):
        assert isinstance(actual, list), f"{where}: expected a sequence, got {type(actual)}"
        assert len(actual) == len(expected), f"{where}: {len(actual)} items != {len(expected)}"
        for i, (e, a) in enumerate(zip(expected, actual, strict=True)):
            compare(e, a, rtol, atol, f"{where}[{i}]")
        return
    expected = np.asarray(expected)
    actual = np.asarray(actual)
    assert actual.shape == expected.shape, f"{where}: shape {actual.shape} != {expected.shape}"
    if expected.dtype == object or expected.dtype.kind in "US":
        np.testing.assert_array_equal(actual.astype(object), expected.astype(object), where)
        return
    assert actual.dtype == expected.dtype, f"{where}: dtype {actual.dtype} != {expected.dtype}"
    if expected.dtype.kind in "biu":
        np.testing.assert_array_equal(actual, expected, where)
        return
    if expected.dtype.name == "bfloat16":
        rtol = max(rtol, 2**-6)  # two bfloat16 ULPs, as onnx's backend runner allows
    np.testing.assert_allclose(
        actual.astype(np.float64),
        expected.astype(np.float64),
        rtol=rtol,
        atol=atol,
        equal_nan=True,
        err_msg=where,
    )
