"""Rolling a validated chain into one ONNX `Loop`, and the `roll_loops` pass.

The Loop runs `M = number of blocks` iterations with a constant-true condition. Its body is a
copy of the template block with inputs `(iter_num, cond_in, carried...)` and outputs
`(cond_out, carried...)`; `cond_out` is `Identity(cond_in)`. Constants are handled per
column (see `_chain.ColumnMode`): one shared value is read from the outer scope, equal
`Constant` nodes are copied into the body once (equal initializers are read from the outer
scope), and different weights are stacked along a new leading axis into one outer
initializer and picked with `Gather(stacked, iter_num, axis=0)`. Values every block reads
from outside the chain are outer-scope references. Carried values are declared with their
element type and rank but unknown dimensions, so their shape may change per iteration.

Two metadata entries make `unroll_loops` an exact inverse: a `Gather` of stacked weights
records the original constants' names (`rewriter.loops.unstack`), and a body node whose
first-iteration value still exists outside (a shared first block, see `_extend`, leaves the
nodes read outside the chain and what they need) records that value's names
(`rewriter.loops.iteration0`).
"""

from __future__ import annotations

import json
import logging
from typing import Any

import numpy as np

import ir
from rewriter.engine import NO_CONTEXT, RULE_TAG, PassContext, PassResult, const_array
from rewriter.loops._body import copy_block, copy_constant
from rewriter.loops._chain import (
    Carried,
    CarriedSlot,
    ChainPlan,
    ColumnMode,
    ConstantColumn,
    ConstantInput,
    Invariant,
    Source,
)
from rewriter.loops._detect import detect_chain
from rewriter.loops._options import DetectOptions, RollLoopsOptions, ensure_facts

logger = logging.getLogger(__name__)

UNSTACK_KEY = "rewriter.loops.unstack"
ITERATION0_KEY = "rewriter.loops.iteration0"
_MAX_ROLLS = 256


def carried_type(slot: CarriedSlot) -> ir.TensorType:
    """Element type and rank of a carried value; dimensions unknown (they may change)."""
    shape = None if slot.rank is None else (None,) * slot.rank
    return ir.TensorType(slot.dtype, shape)


def stacking_refusal(plan: ChainPlan) -> str | None:
    """Why the plan's differing constants cannot be stacked (None when they can)."""
    for column in plan.columns:
        if column.mode is not ColumnMode.STACKED:
            continue
        found = column.values[0].const_value
        dtype = found.dtype if found is not None else None
        if dtype is None:
            array = _constant_array(column.values[0])
            dtype = ir.DataType.from_numpy(array.dtype)
        if dtype == ir.DataType.STRING or dtype.bitwidth < 8:
            return f"cannot stack {dtype.onnx_name} constants ({column.values[0].name!r})"
    return None


def _constant_array(value: ir.Value) -> np.ndarray[Any, Any]:
    array = const_array(value)
    assert array is not None, "a constant column holds constants"
    return np.asarray(array)


def stack_column(column: ConstantColumn, names: ir.NameAllocator) -> ir.Value:
    """One initializer holding the column's constants stacked along a new leading axis."""
    first = column.values[0]
    tensor = first.const_value
    dtype = tensor.dtype if tensor is not None else None
    stacked = np.stack([_constant_array(v) for v in column.values])
    name = names.fresh(f"{first.name}_stacked")
    return ir.Value(name, const_value=ir.NumpyTensor(stacked, name, dtype=dtype))


def _unstack_note(column: ConstantColumn) -> str:
    from_constants = all(
        v.producer() is not None and v.producer().op_type == "Constant"  # type: ignore[union-attr]
        for v in column.values
    )
    record = {"constant_nodes": from_constants, "names": [v.name for v in column.values]}
    return json.dumps(record, sort_keys=True)


