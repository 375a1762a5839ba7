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

import ir
from rewriter._errors import OptionError, RewriteError
from rewriter.api import as_model, set_input_shapes
from rewriter.surgery._validity import check_valid, give_types

if TYPE_CHECKING:
    from rewriter.verification import VerifyProgress, VerifyResult

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
        raise OptionError("outputs", "extract needs at least one output")
    cut = as_model(model)
    if input_shapes:
        set_input_shapes(cut, input_shapes)
    ir.infer_types(cut)  # the new inputs and outputs get the types inference finds
    try:
        ir.extract(cut, inputs, outputs)
    except ir.ExtractError as exc:
        raise OptionError(exc.argument, exc.problem) from None
    give_types(cut, "extract")
    check_valid(cut, "the extracted model")
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
    from rewriter.verification import InputOptions, VerifyOptions, check_equivalence

    source = as_model(original)
    if input_shapes:
        set_input_shapes(source, input_shapes)
    graph_inputs = [value.name for value in source.graph.inputs if not value.is_initializer()]
    cut_inputs = [value.name for value in extracted.graph.inputs]
    cut_outputs = [value.name for value in extracted.graph.outputs]
    upstream = extract(source, graph_inputs, cut_inputs)
    reference = _renamed_outputs(extract(source, graph_inputs, cut_outputs), cut_outputs)
    # The original up to the cut's inputs, then the cut on those values (names the
    # upstream part already uses get a prefix in the cut, subgraphs' outer reads included).
    connections = [ir.Connection(name, name) for name in cut_inputs]
    try:
        chained = ir.graft(upstream, as_model(extracted), connections)
    except ir.GraftError as exc:
        raise RewriteError(f"cannot chain the extracted model after the original: {exc}") from None
    chained = _renamed_outputs(chained, cut_outputs)
    options = VerifyOptions(
        InputOptions(examples, seed), save_counterexample=False, progress=progress
    )
    return check_equivalence(reference, chained, options)


def _renamed_outputs(model: ir.Model, names: Sequence[str]) -> ir.Model:
    """`model` with its k-th output passed through an Identity named `extracted/names[k]`.

    Both sides of the comparison get the same output names, whatever the graft renamed.
    """
    graph = model.graph
    for index, (value, name) in enumerate(zip(list(graph.outputs), names, strict=True)):
        alias = ir.Value(_PREFIX + name, type=value.type or ir.fact_type(value))
        graph.append(ir.Node("Identity", [value], outputs=[alias]))
        graph.set_output(index, alias)
    return model
