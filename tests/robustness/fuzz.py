"""Fuzzers for the three ways user input enters the tool: model files, rule files, arguments.

The property is always the same: nothing but the tool's own errors, ever.

* model loader: `ir.load` of mutated models (byte flips, truncations, insertions on real and
  helper-built models; structured edits: a node removed, an input renamed, an output
  duplicated, an external location pointed at `../`, ...) raises only `ir.IRError`; a model
  that loads is then summarized, lowered, saved and rewritten with the shipped library, which
  raise only `ir.IRError` / `rewriter.RewriteError`;
* rule loader: `rewriter.load_rules` of mutated rule files (edits of the shipped `patterns/`
  and of the test rules, as bytes: invalid UTF-8 too) raises only `rewriter.RuleError`, every
  diagnostic located; a rule set that loads is applied to small models, raising only project
  errors;
* command line: `rewriter.cli.main(args)` with random argument lists built from the real
  parsers (flags, values, existing and missing paths, folders, models and rules) returns
  0, 1 or 2, never raises, never prints an internal error;
* rewrite (soundness): random small models over the ops the library touches
  (`random_graphs`: float16, bfloat16, double, integer and bool tensors, dims of size 0,
  symbolic dims, same-named values across scopes, special-value constants) are rewritten with
  the default library and compared with the original under onnxruntime on special-value
  inputs: where onnxruntime runs the original, the rewritten model runs too and gives the
  same shapes, dtypes, integers, bools and NaN positions, and floats within rounding (bit for
  bit when only exact rules fired; else the dtype's rounding, or the original's own noise
  where it is ill-conditioned). Overflow differences that only inputs near the dtype's
  largest value cause are counted apart, not as findings;
* instances (soundness, every rule reached): the same check on check-rules' instances of every
  library rule (`instances`), with sizes changed (0 included), dims declared as symbols,
  special-value inputs, inside both branches of an If or as a local function's body,
  rewritten with the whole library.

The tests in `test_fuzz.py` run a fast, derandomized sample. A long run:
``python -m tests.robustness.fuzz loader rules cli rewrite instances --seconds 600`` (``--minutes``,
``--seed S`` for a repeatable run; or pytest with ``--run-slow`` and ``FUZZ_SECONDS=600``)
reports examples run and findings per fuzzer; for `rewrite` also the models rewritten, the
rewrites applied and the discrepancies by the rule that first caused them.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import faulthandler
import functools
import io
import logging
import os
import shutil
import signal
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import hypothesis
import ml_dtypes
import numpy as np
import onnx
import onnx.helper
import onnx.numpy_helper
import onnx.shape_inference
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ir
import rewriter
from rewriter._errors import describe_error
from rewriter.api._stats import collect
from rewriter.cli import _main as cli
from rewriter.verification import Criterion
from tests.ir import _ort
from tests.robustness import instances, random_graphs

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / "tests" / "models"
PATTERNS = ROOT / "patterns"
PER_EXAMPLE_SECONDS = 120


class Hang(BaseException):
    """One example ran longer than PER_EXAMPLE_SECONDS (a BaseException: never swallowed)."""


@dataclasses.dataclass
class Tally:
    """Examples run and foreign exceptions seen (by kind and place, with a count), per fuzzer."""

    examples: int = 0
    loaded: int = 0
    findings: dict[str, int] = dataclasses.field(default_factory=dict)
    # The rewrite fuzzer's counts: models some rule rewrote, rule applications, and
    # discrepancies by the rule whose application first broke equivalence.
    rewritten: int = 0
    rewrites: int = 0
    by_rule: dict[str, int] = dataclasses.field(default_factory=dict)
    # The library rules that fired at least once (the fuzzer's reach).
    fired: set[str] = dataclasses.field(default_factory=set)
    # Differences in NaN or infinities that only inputs near the dtype's largest value cause
    # (see `_only_at_the_range_edge`): counted, shown, not findings.
    edge_overflows: int = 0

    def add(self, key: str) -> None:
        """Count one occurrence of finding `key`."""
        self.findings[key] = self.findings.get(key, 0) + 1


TALLY: dict[str, Tally] = {}


def _tally(name: str) -> Tally:
    return TALLY.setdefault(name, Tally())


@contextlib.contextmanager
def _time_limit(seconds: int) -> Iterator[None]:
    """Raise Hang in the main thread after `seconds` (no-op off the main thread)."""

    def on_alarm(signum: int, frame: Any) -> None:
        raise Hang(f"example ran longer than {seconds} s")

    try:
        previous = signal.signal(signal.SIGALRM, on_alarm)
    except ValueError:  # not the main thread
        yield
        return
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


# Where a long run keeps the input and traceback of each distinct finding (None: nowhere).
FINDINGS_DIR: Path | None = None


def _foreign(
    name: str, exc: BaseException, detail: str, example: bytes | None = None
) -> AssertionError:
    """Record a foreign exception under its kind and the project line that raised it."""
    frames = traceback.extract_tb(exc.__traceback__)
    ours = [f for f in frames if str(ROOT) in f.filename and "/tests/" not in f.filename]
    place = ours[-1] if ours else frames[-1]
    where = f"{Path(place.filename).name}:{place.lineno}"
    key = f"{type(exc).__name__} at {where} [{detail.split()[0]}]: {str(exc)[:120]}"
    text = "".join(traceback.format_exception(exc))
    if FINDINGS_DIR is not None and key not in _tally(name).findings:
        stem = FINDINGS_DIR / f"{name}-{len(_tally(name).findings)}"
        FINDINGS_DIR.mkdir(parents=True, exist_ok=True)
        stem.with_suffix(".txt").write_text(f"{detail}\n{text}")
        if example is not None:
            stem.with_suffix(".bin").write_bytes(example)
    _tally(name).add(key)
    return AssertionError(f"{name}: foreign exception {type(exc).__name__} ({detail}):\n{text}")


# ---------------------------------------------------------------------------------------------
# Seed models


def _info(name: str, dims: list[Any], dtype: int = onnx.TensorProto.FLOAT) -> Any:
    return onnx.helper.make_tensor_value_info(name, dtype, dims)


def _model(graph: Any, opset: int = 18, **kwargs: Any) -> onnx.ModelProto:
    imports = [onnx.helper.make_opsetid("", opset), *kwargs.pop("extra_opsets", [])]
    model = onnx.helper.make_model(graph, opset_imports=imports, **kwargs)
    model.ir_version = 9
    return model


def _linear() -> onnx.ModelProto:
    """MatMul + Add (fuses into Gemm), Mul by one, Identity, Relu: several rules fire."""
    rng = np.random.default_rng(0)
    graph = onnx.helper.make_graph(
        [
            onnx.helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
            onnx.helper.make_node("Add", ["m", "b"], ["a"], name="add"),
            onnx.helper.make_node("Mul", ["a", "one"], ["s"], name="mul"),
            onnx.helper.make_node("Identity", ["s"], ["i"], name="id"),
            onnx.helper.make_node("Relu", ["i"], ["y"], name="relu"),
        ],
        "linear",
        [_info("x", ["N", 4])],
        [_info("y", ["N", 3])],
        [
            onnx.numpy_helper.from_array(rng.standard_normal((4, 3)).astype(np.float32), "w"),
            onnx.numpy_helper.from_array(rng.standard_normal(3).astype(np.float32), "b"),
            onnx.numpy_helper.from_array(np.ones((), np.float32), "one"),
        ],
        value_info=[_info("m", ["N", 3]), _info("a", ["N", 3])],
    )
    return _model(graph)


def _conv_bn() -> onnx.ModelProto:
    """Conv + BatchNormalization with Constant-node parameters (attribute tensors)."""
    rng = np.random.default_rng(1)

    def const(name: str, array: np.ndarray) -> Any:
        tensor = onnx.numpy_helper.from_array(array.astype(np.float32), name + "_t")
        return onnx.helper.make_node("Constant", [], [name], name=name + "_c", value=tensor)

    nodes = [
        const("w", rng.standard_normal((2, 3, 1, 1))),
        const("scale", rng.random(2) + 0.5),
        const("shift", rng.standard_normal(2)),
        const("mean", rng.standard_normal(2)),
        const("var", rng.random(2) + 0.5),
        onnx.helper.make_node("Conv", ["x", "w"], ["c"], name="conv", kernel_shape=[1, 1]),
        onnx.helper.make_node(
            "BatchNormalization", ["c", "scale", "shift", "mean", "var"], ["y"], name="bn"
        ),
    ]
    graph = onnx.helper.make_graph(
        nodes, "conv_bn", [_info("x", [1, 3, 4, 4])], [_info("y", [1, 2, 4, 4])]
    )
    return _model(graph)


def _control_flow() -> onnx.ModelProto:
    """An If whose branches read an outer value, and a local function."""
    then = onnx.helper.make_graph(
        [onnx.helper.make_node("Neg", ["t"], ["o1"], name="neg")], "then", [], [_info("o1", [2])]
    )
    other = onnx.helper.make_graph(
        [onnx.helper.make_node("Abs", ["t"], ["o2"], name="abs")], "else", [], [_info("o2", [2])]
    )
    body = [onnx.helper.make_node("Relu", ["a"], ["b"], name="inner")]
    function = onnx.helper.make_function(
        "local", "act", ["a"], ["b"], body, [onnx.helper.make_opsetid("", 18)]
    )
    graph = onnx.helper.make_graph(
        [
            onnx.helper.make_node("act", ["x"], ["t"], name="call", domain="local"),
            onnx.helper.make_node(
                "If", ["c"], ["y"], name="branch", then_branch=then, else_branch=other
            ),
        ],
        "control",
        [_info("x", [2]), _info("c", [], onnx.TensorProto.BOOL)],
        [_info("y", [2])],
    )
    return _model(graph, extra_opsets=[onnx.helper.make_opsetid("local", 1)], functions=[function])


STRINGS: list[Any] = [b"a", b"b"]


def _typed_tensors() -> onnx.ModelProto:
    """Initializers of several element types and encodings, a sparse initializer."""
    tensors = [
        onnx.helper.make_tensor("f16", onnx.TensorProto.FLOAT16, [2], [1.0, 2.0]),
        onnx.helper.make_tensor("i4", onnx.TensorProto.INT4, [3], [1, -2, 3]),
        onnx.helper.make_tensor("s", onnx.TensorProto.STRING, [2], STRINGS),
        onnx.helper.make_tensor("i64", onnx.TensorProto.INT64, [2], [2, 1]),
        onnx.helper.make_tensor("d", onnx.TensorProto.DOUBLE, [1], [0.5]),
    ]
    sparse = onnx.helper.make_sparse_tensor(
        onnx.helper.make_tensor("sp", onnx.TensorProto.FLOAT, [2], [1.0, 2.0]),
        onnx.helper.make_tensor("sp_i", onnx.TensorProto.INT64, [2], [0, 3]),
        [4],
    )
    graph = onnx.helper.make_graph(
        [
            onnx.helper.make_node("Reshape", ["x", "i64"], ["r"], name="reshape"),
            onnx.helper.make_node("Add", ["r", "r"], ["y"], name="add"),
        ],
        "typed",
        [_info("x", [2])],
        [_info("y", [2, 1])],
        tensors,
    )
    graph.sparse_initializer.append(sparse)
    return _model(graph)


@functools.cache
def seed_models() -> dict[str, bytes]:
    """Serialized seed models: helper-built ones, then the small real exports."""
    seeds = {
        "linear": _linear(),
        "conv_bn": _conv_bn(),
        "control_flow": _control_flow(),
        "typed_tensors": _typed_tensors(),
    }
    out = {name: model.SerializeToString() for name, model in seeds.items()}
    for name in (
        "eip_k3x3_s2x2_r2x2_same",
        "conv1d_ln_gelu_x6_ts14",
        "mobilenetv2_ts14",
        "cnn_bn_ts14",
        "bert_ts14",
    ):
        out[name] = (MODELS / f"{name}.onnx").read_bytes()
    return out


@functools.cache
def external_seed() -> tuple[bytes, bytes]:
    """A model whose two initializers live in `w.bin` (model bytes, data bytes)."""
    model = _linear()
    data = bytearray()
    for tensor in model.graph.initializer[:2]:
        offset, payload = len(data), tensor.raw_data
        data += payload
        tensor.ClearField("raw_data")
        tensor.data_location = onnx.TensorProto.EXTERNAL
        for key, value in (("location", "w.bin"), ("offset", offset), ("length", len(payload))):
            tensor.external_data.add(key=key, value=str(value))
    return model.SerializeToString(), bytes(data)


# ---------------------------------------------------------------------------------------------
# Model mutations


@st.composite
def byte_mutations(draw: st.DrawFn, base: bytes) -> bytes:
    """`base` after a few byte-level edits: flips, truncation, insertion, deletion, copies."""
    data = bytearray(base)
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "truncate", "insert", "delete", "set", "copy"]))
        size = len(data)
        if size == 0:
            data += draw(st.binary(min_size=1, max_size=16))
            continue
        pos = draw(st.integers(0, size - 1))
        if kind == "flip":
            data[pos] ^= 1 << draw(st.integers(0, 7))
        elif kind == "truncate":
            del data[pos:]
        elif kind == "insert":
            data[pos:pos] = draw(st.binary(min_size=1, max_size=16))
        elif kind == "delete":
            del data[pos : pos + draw(st.integers(1, 16))]
        elif kind == "set":
            data[pos] = draw(st.sampled_from([0x00, 0x01, 0x7F, 0x80, 0xFF, 0x0A, 0x12, 0x08]))
        else:
            length = draw(st.integers(1, 64))
            chunk = data[pos : pos + length]
            where = draw(st.integers(0, size))
            data[where:where] = chunk
    return bytes(data)


_NAMES = ["x", "y", "w", "t", "nowhere", "", "m", "a", "c", "r"]
_OPS = ["Relu", "Add", "Conv", "If", "Loop", "Scan", "Constant", "NoSuchOp", "Gemm", "MatMul"]
_DOMAINS = ["", "ai.onnx", "ai.onnx.ml", "com.microsoft", "local", "com.example", "x.y.z"]
_LOCATIONS = ["../w.bin", "/etc/passwd", "missing.bin", "sub/../../w.bin", "", "C:\\w.bin", "w.bin"]


def _graphs(model: onnx.ModelProto) -> list[Any]:
    """Every GraphProto of the model (main, nested, function bodies as pseudo-graphs)."""
    found: list[Any] = []

    def walk(graph: Any) -> None:
        found.append(graph)
        for node in graph.node:
            for attr in node.attribute:
                if attr.HasField("g"):
                    walk(attr.g)
                for sub in attr.graphs:
                    walk(sub)

    walk(model.graph)
    found.extend(model.functions)
    return found


def _tensors(model: onnx.ModelProto) -> list[Any]:
    found: list[Any] = []
    for graph in _graphs(model):
        found.extend(getattr(graph, "initializer", []))
        for node in graph.node:
            for attr in node.attribute:
                if attr.HasField("t"):
                    found.append(attr.t)
    return found


def _pick(draw: st.DrawFn, items: list[Any]) -> Any:
    return items[draw(st.integers(0, len(items) - 1))] if items else None


def _mutate_node(draw: st.DrawFn, model: onnx.ModelProto) -> None:
    graph = _pick(draw, _graphs(model))
    if not graph.node:
        return
    index = draw(st.integers(0, len(graph.node) - 1))
    node = graph.node[index]
    kind = draw(
        st.sampled_from(
            ["remove", "rename_input", "rename_output", "domain", "op", "attr", "swap", "dup"]
        )
    )
    if kind == "remove":
        del graph.node[index]
    elif kind == "rename_input" and node.input:
        node.input[draw(st.integers(0, len(node.input) - 1))] = draw(st.sampled_from(_NAMES))
    elif kind == "rename_output" and node.output:
        node.output[draw(st.integers(0, len(node.output) - 1))] = draw(st.sampled_from(_NAMES))
    elif kind == "domain":
        node.domain = draw(st.sampled_from(_DOMAINS))
    elif kind == "op":
        node.op_type = draw(st.sampled_from(_OPS))
    elif kind == "attr":
        _mutate_attribute(draw, node)
    elif kind == "swap" and len(graph.node) > 1:
        other = draw(st.integers(0, len(graph.node) - 1))
        first, second = onnx.NodeProto(), onnx.NodeProto()
        first.CopyFrom(graph.node[index])
        second.CopyFrom(graph.node[other])
        graph.node[index].CopyFrom(second)
        graph.node[other].CopyFrom(first)
    elif kind == "dup":
        graph.node.add().CopyFrom(node)


def _mutate_attribute(draw: st.DrawFn, node: Any) -> None:
    if node.attribute and draw(st.booleans()):
        attr = _pick(draw, list(node.attribute))
        change = draw(st.sampled_from(["type", "ints", "float", "clear", "drop"]))
        if change == "type":
            attr.type = draw(st.integers(0, 14))
        elif change == "ints":
            attr.ints[:] = draw(st.lists(st.integers(-(2**40), 2**40), max_size=5))
        elif change == "float":
            attr.f = draw(st.floats(allow_nan=True, allow_infinity=True, width=32))
        elif change == "clear":
            attr.Clear()
        else:
            node.attribute.remove(attr)
        return
    name = draw(st.sampled_from(["axis", "perm", "to", "alpha", "value", "body", "kernel_shape"]))
    value = draw(
        st.one_of(
            st.integers(-(2**62), 2**62),
            st.floats(width=32),
            st.lists(st.integers(-5, 5), max_size=4),
            st.text(max_size=8),
        )
    )
    node.attribute.append(onnx.helper.make_attribute(name, value))


def _mutate_tensor(draw: st.DrawFn, model: onnx.ModelProto) -> None:
    tensor = _pick(draw, _tensors(model))
    if tensor is None:
        return
    kind = draw(st.sampled_from(["dims", "dtype", "raw", "typed", "external", "name"]))
    if kind == "dims":
        tensor.dims[:] = draw(st.lists(st.integers(-3, 2**33), max_size=4))
    elif kind == "dtype":
        tensor.data_type = draw(st.integers(-1, 40))
    elif kind == "raw":
        tensor.raw_data = draw(st.binary(max_size=64))
    elif kind == "typed":
        tensor.ClearField("raw_data")
        tensor.float_data[:] = draw(st.lists(st.floats(width=32), max_size=8))
    elif kind == "external":
        tensor.ClearField("raw_data")
        tensor.data_location = onnx.TensorProto.EXTERNAL
        del tensor.external_data[:]
        tensor.external_data.add(key="location", value=draw(st.sampled_from(_LOCATIONS)))
        for key in draw(st.lists(st.sampled_from(["offset", "length", "checksum"]), max_size=3)):
            value = draw(st.sampled_from(["0", "8", "-1", "abc", "99999999999", ""]))
            tensor.external_data.add(key=key, value=value)
    else:
        tensor.name = draw(st.sampled_from(_NAMES))


def _mutate_signature(draw: st.DrawFn, model: onnx.ModelProto) -> None:
    graph = model.graph
    kind = draw(
        st.sampled_from(
            ["dup_output", "drop_output", "rename_io", "elem_type", "dims", "opset", "ir", "vi"]
        )
    )
    if kind == "dup_output" and graph.output:
        graph.output.add().CopyFrom(_pick(draw, list(graph.output)))
    elif kind == "drop_output" and graph.output:
        del graph.output[draw(st.integers(0, len(graph.output) - 1))]
    elif kind == "rename_io":
        infos = [*graph.input, *graph.output]
        if infos:
            _pick(draw, infos).name = draw(st.sampled_from(_NAMES))
    elif kind == "elem_type":
        infos = [*graph.input, *graph.output, *graph.value_info]
        if infos:
            _pick(draw, infos).type.tensor_type.elem_type = draw(st.integers(-1, 40))
    elif kind == "dims":
        infos = [*graph.input, *graph.output]
        if infos:
            shape = _pick(draw, infos).type.tensor_type.shape
            shape.dim.add().dim_value = draw(st.integers(-(2**40), 2**40))
    elif kind == "opset":
        if model.opset_import and draw(st.booleans()):
            del model.opset_import[draw(st.integers(0, len(model.opset_import) - 1))]
        else:
            entry = model.opset_import.add()
            entry.domain = draw(st.sampled_from(_DOMAINS))
            entry.version = draw(st.integers(-2, 40))
    elif kind == "ir":
        model.ir_version = draw(st.integers(-1, 20))
    else:
        info = graph.value_info.add()
        info.name = draw(st.sampled_from(_NAMES))
        info.type.CopyFrom(
            draw(
                st.sampled_from(
                    [
                        onnx.helper.make_sequence_type_proto(
                            onnx.helper.make_tensor_type_proto(1, [2])
                        ),
                        onnx.helper.make_optional_type_proto(
                            onnx.helper.make_tensor_type_proto(7, None)
                        ),
                        onnx.helper.make_map_type_proto(
                            7, onnx.helper.make_tensor_type_proto(1, [])
                        ),
                        onnx.TypeProto(),
                    ]
                )
            )
        )


@st.composite
def structured_mutations(draw: st.DrawFn, base: bytes) -> bytes:
    """`base` parsed, edited one to three times at the message level, serialized again."""
    model = onnx.ModelProto()
    model.ParseFromString(base)
    for _ in range(draw(st.integers(1, 3))):
        edit = draw(st.sampled_from([_mutate_node, _mutate_tensor, _mutate_signature]))
        edit(draw, model)
    return bytes(model.SerializeToString())


def _helper_seed_names() -> list[str]:
    return ["linear", "conv_bn", "control_flow", "typed_tensors", "eip_k3x3_s2x2_r2x2_same"]


@st.composite
def mutated_models(draw: st.DrawFn) -> tuple[str, bytes, bool]:
    """(seed name, model bytes, whether `w.bin` goes beside it)."""
    if draw(st.integers(0, 5)) == 0:
        model, _ = external_seed()
        name, with_data = "external", True
    else:
        seeds = seed_models()
        small = _helper_seed_names()
        name = draw(st.sampled_from(small if draw(st.integers(0, 3)) else sorted(seeds)))
        model, with_data = seeds[name], False
    mutate = structured_mutations if draw(st.booleans()) else byte_mutations
    try:
        return name, draw(mutate(model)), with_data
    except Exception:  # a byte-mutated seed that protobuf cannot even parse for editing
        return name, draw(byte_mutations(model)), with_data


@functools.cache
def library() -> Any:
    """The shipped rule library, loaded once."""
    return rewriter.load_rules(*rewriter.api.default_library_files())


def check_model_bytes(data: bytes, folder: Path, *, with_data: bool = False) -> None:
    """Load `data` as a model file; anything but an ir.IRError is a finding, and so is any
    non-project error while summarizing, lowering, saving or rewriting a model that loads."""
    tally = _tally("loader")
    tally.examples += 1
    path = folder / "fuzz.onnx"
    path.write_bytes(data)
    if with_data:
        (folder / "w.bin").write_bytes(external_seed()[1])
    try:
        with _time_limit(PER_EXAMPLE_SECONDS):
            model = ir.load(path)
    except ir.IRError:
        return
    except Exception as exc:
        raise _foreign("loader", exc, "ir.load", data) from exc
    tally.loaded += 1
    step = "stats"
    try:
        with _time_limit(PER_EXAMPLE_SECONDS):
            collect(model)
            str(model.graph)
            step = "to_onnx"
            ir.to_onnx(model)
            step = "save"
            ir.save(model, folder / "saved.onnx")
            step = "rewrite"
            rewriter.rewrite(model, library(), rewriter.RewriteOptions(max_rewrites=200))
    except (ir.IRError, rewriter.RewriteError):
        return
    except Exception as exc:
        raise _foreign("loader", exc, step, data) from exc


# ---------------------------------------------------------------------------------------------
# Rule mutations


@functools.cache
def rule_corpus() -> tuple[bytes, ...]:
    """The shipped rule files and the DSL test examples, as bytes."""
    files = sorted(PATTERNS.glob("**/*.rw")) + sorted(
        (ROOT / "tests" / "rewriter" / "dsl" / "examples").glob("*.rw")
    )
    return tuple(p.read_bytes() for p in files)


RULE_WORDS = (
    "match where rewrite { } ( ) < > [ ] = => , ; ... ? | x y _ 0 -1 1e308 nan none true "
    "Conv com.microsoft.Gelu opset ?? ** // % shape(x) value(w) reshape(k,[-1])"
)
_RULE_TOKENS = [
    *(word.encode() for word in RULE_WORDS.split(" ")),
    *(f"{word} ".encode() for word in ("rule", "let", "pass", "use", "requires", "priority")),
    *(f"{word} ".encode() for word in ("as", "not", "and", "or", "in")),
    b" ", b"\n", b"\t", b"\r\n", b'"', b"\\", b"#",
    b"\xff", b"\xc3", b"\x00", b"\xef\xbb\xbf", b"\xe2\x80\xae",
]  # fmt: skip


@st.composite
def mutated_rules(draw: st.DrawFn) -> bytes:
    """A corpus file (or a splice of two) after a few byte and token edits."""
    corpus = rule_corpus()
    data = bytearray(draw(st.sampled_from(corpus)))
    if draw(st.integers(0, 4)) == 0:
        other = draw(st.sampled_from(corpus))
        cut = draw(st.integers(0, len(data)))
        data = data[:cut] + other[draw(st.integers(0, len(other))) :]
    for _ in range(draw(st.integers(1, 5))):
        size = len(data)
        pos = draw(st.integers(0, size))
        kind = draw(st.sampled_from(["token", "delete", "flip", "line", "truncate", "repeat"]))
        if kind == "token":
            data[pos:pos] = draw(st.sampled_from(_RULE_TOKENS))
        elif kind == "delete":
            del data[pos : pos + draw(st.integers(1, 12))]
        elif kind == "flip" and size:
            data[min(pos, size - 1)] ^= 1 << draw(st.integers(0, 7))
        elif kind == "line":
            lines = bytes(data).split(b"\n")
            i, j = draw(st.integers(0, len(lines) - 1)), draw(st.integers(0, len(lines) - 1))
            if draw(st.booleans()):
                lines[i], lines[j] = lines[j], lines[i]
            else:
                lines.insert(i, lines[j])
            data = bytearray(b"\n".join(lines))
        elif kind == "truncate":
            del data[pos:]
        else:
            chunk = draw(st.sampled_from([b"(", b"[", b"not ", b"-", b"x + ", b"{"]))
            data[pos:pos] = chunk * draw(st.integers(1, 400))
    return bytes(data)


@functools.cache
def rule_targets() -> tuple[onnx.ModelProto, ...]:
    """Small models the rules are applied to when a mutated file still loads."""
    return (_linear(), _conv_bn(), _control_flow())


def check_rule_bytes(data: bytes, folder: Path) -> None:
    """Load `data` as a rule file: only RuleError (with located diagnostics) may come out;
    applying a rule set that loads may raise only project errors."""
    tally = _tally("rules")
    tally.examples += 1
    path = folder / "fuzz.rw"
    path.write_bytes(data)
    try:
        with _time_limit(PER_EXAMPLE_SECONDS):
            ruleset = rewriter.load_rules(path)
    except rewriter.RuleError as exc:
        for diagnostic in exc.diagnostics:
            if not (
                diagnostic.span.path and diagnostic.span.line >= 1 and diagnostic.span.col >= 1
            ):
                raise AssertionError(f"unlocated diagnostic: {diagnostic.render()}") from exc
        return
    except Exception as exc:
        raise _foreign("rules", exc, "load_rules", data) from exc
    tally.loaded += 1
    for model in rule_targets():
        try:
            with _time_limit(PER_EXAMPLE_SECONDS):
                rewriter.rewrite(model, ruleset, rewriter.RewriteOptions(max_rewrites=200))
        except (ir.IRError, rewriter.RewriteError):
            continue
        except Exception as exc:
            raise _foreign("rules", exc, f"rewrite {model.graph.name}", data) from exc


# ---------------------------------------------------------------------------------------------
# Command lines


USE_JSON = b'# a helper module without RW_FUNCTIONS\nuse "json"\n'


def make_workspace(folder: Path) -> Path:
    """Models, rules, a data file and a subfolder to point the command line at."""
    folder.mkdir(parents=True, exist_ok=True)
    models = folder / "models"
    models.mkdir(exist_ok=True)
    seeds = seed_models()
    for name in ("linear", "conv_bn", "control_flow", "eip_k3x3_s2x2_r2x2_same"):
        (models / f"{name}.onnx").write_bytes(seeds[name])
    shutil.copy(MODELS / "conv1d_ln_gelu_x6_ts14.onnx", models / "real.onnx")
    model, data = external_seed()
    (models / "external.onnx").write_bytes(model)
    (models / "w.bin").write_bytes(data)
    (models / "garbage.onnx").write_bytes(b"\x08\x07garbage\xff" * 5)
    rules = folder / "rules"
    rules.mkdir(exist_ok=True)
    for rel in ("folding/identity.rw", "folding/algebra.rw", "fusion/gemm.rw"):
        shutil.copy(PATTERNS / rel, rules / Path(rel).name)
    for shared in ("constraints.rw", "onnxruntime.rw"):  # what the copies `include "../..."`
        shutil.copy(PATTERNS / shared, folder / shared)
    (rules / "broken.rw").write_text("rule r: y = Relu (x) -> y = x\n")
    (folder / "use_json.rw").write_bytes(USE_JSON)
    (folder / "empty").mkdir(exist_ok=True)
    return folder


_PATHS = [
    "models/linear.onnx",
    "models/conv_bn.onnx",
    "models/control_flow.onnx",
    "models/eip_k3x3_s2x2_r2x2_same.onnx",
    "models/real.onnx",
    "models/external.onnx",
    "models/garbage.onnx",
    "models/w.bin",
    "models",
    "rules",
    "rules/identity.rw",
    "rules/gemm.rw",
    "rules/broken.rw",
    "use_json.rw",
    "empty",
    "missing.onnx",
    "missing/deeper/out.onnx",
    "out.onnx",
    "out.json",
    "report.html",
    "models/linear.onnx/child",
    "",
    "-",
]
_VALUES = ["0", "1", "2", "3", "-1", "17", "99", "abc", "1.5", "nan", "x=0:1", "x=1:0", "=", ","]
_RULE_NAMES = ["eliminate_identity", "mul_one", "matmul_add_to_gemm", "no_such_rule", ""]


@functools.cache
def _parser_actions() -> dict[str | None, list[argparse.Action]]:
    """Each command's argparse actions (introspected, so new options are fuzzed too)."""
    table: dict[str | None, list[argparse.Action]] = {}
    for name in (None, *cli.SUBCOMMANDS):
        parser, _ = cli._build_parser(name)
        table[name] = list(parser._actions)
    return table


