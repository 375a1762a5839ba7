"""A catalogue of broken model files, each with the error `ir.load` must raise for it.

Every entry writes its file (and data files) into a folder and names the error class and the
fragments its one-line message must contain: the node or tensor at fault, and what is wrong.
The tests check `ir.load`, `rewrite MODEL`, `rewrite stats MODEL` and `rewrite verify A B`
against the same table.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import onnx.helper
import onnx.numpy_helper

import ir

MODELS = Path(__file__).resolve().parents[1] / "models"
REAL_MODEL = MODELS / "cnn_bn_ts14.onnx"
FLOAT = onnx.TensorProto.FLOAT
OPSET = [onnx.helper.make_opsetid("", 18)]


@dataclasses.dataclass(frozen=True)
class BadModel:
    """One broken model: how to write it, and what loading it must say."""

    name: str
    write: Callable[[Path], Path]
    error: type[ir.IRError]
    fragments: tuple[str, ...]


def _info(name: str, dims: list[int] | None = None) -> onnx.ValueInfoProto:
    return onnx.helper.make_tensor_value_info(name, FLOAT, [2] if dims is None else dims)


def good_model(initializers: list[onnx.TensorProto] | None = None) -> onnx.ModelProto:
    """y = Relu(x + w): a valid two-node model whose `w` can be swapped for a broken tensor."""
    weight = initializers or [onnx.numpy_helper.from_array(np.ones(2, np.float32), "w")]
    graph = onnx.helper.make_graph(
        [
            onnx.helper.make_node("Add", ["x", weight[0].name], ["t"], name="add"),
            onnx.helper.make_node("Relu", ["t"], ["y"], name="relu"),
        ],
        "g",
        [_info("x")],
        [_info("y")],
        weight,
    )
    return onnx.helper.make_model(graph, opset_imports=OPSET)


def _save(folder: Path, proto: onnx.ModelProto | bytes, name: str = "model.onnx") -> Path:
    path = folder / name
    path.write_bytes(proto if isinstance(proto, bytes) else proto.SerializeToString())
    return path


def _bytes(data: bytes) -> Callable[[Path], Path]:
    return lambda folder: _save(folder, data)


def _proto(build: Callable[[], onnx.ModelProto]) -> Callable[[Path], Path]:
    return lambda folder: _save(folder, build())


def _truncated(folder: Path) -> Path:
    data = REAL_MODEL.read_bytes()
    return _save(folder, data[: len(data) * 3 // 5])


def _random(folder: Path) -> Path:
    return _save(folder, np.random.default_rng(7).bytes(4096))


def _tensor_proto_file(folder: Path) -> Path:
    tensor = onnx.numpy_helper.from_array(np.arange(64, dtype=np.float32).reshape(8, 8), "w")
    return _save(folder, tensor.SerializeToString())


def _graph_proto_file(folder: Path) -> Path:
    return _save(folder, good_model().graph.SerializeToString())


def _dangling() -> onnx.ModelProto:
    model = good_model()
    model.graph.node[1].input[0] = "nowhere"
    return model


def _cycle() -> onnx.ModelProto:
    """add reads relu's output and relu reads add's: t = Add(x, y), y = Relu(t)."""
    model = good_model()
    model.graph.node[0].input[1] = "y"
    del model.graph.initializer[:]
    return model


def _duplicate_output() -> onnx.ModelProto:
    model = good_model()
    model.graph.node.append(onnx.helper.make_node("Neg", ["x"], ["t"], name="again"))
    return model


def _output_shadows_input() -> onnx.ModelProto:
    model = good_model()
    model.graph.node[1].output[0] = "x"
    model.graph.output[0].name = "x"
    return model


def _unknown_domain() -> onnx.ModelProto:
    model = good_model()
    model.graph.node[1].domain = "com.example"
    model.graph.node[1].op_type = "Swish"
    return model


def _op_type(name: str) -> Callable[[], onnx.ModelProto]:
    """The good model with `relu`'s op replaced by `name` (default domain, opset 18)."""

    def build() -> onnx.ModelProto:
        model = good_model()
        model.graph.node[1].op_type = name
        return model

    return build


