"""The `outline_functions` pass: one local function per repeated block, one call per block.

Chains are found exactly as for `roll_loops`. The function (domain `rewriter.outlined`) has
as inputs the carried values, then, in order of first use in the block, the values every
block reads from outside the chain and one input per constant that the blocks do not hold
with equal contents; its outputs are the carried values. Weights stay separate initializers
passed to each call (a function cannot see the graph's initializers). Constants with equal
contents in every block become `Constant` nodes in the function body (up to `_INLINE_LIMIT`
bytes; larger ones are passed in). The domain is added to the model's opset imports, and
the function imports the opsets its nodes use; the model's IR version is raised to 8 (local
functions) when lower. Calls of outlined functions are never outlined again.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging

import ir
from rewriter.engine import NO_CONTEXT, RULE_TAG, PassContext, PassResult
from rewriter.loops._body import copy_block, copy_constant
from rewriter.loops._chain import (
    Carried,
    ChainPlan,
    ColumnMode,
    ConstantColumn,
    ConstantInput,
    Invariant,
    Source,
)
from rewriter.loops._detect import detect_chain
from rewriter.loops._options import OutlineFunctionsOptions, ensure_facts
from rewriter.loops._roll import remove_dead, remove_dead_constants, take_over_names

logger = logging.getLogger(__name__)

OUTLINE_DOMAIN = "rewriter.outlined"
_INLINE_LIMIT = 1 << 16
_MAX_OUTLINES = 256
_MIN_FUNCTION_IR_VERSION = 8


class _Signature:
    """The function's inputs: what each call passes, decided per source."""

    def __init__(self, plan: ChainPlan, names: ir.NameAllocator) -> None:
        self.plan = plan
        self.names = names
        self.inputs: list[ir.Value] = []
        # Per function input: the value each block passes (one per block).
        self.arguments: list[tuple[ir.Value, ...]] = []
        self.nodes: list[ir.Node] = []
        self._resolved: dict[object, ir.Value] = {}
        self.carried = [
            self._input(slot.values[0], self._carried_arguments(index))
            for index, slot in enumerate(plan.carried)
        ]

    def _carried_arguments(self, index: int) -> tuple[ir.Value, ...]:
        slot = self.plan.carried[index]
        return (slot.init, *slot.values[:-1])

    def _input(self, like: ir.Value, arguments: tuple[ir.Value, ...]) -> ir.Value:
        value = ir.Value(self.names.fresh(like.name or "arg"))
        self.inputs.append(value)
        self.arguments.append(arguments)
        return value

    def resolve(self, source: Source) -> ir.Value | None:
        if isinstance(source, Carried):
            return self.carried[source.slot]
        key: object
        if isinstance(source, Invariant):
            key = ("invariant", source.value)
        else:
            assert isinstance(source, ConstantInput), "internal inputs are wired by copy_block"
            key = ("column", source.column)
        found = self._resolved.get(key)
        if found is None:
            found = self._make(source)
            self._resolved[key] = found
        return found

    def _make(self, source: Invariant | ConstantInput) -> ir.Value:
        length = self.plan.length
        if isinstance(source, Invariant):
            return self._input(source.value, (source.value,) * length)
        column = self.plan.columns[source.column]
        inline = self._inline(column)
        if inline is not None:
            return inline
        return self._input(column.values[0], column.values)

    def _inline(self, column: ConstantColumn) -> ir.Value | None:
        """A `Constant` node in the body for equal contents small enough to copy."""
        if column.mode is not ColumnMode.EQUAL:
            return None
        chosen = column.values[1 if self.plan.shared_first else 0]
        if chosen.producer() is not None:
            node = copy_constant(chosen, self.names)
        else:
            tensor = chosen.const_value
            if tensor is None or tensor.nbytes > _INLINE_LIMIT:
                return None
            node = ir.Node(
                "Constant",
                [],
                [ir.attr_tensor("value", tensor)],
                name=self.names.fresh(f"{chosen.name}_constant"),
                outputs=[self.names.fresh(chosen.name)],
            )
        self.nodes.append(node)
        return node.outputs[0]