def _value_for(draw: st.DrawFn, action: argparse.Action) -> str:
    hint = " ".join([*action.option_strings, str(action.dest), str(action.metavar or "")]).lower()
    if any(word in hint for word in ("rule", "exclude", "why")) and "rules" not in hint:
        return draw(st.sampled_from(_RULE_NAMES + _VALUES))
    if any(word in hint for word in ("input", "output", "name")) and "path" not in hint:
        return draw(st.sampled_from(["x", "y", "m", "x,y", "nowhere", "", *_VALUES]))
    if action.type is not None or any(w in hint for w in ("examples", "seed", "top", "opset")):
        return draw(st.sampled_from(_VALUES))
    return draw(st.sampled_from(_PATHS + _VALUES))


@st.composite
def command_lines(draw: st.DrawFn) -> list[str]:
    """A random argument list: a command, some of its options (with values), positionals."""
    # `lsp` serves an editor over stdin until it says `exit`: nothing for argument fuzzing.
    command = draw(st.sampled_from([None, *(c for c in cli.SUBCOMMANDS if c != "lsp")]))
    if command == "check-rules" and draw(st.integers(0, 3)):
        command = None  # check-rules is slow; keep it rarer
    actions = _parser_actions()[command]
    args: list[str] = [command] if command else []
    options = [a for a in actions if a.option_strings]
    for _ in range(draw(st.integers(0, 5))):
        action = draw(st.sampled_from(options))
        flag = draw(st.sampled_from(action.option_strings))
        if flag in ("-h", "--help") and draw(st.integers(0, 9)):
            continue
        args.append(flag)
        if action.nargs != 0:
            args.append(_value_for(draw, action))
    positionals = [a for a in actions if not a.option_strings]
    for action in positionals:
        count = 1 if action.nargs in (None, 1) else draw(st.integers(0, 2))
        args.extend(draw(st.sampled_from(_PATHS)) for _ in range(count))
    if draw(st.integers(0, 4)) == 0:
        args.insert(draw(st.integers(0, len(args))), draw(st.sampled_from(_PATHS + _VALUES)))
    if command in (None, "verify", "check-rules") and "--examples" not in args:
        args.extend(["--examples", "2"])  # bound the time of verification
    if command == "check-rules":
        args.extend(["--instances", "1", "--attempts", "4"])
    return args