def _no_opset_import() -> onnx.ModelProto:
    model = good_model()
    del model.opset_import[:]
    return model


def _required_attribute_missing() -> onnx.ModelProto:
    """relu becomes a Cast without its required `to`."""
    model = good_model()
    model.graph.node[1].op_type = "Cast"
    return model


def _loop_without_body() -> onnx.ModelProto:
    model = good_model()
    model.graph.node[1].op_type = "Loop"
    del model.graph.node[1].input[:]
    model.graph.node[1].input.extend(["", ""])
    return model


def _unknown_op_in_function() -> onnx.ModelProto:
    body = [onnx.helper.make_node("NoSuchOp", ["a"], ["b"], name="inner")]
    function = onnx.helper.make_function("local.fns", "act", ["a"], ["b"], body, OPSET)
    model = good_model()
    model.graph.node[1].domain = "local.fns"
    model.graph.node[1].op_type = "act"
    model.opset_import.append(onnx.helper.make_opsetid("local.fns", 1))
    model.functions.append(function)
    return model


def _function_domain_not_imported() -> onnx.ModelProto:
    body = [onnx.helper.make_node("Relu", ["a"], ["b"])]
    function = onnx.helper.make_function("local.fns", "act", ["a"], ["b"], body, OPSET)
    model = good_model()
    model.graph.node[1].domain = "local.fns"
    model.graph.node[1].op_type = "act"
    model.functions.append(function)
    return model


def _bad_dtype() -> onnx.ModelProto:
    model = good_model()
    model.graph.initializer[0].data_type = 99
    return model


def _text_edit(old: bytes, new: bytes) -> Callable[[Path], Path]:
    """The good model with `old` replaced by `new` in its serialized bytes (same length)."""

    def write(folder: Path) -> Path:
        model = good_model()
        model.producer_name = "producer"
        data = model.SerializeToString()
        assert data.count(old) == 1
        assert len(old) == len(new)
        return _save(folder, data.replace(old, new))

    return write


def _unknown_input_type() -> onnx.ModelProto:
    model = good_model()
    model.graph.input[0].type.tensor_type.elem_type = 31
    return model


def external_tensor(
    name: str, dims: list[int], location: str, offset: int = 0, length: int | None = None
) -> onnx.TensorProto:
    """A float TensorProto whose data is at `location` (length defaults to dims' bytes)."""
    tensor = onnx.TensorProto(name=name, data_type=FLOAT, dims=dims)
    tensor.data_location = onnx.TensorProto.EXTERNAL
    nbytes = 4 * int(np.prod(dims))
    entries = {"location": location, "offset": str(offset), "length": str(length or nbytes)}
    for key, value in entries.items():
        tensor.external_data.add(key=key, value=value)
    return tensor


def _external(
    location: str,
    *,
    data: bytes | None = b"\0" * 8,
    length: int | None = None,
    data_type: int = FLOAT,
    offset: int = 0,
) -> Callable[[Path], Path]:
    def write(folder: Path) -> Path:
        if data is not None:
            (folder / "w.bin").write_bytes(data)
        tensor = external_tensor("w", [2], location, offset=offset, length=length)
        tensor.data_type = data_type
        return _save(folder, good_model([tensor]))

    return write


def _tensor(**fields: object) -> Callable[[], onnx.ModelProto]:
    """A model whose initializer `w` (declared float[2] unless `dims`/`data_type` say so) has
    exactly the given data fields."""

    def build() -> onnx.ModelProto:
        tensor = onnx.TensorProto(name="w", data_type=FLOAT, dims=[2])
        for field, value in fields.items():
            if isinstance(value, list):
                getattr(tensor, field).extend(value)
            else:
                setattr(tensor, field, value)
        return good_model([tensor])

    return build


