"""Instances with computed structural inputs and with symbolic dims.

Two kinds of `where` lines ask for instances that recipes alone do not build (the where-hints
in `_repair` turn them into the choices read here):

* `not is_const(s)` on a structural input whose values a recipe decides (a Reshape's target
  shape): `s` is computed the way exporters compute it, as a Concat of one-element pieces,
  each either a dim of a graph input read with Shape (PyTorch's `x.size(0)`) when that input
  has the wanted value at the same axis, or a constant (`computed_pieces`);
* `count_unknown(shape(v)) > n` or `not has_static_shape(v)`: dims of the graph inputs become
  symbolic (`dim_param`), each axis with even odds (`make_symbolic`); values computed from
  them get symbolic dims from onnx's inference (with data propagation, so a computed shape
  carries the symbols along). The instance must still run when the symbolic dims take other
  sizes than the ones it was built with, so it is run once with each symbolic dim a little
  larger (by 1, 2 or 3, so that dims which merely happened to be equal part ways) and
  rejected when that fails.

onnx and the verifier's runner are imported inside the functions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

import ir
from rewriter.checkrules._choices import Choices

Shape = tuple[int, ...]
SYMBOLIC = ("symbolic",)
"""The choice key of an instance with symbolic dims (set by a where-hint)."""


class DynamicError(Exception):
    """The instance cannot have the computed value or symbolic dims asked for."""


def computed_pieces(
    key: str, values: Sequence[int], sources: Sequence[tuple[str, Shape]], opset: int
) -> tuple[list[Any], list[tuple[str, np.ndarray[Any, Any]]]]:
    """Nodes computing the 1-D int64 `values` into `key`, and the constants they read.

    Piece `i` is `Shape(g)[i]` for the first source `g` whose dim `i` is `values[i]`, else
    the constant `[values[i]]`. Shape's start/end exist from opset 15; before, a Gather reads
    the dim.
    """
    import onnx.helper

    if not values:
        raise DynamicError("an empty shape is not computed from dims")
    nodes: list[Any] = []
    constants: list[tuple[str, np.ndarray[Any, Any]]] = []
    pieces: list[str] = []
    for i, wanted in enumerate(values):
        piece = f"{key}_piece{i}"
        source = next(
            (name for name, shape in sources if len(shape) > i and shape[i] == wanted), None
        )
        if source is None:
            constants.append((piece, np.asarray([wanted], dtype=np.int64)))
        elif opset >= 15:
            nodes.append(
                onnx.helper.make_node(
                    "Shape", [source], [piece], name=f"{key}_dim{i}", start=i, end=i + 1
                )
            )
        else:
            full, index = f"{key}_shape{i}", f"{key}_axis{i}"
            constants.append((index, np.asarray([i], dtype=np.int64)))
            nodes.append(onnx.helper.make_node("Shape", [source], [full], name=f"{key}_shape{i}"))
            nodes.append(
                onnx.helper.make_node(
                    "Gather", [full, index], [piece], name=f"{key}_dim{i}", axis=0
                )
            )
        pieces.append(piece)
    nodes.append(onnx.helper.make_node("Concat", pieces, [key], name=f"{key}_concat", axis=0))
    return nodes, constants


def make_symbolic(proto: Any, choices: Choices) -> Any:
    """`proto` with symbolic dims on its graph inputs (see the module docstring).

    Raises:
        DynamicError: no dim could be made symbolic, onnx cannot type the result, or it does
            not run with other sizes for its symbolic dims.
    """
    import onnx
    import onnx.shape_inference

    model = onnx.ModelProto()
    model.CopyFrom(proto)
    sizes: dict[str, int] = {}
    for value in model.graph.input:
        for axis, dim in enumerate(value.type.tensor_type.shape.dim):
            if choices.chance(("symbolic", value.name, axis), 50):
                param = f"{value.name}_{axis}"
                sizes[param] = int(dim.dim_value) + 1 + len(sizes) % 3
                dim.dim_param = param
    if not sizes:
        # At least one: the first axis of the first graph input that has one.
        first = next((v for v in model.graph.input if v.type.tensor_type.shape.dim), None)
        if first is None:
            raise DynamicError("no graph input has a dim to make symbolic")
        dim = first.type.tensor_type.shape.dim[0]
        param = f"{first.name}_0"
        sizes[param] = int(dim.dim_value) + 1
        dim.dim_param = param
    for value in model.graph.output:
        for dim in value.type.tensor_type.shape.dim:
            dim.Clear()
    try:
        inferred = onnx.shape_inference.infer_shapes(
            model, check_type=True, strict_mode=True, data_prop=True
        )
    except Exception as exc:  # onnx raises several types; every one rejects the attempt
        raise DynamicError(f"shape inference with symbolic dims: {exc}") from exc
    types = {value.name: value.type for value in inferred.graph.output}
    for value in model.graph.output:
        if value.name in types:
            value.type.CopyFrom(types[value.name])
    _check_runs(model, sizes)
    return model


def _check_runs(model: Any, sizes: dict[str, int]) -> None:
    """Run `model` with its symbolic dims at `sizes` (zeros as inputs)."""
    from rewriter.verification import VerifyError, run_model

    feeds = {}
    for value in model.graph.input:
        tensor = value.type.tensor_type
        shape = [
            sizes[dim.dim_param] if dim.dim_param else int(dim.dim_value)
            for dim in tensor.shape.dim
        ]
        feeds[value.name] = np.zeros(shape, ir.numpy_dtype(ir.DataType(tensor.elem_type)))
    try:
        run_model(model, feeds)
    except VerifyError as exc:
        raise DynamicError(f"the instance does not run with other symbolic sizes: {exc}") from exc
