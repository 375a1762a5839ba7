"""The `unroll_loops` pass: replicate the body of small constant-trip-count Loops.

A Loop is unrolled when its trip count is a constant between 1 and `max_trip_count`, its
condition is absent or a constant true, its body's `cond_out` is `cond_in` (directly or
through `Identity`) or a constant true, and no body node holds a subgraph. Each iteration
copies the body nodes the outputs need, with `iter_num` replaced by the constant `i` and the
carried values chained; scan outputs are stacked with `Unsqueeze` + `Concat`.
`Gather(stacked, iter_num, axis=0)` of an outer constant becomes the `i`-th slice directly
(an initializer, or a `Constant` node when `roll_loops` recorded that the slices were
`Constant` nodes, under their original names when free). A body node carrying
`rewriter.loops.iteration0` is not copied in the first iteration: the named outer values
(which `roll_loops` found computing the same thing) are used. So unrolling a rolled chain
gives back the original node count.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Iterator
from typing import Any

import numpy as np

import ir
from rewriter.engine import NO_CONTEXT, PassContext, PassResult, const_array, is_const
from rewriter.loops._body import copy_node
from rewriter.loops._options import UnrollLoopsOptions
from rewriter.loops._roll import ITERATION0_KEY, UNSTACK_KEY, remove_dead_constants
from rewriter.loops._signature import has_subgraph, node_label

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True, slots=True)
class UnrollPlan:
    """A Loop that can be unrolled."""

    loop: ir.Node
    body: ir.Graph
    trip_count: int
    carried: int
    scans: int
    opset: int


def _trip_count(value: ir.Value | None) -> int | str:
    if value is None:
        return "the trip count is absent"
    array = const_array(value)
    if array is None:
        return "the trip count is not a constant"
    if array.size != 1 or array.dtype.kind not in "iu":
        return "the trip count is not an integer scalar"
    return int(array.reshape(-1)[0])


def _is_true(value: ir.Value) -> bool:
    array = const_array(value)
    return array is not None and array.size > 0 and bool(np.all(array))


def _cond_passes_through(body: ir.Graph) -> bool:
    cond_in, cond_out = body.inputs[1], body.outputs[0]
    if cond_out is cond_in or _is_true(cond_out):
        return True
    producer = cond_out.producer()
    return (
        producer is not None
        and producer.op_type == "Identity"
        and len(producer.inputs) == 1
        and producer.inputs[0] is cond_in
    )


def plan_unroll(loop: ir.Node, max_trip_count: int, opset: int) -> UnrollPlan | str:
    """Check one Loop; returns the plan or why it is not unrolled."""
    attr = loop.attributes.get("body")
    body = attr.value if attr is not None else None
    if not isinstance(body, ir.Graph):
        return "the Loop has no body graph"
    trip = _trip_count(loop.inputs[0] if loop.inputs else None)
    if isinstance(trip, str):
        return trip
    if not 1 <= trip <= max_trip_count:
        return f"trip count {trip} is outside 1..{max_trip_count}"
    cond = loop.inputs[1] if len(loop.inputs) > 1 else None
    if cond is not None and not _is_true(cond):
        return "the condition is not a constant true"
    carried = len(loop.inputs) - 2
    if len(body.inputs) != carried + 2 or len(body.outputs) < carried + 1:
        return "the body's inputs and outputs do not match the Loop's"
    if not _cond_passes_through(body):
        return "the body computes its own condition (an early exit)"
    for node in body:
        if has_subgraph(node):
            return f"body node {node_label(node)} holds a subgraph"
    scans = len(body.outputs) - 1 - carried
    return UnrollPlan(loop, body, trip, carried, scans, opset)


class _Unroller:
    """Applies one `UnrollPlan`."""

    def __init__(self, plan: UnrollPlan, names: ir.NameAllocator) -> None:
        self.plan = plan
        self.names = names
        graph = plan.loop.graph
        assert graph is not None, "the Loop is in a graph"
        self.graph = graph
        self.created: list[ir.Node] = []
        self.produced: dict[ir.Value, None] = {}
        self.body_constants: dict[ir.Value, ir.Value] = {}
        self.slices: dict[tuple[ir.Value, int], ir.Value] = {}
        self.scalars: dict[tuple[str, int], ir.Value] = {}
        self.stacked: list[ir.Value] = []
        self.order = ir.topological_order(plan.body)
        self.outer = {v.name: v for v in graph.values() if v.name}
        self._descendants: dict[ir.Node, None] | None = None

    # constants ------------------------------------------------------------------------------
    def _initializer(
        self, stem: str, array: np.ndarray[Any, Any], dtype: ir.DataType | None = None
    ) -> ir.Value:
        """A new constant: an initializer, or a `Constant` node in a function body."""
        name = self._claim(stem)
        tensor = ir.NumpyTensor(array, name, dtype=dtype)
        if isinstance(self.graph.owner, ir.Function):
            return self._constant_node(name, tensor)
        value = ir.Value(name, const_value=tensor)
        self.graph.add_initializer(value)
        return value

    def _constant_node(self, name: str, tensor: ir.Tensor) -> ir.Value:
        node = ir.Node(
            "Constant",
            [],
            [ir.attr_tensor("value", tensor)],
            name=self.names.fresh(f"{name}_constant"),
            outputs=[name],
        )
        self._add(node)
        return node.outputs[0]

    def _claim(self, wanted: str) -> str:
        if not self.names.is_used(wanted):
            self.names.reserve(wanted)
            return wanted
        return self.names.fresh(wanted)

    def scalar(self, kind: str, i: int) -> ir.Value:
        key = (kind, i)
        if key not in self.scalars:
            body = self.plan.body
            if kind == "iter":
                array = np.array(i, dtype=np.int64)
                self.scalars[key] = self._initializer(f"{body.inputs[0].name}_{i}", array)
            else:
                self.scalars[key] = self._initializer(f"{body.inputs[1].name}_true", np.array(True))
        return self.scalars[key]

    def body_constant(self, value: ir.Value) -> ir.Value:
        if value not in self.body_constants:
            tensor = value.const_value
            assert tensor is not None, "body initializers hold tensors"
            array = np.asarray(tensor.numpy())
            self.body_constants[value] = self._initializer(value.name, array, tensor.dtype)
        return self.body_constants[value]

    def unstacked(self, gather: ir.Node, i: int) -> ir.Value | None:
        """The `i`-th slice for `Gather(outer constant, iter_num, axis=0)`, else None."""
        body = self.plan.body
        if gather.op_type != "Gather" or gather.domain not in ("", "ai.onnx"):
            return None
        if len(gather.inputs) != 2 or gather.inputs[1] is not body.inputs[0]:
            return None
        data = gather.inputs[0]
        if data is None or data.graph is body or not is_const(data):
            return None
        if gather.attribute("axis", 0) != 0:
            return None
        key = (data, i)
        if key not in self.slices:
            self.slices[key] = self._make_slice(gather, data, i)
            self.stacked.append(data)
        return self.slices[key]

    def _make_slice(self, gather: ir.Node, data: ir.Value, i: int) -> ir.Value:
        array = const_array(data)
        assert array is not None, "checked constant"
        piece = np.array(np.asarray(array)[i], copy=True)  # keeps 0-d slices 0-d
        dtype = data.const_value.dtype if data.const_value is not None else None
        note = _unstack_note(gather, self.plan.trip_count)
        stem = note[0][i] if note is not None else f"{data.name}_{i}"
        if note is None or not note[1]:
            return self._initializer(stem, piece, dtype)
        name = self._claim(stem)
        return self._constant_node(name, ir.NumpyTensor(piece, name, dtype=dtype))

    # iteration 0 reuse ----------------------------------------------------------------------
    def reused(self, node: ir.Node) -> list[ir.Value] | None:
        """The outer values a first-iteration node stands for (checked), if it has a note."""
        text = node.metadata_props.get(ITERATION0_KEY)
        if text is None:
            return None
        try:
            wanted = json.loads(text)
        except json.JSONDecodeError:
            return None
        if not isinstance(wanted, list) or len(wanted) != len(node.outputs):
            return None
        found = []
        for index, name in enumerate(wanted):
            value = self.outer.get(name) if isinstance(name, str) else None
            producer = value.producer() if value is not None else None
            if value is None or producer is None or value.index != index:
                return None
            if producer.op_type != node.op_type or producer in self.descendants():
                return None
            found.append(value)
        return found

    def descendants(self) -> dict[ir.Node, None]:
        if self._descendants is None:
            seen: dict[ir.Node, None] = {}
            stack = [self.plan.loop]
            while stack:
                node = stack.pop()
                for out in node.outputs:
                    for user in out.users():
                        if user.graph is self.graph and user not in seen:
                            seen[user] = None
                            stack.append(user)
            self._descendants = seen
        return self._descendants

    # iterations -----------------------------------------------------------------------------
    def needed(self, first: bool) -> dict[ir.Node, None]:
        """Body nodes the outputs depend on (a reused first-iteration node is a leaf)."""
        body = self.plan.body
        wanted: dict[ir.Node, None] = {}
        stack = [v.producer() for v in body.outputs[1:]]
        while stack:
            node = stack.pop()
            if node is None or node.graph is not body or node in wanted:
                continue
            wanted[node] = None
            if first and self.reused(node) is not None:
                continue
            stack.extend(v.producer() for v in node.inputs if v is not None)
        return wanted

    def iteration(
        self, i: int, carried: list[ir.Value], wanted: dict[ir.Node, None]
    ) -> list[ir.Value]:
        body = self.plan.body
        env: dict[ir.Value, ir.Value] = dict(zip(body.inputs[2:], carried, strict=True))
        for node in self.order:
            if node not in wanted:
                continue
            picked = self.unstacked(node, i)
            if picked is not None:
                env[node.outputs[0]] = picked
                continue
            reused = self.reused(node) if i == 0 else None
            if reused is not None:
                env.update(zip(node.outputs, reused, strict=True))
                continue
            inputs = [None if v is None else self._resolve(v, env, i) for v in node.inputs]
            copy = copy_node(node, inputs, self.names)
            self._add(copy)
            env.update(zip(node.outputs, copy.outputs, strict=True))
        return [self._resolve(v, env, i) for v in body.outputs[1:]]

    def _resolve(self, value: ir.Value, env: dict[ir.Value, ir.Value], i: int) -> ir.Value:
        found = env.get(value)
        if found is not None:
            return found
        body = self.plan.body
        if value is body.inputs[0]:
            return self.scalar("iter", i)
        if value is body.inputs[1]:
            return self.scalar("cond", 0)
        if value.graph is body and value.is_initializer():
            return self.body_constant(value)
        return value  # an outer-scope value

    def _add(self, node: ir.Node) -> None:
        self.created.append(node)
        self.produced.update(dict.fromkeys(node.outputs))

    # outputs --------------------------------------------------------------------------------
    def stack_scans(self, per_iteration: list[list[ir.Value]]) -> list[ir.Value]:
        results = []
        axes_input: ir.Value | None = None
        for s in range(self.plan.scans):
            pieces = []
            for values in per_iteration:
                piece = values[s]
                if self.plan.opset >= 13:
                    if axes_input is None:
                        axes_input = self._initializer("unroll_axes", np.array([0], dtype=np.int64))
                    node = ir.Node(
                        "Unsqueeze",
                        [piece, axes_input],
                        name=self.names.fresh("unroll_unsqueeze"),
                        outputs=[self.names.fresh(f"{piece.name}_unsqueezed")],
                    )
                else:
                    node = ir.Node(
                        "Unsqueeze",
                        [piece],
                        [ir.attr_ints("axes", [0])],
                        name=self.names.fresh("unroll_unsqueeze"),
                        outputs=[self.names.fresh(f"{piece.name}_unsqueezed")],
                    )
                self._add(node)
                pieces.append(node.outputs[0])
            concat = ir.Node(
                "Concat",
                pieces,
                [ir.attr_int("axis", 0)],
                name=self.names.fresh("unroll_concat"),
                outputs=[self.names.fresh("unroll_scan")],
            )
            self._add(concat)
            results.append(concat.outputs[0])
        return results

    def replace_output(self, old: ir.Value, new: ir.Value, claimed: dict[ir.Value, None]) -> None:
        """Make `new` (or an Identity of it) take over `old`'s name, type and uses."""
        if not old.num_uses() and not old.is_graph_output():
            return
        original, declared = old.name, old.type
        old.name = self.names.fresh(f"{original}_unrolled")
        if new in self.produced and new not in claimed and new.graph is self.graph:
            claimed[new] = None
            new.name = original
            new.type = declared if declared is not None else new.type
            old.replace_all_uses_with(new, replace_graph_outputs=True)
            return
        taken = ir.Value(original, type=declared)
        identity = ir.Node(
            "Identity", [new], name=self.names.fresh(f"{original}_identity"), outputs=[taken]
        )
        self._add(identity)
        self.graph.insert_before(self.plan.loop, [identity])
        old.replace_all_uses_with(taken, replace_graph_outputs=True)

    def run(self) -> list[ir.Node]:
        plan = self.plan
        loop = plan.loop
        carried = [v for v in loop.inputs[2:] if v is not None]
        if len(carried) != plan.carried:
            raise AssertionError("plan_unroll checks that carried inputs are present")
        scans: list[list[ir.Value]] = []
        wanted_first, wanted_rest = self.needed(True), self.needed(False)
        for i in range(plan.trip_count):
            results = self.iteration(i, carried, wanted_first if i == 0 else wanted_rest)
            carried = results[: plan.carried]
            scans.append(results[plan.carried :])
        finals = carried + self.stack_scans(scans)
        self.graph.insert_before(loop, [n for n in self.created if n.graph is None])
        claimed: dict[ir.Value, None] = {}
        for old, new in zip(loop.outputs, finals, strict=True):
            self.replace_output(old, new, claimed)
        inputs = [v for v in loop.inputs if v is not None]
        self.graph.remove(loop)
        _drop_outer_uses(loop)
        remove_dead_constants(self.graph, inputs)
        for value in self.stacked:
            owner = value.graph
            if owner is not None:
                remove_dead_constants(owner, [value])
        return self.created


