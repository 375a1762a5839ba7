"""Tensor payloads: lazy views of TensorProtos, memory-mapped external data, and lowering.

Part of the serde layer (the only code that touches ONNX protobuf). Nothing here reads a
tensor's bytes before `numpy()` is called; external data is memory-mapped, never loaded whole.
"""

from __future__ import annotations

import mmap
import os
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx
import onnx.helper
import onnx.numpy_helper

from ir._core import ExternalDataError, IRError, NumpyTensor, Tensor
from ir._enums import DataType

if TYPE_CHECKING:
    import numpy.typing as npt


class TensorDataError(IRError):
    """A tensor's data disagrees with its declared type and shape."""


def numpy_dtype(dtype: DataType) -> np.dtype[Any]:
    """The numpy dtype ONNX uses to hold `dtype` values (ml_dtypes for the exotic ones)."""
    return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(int(dtype)))


class ProtoTensor(Tensor):
    """A tensor whose data is inside a TensorProto; decoded on first `numpy()` call."""

    __slots__ = ("_array", "_proto")

    def __init__(self, proto: onnx.TensorProto) -> None:
        self._proto = proto
        self._array: npt.NDArray[Any] | None = None

    @property
    def name(self) -> str:
        return self._proto.name

    @property
    def dtype(self) -> DataType:
        return DataType(self._proto.data_type)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self._proto.dims)

    @property
    def doc_string(self) -> str:
        """The tensor's doc string."""
        return self._proto.doc_string

    def numpy(self) -> npt.NDArray[Any]:
        if self._array is None:
            try:
                array = onnx.numpy_helper.to_array(self._proto)
            except (ValueError, TypeError) as exc:
                raise TensorDataError(
                    f"tensor {self.name!r}: data does not match its type "
                    f"{self.dtype.onnx_name} and shape {list(self.shape)}: {exc}"
                ) from exc
            self._array = array
        return self._array


class SparseProtoTensor(Tensor):
    """A sparse tensor held as its SparseTensorProto; `numpy()` gives the dense array."""

    __slots__ = ("_proto",)

    def __init__(self, proto: onnx.SparseTensorProto) -> None:
        self._proto = proto

    @property
    def name(self) -> str:
        return self._proto.values.name

    @property
    def dtype(self) -> DataType:
        return DataType(self._proto.values.data_type)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self._proto.dims)

    def numpy(self) -> npt.NDArray[Any]:
        try:
            values = onnx.numpy_helper.to_array(self._proto.values).reshape(-1)
            indices = onnx.numpy_helper.to_array(self._proto.indices)
            dense = np.zeros(self.shape, dtype=values.dtype)
            if indices.ndim == 1:
                dense.reshape(-1)[indices] = values
            else:
                dense[tuple(indices.T)] = values
        except (ValueError, TypeError, IndexError) as exc:
            # Only tensors the loader reads are checked when loading (an attribute of an op
            # that holds no tensors by its schema is lifted on first use).
            raise TensorDataError(
                f"sparse tensor {self.name!r}: values and indices do not make a tensor of "
                f"shape {list(self.shape)}: {exc}"
            ) from exc
        return dense


def check_external_location(proto: onnx.TensorProto) -> None:
    """Refuse an external-data location that is absolute or leaves the model's folder.

    Raises:
        ExternalDataError: naming the tensor and the location.
    """
    location = _external_info(proto).get("location", "")
    if not location:
        raise ExternalDataError(f"tensor {proto.name!r}: external data has no location")
    if not isinstance(location, str):  # protobuf gives bytes for text that is not UTF-8
        raise ExternalDataError(
            f"tensor {proto.name!r}: external data location {location!r} is not UTF-8 text"
        )
    if "\0" in location:
        raise ExternalDataError(
            f"tensor {proto.name!r}: external data location {location!r} holds a NUL character"
        )
    if os.path.isabs(location) or location.startswith(("/", "\\")) or ":" in location[:3]:
        raise ExternalDataError(
            f"tensor {proto.name!r}: external data location {location!r} is an absolute path; "
            "only paths relative to the model's folder are allowed"
        )
    normalized = os.path.normpath(location.replace("\\", "/"))
    if normalized == ".." or normalized.startswith("../") or "/../" in f"/{normalized}/":
        raise ExternalDataError(
            f"tensor {proto.name!r}: external data location {location!r} escapes the model's folder"
        )


_KNOWN_CODES = frozenset(int(t) for t in DataType)
_FIXED_SIZE_CODES = frozenset(int(t) for t in DataType if t.bitwidth > 0)


def _external_info(proto: onnx.TensorProto) -> dict[str, str]:
    return {entry.key: entry.value for entry in proto.external_data}