def check_command_line(args: list[str], workspace: Path) -> None:
    """Run `rewrite ARGS` in `workspace`: exit 0/1/2, no exception, no internal error."""
    tally = _tally("cli")
    tally.examples += 1
    out, err = io.StringIO(), io.StringIO()
    cwd = os.getcwd()
    os.chdir(workspace)
    try:
        with (
            _time_limit(PER_EXAMPLE_SECONDS),
            contextlib.redirect_stdout(out),
            contextlib.redirect_stderr(err),
        ):
            code = cli.main(args)
    except Hang:
        raise
    except Exception as exc:
        # With -vv the command line re-raises after printing its one line, by design; that
        # is fine for the tool's own errors and a finding for anything it calls internal.
        message, _ = describe_error(exc)
        if message.startswith("internal error"):
            raise _foreign("cli", exc, f"rewrite {' '.join(args)}") from exc
        code = 2
    except BaseException as exc:
        raise _foreign("cli", exc, f"rewrite {' '.join(args)}") from exc
    finally:
        os.chdir(cwd)
    text = err.getvalue()
    if code not in (0, 1, 2) or "internal error" in text or "Traceback" in text:
        _tally("cli").add(f"exit {code}: rewrite {' '.join(args)}: {text[-300:]}")
        raise AssertionError(f"rewrite {' '.join(args)} -> exit {code}\nstderr:\n{text}")


