"""External data, lazy tensors and atomic saving (`ir.load` / `ir.save`)."""

from __future__ import annotations

import builtins
import os
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx.helper
import onnx.numpy_helper
import pytest

import ir
from ir._serde_tensors import ProtoTensor


def _external_tensor(
    name: str, dims: list[int], location: str, offset: int = 0, length: int | None = None
) -> onnx.TensorProto:
    tensor = onnx.TensorProto()
    tensor.name = name
    tensor.data_type = onnx.TensorProto.FLOAT
    tensor.dims.extend(dims)
    tensor.data_location = onnx.TensorProto.EXTERNAL
    nbytes = 4 * int(np.prod(dims))
    entries = {"location": location, "offset": str(offset), "length": str(length or nbytes)}
    for key, value in entries.items():
        entry = tensor.external_data.add()
        entry.key = key
        entry.value = value
    return tensor


def _model_with(initializers: list[onnx.TensorProto]) -> onnx.ModelProto:
    """y = x + w0 (+ w1 ...), every w an initializer of shape [...]."""
    dims = list(initializers[0].dims)
    nodes = []
    current = "x"
    for i, init in enumerate(initializers):
        out = "y" if i == len(initializers) - 1 else f"t{i}"
        nodes.append(onnx.helper.make_node("Add", [current, init.name], [out], name=f"add{i}"))
        current = out
    graph = onnx.helper.make_graph(
        nodes,
        "g",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, dims)],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, dims)],
        initializers,
    )
    return onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 18)])


def _write_model(folder: Path, arrays: dict[str, np.ndarray], data_name: str = "w.bin") -> Path:
    """A model whose initializers live in `folder/data_name`, written without onnx.save's help."""
    folder.mkdir(parents=True, exist_ok=True)
    tensors = []
    with open(folder / data_name, "wb") as f:
        for name, array in arrays.items():
            offset = f.tell()
            f.write(np.ascontiguousarray(array, np.float32).tobytes())
            tensors.append(_external_tensor(name, list(array.shape), data_name, offset))
    path = folder / "model.onnx"
    path.write_bytes(_model_with(tensors).SerializeToString())
    return path


@pytest.fixture
def weights() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {
        "w0": rng.standard_normal((4, 8)).astype(np.float32),
        "w1": rng.standard_normal((4, 8)).astype(np.float32),
    }


class _OpenGuard:
    """Records (and optionally forbids) opening files under given paths."""

    def __init__(self, forbidden: list[Path]) -> None:
        self.forbidden = [os.path.realpath(p) for p in forbidden]
        self.opened: list[str] = []

    def check(self, file: Any) -> None:
        if isinstance(file, str | bytes | os.PathLike):
            path = os.path.realpath(os.fsdecode(file))
            self.opened.append(path)
            if path in self.forbidden:
                raise AssertionError(f"{path} was opened")


@pytest.fixture
def open_guard(monkeypatch: pytest.MonkeyPatch) -> Any:
    real_open = builtins.open
    guards: list[_OpenGuard] = []

    def guarded_open(file: Any, *args: Any, **kwargs: Any) -> Any:
        for guard in guards:
            guard.check(file)
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", guarded_open)

    def install(forbidden: list[Path]) -> _OpenGuard:
        guard = _OpenGuard(forbidden)
        guards.append(guard)
        return guard

    return install


def _run(path: Path, x: np.ndarray) -> np.ndarray:
    import onnxruntime as ort

    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (y,) = sess.run(None, {"x": x})
    return np.asarray(y)


# ---------------------------------------------------------------------------------------------
# Loading


def test_load_keeps_external_tensors_lazy(tmp_path: Path, weights: dict[str, np.ndarray]) -> None:
    path = _write_model(tmp_path, weights)
    model = ir.load(path)
    tensor = model.graph.initializers["w0"].const_value
    assert isinstance(tensor, ir.ExternalTensor)
    assert tensor.is_external
    assert tensor._array is None
    assert (tensor.location, tensor.offset, tensor.length) == ("w.bin", 0, 128)
    assert tensor.shape == (4, 8)
    assert np.array_equal(tensor.numpy(), weights["w0"])
    assert np.array_equal(model.graph.initializers["w1"].const_value.numpy(), weights["w1"])  # type: ignore[union-attr]


def test_load_reads_no_weight_bytes(
    tmp_path: Path, weights: dict[str, np.ndarray], open_guard: Any
) -> None:
    path = _write_model(tmp_path, weights)
    guard = open_guard([tmp_path / "w.bin"])
    model = ir.load(path)
    assert len(model.graph.initializers) == 2
    assert os.path.realpath(path) in guard.opened


def test_embedded_tensors_are_decoded_only_on_demand(tmp_path: Path) -> None:
    proto = _model_with([onnx.numpy_helper.from_array(np.ones((2, 2), np.float32), "w")])
    path = tmp_path / "m.onnx"
    onnx.save(proto, path)
    tensor = ir.load(path).graph.initializers["w"].const_value
    assert isinstance(tensor, ProtoTensor)
    assert tensor._array is None
    assert tensor.numpy().sum() == 4.0