class _BodyInputs:
    """Resolves the template's non-internal inputs inside the Loop body."""

    def __init__(self, plan: ChainPlan, names: ir.NameAllocator) -> None:
        self.plan = plan
        self.names = names
        self.iter_num = ir.Value(names.fresh("iter_num"), type=ir.TensorType(ir.DataType.INT64, ()))
        self.cond_in = ir.Value(names.fresh("cond_in"), type=ir.TensorType(ir.DataType.BOOL, ()))
        self.carried = [
            ir.Value(names.fresh(f"{slot.init.name}_carried"), type=carried_type(slot))
            for slot in plan.carried
        ]
        self.nodes: list[ir.Node] = []
        self.initializers: list[ir.Value] = []
        self._columns: dict[int, ir.Value] = {}

    def resolve(self, source: Source) -> ir.Value | None:
        if isinstance(source, Carried):
            return self.carried[source.slot]
        if isinstance(source, Invariant):
            return source.value
        assert isinstance(source, ConstantInput), "internal inputs are wired by copy_block"
        found = self._columns.get(source.column)
        if found is None:
            found = self._column_value(self.plan.columns[source.column])
            self._columns[source.column] = found
        return found

    def _column_value(self, column: ConstantColumn) -> ir.Value:
        template_index = 1 if self.plan.shared_first else 0
        chosen = column.values[template_index]
        if column.mode is ColumnMode.SAME:
            return chosen
        if column.mode is ColumnMode.EQUAL:
            producer = chosen.producer()
            if producer is None:
                return chosen  # an initializer: read from the outer scope
            copy = copy_constant(chosen, self.names)
            self.nodes.append(copy)
            return copy.outputs[0]
        stacked = stack_column(column, self.names)
        self.initializers.append(stacked)
        picked = ir.Value(self.names.fresh(f"{chosen.name}_picked"))
        gather = ir.Node(
            "Gather",
            [stacked, self.iter_num],
            [ir.attr_int("axis", 0)],
            name=self.names.fresh(f"{chosen.name}_pick"),
            outputs=[picked],
        )
        gather.set_metadata(UNSTACK_KEY, _unstack_note(column))
        self.nodes.append(gather)
        return picked


def _loop_name(plan: ChainPlan, names: ir.NameAllocator) -> str:
    """`<common prefix of the blocks' first node names>_loop` (`/model/encoder/layer_loop`).

    The first block is left out: it may be a shared one whose nodes belong to other code.
    """
    firsts = [block[0].name for block in plan.blocks[1:] if block[0].name]
    stem = firsts[0] if firsts else ""
    for name in firsts[1:]:
        while not name.startswith(stem):
            stem = stem[:-1]
    stem = stem.rstrip("0123456789._/-")
    return names.fresh(f"{stem}_loop" if stem else "loop")


def build_body(
    plan: ChainPlan, names: ir.NameAllocator
) -> tuple[ir.Graph, list[ir.Node], list[ir.Value]]:
    """The Loop body, the copies of the template nodes, and the outer initializers it needs.

    The copies are listed by template position; the initializers are not yet in the graph.
    """
    inputs = _BodyInputs(plan, names)
    created, outputs = copy_block(plan, names, inputs.resolve)
    cond_out = ir.Value(names.fresh("cond_out"), type=ir.TensorType(ir.DataType.BOOL, ()))
    identity = ir.Node(
        "Identity", [inputs.cond_in], name=names.fresh("cond_pass"), outputs=[cond_out]
    )
    carried_out = []
    for slot in plan.carried:
        value = outputs[slot.offset][slot.output]
        value.type = carried_type(slot)
        carried_out.append(value)
    body = ir.Graph(
        [inputs.iter_num, inputs.cond_in, *inputs.carried],
        [cond_out, *carried_out],
        [*inputs.nodes, *created, identity],
        name=names.fresh("loop_body"),
    )
    return body, created, inputs.initializers


def _note_first_iteration(plan: ChainPlan, copies: list[ir.Node]) -> None:
    """Record, on body nodes, the outer values that already hold their first-iteration value.

    Only a shared first block leaves nodes behind (those read outside the chain and what
    they need); `unroll_loops` reuses them instead of copying the body node again.
    """
    for node, copy in zip(plan.blocks[0], copies, strict=True):
        if node.graph is plan.graph:
            copy.set_metadata(ITERATION0_KEY, json.dumps([out.name for out in node.outputs]))


def _scalar_initializer(
    graph: ir.Graph, names: ir.NameAllocator, stem: str, array: Any
) -> ir.Value:
    name = names.fresh(stem)
    value = ir.Value(name, const_value=ir.NumpyTensor(np.asarray(array), name))
    graph.add_initializer(value)
    return value


