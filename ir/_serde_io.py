"""Reading and writing model files, with external data streamed and never loaded whole.

Part of the serde layer. `load` parses the file and lifts it; `save` lowers, places tensor
data (kept where it is when saving beside the original, streamed into a new data file
otherwise), and writes every file atomically (temporary file, then rename).
"""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from collections.abc import Iterator
from typing import Any

import onnx
from google.protobuf.message import DecodeError

from ir._core import ExternalDataError, IRError, Model, ModelLoadError
from ir._serde import lift_model, model_dir, to_onnx
from ir._serde_tensors import ExternalTensor, check_external_location
from ir._validate import validate_model

_PROTOBUF_LIMIT = 2**31 - 1
_COPY_CHUNK = 1 << 24


def load(path: str | os.PathLike[str]) -> Model:
    """Read an ONNX model file into the IR; external data stays on disk until needed.

    Raises:
        ModelLoadError: the file is unreadable, empty, not an ONNX model, or broken.
        ExternalDataError: an external-data reference is unsafe, missing or too short.
        TensorDataError: a tensor's data disagrees with its type and shape.
    """
    filename = os.fspath(path)
    try:
        with open(filename, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise ModelLoadError(f"{filename}: cannot read: {exc.strerror or exc}") from exc
    if not data:
        raise ModelLoadError(f"{filename}: file is empty")
    proto = onnx.ModelProto()
    try:
        proto.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError) as exc:
        raise ModelLoadError(
            f"{filename}: not an ONNX model (protobuf parse failed: {exc})"
        ) from exc
    # Every external-data entry has a "location" key: without those bytes there is none.
    may_have_external = b"location" in data
    del data
    if not proto.HasField("graph"):
        raise ModelLoadError(f"{filename}: not an ONNX model (it has no graph)")
    base_dir = model_dir(filename)
    try:
        model, external = lift_model(proto, base_dir=base_dir)
        for tensor in external:
            tensor.check()
        if may_have_external:
            # Attributes of most ops are lifted lazily: their tensors were not checked yet.
            for tensor_proto in _tensor_protos(proto):
                if tensor_proto.data_location == onnx.TensorProto.EXTERNAL:
                    _source_path(tensor_proto, base_dir)
        validate_model(model)
    except IRError as exc:
        # Same error class, one line that names the file first.
        raise type(exc)(f"{filename}: {exc}") from exc
    return model


def _source_path(tensor: Any, base_dir: str | None) -> str:
    """The data file of an external tensor, refused when it lies outside `base_dir`.

    Raises:
        ExternalDataError: the location is absolute, climbs out with `..`, or resolves
            (through symlinks) outside the folder.
    """
    check_external_location(tensor)
    base = os.path.realpath(base_dir or os.getcwd())
    location = _external_fields(tensor).get("location", "")
    path = os.path.realpath(os.path.join(base, location))
    if os.path.commonpath([base, path]) != base:
        raise ExternalDataError(
            f"tensor {tensor.name!r}: external data location {location!r} resolves "
            f"outside the model's folder ({path})"
        )
    return path


def _external_tensors(model: Model) -> Iterator[ExternalTensor]:
    for graph in model.graphs():
        for value in graph.initializers.values():
            if isinstance(value.const_value, ExternalTensor):
                yield value.const_value
        for node in graph._nodes:
            if node.op_type == "Constant" or node.domain not in ("", "ai.onnx"):
                for attr in node.attributes.values():
                    if isinstance(attr.value, ExternalTensor):
                        yield attr.value


def save(
    model: Model,
    path: str | os.PathLike[str],
    *,
    external_data: bool | None = None,
    size_threshold: int = 1024,
) -> None:
    """Write `model` to `path` atomically.

    External data: tensors that were external stay external. Saved into the folder they came
    from, their files are reused untouched; saved elsewhere, their bytes are streamed into
    `<file name>.data` beside the output. New tensors of at least `size_threshold` bytes go to
    external data too when the model already uses it, when `external_data` is True, or when
    the model would exceed protobuf's 2 GB limit. With `external_data=False` everything is
    embedded.

    Raises:
        OSError: the output cannot be written (no partial file is left behind).
        ExternalDataError: the data of an external tensor cannot be read.
    """
    filename = os.path.abspath(os.fspath(path))
    dest_dir = os.path.dirname(filename)
    if os.path.lexists(filename) and not os.path.isfile(filename):
        raise OSError(errno.EEXIST, "exists and is not a regular file", filename)
    proto = to_onnx(model)
    plan = _DataPlan(model, proto, filename, external_data, size_threshold)
    temporaries: list[str] = []
    try:
        data_temp = plan.write_data(temporaries)
        model_temp = _temp_path(dest_dir, os.path.basename(filename), temporaries)
        with open(model_temp, "wb") as f:
            f.write(proto.SerializeToString())
        if data_temp is None:
            os.replace(model_temp, filename)
        else:
            _replace_pair(data_temp, plan.data_path, model_temp, filename, temporaries)
    except OSError as exc:
        if exc.filename is None or _is_temporary_of(os.fspath(exc.filename), filename):
            # A failed write (a full disk) names no file, a refused one our hidden temporary
            # file: name the file the caller asked for, as given.
            raise cannot_write(exc, os.fspath(path)) from exc
        raise
    finally:
        for temp in temporaries:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temp)