def _function_name(plan: ChainPlan, model: ir.Model) -> str:
    ops = list(dict.fromkeys(node.op_type for node in plan.template))
    digest = hashlib.sha256(
        "|".join(f"{n.domain}.{n.op_type}" for n in plan.template).encode()
    ).hexdigest()[:8]
    stem = "_".join(ops[:4]) + f"_x{plan.block_size}_{digest}"
    name = stem
    counter = 0
    while (OUTLINE_DOMAIN, name, "") in model.functions:
        counter += 1
        name = f"{stem}_{counter}"
    return name


def _function_opsets(model: ir.Model, nodes: list[ir.Node]) -> dict[str, int]:
    opsets: dict[str, int] = {}
    for node in nodes:
        domain = ir.schemas.normalize_domain(node.domain)
        version = model.opset_imports.get(domain)
        if version is None and domain == "":
            version = model.opset_imports.get("ai.onnx")
        if version is not None:
            opsets[domain] = version
    return opsets


def outline_chain(plan: ChainPlan, model: ir.Model, names: ir.NameAllocator) -> ir.Function:
    """Replace the chain's blocks by calls of one new local function."""
    signature = _Signature(plan, names)
    created, outputs = copy_block(plan, names, signature.resolve)
    results = [outputs[slot.offset][slot.output] for slot in plan.carried]
    body_nodes = [*signature.nodes, *created]
    name = _function_name(plan, model)
    body = ir.Graph(signature.inputs, results, body_nodes, name=name)
    function = ir.Function(
        OUTLINE_DOMAIN, name, body, opset_imports=_function_opsets(model, body_nodes)
    )
    model.functions[function.identifier] = function
    model.opset_imports.setdefault(OUTLINE_DOMAIN, 1)
    model.ir_version = max(model.ir_version, _MIN_FUNCTION_IR_VERSION)
    _replace_blocks(plan, signature, function, names)
    return function


def _replace_blocks(
    plan: ChainPlan, signature: _Signature, function: ir.Function, names: ir.NameAllocator
) -> None:
    graph = plan.graph
    previous: list[ir.Value] = []
    replaced: list[tuple[list[ir.Value], list[ir.Value]]] = []
    for k, block in enumerate(plan.blocks):
        arguments = [per_block[k] for per_block in signature.arguments]
        if previous:
            arguments[: len(previous)] = previous  # the previous call's results
        olds = [slot.values[k] for slot in plan.carried]
        news = take_over_names(olds, names)
        call = ir.Node(
            function.name,
            arguments,
            domain=function.domain,
            name=names.fresh(f"{block[0].name or function.name}_call"),
            outputs=news,
        )
        call.set_metadata(RULE_TAG, "outline_functions")
        graph.insert_after(block[-1], [call])
        replaced.append((olds, news))
        previous = news
    for olds, news in replaced:
        for old, new in zip(olds, news, strict=True):
            old.replace_all_uses_with(new, replace_graph_outputs=True)
    remove_dead(graph, plan.nodes())
    remove_dead_constants(graph, [v for column in plan.columns for v in column.values])


def outline_functions(
    model: ir.Model,
    options: OutlineFunctionsOptions | None = None,
    context: PassContext = NO_CONTEXT,
) -> PassResult:
    """Outline every chain of at least `min_repeats` equal blocks into function calls."""
    chosen = options or OutlineFunctionsOptions()
    detect = dataclasses.replace(chosen.detect(), skip_domains=(OUTLINE_DOMAIN,))
    ensure_facts(model)
    names = ir.NameAllocator(model)
    touched: dict[ir.Node, None] = {}
    outlined = 0
    for _ in range(_MAX_OUTLINES):
        detection = detect_chain(model.graph, detect)
        for reason in detection.refusals:
            logger.debug("outline_functions: candidate refused: %s", reason)
        plan = detection.plan
        if plan is None:
            break
        function = outline_chain(plan, model, names)
        logger.info(
            "outline_functions: %d blocks of %d nodes -> %s.%s",
            plan.length,
            plan.block_size,
            function.domain,
            function.name,
        )
        for node in model.graph:
            if node.domain == function.domain and node.op_type == function.name:
                touched[node] = None
        outlined += 1
    return PassResult("outline_functions", outlined > 0, tuple(touched), outlined)
