"""`extract(model, inputs, outputs)`: the subgraph between some values, as a runnable model.

The cut itself is the IR's (`ir.extract`): exactly the nodes between the given values, the
initializers they read (external ones stay external and are not read), the functions they
call, the types the model declares or inference finds. This module adds what a user needs
around it: loading, onnx's checker on the result, and `verify_extracted`, which checks the
cut against the original's own intermediate values.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import onnx
import onnx.compose

import ir
from rewriter._errors import RewriteError
from rewriter.api import as_model, set_input_shapes

if TYPE_CHECKING:
    from rewriter.verification import VerifyResult
    from rewriter.verification._check import VerifyProgress

ModelLike = str | os.PathLike[str] | ir.Model | onnx.ModelProto

# Names of the extracted model inside the composition `verify_extracted` checks.
_PREFIX = "extracted/"


def extract(
    model: ModelLike,
    inputs: Sequence[str],
    outputs: Sequence[str],
    *,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
) -> ir.Model:
    """The model computing `outputs` from `inputs`, cut out of `model` (left unchanged).

    Args:
        model: a path (weights stay on disk), a ModelProto or an IR model (copied).
        inputs: names of values of the main graph that become the inputs, in this order.
        outputs: names of values of the main graph that become the outputs, in this order.
        input_shapes: fix graph inputs' shapes first (see `set_input_shapes`), so the cut's
            boundary values get static types where they follow from them.

    Raises:
        RewriteError: a name is unknown, an output depends on a value that is not among the
            inputs (the message names it), or the result fails onnx's checker.
    """
    if not outputs:
        raise RewriteError("extract: give at least one output (--outputs)")
    cut = as_model(model)
    if input_shapes:
        set_input_shapes(cut, input_shapes)
    ir.infer_types(cut)  # the new inputs and outputs get the types inference finds
    try:
        ir.extract(cut, inputs, outputs)
    except ir.ExtractError as exc:
        raise RewriteError(str(exc)) from None
    problem = ir.check_model(cut)
    if problem is not None:
        raise RewriteError(f"the extracted model fails onnx's checker: {problem}")
    return cut


def verify_extracted(
    original: ModelLike,
    extracted: ir.Model,
    *,
    examples: int = 20,
    seed: int = 0,
    progress: VerifyProgress | None = None,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
) -> VerifyResult:
    """Check on generated inputs of `original` that `extracted` computes its values.

    The original runs up to the extracted model's inputs, the extracted model runs on those
    values, and its outputs are compared with the original's values of the same names (by
    the verifier's criterion), on inputs generated for the original (as `rewrite --verify`
    generates them; `input_shapes` as given to `extract`). Outputs are named
    `extracted/NAME` in the table.
    """
    from rewriter.verification import check_equivalence

    source = as_model(original)
    if input_shapes:
        set_input_shapes(source, input_shapes)
    graph_inputs = [value.name for value in source.graph.inputs if not value.is_initializer()]
    cut_inputs = [value.name for value in extracted.graph.inputs]
    cut_outputs = [value.name for value in extracted.graph.outputs]
    upstream = extract(source, graph_inputs, cut_inputs)
    reference = _renamed_outputs(extract(source, graph_inputs, cut_outputs))
    composed = onnx.compose.merge_models(
        ir.to_onnx(upstream),
        ir.to_onnx(extracted),
        io_map=[(name, name) for name in cut_inputs],
        prefix2=_PREFIX,
    )
    chained = ir.from_onnx(composed, base_dir=source.base_dir)
    return check_equivalence(
        reference,
        chained,
        examples=examples,
        seed=seed,
        save_counterexample=False,
        progress=progress,
    )


def _renamed_outputs(model: ir.Model) -> ir.Model:
    """`model` with each output `y` passed through an Identity named `extracted/y`."""
    graph = model.graph
    for index, value in enumerate(list(graph.outputs)):
        alias = ir.Value(_PREFIX + value.name, type=value.type or ir.fact_type(value))
        graph.append(ir.Node("Identity", [value], outputs=[alias]))
        graph.set_output(index, alias)
    return model