@pytest.mark.parametrize(
    "location", ["../outside.bin", "sub/../../outside.bin", "/abs/x.bin", "..\\x.bin"]
)
def test_locations_escaping_the_folder_are_refused(tmp_path: Path, location: str) -> None:
    proto = _model_with([_external_tensor("w_evil", [2], location)])
    with pytest.raises(ir.ExternalDataError) as info:
        ir.from_onnx(proto, base_dir=str(tmp_path))
    message = str(info.value)
    assert "w_evil" in message
    assert repr(location) in message
    path = tmp_path / "model.onnx"
    path.write_bytes(proto.SerializeToString())
    with pytest.raises(ir.ExternalDataError, match="w_evil"):
        ir.load(path)


def _attribute_tensor_model(op: str, location: str) -> onnx.ModelProto:
    """One node whose TENSOR attribute `value` has its data at `location`."""
    tensor = _external_tensor("secret_attr", [1], location)
    inputs = ["shape"] if op == "ConstantOfShape" else []
    node = onnx.helper.make_node(op, inputs, ["y"], value=tensor)
    shape = onnx.numpy_helper.from_array(np.array([4], np.int64), "shape")
    graph = onnx.helper.make_graph(
        [node],
        "g",
        [],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [4])],
        [shape] if inputs else [],
    )
    return onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 18)])


@pytest.mark.parametrize("op", ["Constant", "ConstantOfShape"])
@pytest.mark.parametrize("location", ["../secret.bin", "/tmp/secret.bin"])
def test_unsafe_locations_in_lazily_lifted_attributes_are_refused_on_load(
    tmp_path: Path, op: str, location: str
) -> None:
    (tmp_path / "secret.bin").write_bytes(b"SECRET!!" * 2)
    folder = tmp_path / "model"
    folder.mkdir()
    path = folder / "model.onnx"
    path.write_bytes(_attribute_tensor_model(op, location).SerializeToString())
    with pytest.raises(ir.ExternalDataError) as info:
        ir.load(path)
    assert "secret_attr" in str(info.value)
    assert repr(location) in str(info.value)


def test_save_never_copies_data_from_outside_the_source_folder(tmp_path: Path) -> None:
    (tmp_path / "secret.bin").write_bytes(b"SECRET!!" * 2)
    model = ir.from_onnx(
        _attribute_tensor_model("ConstantOfShape", "../secret.bin"), base_dir=str(tmp_path / "m")
    )
    out = tmp_path / "out"
    out.mkdir()
    for external_data in (True, False):
        with pytest.raises(ir.ExternalDataError, match="secret_attr"):
            ir.save(model, out / "model.onnx", external_data=external_data, size_threshold=0)
    assert list(out.iterdir()) == []


def test_symlink_leading_outside_the_folder_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "w.bin").write_bytes(np.zeros(2, np.float32).tobytes())
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "w.bin").symlink_to(outside / "w.bin")
    path = folder / "model.onnx"
    path.write_bytes(_model_with([_external_tensor("w", [2], "w.bin")]).SerializeToString())
    with pytest.raises(ir.ExternalDataError, match="outside the model's folder"):
        ir.load(path)


def test_missing_data_file_is_reported(tmp_path: Path, weights: dict[str, np.ndarray]) -> None:
    path = _write_model(tmp_path, weights)
    (tmp_path / "w.bin").unlink()
    with pytest.raises(ir.ExternalDataError, match=r"w0.*'w\.bin' not found"):
        ir.load(path)


def test_too_short_data_file_is_reported(tmp_path: Path, weights: dict[str, np.ndarray]) -> None:
    path = _write_model(tmp_path, weights)
    with open(tmp_path / "w.bin", "r+b") as f:
        f.truncate(200)
    with pytest.raises(ir.ExternalDataError, match=r"w1.*ends at byte 256 but the file has 200"):
        ir.load(path)


# ---------------------------------------------------------------------------------------------
# Saving


def test_save_beside_the_data_keeps_references_and_reads_no_bytes(
    tmp_path: Path, weights: dict[str, np.ndarray], open_guard: Any
) -> None:
    path = _write_model(tmp_path, weights)
    before = (tmp_path / "w.bin").stat()
    original = onnx.load(path, load_external_data=False)
    model = ir.load(path)
    guard = open_guard([tmp_path / "w.bin"])
    out = tmp_path / "copy.onnx"
    ir.save(model, out)
    after = (tmp_path / "w.bin").stat()
    assert (before.st_mtime_ns, before.st_size) == (after.st_mtime_ns, after.st_size)
    assert not (tmp_path / "copy.onnx.data").exists()
    saved = onnx.load(out, load_external_data=False)
    assert saved == original
    assert os.path.realpath(tmp_path / "w.bin") not in guard.opened
    y = _run(out, np.zeros((4, 8), np.float32))
    assert np.allclose(y, weights["w0"] + weights["w1"])