# ---------------------------------------------------------------------------------------------
# Rewrites: the rewritten model computes what the original computes

# Rules whose rewrite computes bit for bit what it replaces (up to the sign of a zero): when
# only these (and the passes) fired, floats are compared exactly. The others fuse ops or fold
# constants into weights, which changes rounding.
_ROUNDING_RULES = (
    "fuse_",
    "mul_reciprocal_to_div",  # one rounding where x * Reciprocal(d) rounds twice
    # Einsum -> MatMul: onnxruntime's Einsum kernel sums the same products in another order
    # (einsum.rw: rounding only), and einsum_scaled_scores_to_matmul rounds (q . k) * c where
    # the Einsum summed the rounded q * c (a sum that cancels shows tens of ulps)
    "einsum_",
    "fold_batchnorm",
    "fold_mul_into",
    "fold_add_into",
    "absorb_",
    "matmul_add_to_gemm",
    "decompose_",
    "remove_reshapes_around_matmul",
)
_TOLERANCE = {"float16": 2e-2, "bfloat16": 5e-2, "float32": 1e-4, "float64": 1e-9}


def run_model(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every output of `model` on `feeds`, by onnxruntime with its optimizations off
    (bfloat16 inputs and outputs through OrtValues)."""
    session = _ort.session(model.SerializeToString())
    names = [o.name for o in session.get_outputs()]
    inputs = [feeds[i.name] for i in session.get_inputs()]
    return dict(zip(names, _ort.run(session, inputs), strict=True))


def _infinities_differ(a: np.ndarray, b: np.ndarray, dtype: np.dtype[Any], exact: bool) -> bool:
    """Whether `a` and `b` (as float64) hold infinities in different places.

    Unless `exact`, an infinity facing a finite value of the same sign within a factor 2 of
    the dtype's largest value is rounding at the edge of the range, not a difference: a fused
    op that does not overflow in an intermediate (Gelu(x) at x = float max, where
    `x * (1 + erf(...))` overflows) is as accurate as the original, or more.
    """
    differ = (np.isposinf(a) != np.isposinf(b)) | (np.isneginf(a) != np.isneginf(b))
    if exact or not differ.any():
        return bool(differ.any())
    edge = float(ml_dtypes.finfo(dtype).max) / 2  # type: ignore[no-untyped-call]
    with np.errstate(invalid="ignore"):
        rounded = (np.sign(a) == np.sign(b)) & (np.minimum(np.abs(a), np.abs(b)) >= edge)
    return bool((differ & ~rounded).any())


def output_difference(
    want: Any, have: Any, exact: bool, noise: np.ndarray | None = None
) -> str | None:
    """How `have` differs from `want` (None when it does not): dtype, shape, integers and
    bools exactly, NaN and infinities by position, finite floats bit for bit when `exact`,
    else within the dtype's rounding (relative to the output's largest finite magnitude) plus
    four times the largest of `noise`, the original's own rounding noise (`rounding_noise`)."""
    if not isinstance(want, np.ndarray) or not isinstance(have, np.ndarray):
        return None if type(want) is type(have) else f"type {type(want)} vs {type(have)}"
    if want.dtype != have.dtype:
        return f"dtype {want.dtype} vs {have.dtype}"
    if want.shape != have.shape:
        return f"shape {want.shape} vs {have.shape}"
    if want.dtype.kind not in "fV" and want.dtype.name != "bfloat16":
        if not np.array_equal(want, have):
            return "integer or bool values differ"
        return None
    a = want.astype(np.float64)
    b = have.astype(np.float64)
    if noise is not None and not exact:
        # An element a nudge of the original made NaN or infinite (or finite) is unstable:
        # a LayerNorm with epsilon 0 of a row that is constant up to rounding is 0 / 0 or not
        # by luck. It is left out of the comparison.
        stable = np.isfinite(noise)
        a = np.where(stable, a, 0.0)
        b = np.where(stable, b, 0.0)
    if not np.array_equal(np.isnan(a), np.isnan(b)):
        return "NaN positions differ"
    if _infinities_differ(a, b, want.dtype, exact):
        return "infinities differ"
    finite = np.isfinite(a) & np.isfinite(b)
    if exact:
        if not np.array_equal(a[finite], b[finite]):
            return "values differ (exact rules only)"
        return None
    tolerance = _TOLERANCE.get(want.dtype.name, 1e-4)
    scale = max(1.0, float(np.max(np.abs(a[finite]), initial=0.0)))
    allowed = tolerance * scale + tolerance * np.abs(a[finite])
    if noise is not None:
        # The noise of a few nudges is a sample: its largest finite value is the output's
        # floor, and an element a nudge made NaN or infinite is unstable, anything goes there.
        floor = float(np.max(noise[np.isfinite(noise)], initial=0.0))
        allowed = allowed + 4 * floor
    if not np.all(np.abs(b[finite] - a[finite]) <= allowed):
        return "values differ beyond rounding"
    return None


