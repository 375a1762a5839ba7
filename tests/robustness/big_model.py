"""A model with more than 2 GB of weights in external data, written without holding them.

Four MatMul weights of `side` x `side` float32 (604 MB each at the default 12288) feed
`MatMul + Add + Relu` layers, which the shipped library turns into Gemm from shapes alone;
a small Conv + BatchNormalization branch is folded by a rule that reads those tensors'
values. Every tensor, small or big, lives in one data file `weights.bin`, written block by
block (a 16 MiB block of random values per weight, repeated), so building it needs little
memory. Used by `test_big_model.py` and `benchmarks/big_model.py`.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import onnx
import onnx.helper

BLOCK_ELEMENTS = 1 << 22  # 16 MiB of float32
FLOAT = onnx.TensorProto.FLOAT


@dataclasses.dataclass(frozen=True)
class BigModel:
    """Where the model is, which tensors are big, and how many bytes its weights take."""

    path: Path
    data: Path
    big: tuple[str, ...]
    small: tuple[str, ...]
    weight_bytes: int
    side: int


class _DataWriter:
    """Appends tensors to the data file and makes their external TensorProtos."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.file = open(path, "wb")  # noqa: SIM115 (closed by `close`)
        self.tensors: list[onnx.TensorProto] = []

    def _reference(self, name: str, dims: list[int], offset: int) -> None:
        length = self.file.tell() - offset
        tensor = onnx.TensorProto(name=name, data_type=FLOAT, dims=dims)
        tensor.data_location = onnx.TensorProto.EXTERNAL
        for key, value in (("location", self.path.name), ("offset", offset), ("length", length)):
            tensor.external_data.add(key=key, value=str(value))
        self.tensors.append(tensor)
        pad = (-self.file.tell()) % 4096  # page-aligned, so runtimes can memory-map each
        self.file.write(b"\0" * pad)

    def small(self, name: str, array: np.ndarray) -> None:
        offset = self.file.tell()
        self.file.write(np.ascontiguousarray(array, np.float32).tobytes())
        self._reference(name, list(array.shape), offset)

    def big(self, name: str, side: int, seed: int) -> None:
        """A side x side weight: one random block (scaled to keep activations ~1), repeated."""
        total = side * side
        block = np.random.default_rng(seed).standard_normal(min(BLOCK_ELEMENTS, total))
        data = (block / np.sqrt(side)).astype(np.float32).tobytes()
        offset = self.file.tell()
        written = 0
        while written < total:
            count = min(len(block), total - written)
            self.file.write(data[: 4 * count])
            written += count
        self._reference(name, [side, side], offset)

    def close(self) -> None:
        self.file.close()


def build_big_model(folder: Path, *, layers: int = 4, side: int = 12288) -> BigModel:
    """Write `folder/model.onnx` and `folder/weights.bin` (layers * side^2 * 4 bytes and more)."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    writer = _DataWriter(folder / "weights.bin")
    nodes = []
    current = "x"
    big, small = [], []
    for i in range(layers):
        writer.big(f"w{i}", side, seed=100 + i)
        writer.small(f"b{i}", rng.standard_normal(side) * 0.1)
        big.append(f"w{i}")
        small.append(f"b{i}")
        out = "y" if i == layers - 1 else f"h{i}"
        nodes += [
            onnx.helper.make_node("MatMul", [current, f"w{i}"], [f"m{i}"], name=f"matmul{i}"),
            onnx.helper.make_node("Add", [f"m{i}", f"b{i}"], [f"a{i}"], name=f"add{i}"),
            onnx.helper.make_node("Relu", [f"a{i}"], [out], name=f"relu{i}"),
        ]
        current = out
    conv = {
        "conv_w": rng.standard_normal((16, 3, 3, 3)),
        "bn_scale": rng.random(16) + 0.5,
        "bn_shift": rng.standard_normal(16),
        "bn_mean": rng.standard_normal(16),
        "bn_var": rng.random(16) + 0.5,
    }
    for name, array in conv.items():
        writer.small(name, array)
        small.append(name)
    writer.close()
    nodes += [
        onnx.helper.make_node(
            "Conv", ["img", "conv_w"], ["c"], name="conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1]
        ),
        onnx.helper.make_node(
            "BatchNormalization", ["c", *list(conv)[1:]], ["z"], name="bn", epsilon=1e-5
        ),
    ]
    graph = onnx.helper.make_graph(
        nodes,
        "big",
        [
            onnx.helper.make_tensor_value_info("x", FLOAT, [1, side]),
            onnx.helper.make_tensor_value_info("img", FLOAT, [1, 3, 16, 16]),
        ],
        [
            onnx.helper.make_tensor_value_info("y", FLOAT, [1, side]),
            onnx.helper.make_tensor_value_info("z", FLOAT, [1, 16, 16, 16]),
        ],
        writer.tensors,
    )
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 18)])
    model.ir_version = 9
    path = folder / "model.onnx"
    path.write_bytes(model.SerializeToString())
    return BigModel(
        path=path,
        data=writer.path,
        big=tuple(big),
        small=tuple(small),
        weight_bytes=layers * side * side * 4,
        side=side,
    )