def _is_temporary_of(name: str, filename: str) -> bool:
    """Whether `name` is a temporary file `save` makes for `filename` (`.NAME.xyz.tmp`)."""
    folder, base = os.path.split(filename)
    return os.path.dirname(os.path.abspath(name)) == folder and os.path.basename(name).startswith(
        f".{base}."
    )


def cannot_write(exc: OSError, path: str) -> OSError:
    """An OSError (of `exc`'s kind) naming `path` as given and saying why it cannot be written.

    `cannot write: No space left on device`; a folder that takes no new files (/proc) and
    one the user may not write to are said so, rather than as a missing or refused
    temporary file.
    """
    folder = os.path.dirname(os.path.abspath(path)) or "."
    reason = exc.strerror or str(exc)
    if exc.errno == errno.ENOENT and os.path.isdir(folder):
        reason = f"the folder {folder} does not accept new files"
    elif exc.errno in (errno.EACCES, errno.EPERM):
        reason = f"permission denied to create files in {folder}"
    return OSError(exc.errno, f"cannot write: {reason}", path)


def _replace_pair(
    data_temp: str, data_path: str, model_temp: str, filename: str, temporaries: list[str]
) -> None:
    """Rename the data file, then the model file, leaving no mismatched pair on failure.

    If a rename fails, the data file that was there before is put back (or the new one is
    removed), so an old model never ends up beside a new data file.
    """
    backup = None
    if os.path.lexists(data_path):
        backup = _temp_path(os.path.dirname(data_path), os.path.basename(data_path), temporaries)
        os.replace(data_path, backup)
    try:
        os.replace(data_temp, data_path)
        os.replace(model_temp, filename)
    except BaseException:
        if backup is not None:
            os.replace(backup, data_path)
        else:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(data_path)
        raise


def _temp_path(folder: str, base: str, temporaries: list[str]) -> str:
    fd, temp = tempfile.mkstemp(prefix=f".{base}.", suffix=".tmp", dir=folder)
    temporaries.append(temp)
    try:
        # mkstemp makes the file private (0600); the renamed file gets the mode the file it
        # replaces had, or what a plain open() would have given it.
        target = os.path.join(folder, base)
        mode = os.stat(target).st_mode & 0o7777 if os.path.isfile(target) else _default_mode()
        os.fchmod(fd, mode)
    finally:
        os.close(fd)
    return temp


def _default_mode() -> int:
    """0666 less the process umask (read by setting it and putting it back)."""
    umask = os.umask(0o022)
    os.umask(umask)
    return 0o666 & ~umask


class _DataPlan:
    """Decides which tensors go to the new data file and writes it."""

    def __init__(
        self,
        model: Model,
        proto: onnx.ModelProto,
        filename: str,
        external_data: bool | None,
        size_threshold: int,
    ) -> None:
        self.dest_dir = os.path.dirname(filename)
        src_dir = model.base_dir
        same_dir = src_dir is not None and _same_dir(src_dir, self.dest_dir)
        tensors = list(_tensor_protos(proto)) if _may_need_tensor_walk(model, external_data) else []
        kept_locations = set()
        self.moves: list[tuple[Any, str | None]] = []  # (TensorProto, source file or None)
        embedded_total = 0
        candidates: list[Any] = []
        for tensor in tensors:
            if tensor.data_location == onnx.TensorProto.EXTERNAL:
                info = {e.key: e.value for e in tensor.external_data}
                if same_dir and external_data is not False:
                    kept_locations.add(info.get("location", ""))
                else:
                    self.moves.append((tensor, _source_path(tensor, src_dir)))
            elif tensor.HasField("raw_data") and len(tensor.raw_data) >= size_threshold:
                embedded_total += len(tensor.raw_data)
                candidates.append(tensor)
        _refuse_to_overwrite_sources(filename, kept_locations, self.moves)
        uses_external = bool(kept_locations or self.moves)
        too_big = embedded_total > _PROTOBUF_LIMIT // 2
        if external_data is False:
            if too_big:
                raise ValueError("model exceeds protobuf's 2 GB limit; save with external data")
            self.moves = [(t, src) for t, src in self.moves]  # embedded below
            self.embed = True
        else:
            self.embed = False
            if external_data or uses_external or too_big:
                self.moves.extend((t, None) for t in candidates)
        base = os.path.basename(filename)
        name = f"{base}.data"
        counter = 1
        while name in kept_locations:
            name = f"{base}.{counter}.data"
            counter += 1
        self.data_name = name
        self.data_path = os.path.join(self.dest_dir, name)

    def write_data(self, temporaries: list[str]) -> str | None:
        """Write moved tensors; returns the temporary data file to rename, if any."""
        if not self.moves:
            return None
        if self.embed:
            for tensor, source in self.moves:
                if source is not None:
                    _embed(tensor, source)
            return None
        temp = _temp_path(self.dest_dir, self.data_name, temporaries)
        with open(temp, "wb") as out:
            for tensor, source in self.moves:
                offset = out.tell()
                if source is None:
                    payload = tensor.raw_data
                    out.write(payload)
                    length = len(payload)
                    tensor.ClearField("raw_data")
                else:
                    length = _copy_range(tensor, source, out, self.data_path)
                _set_external(tensor, self.data_name, offset, length)
                # Keep each tensor 64-byte aligned so it can be memory-mapped efficiently.
                pad = (-out.tell()) % 64
                if pad:
                    out.write(b"\0" * pad)
        return temp