def _nudge(array: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """`array` with each finite, non-zero float element moved one step up or down in its own
    dtype. Zeros, infinities and NaN stay: they are not rounded values (an infinity would
    become the largest float, a zero weight a subnormal one, and hide what they do)."""
    if array.dtype.kind != "f" or array.size == 0:
        return array  # integers, bools; bfloat16 has no numpy nextafter
    toward = np.where(rng.random(array.shape) < 0.5, -np.inf, np.inf).astype(array.dtype)
    movable = np.isfinite(array) & (array != 0)
    with np.errstate(all="ignore"):
        return np.where(movable, np.nextafter(array, toward), array)


def _nudged_model(model: onnx.ModelProto, rng: np.random.Generator) -> onnx.ModelProto:
    """`model` with every float constant of its main graph nudged by one step (`_nudge`)."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    for tensor in copy.graph.initializer:
        array = _nudge(onnx.numpy_helper.to_array(tensor), rng)
        tensor.CopyFrom(onnx.numpy_helper.from_array(array, tensor.name))
    for node in copy.graph.node:
        for attribute in node.attribute:
            if node.op_type == "Constant" and attribute.name == "value":
                array = _nudge(onnx.numpy_helper.to_array(attribute.t), rng)
                attribute.t.CopyFrom(onnx.numpy_helper.from_array(array, attribute.t.name))
    return copy


_FLOAT_TYPES = {
    onnx.TensorProto.FLOAT16: np.dtype(np.float16),
    onnx.TensorProto.BFLOAT16: np.dtype(ml_dtypes.bfloat16),
    onnx.TensorProto.FLOAT: np.dtype(np.float32),
    onnx.TensorProto.DOUBLE: np.dtype(np.float64),
}


def _rounded_differently(model: onnx.ModelProto, rng: np.random.Generator) -> onnx.ModelProto:
    """`model` with every float intermediate of its main graph scaled by 1 +- one epsilon of
    its dtype (the sign drawn per value), as if each op had rounded its result the other way.

    Nudging inputs and constants does not show how a computation amplifies the rounding of
    its intermediates: a LayerNorm over `w * x + b` with a large bias normalizes the rounding
    of each sum, and a rewrite that adds the bias in another order (folding two biases into
    one) rounds those sums differently. Scaling each intermediate re-rounds it element by
    element, which is that noise.
    """
    inferred = onnx.shape_inference.infer_shapes(model)
    types = {
        info.name: info.type.tensor_type.elem_type
        for info in [*inferred.graph.value_info, *inferred.graph.output]
        if info.type.HasField("tensor_type")
    }
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    nodes = []
    for index, node in enumerate(copy.graph.node):
        nodes.append(node)
        if node.op_type == "Constant":
            continue  # constants are nudged by `_nudged_model`
        for slot, output in enumerate(node.output):
            dtype = _FLOAT_TYPES.get(types.get(output, 0))
            if not output or dtype is None:
                continue
            epsilon = float(ml_dtypes.finfo(dtype).eps)  # type: ignore[no-untyped-call]
            factor = np.array(1 + epsilon * rng.choice([-1.0, 1.0]), dtype=dtype)
            unrounded, scale = f"{output}__unrounded{index}", f"{output}__rounding{index}"
            node.output[slot] = unrounded
            copy.graph.initializer.append(onnx.numpy_helper.from_array(factor, scale))
            nodes.append(onnx.helper.make_node("Mul", [unrounded, scale], [output]))
    del copy.graph.node[:]
    copy.graph.node.extend(nodes)
    return copy


def rounding_noise(
    model: onnx.ModelProto, feeds: dict[str, np.ndarray], want: dict[str, np.ndarray]
) -> dict[str, np.ndarray]:
    """How far the original's outputs move, per element, when its float constants and inputs
    move by one rounding step, or its intermediates round the other way: the noise a rewrite
    that only rounds differently (a fold, a fused kernel) may show. Large where the model is
    ill-conditioned (a LayerNorm of values whose spread is a few ulps of their mean);
    infinite where a step changes NaN or inf."""
    noise = {name: np.zeros(np.shape(value)) for name, value in want.items()}
    rng = np.random.default_rng(0)
    for sample in range(6):
        nudged_feeds = {name: _nudge(value, rng) for name, value in feeds.items()}
        try:
            nudged = _nudged_model(model, rng) if sample < 3 else _rounded_differently(model, rng)
            outputs = run_model(nudged, nudged_feeds)
        except Exception:
            continue  # a step the model does not run on tells nothing about rounding
        for name, value in outputs.items():
            if not isinstance(value, np.ndarray) or value.dtype.kind not in "fV":
                continue
            a = want[name].astype(np.float64)
            b = value.astype(np.float64)
            with np.errstate(invalid="ignore"):
                moved = np.where(np.isfinite(a) & np.isfinite(b), np.abs(a - b), np.inf)
            same = (a == b) | (np.isnan(a) & np.isnan(b))
            noise[name] = np.maximum(noise[name], np.where(same, 0.0, moved))
    return noise


def _record(
    name: str,
    key: str,
    detail: str,
    model: onnx.ModelProto,
    feeds: Any,
    rewritten: onnx.ModelProto | None = None,
) -> None:
    """Count finding `key`; the first time, keep the model, inputs and rewritten model."""
    if FINDINGS_DIR is not None and key not in _tally(name).findings:
        stem = FINDINGS_DIR / f"{name}-{len(_tally(name).findings)}"
        FINDINGS_DIR.mkdir(parents=True, exist_ok=True)
        stem.with_suffix(".txt").write_text(f"{key}\n{detail}\n")
        stem.with_suffix(".onnx").write_bytes(model.SerializeToString())
        if rewritten is not None:
            stem.with_suffix(".rewritten.onnx").write_bytes(rewritten.SerializeToString())
        np.savez(stem.with_suffix(".npz"), **feeds)
    _tally(name).add(key)


def _rewrite_case(
    case: random_graphs.Case, replay_limit: int | None = None, exact: bool | None = None
) -> Any:
    """The default library's rewrite of `case.model` (its first `replay_limit` rewrites).

    Rules that assume something of their inputs are exact only where it holds: non-empty
    tensors (a fused Attention), finite values (a decomposed Attention that drops NaN at
    masked positions). On feeds that break an assumption (an empty tensor; NaN, an infinity
    or a value near the dtype's largest) the run is `exact` (unless told otherwise), so such
    a rule applies only where it proves its assumption, and a rule that fires anyway is a
    finding.
    """
    if exact is None:
        exact = any(np.size(value) == 0 or not _calm(value) for value in case.feeds.values())
    options = rewriter.RewriteOptions(
        target_opset=case.target_opset,
        max_rewrites=500,
        replay_limit=replay_limit,
        exact=exact,
    )
    with _time_limit(PER_EXAMPLE_SECONDS):
        return rewriter.rewrite(case.model, library(), options)


def _rule_entries(result: Any) -> list[Any]:
    return [e for e in result.trace.entries if e.kind == "rule"]


# Differences a rewrite that only rounds differently can show where the original is unstable.
_NOISY_DIFFERENCES = ("values differ beyond rounding", "NaN positions differ", "infinities differ")


def discrepancy(
    original: onnx.ModelProto,
    want: dict[str, np.ndarray],
    rewritten: onnx.ModelProto,
    feeds: dict[str, np.ndarray],
    exact: bool,
) -> str | None:
    """How the rewritten model's outputs on `feeds` differ from `want`, the original's (None:
    they do not). Float values beyond the dtype's rounding are measured again against the
    original's own rounding noise before they count.

    The output is not named: a finding's key is the rule and the kind of difference, so one
    class of finding counts once however its outputs are named.
    """
    try:
        have = run_model(rewritten, feeds)
    except Exception as exc:
        return f"rewritten model fails where the original runs: {str(exc)[:160]}"
    noise: dict[str, np.ndarray] | None = None
    for output, expected in want.items():
        difference = output_difference(expected, have.get(output), exact)
        if difference in _NOISY_DIFFERENCES and not exact:
            noise = noise if noise is not None else rounding_noise(original, feeds, want)
            difference = output_difference(expected, have.get(output), exact, noise[output])
        if difference == "values differ beyond rounding" and _as_accurate(
            original, rewritten, feeds
        ):
            difference = None
        if difference is not None:
            return difference
    return None


def _as_accurate(
    original: onnx.ModelProto, rewritten: onnx.ModelProto, feeds: dict[str, np.ndarray]
) -> bool:
    """Whether the verifier's accuracy criterion accepts the rewritten model on `feeds`.

    Float values that differ beyond rounding may still be as close to the exact result as
    the original's (a float16 graph fused into an op that computes in float32 is closer): the
    float64 oracle of `rewriter.verification` decides, as `rewrite --verify` would.
    """
    from rewriter.verification import VerifyError, check_on_inputs

    try:
        return check_on_inputs(
            original, rewritten, feeds, criterion=Criterion(compare="accuracy")
        ).ok
    except (VerifyError, ValueError, RuntimeError):
        return False


def _first_breaking_rule(case: random_graphs.Case, want: dict[str, np.ndarray], exact: bool) -> str:
    """The rule whose application first makes the rewritten model differ (replaying prefixes
    of the run); `passes` when the passes or the opset conversion alone do."""
    count = len(_rule_entries(_rewrite_case(case)))
    for limit in range(count + 1):
        try:
            result = _rewrite_case(case, limit)
        except (ir.IRError, rewriter.RewriteError):
            continue  # a prefix can stop short of what a conversion needs (a decomposition)
        if discrepancy(case.model, want, result.proto, case.feeds, exact) is not None:
            entries = _rule_entries(result)
            return entries[limit - 1].rule if limit and len(entries) >= limit else "passes"
    return "not reproduced by a prefix"


def _extreme_edge(value: np.ndarray) -> float | None:
    """A factor 16 below the largest value of a float array's dtype (None: not floats)."""
    if value.dtype.kind != "f" and value.dtype.name != "bfloat16":
        return None
    return float(ml_dtypes.finfo(value.dtype).max) / 16  # type: ignore[no-untyped-call]


def _calm(value: np.ndarray) -> bool:
    """Whether a float array holds only finite values well inside its dtype's range (what a
    rule that `assumes finite` is checked on); any other array is calm."""
    edge = _extreme_edge(value)
    if edge is None:
        return True
    wide = value.astype(np.float64)
    return bool(np.all(np.isfinite(wide)) and np.all(np.abs(wide) < edge))


def _without_extremes(feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """`feeds` with every finite float within a factor 16 of its dtype's largest set to +-1."""
    calm = {}
    for name, value in feeds.items():
        edge = _extreme_edge(value)
        if edge is None:
            calm[name] = value
            continue
        wide = value.astype(np.float64)
        extreme = np.isfinite(wide) & (np.abs(wide) >= edge)
        calm[name] = np.where(extreme, np.sign(wide), wide).astype(value.dtype)
    return calm


def _has_extreme_constants(model: onnx.ModelProto) -> bool:
    """Whether an initializer or Constant of the main graph holds a float within a factor 16
    of its dtype's largest value (`_extreme_edge`)."""
    tensors = list(model.graph.initializer)
    for node in model.graph.node:
        if node.op_type == "Constant":
            tensors.extend(a.t for a in node.attribute if a.type == onnx.AttributeProto.TENSOR)
    for tensor in tensors:
        try:
            array = onnx.numpy_helper.to_array(tensor)
        except Exception:  # a tensor onnx cannot read is no constant to judge by
            continue
        edge = _extreme_edge(array)
        if edge is None:
            continue
        wide = np.asarray(array, dtype=np.float64)
        if np.any(np.abs(wide[np.isfinite(wide)]) >= edge):
            return True
    return False


def _only_at_the_range_edge(
    case: random_graphs.Case, rewritten: onnx.ModelProto, difference: str
) -> bool:
    """Whether a NaN or infinity `difference` goes away when no input is near its dtype's
    largest value, or comes from a constant that is (`_has_extreme_constants`).

    A fold that scales weights (BatchNorm into MatMul) moves where a product overflows: with
    an input at float max the original's sum may reach +inf where the folded one meets
    +inf - inf. That is rounding at the edge of the range, which no reassociation avoids; a
    rewrite that mishandles NaN or infinities themselves still differs without those inputs.
    """
    if difference not in ("NaN positions differ", "infinities differ"):
        return False
    if _has_extreme_constants(case.model):
        # the same, with a constant of the graph near the largest value (a weight at float
        # max scaled by a folded factor overflows in one form and not in the other)
        return True
    calm = _without_extremes(case.feeds)
    if all(np.array_equal(calm[k], v, equal_nan=True) for k, v in case.feeds.items()):
        return False
    try:
        want = run_model(case.model, calm)
    except Exception:
        return False
    return discrepancy(case.model, want, rewritten, calm, exact=False) is None


def check_rewrite(case: random_graphs.Case, fuzzer: str = "rewrite") -> None:
    """Rewrite `case.model` with the default library and compare it with the original."""
    tally = _tally(fuzzer)
    tally.examples += 1
    try:
        want = run_model(case.model, case.feeds)
    except (_ort.OrtUnsupportedError, KeyError):  # onnxruntime does not run the original
        return
    tally.loaded += 1
    try:
        result = _rewrite_case(case)
    except (ir.IRError, rewriter.RewriteError) as exc:
        message, _ = describe_error(exc)
        if message.startswith("internal error"):
            key = f"rewrite: {message[:160]}"
            _record(fuzzer, key, str(case.motifs), case.model, case.feeds)
            raise AssertionError(key) from exc
        return
    except Exception as exc:
        raise _foreign(
            fuzzer, exc, f"rewrite {case.motifs}", case.model.SerializeToString()
        ) from exc
    entries = _rule_entries(result)
    tally.rewritten += bool(entries)
    tally.rewrites += len(entries)
    tally.fired.update(e.rule for e in entries)
    exact = not any(e.rule.startswith(_ROUNDING_RULES) for e in entries)
    difference = discrepancy(case.model, want, result.proto, case.feeds, exact)
    if difference is None:
        return
    if not exact and _only_at_the_range_edge(case, result.proto, difference):
        tally.edge_overflows += 1
        return
    rule = _first_breaking_rule(case, want, exact)
    tally.by_rule[rule] = tally.by_rule.get(rule, 0) + 1
    key = f"{rule}: {difference}"
    detail = f"motifs {case.motifs}, target {case.target_opset}"
    _record(fuzzer, key, detail, case.model, case.feeds, result.proto)
    raise AssertionError(f"{key}: {detail}")


# ---------------------------------------------------------------------------------------------
# Running


FAST = settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)
# The default test's sample per fuzzer, where it differs from FAST: the rewrite fuzzer's
# examples are small models, and more of them fit in its share of the suite's time.
SAMPLES = {
    "rewrite": settings(FAST, max_examples=150),
    "instances": settings(FAST, max_examples=150),
}
LONG = settings(
    max_examples=100,
    deadline=None,
    derandomize=False,
    database=None,
    suppress_health_check=list(HealthCheck),
)


def _seeded(test: Callable[[], None], seed: int | None) -> Callable[[], None]:
    """`test` (a hypothesis test) drawing from `seed`, or from fresh randomness when None."""
    return test if seed is None else hypothesis.seed(seed)(test)


def _run_loader(chosen: settings, folder: Path, seed: int | None = None) -> None:
    @chosen
    @given(mutated_models())
    def run(case: tuple[str, bytes, bool]) -> None:
        _, data, with_data = case
        check_model_bytes(data, folder, with_data=with_data)

    _seeded(run, seed)()


def _run_rules(chosen: settings, folder: Path, seed: int | None = None) -> None:
    @chosen
    @given(mutated_rules())
    def run(data: bytes) -> None:
        check_rule_bytes(data, folder)

    _seeded(run, seed)()


def _run_cli(chosen: settings, folder: Path, seed: int | None = None) -> None:
    template = make_workspace(folder / "template")

    @chosen
    @given(command_lines())
    def run(args: list[str]) -> None:
        workspace = folder / "ws"
        shutil.rmtree(workspace, ignore_errors=True)
        shutil.copytree(template, workspace)
        check_command_line(args, workspace)

    _seeded(run, seed)()


def _run_rewrite(chosen: settings, folder: Path, seed: int | None = None) -> None:
    @chosen
    @given(random_graphs.cases())
    def run(case: random_graphs.Case) -> None:
        check_rewrite(case)

    _seeded(run, seed)()


def _run_instances(chosen: settings, folder: Path, seed: int | None = None) -> None:
    @chosen
    @given(instances.instance_cases())
    def run(case: random_graphs.Case) -> None:
        check_rewrite(case, "instances")

    _seeded(run, seed)()


FUZZERS: dict[str, Callable[[settings, Path, int | None], None]] = {
    "loader": _run_loader,
    "rules": _run_rules,
    "cli": _run_cli,
    "rewrite": _run_rewrite,
    "instances": _run_instances,
}


def run_for(name: str, seconds: float, folder: Path, seed: int | None = None) -> Tally:
    """Run fuzzer `name` in rounds of random examples until `seconds` have passed.

    Round k draws from `seed + k` when a seed is given (the run can be repeated), else from
    fresh randomness. A round that finds something records the (shrunk) failure and the run
    goes on.
    """
    end = time.monotonic() + seconds
    tally = _tally(name)
    round_number = 0
    while time.monotonic() < end:
        round_seed = None if seed is None else seed + round_number
        round_number += 1
        try:
            FUZZERS[name](LONG, folder, round_seed)
        except AssertionError:
            pass  # the check recorded it under its own key
        except Exception as exc:
            tally.add(f"round failed: {type(exc).__name__}: {str(exc)[:300]}")
    return tally


def _summary(name: str, tally: Tally, minutes: float) -> list[str]:
    """The lines a long run prints for fuzzer `name`."""
    lines = [
        f"{name}: {tally.examples} examples in {minutes:.1f} min "
        f"({tally.loaded} loaded), {len(tally.findings)} findings"
    ]
    if name in ("rewrite", "instances"):
        lines.append(
            f"  {tally.examples} graphs generated, {tally.loaded} run by onnxruntime, "
            f"{tally.rewritten} rewritten, {tally.rewrites} rewrites applied"
        )
        rules = {rule.name for rule in library().rules}
        lines.append(f"  {len(tally.fired & rules)} of {len(rules)} library rules fired")
        lines.append(
            f"  {tally.edge_overflows} differences in NaN or infinities only where an input is "
            "near its dtype's largest value (overflow at the range's edge; not findings)"
        )
        for rule, count in sorted(tally.by_rule.items()):
            lines.append(f"  discrepancies first caused by {rule}: {count}")
    lines.extend(f"  {count:6d}x {finding}" for finding, count in tally.findings.items())
    return lines


def main(argv: list[str] | None = None) -> int:
    """Command line of the long run: fuzzers, time each, seed; prints a summary per fuzzer."""
    logging.disable(logging.WARNING)  # inference warnings about broken models are expected
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("fuzzers", nargs="*", default=list(FUZZERS), choices=list(FUZZERS))
    budget = parser.add_mutually_exclusive_group()
    budget.add_argument("--seconds", type=float, help="time per fuzzer (default 600)")
    budget.add_argument("--minutes", type=float, help="time per fuzzer, in minutes")
    parser.add_argument("--seed", type=int, help="repeatable run: round k draws from SEED + k")
    parser.add_argument(
        "--findings", type=Path, default=Path("fuzz-findings"), help="where to keep findings"
    )
    options = parser.parse_args(argv)
    # A native crash in onnxruntime (a signal, no Python exception) ends the run: say where.
    faulthandler.enable()
    seconds = options.minutes * 60 if options.minutes is not None else options.seconds or 600
    global FINDINGS_DIR
    FINDINGS_DIR = options.findings
    failed = False
    for name in options.fuzzers:
        start = time.monotonic()
        with tempfile.TemporaryDirectory(prefix=f"fuzz_{name}_") as folder:
            tally = run_for(name, seconds, Path(folder), options.seed)
        failed = failed or bool(tally.findings)
        minutes = (time.monotonic() - start) / 60
        print("\n".join(_summary(name, tally, minutes)), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
