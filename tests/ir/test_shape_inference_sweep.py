"""Shape facts against onnxruntime over onnx's own node test cases, every input dim symbolic.

Each case's inputs get one fresh symbol per axis, so onnx's inference leaves much unknown and
the symbolic walk's rules do the work; then onnxruntime runs the original case with every
intermediate value exposed, and every fact, evaluated at the case's real sizes, must equal the
shape onnxruntime produced. The fast run checks a fixed sample; `--run-slow` checks all.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Mapping

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import ir

SAMPLE_EVERY = 10


@functools.cache
def _cases() -> tuple[object, ...]:
    from onnx.backend.test.case import node as node_cases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return tuple(node_cases.collect_testcases(None))


def _with_symbolic_inputs(model: onnx.ModelProto) -> tuple[onnx.ModelProto, dict[str, int]]:
    """A copy whose input dims are symbols `i<input>d<axis>`, and their real sizes."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    sizes: dict[str, int] = {}
    for i, value in enumerate(copy.graph.input):
        if not value.type.HasField("tensor_type"):
            continue
        for k, dim in enumerate(value.type.tensor_type.shape.dim):
            if dim.HasField("dim_value"):
                name = f"i{i}d{k}"
                sizes[name] = dim.dim_value
                dim.dim_param = name
    for value in copy.graph.output:
        if value.type.HasField("tensor_type"):
            for dim in value.type.tensor_type.shape.dim:
                dim.ClearField("dim_value")
                dim.ClearField("dim_param")
    return copy, sizes


def _evaluate(dim: ir.Dim, sizes: Mapping[str, int]) -> int | None:
    if dim is None or isinstance(dim, int):
        return dim
    try:
        return int(eval(dim, {"floor": math.floor, "min": min}, dict(sizes)))
    except NameError:
        return None  # a symbol onnx invented: nothing to check


def _actual_shapes(case: object) -> dict[str, tuple[int, ...]] | None:
    model: onnx.ModelProto = case.model  # type: ignore[attr-defined]
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    outputs = {o.name for o in probe.graph.output}
    for node in probe.graph.node:
        for name in node.output:
            if name and name not in outputs:
                probe.graph.output.append(onnx.ValueInfoProto(name=name))
                outputs.add(name)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 4
    inputs = case.data_sets[0][0]  # type: ignore[attr-defined]
    try:
        session = ort.InferenceSession(
            probe.SerializeToString(), options, providers=["CPUExecutionProvider"]
        )
        feeds = {v.name: d for v, d in zip(model.graph.input, inputs, strict=False) if v.name}
        names = [o.name for o in session.get_outputs()]
        results = session.run(names, feeds)
    except Exception:  # onnxruntime lacks the kernel or rejects the case: nothing to compare
        return None
    return {n: r.shape for n, r in zip(names, results, strict=True) if isinstance(r, np.ndarray)}


def _problems(case: object) -> list[str]:
    symbolic, sizes = _with_symbolic_inputs(case.model)  # type: ignore[attr-defined]
    model = ir.from_onnx(symbolic)
    ir.infer_types(model)
    actual = _actual_shapes(case)
    if actual is None:
        return []
    found = []
    for value in model.graph.values():
        fact = ir.fact_type(value)
        shape = actual.get(value.name)
        if not isinstance(fact, ir.TensorType) or fact.shape is None or shape is None:
            continue
        expected = [_evaluate(d, sizes) for d in fact.shape]
        if len(expected) != len(shape) or any(
            e is not None and e != s for e, s in zip(expected, shape, strict=False)
        ):
            found.append(f"{case.name}: {value.name} fact {fact.shape}, onnxruntime {shape}")  # type: ignore[attr-defined]
    return found


def _check(cases: tuple[object, ...]) -> None:
    problems = [p for case in cases for p in _problems(case)]
    assert problems == []


def test_facts_hold_on_a_sample_of_onnx_node_cases() -> None:
    _check(_cases()[::SAMPLE_EVERY])


@pytest.mark.slow
def test_facts_hold_on_every_onnx_node_case() -> None:
    _check(_cases())
