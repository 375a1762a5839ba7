"""Conformance: lift -> lower is exact on onnx's backend test models, and they still run.

Cases:

* ``data/<kind>/<name>``: every model shipped in onnx's ``backend/test/data`` (simple,
  pytorch-converted, pytorch-operator, and the light_* CNNs), with their test data sets.
* ``node/<name>``: every node test case onnx's backend test generator produces.
* ``model/<name>``: onnx's python-defined model test cases.
* ``function/<name>``: model-local functions. onnx's cases have none, so these are built
  here: every ``*_expanded`` node case wrapped into a model-local function that the main
  graph calls, plus hand-written models (nested calls, attribute references, defaults,
  subgraphs calling functions).

Each case checks that `ir.to_onnx(ir.from_onnx(m))` equals `m` byte for byte, both when
lowering reuses the messages kept from lifting and when everything is rebuilt from the IR;
on-disk cases also round-trip through `ir.load`/`ir.save`. Then onnxruntime (graph
optimizations off) runs the rebuilt model and its outputs are compared with the expected
outputs shipped with the case. A model onnxruntime refuses, or on which onnxruntime already
disagrees with onnx's reference outputs for the original model, is skipped with the reason.

The default run takes a deterministic sample (every 8th case by name) plus every case with
control flow, sequences, optionals or functions; ``--run-slow`` runs them all. The counts are
printed at the end of the session (see tests/ir/conftest.py).
"""

from __future__ import annotations

import dataclasses
import glob
import os
import warnings
import zlib
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import onnx
import onnx.helper
import onnx.numpy_helper
import onnx.parser
import onnx.reference
import pytest

import ir
from tests.ir import _ort
from tests.ir._roundtrip import assert_same_proto, roundtrip, roundtrip_rebuilt

DataSets = list[tuple[list[Any], list[Any]]]

_DATA_DIR = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")
_DATA_KINDS = ("light", "pytorch-converted", "pytorch-operator", "simple")
_SAMPLE_EVERY = 8
_RTOL = 1e-3
_ATOL = 1e-5
# Per-model tolerances onnx's own runner uses for the light models.
_LIGHT_RTOL = {"densenet121": 2e-3}
_CONTROL_FLOW = frozenset({"If", "Loop", "Scan", "SequenceMap"})
_SEQUENCE_OPS = frozenset({"SplitToSequence", "ConcatFromSequence"})


@dataclasses.dataclass(frozen=True, slots=True)
class Case:
    """One conformance case: how to get its model and its (inputs, outputs) data sets."""

    case_id: str
    load_model: Callable[[], onnx.ModelProto]
    load_data: Callable[[onnx.ModelProto], DataSets]
    path: str | None = None
    rtol: float = _RTOL
    atol: float = _ATOL


# ---------------------------------------------------------------------------------------------
# On-disk models


def _load_pb(path: str, type_proto: onnx.TypeProto | None) -> Any:
    with open(path, "rb") as f:
        data = f.read()
    which = type_proto.WhichOneof("value") if type_proto is not None else None
    if which == "sequence_type":
        seq = onnx.SequenceProto()
        seq.ParseFromString(data)
        return _ort.normalize(seq)
    if which == "optional_type":
        opt = onnx.OptionalProto()
        opt.ParseFromString(data)
        return _ort.normalize(opt)
    tensor = onnx.TensorProto()
    tensor.ParseFromString(data)
    return onnx.numpy_helper.to_array(tensor)


