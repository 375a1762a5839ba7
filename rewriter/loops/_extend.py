"""Extending a chain backwards by matching the block before it onto the template.

Exporters often let the first layer reuse values the code before the stack already computed
(TorchScript's BERT reads the batch and sequence sizes that the attention-mask code took from
the embeddings output, where every later layer takes them from its own input). Such a first
layer is shorter in the node sequence, so the periodic search starts the chain at the second
layer. `walk_previous_block` matches the template (the chain's first block) backwards from
the chain's input: each template node is mapped onto the producer of the corresponding value,
wherever that producer sits. The matched block is then validated with `share_first`: its
nodes may be read outside the chain (they stay), and the Loop recomputes them.
"""

from __future__ import annotations

import ir
from rewriter.loops._chain import (
    Carried,
    ChainPlan,
    ConstantInput,
    Internal,
    Invariant,
    Source,
    analyze_chain,
)
from rewriter.loops._signature import StructureCache, is_constant, is_constant_node

_MAX_EXTENSIONS = 8


class _Walk:
    """Assigns template positions to graph nodes, walking from values to their producers."""

    def __init__(self, plan: ChainPlan) -> None:
        self.plan = plan
        self.template = plan.blocks[0]
        self.in_chain = dict.fromkeys(plan.nodes())
        self.assigned: list[ir.Node | None] = [None] * plan.block_size
        self.inits: dict[int, ir.Value] = {}
        self.queue: list[int] = []

    def assign(self, offset: int, value: ir.Value, output: int) -> bool:
        producer = value.producer()
        if producer is None or producer.graph is not self.plan.graph:
            return False
        if is_constant_node(producer) or producer in self.in_chain or value.index != output:
            return False
        if producer.op_type != self.template[offset].op_type:
            return False
        known = self.assigned[offset]
        if known is None:
            self.assigned[offset] = producer
            self.queue.append(offset)
            return True
        return known is producer

    def follow(self, source: Source, value: ir.Value | None) -> bool:
        if source is None:
            return value is None
        if value is None:
            return False
        if isinstance(source, Internal):
            return self.assign(source.offset, value, source.output)
        if isinstance(source, Carried):
            return self.inits.setdefault(source.slot, value) is value
        if isinstance(source, ConstantInput):
            return is_constant(value)
        assert isinstance(source, Invariant), "every source kind is handled"
        return value is source.value

    def run(self) -> tuple[ir.Node, ...] | None:
        for slot in self.plan.carried:
            if not self.assign(slot.offset, slot.init, slot.output):
                return None
        while self.queue:
            offset = self.queue.pop()
            node = self.assigned[offset]
            assert node is not None, "queued positions are assigned"
            row = self.plan.sources[offset]
            if len(node.inputs) != len(row):
                return None
            for source, value in zip(row, node.inputs, strict=True):
                if not self.follow(source, value):
                    return None
        found = tuple(node for node in self.assigned if node is not None)
        return found if len(found) == len(self.assigned) else None


def walk_previous_block(plan: ChainPlan) -> tuple[ir.Node, ...] | None:
    """The block before the chain, matched backwards from the chain's input, if any."""
    if plan.shared_first:
        return None  # the first block is already a matched one with shared nodes
    return _Walk(plan).run()


def extend_backward(
    plan: ChainPlan, max_carried: int, cache: StructureCache | None = None
) -> ChainPlan:
    """Prepend matching blocks while the block before the chain matches the template."""
    for _ in range(_MAX_EXTENSIONS):
        previous = walk_previous_block(plan)
        if previous is None:
            return plan
        extended = analyze_chain(
            plan.graph,
            (previous, *plan.blocks),
            share_first=True,
            max_carried=max_carried,
            cache=cache,
        )
        if not isinstance(extended, ChainPlan):
            return plan
        plan = extended
    return plan
