"""Copying a chain's template block into a new graph (a Loop body or a function body).

The caller decides what every non-internal input becomes (a body input, an outer-scope
reference, a `Gather` of stacked weights, a copied `Constant`); internal inputs are wired to
the copies. Copies get fresh names derived from the template's names and keep its
attributes, doc strings and metadata.
"""

from __future__ import annotations

from collections.abc import Callable

import ir
from rewriter.loops._chain import ChainPlan, Internal, Source

Resolver = Callable[[Source], ir.Value | None]

# Metadata the loop passes attach to the nodes they create; never copied along with a node.
LOOP_METADATA_PREFIX = "rewriter.loops."


def fresh_value(
    names: ir.NameAllocator, original: ir.Value, type_: ir.Type | None = None
) -> ir.Value:
    """A new value named after `original` (an anonymous one stays anonymous)."""
    name = names.fresh(original.name) if original.name else ""
    return ir.Value(name, type=type_)


def copy_node(
    node: ir.Node,
    inputs: list[ir.Value | None],
    names: ir.NameAllocator,
) -> ir.Node:
    """A detached copy of `node` reading `inputs`, with fresh output and node names."""
    outputs = [fresh_value(names, out) for out in node.outputs]
    return ir.Node(
        node.op_type,
        inputs,
        list(node.attributes.values()),
        domain=node.domain,
        overload=node.overload,
        name=names.fresh(node.name or node.op_type),
        outputs=outputs,
        doc_string=node.doc_string,
        metadata_props={
            key: text
            for key, text in node.metadata_props.items()
            if not key.startswith(LOOP_METADATA_PREFIX)
        },
    )


def copy_constant(value: ir.Value, names: ir.NameAllocator) -> ir.Node:
    """A copy of the `Constant` node producing `value`."""
    producer = value.producer()
    assert producer is not None, "copying a Constant output"
    assert producer.op_type == "Constant", "copying a Constant output"
    return copy_node(producer, [], names)


def copy_block(
    plan: ChainPlan, names: ir.NameAllocator, resolve: Resolver
) -> tuple[list[ir.Node], list[tuple[ir.Value, ...]]]:
    """Copy the template block; returns the new nodes and each position's new outputs."""
    created: list[ir.Node] = []
    outputs: list[tuple[ir.Value, ...]] = []
    for node, row in zip(plan.template, plan.sources, strict=True):
        inputs: list[ir.Value | None] = []
        for source in row:
            if isinstance(source, Internal):
                inputs.append(outputs[source.offset][source.output])
            else:
                inputs.append(resolve(source))
        copy = copy_node(node, inputs, names)
        created.append(copy)
        outputs.append(copy.outputs)
    return created, outputs