def _constant_attribute_short() -> onnx.ModelProto:
    """The tensor in a Constant node's `value` attribute has 4 bytes for float[2]."""
    model = good_model()
    del model.graph.initializer[:]
    tensor = onnx.TensorProto(name="cval", data_type=FLOAT, dims=[2], raw_data=b"\0" * 4)
    model.graph.node.insert(
        0, onnx.helper.make_node("Constant", [], ["w"], name="const", value=tensor)
    )
    return model


CATALOGUE = (
    BadModel("empty", _bytes(b""), ir.ModelLoadError, ("file is empty",)),
    BadModel("truncated", _truncated, ir.ModelLoadError, ("not an ONNX model",)),
    BadModel("random_bytes", _random, ir.ModelLoadError, ("not an ONNX model",)),
    BadModel("tensor_proto", _tensor_proto_file, ir.ModelLoadError, ("not an ONNX model",)),
    BadModel("graph_proto", _graph_proto_file, ir.ModelLoadError, ("not an ONNX model",)),
    BadModel(
        "dangling_input",
        _proto(_dangling),
        ir.ModelLoadError,
        ("node 'relu' (Relu)", "'nowhere'", "nothing defines"),
    ),
    BadModel("cycle", _proto(_cycle), ir.ModelLoadError, ("cycle", "node 'add' (Add)")),
    BadModel(
        "duplicate_output",
        _proto(_duplicate_output),
        ir.ModelLoadError,
        ("'t' is defined twice", "node 'again'"),
    ),
    BadModel(
        "output_shadows_input",
        _proto(_output_shadows_input),
        ir.ModelLoadError,
        ("'x' is defined twice", "node 'relu'"),
    ),
    BadModel(
        "unknown_domain",
        _proto(_unknown_domain),
        ir.ModelLoadError,
        ("node 'relu' (com.example.Swish)", "domain 'com.example'", "not import"),
    ),
    BadModel(
        "function_domain_not_imported",
        _proto(_function_domain_not_imported),
        ir.ModelLoadError,
        ("node 'relu' (local.fns.act)", "domain 'local.fns'", "not import"),
    ),
    BadModel(
        "unknown_op",
        _proto(_op_type("NoSuchOp")),
        ir.ModelLoadError,
        ("node 'relu' (NoSuchOp)", "op 'NoSuchOp' does not exist in ai.onnx opset 18"),
    ),
    BadModel(
        "no_opset_import",
        _proto(_no_opset_import),
        ir.ModelLoadError,
        ("imports no opset", "IR version"),
    ),
    BadModel(
        "required_attribute_missing",
        _proto(_required_attribute_missing),
        ir.ModelLoadError,
        ("node 'relu' (Cast)", "required attribute 'to' is missing"),
    ),
    BadModel(
        "loop_without_body",
        _proto(_loop_without_body),
        ir.ModelLoadError,
        ("node 'relu' (Loop)", "required attribute 'body' is missing"),
    ),
    BadModel(
        "unknown_op_in_function",
        _proto(_unknown_op_in_function),
        ir.ModelLoadError,
        ("node 'inner' (NoSuchOp)", "op 'NoSuchOp' does not exist in ai.onnx opset 18"),
    ),
    BadModel("unknown_dtype", _proto(_bad_dtype), ir.TensorDataError, ("tensor 'w'", "99")),
    BadModel(
        "unknown_input_type",
        _proto(_unknown_input_type),
        ir.ModelLoadError,
        ("graph 'g': input 'x' has unknown element type 31",),
    ),
    BadModel(
        "op_type_not_utf8",
        _text_edit(b"Relu", b"Rel\xff"),
        ir.ModelLoadError,
        ("node op_type b'Rel\\xff' is not UTF-8 text",),
    ),
    BadModel(
        "constant_tensor_name_not_utf8",
        lambda folder: _save(
            folder, _constant_attribute_short().SerializeToString().replace(b"cval", b"cva\xff")
        ),
        ir.TensorDataError,
        ("node 'const' (Constant): tensor b'cva\\xff': raw_data holds 4 bytes",),
    ),
    BadModel(
        "producer_not_utf8",
        _text_edit(b"producer", b"produce\xff"),
        ir.ModelLoadError,
        ("model producer_name b'produce\\xff' is not UTF-8 text",),
    ),
    BadModel(
        "external_string_type",
        _external("w.bin", data_type=onnx.TensorProto.STRING),
        ir.TensorDataError,
        ("tensor 'w': external data needs a fixed-size element type, not string",),
    ),
    BadModel(
        "external_unknown_type",
        _external("w.bin", data_type=35),
        ir.TensorDataError,
        ("tensor 'w'", "35"),
    ),
    BadModel(
        "node_name_not_utf8",
        _text_edit(b"relu", b"rel\xff"),
        ir.ModelLoadError,
        ("graph 'g': node name b'rel\\xff' is not UTF-8 text",),
    ),
    BadModel(
        "external_missing_file",
        _external("w.bin", data=None),
        ir.ExternalDataError,
        ("tensor 'w'", "'w.bin' not found"),
    ),
    BadModel(
        "external_absolute_path",
        _external("/etc/passwd"),
        ir.ExternalDataError,
        ("tensor 'w'", "'/etc/passwd'", "absolute"),
    ),
    BadModel(
        "external_escapes_folder",
        _external("../w.bin"),
        ir.ExternalDataError,
        ("tensor 'w'", "'../w.bin'", "escapes"),
    ),
    BadModel(
        "external_location_not_utf8",
        lambda folder: _save(
            folder,
            good_model([external_tensor("w", [2], "w.bin")])
            .SerializeToString()
            .replace(b"w.bin", b"w\xffbin"),
        ),
        ir.ExternalDataError,
        ("tensor 'w': external data location b'w\\xffbin' is not UTF-8 text",),
    ),
    BadModel(
        "external_location_with_nul",
        _external("w\0.bin"),
        ir.ExternalDataError,
        ("tensor 'w': external data location 'w\\x00.bin' holds a NUL character",),
    ),
    BadModel(
        "external_negative_offset",
        _external("w.bin", offset=-1),
        ir.ExternalDataError,
        ("tensor 'w': negative external data offset/length (-1, 8)",),
    ),
    BadModel(
        "external_length_disagrees",
        _external("w.bin", data=b"\0" * 64, length=12),
        ir.ExternalDataError,
        ("tensor 'w'", "length 12", "8 bytes", "float[2]"),
    ),
    BadModel(
        "external_file_too_short",
        _external("w.bin", data=b"\0" * 4),
        ir.ExternalDataError,
        ("tensor 'w'", "ends at byte 8", "file has 4 bytes"),
    ),
    BadModel(
        "raw_data_too_short",
        _proto(_tensor(raw_data=b"\0" * 6)),
        ir.TensorDataError,
        ("tensor 'w'", "6 bytes", "float[2]", "8"),
    ),
    BadModel(
        "raw_data_too_long",
        _proto(_tensor(raw_data=b"\0" * 12)),
        ir.TensorDataError,
        ("tensor 'w'", "12 bytes", "float[2]", "8"),
    ),
    BadModel(
        "float_data_count",
        _proto(_tensor(float_data=[1.0, 2.0, 3.0])),
        ir.TensorDataError,
        ("tensor 'w'", "float_data", "3 values", "float[2]", "2"),
    ),
    BadModel(
        "int64_data_count",
        _proto(_tensor(data_type=onnx.TensorProto.INT64, int64_data=[1])),
        ir.TensorDataError,
        ("tensor 'w'", "int64_data", "1 value", "int64[2]"),
    ),
    BadModel(
        "string_data_count",
        _proto(_tensor(data_type=onnx.TensorProto.STRING, string_data=[b"a"] * 3)),
        ir.TensorDataError,
        ("tensor 'w'", "string_data", "3 values", "string[2]"),
    ),
    BadModel(
        "no_data_at_all",
        _proto(_tensor()),
        ir.TensorDataError,
        ("tensor 'w'", "holds no data", "float[2] needs 2"),
    ),
    BadModel(
        "constant_attribute_short",
        _proto(_constant_attribute_short),
        ir.TensorDataError,
        ("tensor 'cval'", "node 'const'", "4 bytes", "float[2]"),
    ),
)
