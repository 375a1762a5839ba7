"""`split(model, stages)`: pipeline stages cut on the topological order, and their chain.

The main graph's nodes, in order, are cut into `stages` runs so that the costliest run is as
cheap as the cuts allow (an exact linear partition over prefix sums). Cost is either the
bytes of the weights a node is the first to read (`params`: a weight counts once, with its
first reader) or an estimate of its floating-point operations (`flops`, see `_flops`). Each
run becomes a model with `ir.extract`: its inputs are the original's inputs and earlier
runs' values it reads, its outputs the values later runs or the original's outputs read, all
by their original names. Weights stay lazy: a stage model reads and writes only its own.

The stages are saved and chained back with `_pipeline` (`write_pipeline`, `load_pipeline`).
"""

from __future__ import annotations

import dataclasses
import itertools
import os
from collections.abc import Mapping, Sequence

import onnx

import ir
from rewriter._errors import OptionError
from rewriter.api import as_model, node_flops, set_input_shapes
from rewriter.surgery._extract import extract

ModelLike = str | os.PathLike[str] | ir.Model | onnx.ModelProto


@dataclasses.dataclass(frozen=True)
class Stage:
    """One stage: its model, the values it takes and gives (by name) and its cost."""

    model: ir.Model
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    cost: int
    nodes: int


def split(
    model: ModelLike,
    stages: int,
    *,
    balance: str = "params",
    input_shapes: Mapping[str, Sequence[int]] | None = None,
) -> list[Stage]:
    """The model cut into `stages` consecutive stages of balanced cost.

    Args:
        model: a path (weights stay on disk), a ModelProto or an IR model.
        stages: how many stages (at least 1, at most the number of nodes).
        balance: "params" (weight bytes) or "flops" (estimated operations).
        input_shapes: fix graph inputs' shapes first (see `set_input_shapes`): the stages
            take them, and FLOPs are counted at those sizes.

    Raises:
        RewriteError: fewer nodes than stages, or an unknown `balance`.
    """
    source = as_model(model)
    if input_shapes:
        set_input_shapes(source, input_shapes)
    ir.infer_types(source)  # facts for the flops estimate and the stages' boundary types
    nodes = list(source.graph)
    if stages < 1 or stages > len(nodes):
        raise OptionError("stages", f"the model has {len(nodes)} nodes", value=str(stages))
    costs = _costs(source, nodes, balance)
    cuts = _balanced_cuts(costs, stages)
    plans = _boundaries(source, nodes, cuts)
    # A path is read again per stage (weights stay on disk); anything else is copied.
    origin = model if isinstance(model, str | os.PathLike) else source
    result = []
    for stage, (inputs, outputs) in enumerate(plans):
        start, end = cuts[stage], cuts[stage + 1]
        cut = extract(origin, inputs, outputs, input_shapes=input_shapes)
        result.append(Stage(cut, tuple(inputs), tuple(outputs), sum(costs[start:end]), end - start))
    return result


def _costs(model: ir.Model, nodes: Sequence[ir.Node], balance: str) -> list[int]:
    if balance == "flops":
        return [node_flops(node) for node in nodes]
    if balance != "params":
        raise OptionError("balance", "expected params or flops", value=repr(balance))
    counted: set[ir.Value] = set()
    costs = []
    for node in nodes:
        cost = 0
        for value in node.reads():
            if value in counted or not _is_stored_constant(value):
                continue
            counted.add(value)
            tensor = value.const_value
            cost += tensor.nbytes if tensor is not None else 0
        costs.append(cost)
    return costs


def _is_stored_constant(value: ir.Value) -> bool:
    """An initializer, dense or sparse: each stage that reads it carries its own copy."""
    return value.is_initializer() or value.is_sparse_initializer()


def _balanced_cuts(costs: Sequence[int], stages: int) -> list[int]:
    """Cut positions [0, c1, ..., len] minimizing the costliest run (each run non-empty).

    The smallest feasible maximum is found by bisection over the answer, with a greedy
    check: fill each run while it stays within the bound. Runs are then filled greedily
    under that bound, leaving at least one node for each remaining run.
    """
    count = len(costs)
    prefix = [0]
    for cost in costs:
        prefix.append(prefix[-1] + cost)

    def runs_needed(bound: int) -> int:
        runs, start = 1, 0
        for index in range(1, count + 1):
            if prefix[index] - prefix[start] > bound:
                runs += 1
                start = index - 1
        return runs

    low, high = max(costs, default=0), prefix[-1]
    while low < high:
        middle = (low + high) // 2
        if runs_needed(middle) <= stages:
            high = middle
        else:
            low = middle + 1
    cuts = [0]
    for remaining in range(stages - 1, 0, -1):
        start = cuts[-1]
        end = start + 1
        # Extend while within the bound and while enough nodes stay for the other runs.
        while end < count - remaining and prefix[end + 1] - prefix[start] <= low:
            end += 1
        cuts.append(end)
    cuts.append(count)
    return cuts


def _boundaries(
    model: ir.Model, nodes: Sequence[ir.Node], cuts: Sequence[int]
) -> list[tuple[list[str], list[str]]]:
    """Per stage, the names of the values it reads from outside and those it must give."""
    stage_of: dict[ir.Node, int] = {}
    for stage, (start, end) in enumerate(itertools.pairwise(cuts)):
        for node in nodes[start:end]:
            stage_of[node] = stage
    count = len(cuts) - 1
    inputs: list[dict[str, None]] = [{} for _ in range(count)]
    outputs: list[dict[str, None]] = [{} for _ in range(count)]
    for node, stage in stage_of.items():
        for value in node.reads():
            producer = value.producer()
            if producer is None:
                if not _is_stored_constant(value) and value.graph is model.graph:
                    inputs[stage][value.name] = None
            elif stage_of.get(producer, stage) != stage:
                inputs[stage][value.name] = None
                outputs[stage_of[producer]][value.name] = None
    for value in model.graph.outputs:
        producer = value.producer()
        if producer is not None:
            outputs[stage_of[producer]][value.name] = None
    return [(list(i), list(o)) for i, o in zip(inputs, outputs, strict=True)]