def test_save_of_a_huge_external_tensor_beside_it_is_instant(
    tmp_path: Path, open_guard: Any
) -> None:
    # A sparse 1 GiB data file: reading it would be slow and show up in memory.
    data = tmp_path / "big.bin"
    with open(data, "wb") as f:
        f.truncate(1 << 30)
    big = _external_tensor("big", [1 << 28], "big.bin")
    path = tmp_path / "model.onnx"
    path.write_bytes(_model_with([big]).SerializeToString())
    guard = open_guard([data])
    model = ir.load(path)
    ir.save(model, tmp_path / "again.onnx")
    assert os.path.realpath(data) not in guard.opened
    saved = onnx.load(tmp_path / "again.onnx", load_external_data=False)
    assert saved.graph.initializer[0].external_data == big.external_data


def test_save_elsewhere_streams_data_into_one_file(
    tmp_path: Path, weights: dict[str, np.ndarray]
) -> None:
    path = _write_model(tmp_path / "src", weights)
    model = ir.load(path)
    out = tmp_path / "dst" / "model.onnx"
    out.parent.mkdir()
    ir.save(model, out)
    assert sorted(p.name for p in out.parent.iterdir()) == ["model.onnx", "model.onnx.data"]
    saved = onnx.load(out, load_external_data=False)
    for tensor in saved.graph.initializer:
        info = {e.key: e.value for e in tensor.external_data}
        assert info["location"] == "model.onnx.data"
        assert int(info["offset"]) % 64 == 0
    reloaded = ir.load(out)
    for name, array in weights.items():
        assert np.array_equal(reloaded.graph.initializers[name].const_value.numpy(), array)  # type: ignore[union-attr]
    y = _run(out, np.ones((4, 8), np.float32))
    assert np.allclose(y, 1 + weights["w0"] + weights["w1"])


def test_save_with_external_data_false_embeds_everything(
    tmp_path: Path, weights: dict[str, np.ndarray]
) -> None:
    model = ir.load(_write_model(tmp_path / "src", weights))
    out = tmp_path / "embedded.onnx"
    ir.save(model, out, external_data=False)
    saved = onnx.load(out, load_external_data=False)
    assert all(t.data_location == onnx.TensorProto.DEFAULT for t in saved.graph.initializer)
    assert np.array_equal(onnx.numpy_helper.to_array(saved.graph.initializer[1]), weights["w1"])
    assert [p.name for p in tmp_path.iterdir() if p.is_file()] == ["embedded.onnx"]


def test_save_with_external_data_true_moves_large_new_tensors(tmp_path: Path) -> None:
    big = np.arange(1024, dtype=np.float32)
    small = np.arange(4, dtype=np.float32)
    proto = _model_with([onnx.numpy_helper.from_array(big, "big")])
    model = ir.from_onnx(proto)
    value = ir.Value("small", const_value=ir.NumpyTensor(small, "small"))
    model.graph.add_initializer(value)
    out = tmp_path / "m.onnx"
    ir.save(model, out, external_data=True, size_threshold=1024)
    saved = onnx.load(out, load_external_data=False)
    locations = {t.name: t.data_location for t in saved.graph.initializer}
    assert locations == {"big": onnx.TensorProto.EXTERNAL, "small": onnx.TensorProto.DEFAULT}
    reloaded = ir.load(out)
    assert np.array_equal(reloaded.graph.initializers["big"].const_value.numpy(), big)  # type: ignore[union-attr]


def test_round_trip_through_files_is_exact(tmp_path: Path, weights: dict[str, np.ndarray]) -> None:
    path = _write_model(tmp_path, weights)
    out = tmp_path / "same.onnx"
    ir.save(ir.load(path), out)
    assert out.read_bytes() == path.read_bytes()


# ---------------------------------------------------------------------------------------------
# Atomic writes


def test_failed_save_leaves_no_partial_files(
    tmp_path: Path, weights: dict[str, np.ndarray]
) -> None:
    src = _write_model(tmp_path / "src", weights)
    model = ir.load(src)
    with open(tmp_path / "src" / "w.bin", "r+b") as f:
        f.truncate(100)  # the copy to the new folder will run out of bytes half-way
    dst = tmp_path / "dst"
    dst.mkdir()
    out = dst / "model.onnx"
    out.write_bytes(b"previous contents")
    with pytest.raises(ir.ExternalDataError, match="too short"):
        ir.save(model, out)
    assert sorted(p.name for p in dst.iterdir()) == ["model.onnx"]
    assert out.read_bytes() == b"previous contents"


def test_failed_write_of_the_model_file_leaves_nothing_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    proto = _model_with([onnx.numpy_helper.from_array(np.ones(4, np.float32), "w")])
    model = ir.from_onnx(proto)

    def failing_replace(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("ir._serde_io.os.replace", failing_replace)
    with pytest.raises(OSError, match="No space left"):
        ir.save(model, tmp_path / "m.onnx")
    assert list(tmp_path.iterdir()) == []


def test_load_errors_name_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "missing.onnx"
    with pytest.raises(ir.ModelLoadError, match=r"missing\.onnx"):
        ir.load(missing)
    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")
    with pytest.raises(ir.ModelLoadError, match="empty"):
        ir.load(empty)
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"\xff\xff\xff\xff not a protobuf")
    with pytest.raises(ir.ModelLoadError, match="not an ONNX model"):
        ir.load(garbage)