def _refuse_to_overwrite_sources(
    filename: str, kept_locations: set[str], moves: list[tuple[Any, str | None]]
) -> None:
    """Refuse an output path that is one of the data files the saved model reads.

    Raises:
        ExternalDataError: naming the file (replacing it would destroy the weights).
    """
    folder = os.path.dirname(filename)
    sources = {os.path.realpath(os.path.join(folder, location)) for location in kept_locations}
    sources.update(os.path.realpath(source) for _, source in moves if source is not None)
    if os.path.realpath(filename) in sources:
        raise ExternalDataError(
            f"{filename} holds external data of the model being saved; save it elsewhere"
        )


def _may_need_tensor_walk(model: Model, external_data: bool | None) -> bool:
    if external_data is not None:
        return True
    for graph in model.graphs():
        for value in graph.initializers.values():
            tensor = value.const_value
            if tensor is None:
                continue
            if tensor.is_external or tensor.nbytes >= 1 << 20:
                return True
    return any(True for _ in _external_tensors(model))


def _same_dir(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def _tensor_protos(proto: onnx.ModelProto) -> Iterator[Any]:
    yield from _graph_tensors(proto.graph)
    for fn in proto.functions:
        for node in fn.node:
            yield from _node_tensors(node)


def _graph_tensors(graph: Any) -> Iterator[Any]:
    yield from graph.initializer
    for node in graph.node:
        if node.attribute:
            yield from _node_tensors(node)


def _node_tensors(node: Any) -> Iterator[Any]:
    for attr in node.attribute:
        if attr.HasField("t"):
            yield attr.t
        yield from attr.tensors
        if attr.HasField("g"):
            yield from _graph_tensors(attr.g)
        for sub in attr.graphs:
            yield from _graph_tensors(sub)


def _external_fields(tensor: Any) -> dict[str, str]:
    return {e.key: e.value for e in tensor.external_data}


def _copy_range(tensor: Any, source: str, out: Any, data_path: str) -> int:
    """Stream one tensor's bytes from `source` into `out` (the new `data_path`).

    Raises:
        ExternalDataError: the source cannot be read or is too short.
        OSError: writing failed (a full disk), naming `data_path`.
    """
    info = _external_fields(tensor)
    offset = int(info.get("offset", "0"))
    length = int(info["length"]) if "length" in info else os.path.getsize(source) - offset
    try:
        f = open(source, "rb")  # noqa: SIM115 (closed below; reads and writes fail apart)
    except OSError as exc:
        raise ExternalDataError(
            f"tensor {tensor.name!r}: cannot read external data {source}: {exc.strerror}"
        ) from exc
    with f:
        remaining = length
        while remaining:
            try:
                if remaining == length:
                    f.seek(offset)
                chunk = f.read(min(_COPY_CHUNK, remaining))
            except OSError as exc:
                raise ExternalDataError(
                    f"tensor {tensor.name!r}: cannot read external data {source}: {exc.strerror}"
                ) from exc
            if not chunk:
                raise ExternalDataError(
                    f"tensor {tensor.name!r}: external data file {source} is too short"
                )
            try:
                out.write(chunk)
            except OSError as exc:
                raise OSError(exc.errno, f"cannot write: {exc.strerror or exc}", data_path) from exc
            remaining -= len(chunk)
    return length


def _set_external(tensor: Any, location: str, offset: int, length: int) -> None:
    del tensor.external_data[:]
    for key, value in (("location", location), ("offset", str(offset)), ("length", str(length))):
        entry = tensor.external_data.add()
        entry.key = key
        entry.value = value
    tensor.data_location = onnx.TensorProto.EXTERNAL


def _embed(tensor: Any, source: str) -> None:
    info = _external_fields(tensor)
    offset = int(info.get("offset", "0"))
    with open(source, "rb") as f:
        f.seek(offset)
        data = f.read(int(info["length"])) if "length" in info else f.read()
    del tensor.external_data[:]
    tensor.data_location = onnx.TensorProto.DEFAULT
    tensor.raw_data = data