def _drop_outer_uses(node: ir.Node) -> None:
    """Forget the uses that a removed node's subgraphs hold on outer values.

    `Graph.remove` drops the removed node's own input uses only; nodes of its subgraphs
    would otherwise keep outer values (the stacked weights) looking used.
    """
    for sub in node.subgraphs():
        for inner in sub.all_nodes():
            inner.detach_inputs()


def _unstack_note(gather: ir.Node, trip_count: int) -> tuple[list[str], bool] | None:
    text = gather.metadata_props.get(UNSTACK_KEY)
    if text is None:
        return None
    try:
        record = json.loads(text)
    except json.JSONDecodeError:
        return None
    if not isinstance(record, dict):
        return None
    names = record.get("names")
    if not isinstance(names, list) or len(names) != trip_count:
        return None
    if not all(isinstance(n, str) and n for n in names):
        return None
    return names, bool(record.get("constant_nodes"))


def _graphs_with_opsets(model: ir.Model) -> Iterator[tuple[ir.Graph, int]]:
    """Every graph, innermost first, with its default-domain opset."""
    default = model.opset_imports.get("", model.opset_imports.get("ai.onnx", 1))
    for fn in model.functions.values():
        version = fn.opset_imports.get("", fn.opset_imports.get("ai.onnx", default))
        for graph in reversed(list(fn.graph.all_graphs())):
            yield graph, version
    for graph in reversed(list(model.graph.all_graphs())):
        yield graph, default


def unroll_loops(
    model: ir.Model, options: UnrollLoopsOptions | None = None, context: PassContext = NO_CONTEXT
) -> PassResult:
    """Unroll every Loop with a constant trip count up to `max_trip_count`."""
    limit = (options or UnrollLoopsOptions()).max_trip_count
    names = ir.NameAllocator(model)
    touched: dict[ir.Node, None] = {}
    unrolled = 0
    for graph, opset in list(_graphs_with_opsets(model)):
        for node in graph:
            if node.op_type != "Loop" or node.domain not in ("", "ai.onnx"):
                continue
            plan = plan_unroll(node, limit, opset)
            if isinstance(plan, str):
                logger.info("unroll_loops: not unrolling %s: %s", node_label(node), plan)
                continue
            created = _Unroller(plan, names).run()
            touched.update(dict.fromkeys(created))
            unrolled += 1
    return PassResult("unroll_loops", unrolled > 0, tuple(n for n in touched if n.graph), unrolled)