def take_over_names(olds: list[ir.Value], names: ir.NameAllocator) -> list[ir.Value]:
    """New values that take the names (and declared types) of `olds`, which get fresh names."""
    news = []
    for old in olds:
        original = old.name
        old.name = names.fresh(f"{original}_replaced")
        news.append(ir.Value(original, type=old.type))
    return news


def remove_dead(graph: ir.Graph, nodes: list[ir.Node]) -> int:
    """Remove, in reverse order, those of `nodes` whose outputs nothing reads any more."""
    removed = 0
    for node in reversed(nodes):
        if node.graph is not graph:
            continue
        if any(out.num_uses() or out.is_graph_output() for out in node.outputs):
            continue
        graph.remove(node)
        removed += 1
    return removed


def remove_dead_constants(graph: ir.Graph, values: list[ir.Value]) -> None:
    """Remove the `Constant` nodes and initializers among `values` that nothing reads now."""
    for value in dict.fromkeys(values):
        if value.num_uses() or value.is_graph_output() or value.is_graph_input():
            continue
        producer = value.producer()
        if producer is not None:
            if producer.graph is graph and producer.op_type == "Constant":
                graph.remove(producer)
        elif value.is_initializer() and value.graph is graph:
            graph.remove_initializer(value.name)


def roll_chain(plan: ChainPlan, names: ir.NameAllocator, tag: str = "roll_loops") -> ir.Node:
    """Replace the chain by one Loop (the plan must be fresh: the graph unchanged since)."""
    graph = plan.graph
    body, copies, initializers = build_body(plan, names)
    for value in initializers:
        graph.add_initializer(value)
    trip_count = _scalar_initializer(graph, names, "trip_count", np.int64(plan.length))
    condition = _scalar_initializer(graph, names, "loop_cond", np.bool_(True))
    finals = [slot.values[-1] for slot in plan.carried]
    outputs = take_over_names(finals, names)
    loop = ir.Node(
        "Loop",
        [trip_count, condition, *(slot.init for slot in plan.carried)],
        [ir.attr_graph("body", body)],
        name=_loop_name(plan, names),
        outputs=outputs,
    )
    loop.set_metadata(RULE_TAG, tag)
    graph.insert_after(plan.blocks[-1][-1], [loop])
    for old, new in zip(finals, outputs, strict=True):
        old.replace_all_uses_with(new, replace_graph_outputs=True)
    remove_dead(graph, plan.nodes())
    remove_dead_constants(graph, [v for column in plan.columns for v in column.values])
    _note_first_iteration(plan, copies)
    return loop


def roll_loops(
    model: ir.Model, options: RollLoopsOptions | None = None, context: PassContext = NO_CONTEXT
) -> PassResult:
    """Roll every chain of at least `min_repeats` equal blocks in the main graph into a Loop.

    `Constant` nodes do not count towards `min_block_nodes`. Chains are found by
    `detect_chain`; each roll is logged with its size, and refused candidates with their
    reasons at debug level.
    """
    detect = (options or RollLoopsOptions()).detect()
    ensure_facts(model)
    names = ir.NameAllocator(model)
    touched: dict[ir.Node, None] = {}
    rolled = 0
    for _ in range(_MAX_ROLLS):
        plan = _next_plan(model.graph, detect)
        if plan is None:
            break
        before = len(model.graph)
        loop = roll_chain(plan, names)
        logger.info(
            "roll_loops: %d blocks of %d nodes -> %s (%d nodes fewer in the main graph)",
            plan.length,
            plan.block_size,
            loop.name,
            before - len(model.graph),
        )
        touched[loop] = None
        for out in loop.outputs:
            touched.update(dict.fromkeys(out.users()))
        rolled += 1
    return PassResult("roll_loops", rolled > 0, tuple(n for n in touched if n.graph), rolled)


def _next_plan(graph: ir.Graph, options: DetectOptions) -> ChainPlan | None:
    detection = detect_chain(graph, options)
    for reason in detection.refusals:
        logger.debug("roll_loops: candidate refused: %s", reason)
    plan = detection.plan
    if plan is None:
        return None
    refusal = stacking_refusal(plan)
    if refusal is not None:
        logger.info("roll_loops: not rolling a chain of %d blocks: %s", plan.length, refusal)
        return None
    return plan
