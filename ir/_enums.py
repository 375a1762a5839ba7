"""Element data types and attribute kinds, mirroring ONNX's numbering.

The numbers equal ONNX's `TensorProto.DataType` and `AttributeProto.AttributeType` values so
lifting and lowering are plain integer copies; the names are the ones ONNX's text format and
the rule language use ("float", "int64", ...).
"""

from __future__ import annotations

import enum

import numpy as np


class DataType(enum.IntEnum):
    """Element type of a tensor, numbered as ONNX's `TensorProto.DataType`."""

    UNDEFINED = 0
    FLOAT = 1
    UINT8 = 2
    INT8 = 3
    UINT16 = 4
    INT16 = 5
    INT32 = 6
    INT64 = 7
    STRING = 8
    BOOL = 9
    FLOAT16 = 10
    DOUBLE = 11
    UINT32 = 12
    UINT64 = 13
    COMPLEX64 = 14
    COMPLEX128 = 15
    BFLOAT16 = 16
    FLOAT8E4M3FN = 17
    FLOAT8E4M3FNUZ = 18
    FLOAT8E5M2 = 19
    FLOAT8E5M2FNUZ = 20
    UINT4 = 21
    INT4 = 22
    FLOAT4E2M1 = 23
    FLOAT8E8M0 = 24
    UINT2 = 25
    INT2 = 26
    FLOAT6E2M3 = 27
    FLOAT6E3M2 = 28

    @property
    def onnx_name(self) -> str:
        """The lower-case name ONNX's text format uses ("float", "int64", ...)."""
        return self.name.lower()

    @classmethod
    def from_name(cls, name: str) -> DataType:
        """Look a data type up by its ONNX text name; raises ValueError if unknown."""
        try:
            return cls[name.upper()]
        except KeyError:
            raise ValueError(f"unknown ONNX data type name {name!r}") from None

    @property
    def is_floating(self) -> bool:
        """True for the real floating-point types (float8..double, bfloat16)."""
        return self in _FLOATING

    @property
    def is_integer(self) -> bool:
        """True for signed and unsigned integer types, 2-bit to 64-bit."""
        return self in _INTEGER

    @property
    def bitwidth(self) -> int:
        """Bits per element (0 for STRING and UNDEFINED)."""
        return _BITWIDTH.get(self, 0)

    @classmethod
    def from_numpy(cls, dtype: np.dtype[np.generic] | type) -> DataType:
        """The data type of a numpy dtype (ml_dtypes types recognised by name)."""
        dt = np.dtype(dtype)
        if dt.kind in ("U", "S", "O"):
            return cls.STRING
        found = _FROM_NUMPY_NAME.get(dt.name)
        if found is None:
            raise ValueError(f"numpy dtype {dt} has no ONNX data type")
        return found


_FLOATING = frozenset(
    {
        DataType.FLOAT,
        DataType.FLOAT16,
        DataType.DOUBLE,
        DataType.BFLOAT16,
        DataType.FLOAT8E4M3FN,
        DataType.FLOAT8E4M3FNUZ,
        DataType.FLOAT8E5M2,
        DataType.FLOAT8E5M2FNUZ,
        DataType.FLOAT4E2M1,
        DataType.FLOAT8E8M0,
        DataType.FLOAT6E2M3,
        DataType.FLOAT6E3M2,
    }
)
_INTEGER = frozenset(
    {
        DataType.UINT8,
        DataType.INT8,
        DataType.UINT16,
        DataType.INT16,
        DataType.INT32,
        DataType.INT64,
        DataType.UINT32,
        DataType.UINT64,
        DataType.UINT4,
        DataType.INT4,
        DataType.UINT2,
        DataType.INT2,
    }
)
_BITWIDTH = {
    DataType.FLOAT: 32,
    DataType.UINT8: 8,
    DataType.INT8: 8,
    DataType.UINT16: 16,
    DataType.INT16: 16,
    DataType.INT32: 32,
    DataType.INT64: 64,
    DataType.BOOL: 8,
    DataType.FLOAT16: 16,
    DataType.DOUBLE: 64,
    DataType.UINT32: 32,
    DataType.UINT64: 64,
    DataType.COMPLEX64: 64,
    DataType.COMPLEX128: 128,
    DataType.BFLOAT16: 16,
    DataType.FLOAT8E4M3FN: 8,
    DataType.FLOAT8E4M3FNUZ: 8,
    DataType.FLOAT8E5M2: 8,
    DataType.FLOAT8E5M2FNUZ: 8,
    DataType.UINT4: 4,
    DataType.INT4: 4,
    DataType.FLOAT4E2M1: 4,
    DataType.FLOAT8E8M0: 8,
    DataType.UINT2: 2,
    DataType.INT2: 2,
    DataType.FLOAT6E2M3: 6,
    DataType.FLOAT6E3M2: 6,
}
# numpy (and ml_dtypes) dtype names; ml_dtypes names match ONNX's after lower-casing.
_FROM_NUMPY_NAME = {
    "float32": DataType.FLOAT,
    "uint8": DataType.UINT8,
    "int8": DataType.INT8,
    "uint16": DataType.UINT16,
    "int16": DataType.INT16,
    "int32": DataType.INT32,
    "int64": DataType.INT64,
    "bool": DataType.BOOL,
    "float16": DataType.FLOAT16,
    "float64": DataType.DOUBLE,
    "uint32": DataType.UINT32,
    "uint64": DataType.UINT64,
    "complex64": DataType.COMPLEX64,
    "complex128": DataType.COMPLEX128,
    "bfloat16": DataType.BFLOAT16,
    "float8_e4m3fn": DataType.FLOAT8E4M3FN,
    "float8_e4m3fnuz": DataType.FLOAT8E4M3FNUZ,
    "float8_e5m2": DataType.FLOAT8E5M2,
    "float8_e5m2fnuz": DataType.FLOAT8E5M2FNUZ,
    "uint4": DataType.UINT4,
    "int4": DataType.INT4,
    "float4_e2m1fn": DataType.FLOAT4E2M1,
    "float8_e8m0fnu": DataType.FLOAT8E8M0,
    "uint2": DataType.UINT2,
    "int2": DataType.INT2,
}


class AttrType(enum.IntEnum):
    """Kind of an attribute, numbered as ONNX's `AttributeProto.AttributeType`."""

    UNDEFINED = 0
    FLOAT = 1
    INT = 2
    STRING = 3
    TENSOR = 4
    GRAPH = 5
    FLOATS = 6
    INTS = 7
    STRINGS = 8
    TENSORS = 9
    GRAPHS = 10
    SPARSE_TENSOR = 11
    SPARSE_TENSORS = 12
    TYPE_PROTO = 13
    TYPE_PROTOS = 14