def _graph_inputs(model: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    initializers = {t.name for t in model.graph.initializer}
    return [vi for vi in model.graph.input if vi.name not in initializers]


def _data_set_loader(case_dir: str) -> Callable[[onnx.ModelProto], DataSets]:
    def load(model: onnx.ModelProto) -> DataSets:
        sets: DataSets = []
        inputs_vi = _graph_inputs(model)
        for set_dir in sorted(glob.glob(os.path.join(case_dir, "test_data_set_*"))):
            n_in = len(glob.glob(os.path.join(set_dir, "input_*.pb")))
            n_out = len(glob.glob(os.path.join(set_dir, "output_*.pb")))
            inputs = [
                _load_pb(os.path.join(set_dir, f"input_{i}.pb"), inputs_vi[i].type)
                for i in range(n_in)
            ]
            outputs = [
                _load_pb(os.path.join(set_dir, f"output_{i}.pb"), model.graph.output[i].type)
                for i in range(n_out)
            ]
            sets.append((inputs, outputs))
        return sets

    return load


def _light_data_loader(path: str) -> Callable[[onnx.ModelProto], DataSets]:
    """Inputs as onnx's runner makes them for light models (arange / n), shipped outputs."""

    def load(model: onnx.ModelProto) -> DataSets:
        inputs = []
        for vi in _graph_inputs(model):
            dims = vi.type.tensor_type.shape.dim
            shape = tuple(d.dim_value if d.HasField("dim_value") else 1 for d in dims)
            n = int(np.prod(shape))
            inputs.append((np.arange(n).reshape(shape) / n).astype(np.float32))
        prefix = os.path.splitext(path)[0]
        outputs = [
            _load_pb(f"{prefix}_output_{i}.pb", vi.type) for i, vi in enumerate(model.graph.output)
        ]
        return [(inputs, outputs)]

    return load


def _loader(path: str) -> Callable[[], onnx.ModelProto]:
    return lambda: onnx.load(path)


def _data_cases() -> Iterator[Case]:
    for kind in _DATA_KINDS:
        folder = os.path.join(_DATA_DIR, kind)
        if kind == "light":
            for path in sorted(glob.glob(os.path.join(folder, "light_*.onnx"))):
                name = os.path.splitext(os.path.basename(path))[0]
                rtol = _LIGHT_RTOL.get(name.removeprefix("light_"), _RTOL)
                yield Case(
                    f"data/light/{name}", _loader(path), _light_data_loader(path), path, rtol
                )
            continue
        for path in sorted(glob.glob(os.path.join(folder, "*", "model.onnx"))):
            case_dir = os.path.dirname(path)
            case_id = f"data/{kind}/{os.path.basename(case_dir)}"
            yield Case(case_id, _loader(path), _data_set_loader(case_dir), path)


# ---------------------------------------------------------------------------------------------
# Generated cases


def _collect_onnx_cases() -> tuple[list[Any], list[Any]]:
    from onnx.backend.test.case import model as model_cases
    from onnx.backend.test.case import node as node_cases

    # Generating the cases runs onnx's numpy reference code, which warns on purpose.
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        nodes = list(node_cases.collect_testcases(None))
        models = [c for c in model_cases.collect_testcases() if c.model is not None]
    return nodes, models


def _fixed(proto: onnx.ModelProto) -> Callable[[], onnx.ModelProto]:
    data = proto.SerializeToString()

    def load() -> onnx.ModelProto:
        fresh = onnx.ModelProto()
        fresh.ParseFromString(data)
        return fresh

    return load


def _fixed_data(data_sets: Any) -> Callable[[onnx.ModelProto], DataSets]:
    def load(_: onnx.ModelProto) -> DataSets:
        return [
            ([_ort.normalize(x) for x in inputs], [_ort.normalize(y) for y in outputs])
            for inputs, outputs in data_sets
        ]

    return load


def _generated_cases(prefix: str, test_cases: list[Any]) -> Iterator[Case]:
    for tc in test_cases:
        yield Case(
            f"{prefix}/{tc.name}",
            _fixed(tc.model),
            _fixed_data(tc.data_sets),
            rtol=max(tc.rtol, _RTOL),
            atol=max(tc.atol, _ATOL),
        )


def wrap_in_function(model: onnx.ModelProto, domain: str = "test.local") -> onnx.ModelProto:
    """The same computation, with the graph's nodes moved into a model-local function."""
    graph = model.graph
    inputs = [vi.name for vi in graph.input]
    outputs = [vi.name for vi in graph.output]
    name = graph.name or "body"
    function = onnx.helper.make_function(
        domain, name, inputs, outputs, list(graph.node), list(model.opset_import)
    )
    call = onnx.helper.make_node(name, inputs, outputs, domain=domain, name="call")
    main = onnx.helper.make_graph(
        [call], f"{name}_main", list(graph.input), list(graph.output), list(graph.initializer)
    )
    wrapped = onnx.helper.make_model(
        main,
        opset_imports=[*model.opset_import, onnx.helper.make_opsetid(domain, 1)],
        functions=[function],
        producer_name="ir-conformance",
    )
    wrapped.ir_version = model.ir_version
    return wrapped


_FUNCTION_MODELS = {
    "nested_calls_and_attribute_refs": (
        """
        <ir_version: 10, opset_import: ["" : 18, "local" : 1], producer_name: "ir-test">
        main (float[N] x, bool c) => (float[N] y, float[N] z) {
            t = local.scaled_relu <alpha: float = 2.0> (x)
            y = local.twice (t)
            z = If (c) <
                then_branch = g1 () => (float[N] o1) { o1 = Neg (t) },
                else_branch = g2 () => (float[N] o2) { o2 = local.twice (x) }
            >
        }
        <domain: "local", opset_import: ["" : 18]>
        scaled_relu <alpha: float = 1.0> (a) => (b) {
            r = Relu (a)
            s = Constant <value_float: float = @alpha> ()
            b = Mul (r, s)
        }
        <domain: "local", opset_import: ["" : 18, "local" : 1]>
        twice (a) => (b) {
            b = local.scaled_relu <alpha = 2.0> (a)
        }
        """,
        {"x": np.array([-1.0, 0.5, 2.0], np.float32), "c": np.array(False)},
    ),
    "function_with_loop_body": (
        """
        <ir_version: 10, opset_import: ["" : 18, "local" : 1]>
        main (float[3] x) => (float[3] y) {
            y = local.repeat_add (x)
        }
        <domain: "local", opset_import: ["" : 18]>
        repeat_add (a) => (b) {
            n = Constant <value: tensor = int64 {3}> ()
            cond = Constant <value: tensor = bool {1}> ()
            b = Loop (n, cond, a) <body = step (int64 i, bool c_in, float[3] acc) => (
                bool c_out, float[3] acc_out) {
                c_out = Identity (c_in)
                acc_out = Add (acc, a)
            }>
        }
        """,
        {"x": np.array([1.0, 2.0, 3.0], np.float32)},
    ),
    "function_with_value_info_and_doc": (
        """
        <ir_version: 10, opset_import: ["" : 18, "local" : 1], doc_string: "model doc">
        main (float[2, 3] x) => (float[3, 2] y) {
            y = local.transpose_scale (x)
        }
        <domain: "local", opset_import: ["" : 18]>
        transpose_scale (a) => (b) {
            t = Transpose <perm = [1, 0]> (a)
            two = Constant <value_float = 2.0> ()
            b = Mul (t, two)
        }
        """,
        {"x": np.arange(6, dtype=np.float32).reshape(2, 3)},
    ),
}


def _function_model(text: str) -> onnx.ModelProto:
    model = onnx.parser.parse_model(text)
    if "value_info" in text or "doc" in text:
        fn = model.functions[0]
        fn.doc_string = "a function with documentation"
        entry = fn.value_info.add()
        entry.name = "t"
        entry.type.tensor_type.elem_type = onnx.TensorProto.FLOAT
        meta = fn.metadata_props.add()
        meta.key = "origin"
        meta.value = "ir-test"
    onnx.checker.check_model(model, full_check=True)
    return model


def _reference_data(
    model: onnx.ModelProto, feeds: dict[str, np.ndarray]
) -> Callable[[onnx.ModelProto], DataSets]:
    def load(_: onnx.ModelProto) -> DataSets:
        outputs = onnx.reference.ReferenceEvaluator(model).run(None, feeds)
        return [(list(feeds.values()), list(outputs))]

    return load


def _function_cases(node_cases: list[Any]) -> Iterator[Case]:
    for name, (text, feeds) in _FUNCTION_MODELS.items():
        model = _function_model(text)
        yield Case(f"function/{name}", _fixed(model), _reference_data(model, feeds))
    for tc in node_cases:
        if "_expanded" not in tc.name:
            continue
        wrapped = wrap_in_function(tc.model)
        yield Case(
            f"function/{tc.name}",
            _fixed(wrapped),
            _fixed_data(tc.data_sets),
            rtol=max(tc.rtol, _RTOL),
            atol=max(tc.atol, _ATOL),
        )


# ---------------------------------------------------------------------------------------------
# Case selection


def _all_ops(model: onnx.ModelProto) -> Iterator[str]:
    def walk(graph: onnx.GraphProto) -> Iterator[str]:
        for node in graph.node:
            yield node.op_type
            for attr in node.attribute:
                if attr.HasField("g"):
                    yield from walk(attr.g)
                for sub in attr.graphs:
                    yield from walk(sub)

    yield from walk(model.graph)
    for fn in model.functions:
        yield from walk(onnx.helper.make_graph(fn.node, fn.name, [], []))


def _has_special_type(type_proto: onnx.TypeProto) -> bool:
    """A sequence, optional or map type."""
    return type_proto.WhichOneof("value") in ("sequence_type", "optional_type", "map_type")


def is_always_run(model: onnx.ModelProto, *, functions_count: bool = True) -> bool:
    """Control flow, sequences, optionals and functions are always in the default sample.

    Sequences and optionals count as ops (SequenceMap, OptionalHasElement) and as the types of
    graph inputs and outputs (`identity_opt` is one Identity of an optional).
    """
    if functions_count and model.functions:
        return True
    graph = model.graph
    if any(_has_special_type(v.type) for v in (*graph.input, *graph.output)):
        return True
    for op in _all_ops(model):
        if op in _CONTROL_FLOW or op in _SEQUENCE_OPS:
            return True
        if op.startswith(("Sequence", "Optional")):
            return True
    return False


def _build_cases() -> list[tuple[Case, bool]]:
    """Every case, with whether it belongs to the default (non-slow) sample."""
    nodes, models = _collect_onnx_cases()
    cases = [
        *_data_cases(),
        *_generated_cases("node", nodes),
        *_generated_cases("model", models),
        *_function_cases(nodes),
    ]
    cases.sort(key=lambda c: c.case_id)
    selected = []
    for case in cases:
        # By a hash of the case's own id, so adding or removing a case elsewhere leaves the
        # sample as it was.
        bucket = zlib.crc32(case.case_id.encode())
        in_sample = bucket % _SAMPLE_EVERY == 0
        if not in_sample and case.case_id.startswith("function/"):
            # The wrapped `_expanded` cases all have functions; keep a quarter of them, all
            # hand-written ones and those with control flow, sequences or optionals, or the
            # default run would be dominated by them.
            in_sample = (
                "_expanded" not in case.case_id
                or bucket % 4 == 1
                or is_always_run(case.load_model(), functions_count=False)
            )
        elif not in_sample:
            in_sample = is_always_run(case.load_model())
        selected.append((case, in_sample))
    return selected


_CASES = _build_cases()
_PARAMS = [
    pytest.param(case, id=case.case_id, marks=() if in_sample else pytest.mark.slow)
    for case, in_sample in _CASES
]


# ---------------------------------------------------------------------------------------------
# Tests


@pytest.mark.parametrize("case", _PARAMS)
def test_roundtrip_is_exact(case: Case, conformance_report: Any) -> None:
    proto = case.load_model()
    conformance_report.seen(case.case_id)
    ir.verify(ir.from_onnx(proto))
    assert_same_proto(proto, roundtrip(proto))
    conformance_report.record(case.case_id, "exact_reused")
    assert_same_proto(proto, roundtrip_rebuilt(proto))
    conformance_report.record(case.case_id, "exact_rebuilt")


_FILE_PARAMS = [
    pytest.param(case, id=case.case_id, marks=() if in_sample else pytest.mark.slow)
    for case, in_sample in _CASES
    if case.path is not None
]


@pytest.mark.parametrize("case", _FILE_PARAMS)
def test_load_save_file_is_exact(case: Case, tmp_path: Any, conformance_report: Any) -> None:
    assert case.path is not None
    out = tmp_path / "model.onnx"
    ir.save(ir.load(case.path), out)
    assert out.read_bytes() == onnx.load(case.path).SerializeToString()
    conformance_report.record(case.case_id, "exact_file")


@pytest.mark.parametrize("case", _PARAMS)
def test_roundtrip_runs_like_reference(case: Case, conformance_report: Any) -> None:
    proto = case.load_model()
    lowered = roundtrip_rebuilt(proto).SerializeToString()
    data_sets = case.load_data(proto)
    if not data_sets:
        conformance_report.skip(case.case_id, "no test data")
        pytest.skip("no test data")
    try:
        sess = _ort.session(lowered)
        results = [_ort.run(sess, inputs) for inputs, _ in data_sets]
    except _ort.OrtUnsupportedError as exc:
        conformance_report.skip(case.case_id, str(exc))
        pytest.skip(str(exc))
    try:
        for (_, expected), actual in zip(data_sets, results, strict=True):
            assert len(actual) == len(expected), "number of outputs differs"
            for i, (e, a) in enumerate(zip(expected, actual, strict=True)):
                _ort.compare(e, a, case.rtol, case.atol, f"output {i}")
    except AssertionError:
        original = proto.SerializeToString()
        if original != lowered:
            baseline = [_ort.run(_ort.session(original), inputs) for inputs, _ in data_sets]
            for base, actual in zip(baseline, results, strict=True):
                _ort.compare(base, actual, 0.0, 0.0, "round-tripped vs original under ORT")
        reason = "onnxruntime disagrees with the reference outputs on the original model too"
        conformance_report.skip(case.case_id, reason)
        pytest.skip(reason)
    conformance_report.record(case.case_id, "ort_equal")


def test_wrap_in_function_keeps_the_computation() -> None:
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("Relu", ["x"], ["y"])],
        "relu",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2])],
    )
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 18)])
    wrapped = wrap_in_function(model)
    onnx.checker.check_model(wrapped, full_check=True)
    assert [n.op_type for n in wrapped.functions[0].node] == ["Relu"]
    x = np.array([-1.0, 2.0], np.float32)
    (y,) = onnx.reference.ReferenceEvaluator(wrapped).run(None, {"x": x})
    assert np.asarray(y).tolist() == [0.0, 2.0]


def test_default_sample_covers_the_special_cases() -> None:
    sampled = [case.case_id for case, in_sample in _CASES if in_sample]
    assert any(cid.startswith("data/") for cid in sampled)
    assert any("loop" in cid for cid in sampled)
    assert any(cid.startswith("node/test_if") for cid in sampled)
    assert any("scan" in cid for cid in sampled)
    assert any("sequence" in cid for cid in sampled)
    assert any("optional" in cid for cid in sampled)
    assert any(cid.startswith("function/") for cid in sampled)