class ExternalTensor(Tensor):
    """A tensor whose bytes live in an external file; memory-mapped on first `numpy()`."""

    __slots__ = ("_array", "_base_dir", "_proto", "length", "location", "offset")

    def __init__(self, proto: onnx.TensorProto, base_dir: str | None) -> None:
        self._proto = proto
        self._base_dir = base_dir
        self._array: npt.NDArray[Any] | None = None
        info = _external_info(proto)
        self.location = info.get("location", "")
        try:
            self.offset = int(info.get("offset", "0"))
            self.length = int(info["length"]) if "length" in info else None
        except ValueError as exc:
            raise ExternalDataError(
                f"tensor {proto.name!r}: bad external data offset/length: {exc}"
            ) from exc
        if self.offset < 0 or (self.length is not None and self.length < 0):
            raise ExternalDataError(
                f"tensor {proto.name!r}: negative external data offset/length "
                f"({self.offset}, {self.length})"
            )

    @property
    def name(self) -> str:
        return self._proto.name

    @property
    def dtype(self) -> DataType:
        return DataType(self._proto.data_type)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self._proto.dims)

    @property
    def is_external(self) -> bool:
        return True

    @property
    def base_dir(self) -> str | None:
        """The folder `location` is relative to."""
        return self._base_dir

    def path(self) -> str:
        """Absolute path of the data file (checked to stay inside the model's folder).

        Raises:
            ExternalDataError: the file is missing or a symlink leads outside the folder.
        """
        base = os.path.realpath(self._base_dir or os.getcwd())
        path = os.path.realpath(os.path.join(base, self.location))
        if os.path.commonpath([base, path]) != base:
            raise ExternalDataError(
                f"tensor {self.name!r}: external data location {self.location!r} resolves "
                f"outside the model's folder ({path})"
            )
        if not os.path.isfile(path):
            raise ExternalDataError(
                f"tensor {self.name!r}: external data file {self.location!r} not found in {base}"
            )
        return path

    def byte_length(self) -> int:
        """Bytes this tensor occupies in the file."""
        return self.length if self.length is not None else self.nbytes

    def check(self) -> None:
        """Check that the file exists and holds this tensor's bytes (no data is read).

        Raises:
            ExternalDataError: the file is missing, too short, or the length is inconsistent.
            TensorDataError: the element type is unknown or has no fixed size (strings).
        """
        code = self._proto.data_type
        if code not in _FIXED_SIZE_CODES:
            raise TensorDataError(
                f"tensor {self.name!r}: external data needs a fixed-size element type, "
                f"not {DataType(code).onnx_name if code in _KNOWN_CODES else code}"
            )
        path = self.path()
        expected = self.nbytes
        if self.length is not None and self.dtype != DataType.STRING and self.length != expected:
            raise ExternalDataError(
                f"tensor {self.name!r}: external data length {self.length} does not match "
                f"{expected} bytes for {self.dtype.onnx_name}{list(self.shape)}"
            )
        size = os.path.getsize(path)
        if self.offset + self.byte_length() > size:
            raise ExternalDataError(
                f"tensor {self.name!r}: external data {self.location!r} ends at byte "
                f"{self.offset + self.byte_length()} but the file has {size} bytes"
            )

    def raw_view(self) -> memoryview:
        """A read-only memory-mapped view of this tensor's bytes."""
        self.check()
        with open(self.path(), "rb") as f:
            mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        return memoryview(mapped)[self.offset : self.offset + self.byte_length()]

    def numpy(self) -> npt.NDArray[Any]:
        if self._array is not None:
            return self._array
        view = self.raw_view()
        dtype = self.dtype
        if dtype.bitwidth % 8 == 0 and dtype != DataType.STRING:
            array = np.frombuffer(view, dtype=numpy_dtype(dtype)).reshape(self.shape)
        else:
            # Sub-byte types: let onnx unpack a copy of the bytes.
            temp = onnx.TensorProto()
            temp.data_type = int(dtype)
            temp.dims.extend(self.shape)
            temp.raw_data = bytes(view)
            array = onnx.numpy_helper.to_array(temp)
        self._array = array
        return array


def tensor_to_proto(tensor: Tensor, name: str | None = None) -> onnx.TensorProto:
    """A TensorProto for `tensor` named `name` (the original message when unchanged)."""
    target = tensor.name if name is None else name
    if isinstance(tensor, ProtoTensor | ExternalTensor):
        original = tensor._proto
        if original.name == target:
            return original
        renamed = onnx.TensorProto()
        renamed.CopyFrom(original)
        renamed.name = target
        return renamed
    if isinstance(tensor, SparseProtoTensor):
        raise TypeError("sparse tensors are lowered as sparse initializers")
    array = tensor.numpy()
    proto = onnx.numpy_helper.from_array(np.asarray(array), target)
    if proto.data_type != int(tensor.dtype):
        raise ValueError(
            f"tensor {target!r}: numpy data of dtype {array.dtype} does not hold "
            f"{tensor.dtype.onnx_name}"
        )
    doc = getattr(tensor, "doc_string", "")
    if doc:
        proto.doc_string = doc
    return proto


def embedded_proto(tensor: ExternalTensor) -> onnx.TensorProto:
    """A TensorProto holding an external tensor's bytes itself (read from its file)."""
    proto = onnx.TensorProto()
    proto.CopyFrom(tensor._proto)
    del proto.external_data[:]
    proto.data_location = onnx.TensorProto.DEFAULT
    proto.raw_data = bytes(tensor.raw_view())
    return proto


def from_numpy(array: npt.ArrayLike, name: str = "") -> NumpyTensor:
    """A NumpyTensor with the ONNX dtype numpy's dtype maps to."""
    return NumpyTensor(np.asarray(array), name)
