"""The `optimize_transposes` pass: sink Transposes through layout-agnostic ops until they cancel.

Converters from channels-last frameworks (tf2onnx) leave `Transpose(perm)` after a Conv and
its inverse before the next one, with elementwise work in between. For each Transpose the
pass grows the region of nodes it could sink through (following every reader, so a value
that fans out takes all its readers along): values in the region are held un-transposed, and
a node joins when it does not care about layout given how its operands are held. Where the
region meets another Transpose the two compose into one (or into nothing when they are
inverse); where a reader outside the region (or a graph output) needs the transposed value,
a Transpose is put back. The region is rewritten only when that removes Transposes: the
count never grows. Ops a Transpose passes through:

* unary elementwise ops (Relu, Sigmoid, Cast, ...) and Clip with scalar bounds;
* broadcasting ops (Add, Mul, Where, ...) whose other operands are scalars, constants (the
  constant is permuted to match: an exact data movement), Transposes with the same perm
  (read through; they vanish when nothing else reads them) or values of the region;
* Concat of such operands (its axis is permuted), Softmax / LogSoftmax / Hardmax from opset
  13 (the axis is permuted), Reduce ops with `keepdims=1` (the axes are permuted),
  LayerNormalization where the Transpose keeps the normalized trailing axes in place;
* Slice (its axes permuted) and Pad (its pads permuted);
* MatMul of a channels-last value (`perm = [0, 2, ..., 1]`) by a constant 2-D matrix, which
  becomes a 1x1 Conv of the channels-first value (the one step that is not pure data
  movement: the same sums in another kernel), where the runtime has a Conv kernel for the
  dtype or none for the MatMul either (`PassContext.runnable`);
* Reshapes (and Squeeze / Unsqueeze, as Reshapes) that only split dims or merge adjacent
  ones, with static shapes: above the Transpose they split (merge) the matching dims of the
  original, and the perm moves the pieces as blocks (a merge needs its dims adjacent and in
  order there too).

Operands that are values of the region with the same perm are read un-transposed as well.
Graphs that cannot hold initializers (function bodies) are left alone.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

import ir
from rewriter.engine import _facts, _trace
from rewriter.engine._builder import Runnable
from rewriter.engine._commit import can_take_output_name
from rewriter.engine._pass import NO_CONTEXT, ChangeLog, PassContext, PassResult

_STANDARD = ("", "ai.onnx")

_UNARY = frozenset(
    {
        "Abs", "Acos", "Acosh", "Asin", "Asinh", "Atan", "Atanh", "Cast", "Ceil", "Celu",
        "Cos", "Cosh", "Elu", "Erf", "Exp", "Floor", "Gelu", "HardSigmoid", "HardSwish",
        "Identity", "IsInf", "IsNaN", "LeakyRelu", "Log", "Mish", "Neg", "Not", "Reciprocal",
        "Relu", "Round", "Selu", "Sigmoid", "Sign", "Sin", "Sinh", "Softplus", "Softsign",
        "Sqrt", "Tan", "Tanh", "ThresholdedRelu",
    }
)  # fmt: skip
_BROADCAST = frozenset(
    {
        "Add", "And", "BitShift", "Div", "Equal", "Greater", "GreaterOrEqual", "Less",
        "LessOrEqual", "Max", "Mean", "Min", "Mod", "Mul", "Or", "Pow", "PRelu", "Sub", "Sum",
        "Where", "Xor",
    }
)  # fmt: skip
_SOFTMAX = frozenset({"Softmax", "LogSoftmax", "Hardmax"})
_REDUCE = frozenset(
    {
        "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax", "ReduceMean",
        "ReduceMin", "ReduceProd", "ReduceSum", "ReduceSumSquare",
    }
)  # fmt: skip
# The opset from which a Reduce op takes its axes as an input instead of an attribute.
_AXES_INPUT_SINCE = {"ReduceSum": 13}
_AXES_INPUT_SINCE_OTHERS = 18


@dataclasses.dataclass(frozen=True, slots=True)
class _Target:
    """What rebuilt nodes must suit: the default-domain opset and the runtime's kernels."""

    opset: int
    opset_imports: Mapping[str, int]
    runnable: Runnable | None

    def can_replace(self, old: ir.Node, new: ir.Node) -> bool:
        """False when the runtime has no kernel for `new` but one for `old` (see `_builder`)."""
        if self.runnable is None or self.runnable(new, self.opset_imports) is not False:
            return True
        return self.runnable(old, self.opset_imports) is False


@dataclasses.dataclass(frozen=True, slots=True)
class OptimizeTransposesOptions:
    """Options of `pass optimize_transposes` (none)."""


@dataclasses.dataclass(frozen=True, slots=True)
class _Permuted:
    """A constant operand to be written permuted (made an initializer when applied)."""

    array: np.ndarray[Any, Any]
    stem: str  # what its name is made from


@dataclasses.dataclass(slots=True)
class _Step:
    """One node the Transpose passes: how to rebuild it below the Transpose."""

    node: ir.Node
    slot: int  # the input that carries the transposed value
    inputs: list[ir.Value | _Permuted | _Held | None]  # the rebuilt node's inputs
    attributes: dict[str, object]
    freed: list[ir.Node]  # Transposes of other operands that become dead
    # The perm of the Transpose below the rebuilt node (a Reshape changes it), and the
    # rebuilt node's output type when the step knows it better than the old one's facts.
    perm_after: list[int] = dataclasses.field(default_factory=list)
    layout_type: ir.Type | None = None
    op_type: str = ""  # the rebuilt node's op when it changes (Squeeze as a Reshape)


def optimize_transposes(
    model: ir.Model, options: OptimizeTransposesOptions, context: PassContext = NO_CONTEXT
) -> PassResult:
    """Sink Transposes towards their inverses (see the module docstring)."""
    removed = 0
    touched: dict[ir.Node, None] = {}
    log = ChangeLog()
    names = ir.NameAllocator(model)
    target = _Target(
        model.opset_imports.get("", model.opset_imports.get("ai.onnx", 1)),
        dict(model.opset_imports),
        context.runnable,
    )
    for graph in list(model.graphs()):
        if not _facts.can_hold_initializers(graph, model):
            continue
        changed = True
        while changed:
            changed = False
            for node in list(graph):
                if node.graph is not graph or not _is_transpose(node):
                    continue
                saved = _sink(graph, node, target, names, log, touched)
                if saved:
                    removed += saved
                    changed = True
    return PassResult(
        "optimize_transposes",
        removed > 0,
        tuple(n for n in touched if n.graph),
        removed,
        log.changes(),
    )


def _is_transpose(node: ir.Node) -> bool:
    return node.op_type == "Transpose" and node.domain in _STANDARD and len(node.inputs) == 1


def _perm(node: ir.Node) -> list[int] | None:
    """The Transpose's permutation (its default, the reversal, needs the input's rank)."""
    perm = node.attribute("perm")
    if isinstance(perm, Sequence) and all(isinstance(p, int) for p in perm):
        return [int(p) for p in perm]  # type: ignore[arg-type]
    rank = _rank(node.inputs[0])
    return list(reversed(range(rank))) if rank is not None else None


def _rank(value: ir.Value | None) -> int | None:
    fact = ir.fact_type(value) if value is not None else None
    if isinstance(fact, ir.TensorType) and fact.shape is not None:
        return len(fact.shape)
    const = _facts.const_array(value) if value is not None else None
    return const.ndim if const is not None else None


@dataclasses.dataclass(frozen=True, slots=True)
class _Held:
    """An operand that is a value of the region: read in its un-transposed form."""

    value: ir.Value


@dataclasses.dataclass(slots=True)
class _Region:
    """The values a Transpose's sinking holds un-transposed, and what that costs.

    `perms` maps each such value to the perm that would give it back; `steps` rebuild the
    nodes computing them; `ends` are Transposes reading them (composed away); `exits` are
    values some reader needs transposed (a Transpose is put back for those readers).
    """

    start: ir.Node
    perms: dict[ir.Value, list[int]]
    steps: dict[ir.Node, _Step]
    ends: dict[ir.Node, list[int]]
    exits: list[ir.Value]

    def gain(self) -> int:
        """Transposes removed minus Transposes added, if the region is rewritten."""
        start_value = self.start.outputs[0]
        removed = 0 if start_value in self.exits else 1
        removed += sum(1 for perm in self.ends.values() if perm == sorted(perm))
        removed += len({node for step in self.steps.values() for node in step.freed})
        added = sum(1 for value in self.exits if value is not start_value)
        return removed - added


def _grow(start: ir.Node, perm: list[int], target: _Target) -> _Region:
    """Every node the Transpose can sink through, grown until nothing more joins."""
    value = start.outputs[0]
    region = _Region(start, {value: perm}, {}, {}, [])
    # Each new held value's readers are tried once it joins; a reader that needs another
    # operand held too is tried again when that operand joins (it reads that one as well).
    pending = [value]
    while pending:
        held = pending.pop()
        held_perm = region.perms[held]
        for use in held.uses:
            node = use.node
            if node in region.steps or node in region.ends:
                continue
            if _is_transpose(node):
                composed = _compose(held_perm, node)
                if composed is not None:
                    region.ends[node] = composed
                continue
            step = _plan_step(node, use.index, held_perm, target, region.perms)
            if step is None:
                continue
            if not step.perm_after:
                step.perm_after = held_perm
            region.steps[node] = step
            region.perms[node.outputs[0]] = step.perm_after
            pending.append(node.outputs[0])
    # A transposed operand another operand's Transpose would free must not be read elsewhere.
    for step in region.steps.values():
        step.freed = [
            n
            for n in step.freed
            if n not in region.ends and _only_read_by(n.outputs[0], region.steps)
        ]
    for held in region.perms:
        outside = [u for u in held.uses if u.node not in region.steps and u.node not in region.ends]
        if outside or held.is_graph_output():
            region.exits.append(held)
    return region


def _only_read_by(value: ir.Value, nodes: dict[ir.Node, _Step]) -> bool:
    return not value.is_graph_output() and all(use.node in nodes for use in value.uses)


def _sink(
    graph: ir.Graph,
    start: ir.Node,
    target: _Target,
    names: ir.NameAllocator,
    log: ChangeLog,
    touched: dict[ir.Node, None],
) -> int:
    """Sink `start` through the region below it when that removes Transposes; how many."""
    perm = _perm(start)
    source = start.inputs[0]
    if perm is None or source is None or sorted(perm) != list(range(len(perm))):
        return 0
    region = _grow(start, perm, target)
    gain = region.gain()
    if gain <= 0:
        return 0
    _apply(graph, region, source, names, log, touched)
    return gain


def _compose(perm: list[int], end: ir.Node) -> list[int] | None:
    """The one permutation of `end` applied after `perm`, or None when `end`'s is unknown."""
    second = _perm(end)
    if second is None or len(second) != len(perm):
        return None
    return [perm[q] for q in second]


def _plan_step(
    node: ir.Node,
    slot: int,
    perm: list[int],
    target: _Target,
    held: dict[ir.Value, list[int]],
) -> _Step | None:
    """How `node` is rebuilt below a Transpose of `perm` entering at input `slot`, if it can.

    `held` are the region's values: another operand among them with the same perm is read
    un-transposed too.
    """
    if node.domain not in _STANDARD or len(node.outputs) != 1:
        return None
    others = [v for i, v in enumerate(node.inputs) if i != slot and v is not None]
    if any(v in held for v in others) and not (
        node.op_type in _BROADCAST or node.op_type == "Concat"
    ):
        return None  # another input of the region where only one can be
    op = node.op_type
    attributes: dict[str, object] = {name: attr.value for name, attr in node.attributes.items()}
    inputs: list[ir.Value | _Permuted | _Held | None] = list(node.inputs)
    rank = len(perm)
    if op in _UNARY and len(inputs) == 1:
        return _Step(node, slot, inputs, attributes, [])
    if op == "Clip" and all(_rank(v) == 0 for v in node.inputs[1:] if v is not None):
        return _Step(node, slot, inputs, attributes, [])
    if (op in _BROADCAST and (op != "PRelu" or slot == 0)) or op == "Concat":
        freed: list[ir.Node] = []
        for index, other in enumerate(node.inputs):
            if index == slot or other is None:
                continue
            if held.get(other) == perm:
                inputs[index] = _Held(other)
                continue
            replacement = _operand(other, perm, exact_rank=op == "Concat", freed=freed)
            if replacement is None:
                return None
            inputs[index] = replacement
        if op == "Concat":
            axis = _axis(node.attribute("axis"), rank)
            if axis is None:
                return None
            attributes["axis"] = perm[axis]
        return _Step(node, slot, inputs, attributes, freed)
    if op in _SOFTMAX and target.opset >= 13 and slot == 0:
        axis = _axis(node.attribute("axis", -1), rank)
        if axis is None:
            return None
        attributes["axis"] = perm[axis]
        return _Step(node, slot, inputs, attributes, [])
    if op == "MatMul" and slot == 0:
        return _matmul_step(node, inputs, perm, target)
    if op == "LayerNormalization" and slot == 0:
        # normalizes the trailing axes from `axis`: below a Transpose that keeps them in
        # place (it moves only leading axes, as [seq, batch] <-> [batch, seq]) it normalizes
        # the same elements, and scale and bias keep their shape
        axis = _axis(node.attribute("axis", -1), rank)
        if axis is None or perm[axis:] != list(range(axis, rank)):
            return None
        return _Step(node, slot, inputs, attributes, [])
    if op == "Reshape" and slot == 0:
        return _reshape_step(node, inputs, attributes, perm)
    if op in ("Squeeze", "Unsqueeze") and slot == 0:
        # A static Squeeze or Unsqueeze is a Reshape that drops or adds 1s; moved above the
        # Transpose it becomes that Reshape.
        shape_slot: list[ir.Value | _Permuted | _Held | None] = [inputs[0], None]
        step = _reshape_step(node, shape_slot, {}, perm)
        if step is not None:
            step.op_type = "Reshape"
        return step
    if op == "Slice" and slot == 0:
        return _slice_step(node, inputs, attributes, perm)
    if op == "Pad" and slot == 0 and len(node.inputs) < 4:
        return _pad_step(node, inputs, attributes, perm)
    if op in _REDUCE and slot == 0 and node.attribute("keepdims", 1) == 1:
        return _reduce_step(node, inputs, attributes, perm, target.opset)
    return None


_FLOATS = frozenset({ir.DataType.FLOAT, ir.DataType.FLOAT16, ir.DataType.DOUBLE})


def _conv_probe(matmul: ir.Node, kernel: np.ndarray[Any, Any], rank: int) -> ir.Node:
    """A detached Conv of the MatMul's dtype and rank, to ask the runtime about (not inserted).

    Its inputs are fresh typed values: the graph's values gain no use from it.
    """
    dtype = _facts.dtype_of(matmul.outputs[0])
    assert dtype is not None, "the MatMul step checked its dtype"
    data = ir.Value("probe_x", type=ir.TensorType(dtype, (None,) * rank))
    weights = ir.Value("probe_w", type=ir.TensorType(dtype, tuple(kernel.shape)))
    attributes = {"kernel_shape": [1] * (rank - 2)}
    return ir.Node("Conv", [data, weights], attributes, outputs=[ir.Value("probe_y")])


def _matmul_step(
    node: ir.Node,
    inputs: list[ir.Value | _Permuted | _Held | None],
    perm: list[int],
    target: _Target,
) -> _Step | None:
    """MatMul of channels-last values by a constant [C, K] matrix: a 1x1 Conv below.

    `MatMul(Transpose(x, [0, 2, ..., 1]), B)` (a Dense layer on an NHWC map, as tf2onnx
    writes Keras' Dense on 4-D inputs) multiplies every pixel's channel vector by B: on x it
    is `Conv(x, B^T as [K, C, 1, ...])`, whose [N, K, H, W] output the same Transpose turns
    into the MatMul's. The sum over C runs in another kernel (the same terms, rounded as
    onnxruntime's Conv rounds them). Not where the runtime has no Conv kernel for the dtype
    but runs the MatMul (onnxruntime's CPU provider has no float64 Conv).
    """
    rank = len(perm)
    if rank < 3 or perm != [0, *range(2, rank), 1]:
        return None
    weights = node.inputs[1]
    if weights is None or _facts.dtype_of(node.outputs[0]) not in _FLOATS:
        return None
    matrix = _facts.const_array(weights)
    if matrix is None or matrix.ndim != 2:
        return None
    kernel = np.ascontiguousarray(matrix.T).reshape(
        matrix.shape[1], matrix.shape[0], *[1] * (rank - 2)
    )
    if not target.can_replace(node, _conv_probe(node, kernel, rank)):
        return None
    conv_inputs: list[ir.Value | _Permuted | _Held | None] = [
        inputs[0],
        _Permuted(kernel, f"{weights.name}_kernel"),
    ]
    step = _Step(node, 0, conv_inputs, {"kernel_shape": [1] * (rank - 2)}, [])
    step.op_type = "Conv"
    return step


def _operand(
    value: ir.Value, perm: list[int], *, exact_rank: bool, freed: list[ir.Node]
) -> ir.Value | _Permuted | None:
    """What another operand becomes below the Transpose, or None when it cannot follow."""
    rank = len(perm)
    producer = value.producer()
    if producer is not None and _is_transpose(producer) and _perm(producer) == perm:
        if len(value.uses) == 1 and not value.is_graph_output():
            freed.append(producer)
        return producer.inputs[0]
    const = _facts.const_array(value)
    if const is not None and const.ndim <= rank and not (exact_rank and const.ndim != rank):
        if const.ndim == 0:
            return value
        full = const.reshape((1,) * (rank - const.ndim) + const.shape)
        return _Permuted(np.transpose(full, np.argsort(perm)), f"{value.name}_permuted")
    if not exact_rank and _rank(value) == 0:
        return value  # a scalar broadcasts the same in any layout
    return None


def _axis(value: object, rank: int) -> int | None:
    if not isinstance(value, int) or not -rank <= value < rank:
        return None
    return value % rank


def _reduce_step(
    node: ir.Node,
    inputs: list[ir.Value | _Permuted | _Held | None],
    attributes: dict[str, object],
    perm: list[int],
    opset: int,
) -> _Step | None:
    rank = len(perm)
    since = _AXES_INPUT_SINCE.get(node.op_type, _AXES_INPUT_SINCE_OTHERS)
    if opset < since:
        axes = attributes.get("axes")
        if axes is None:
            return _Step(node, 0, inputs, attributes, [])  # every axis: layout does not matter
        mapped = [_axis(a, rank) for a in axes]  # type: ignore[attr-defined]
        if any(a is None for a in mapped):
            return None
        attributes["axes"] = sorted(perm[a] for a in mapped if a is not None)
        return _Step(node, 0, inputs, attributes, [])
    given = node.inputs[1] if len(node.inputs) > 1 else None
    if given is None:
        return _Step(node, 0, inputs, attributes, [])
    axes = _facts.const_array(given)
    if axes is None or axes.ndim != 1:
        return None
    mapped = [_axis(int(a), rank) for a in axes]
    if any(a is None for a in mapped):
        return None
    permuted = np.array(sorted(perm[a] for a in mapped if a is not None), dtype=np.int64)
    inputs[1] = _Permuted(permuted, f"{given.name}_permuted")
    return _Step(node, 0, inputs, attributes, [])


def _constant_ints(value: ir.Value | None) -> list[int] | None:
    array = _facts.const_array(value) if value is not None else None
    if array is None or array.ndim != 1 or array.dtype.kind not in "iu":
        return None
    return [int(v) for v in array]


def _slice_step(
    node: ir.Node,
    inputs: list[ir.Value | _Permuted | _Held | None],
    attributes: dict[str, object],
    perm: list[int],
) -> _Step | None:
    """Slice below a Transpose slices the original's matching axes (axes input permuted)."""
    rank = len(perm)
    if len(node.inputs) < 3:
        return None  # Slice-1 (attributes): not worth the special case
    starts = _constant_ints(node.inputs[1])
    axes_value = node.inputs[3] if len(node.inputs) > 3 else None
    axes = _constant_ints(axes_value) if axes_value is not None else None
    if starts is None or (axes_value is not None and axes is None):
        return None
    given = axes if axes is not None else list(range(len(starts)))
    mapped = [_axis(a, rank) for a in given]
    if any(a is None for a in mapped):
        return None
    moved = np.array([perm[a] for a in mapped if a is not None], dtype=np.int64)
    while len(inputs) < 4:
        inputs.append(None)
    inputs[3] = _Permuted(moved, f"{node.outputs[0].name}_axes")
    return _Step(node, 0, inputs, attributes, [])


def _pad_step(
    node: ir.Node,
    inputs: list[ir.Value | _Permuted | _Held | None],
    attributes: dict[str, object],
    perm: list[int],
) -> _Step | None:
    """Pad below a Transpose pads the original's matching axes (pads permuted)."""
    rank = len(perm)
    if len(node.inputs) < 2:
        return None  # Pad-1/2 (attributes)
    pads = _constant_ints(node.inputs[1])
    if pads is None or len(pads) != 2 * rank:
        return None
    moved = [0] * (2 * rank)
    for index, axis in enumerate(perm):
        moved[axis] = pads[index]
        moved[rank + axis] = pads[rank + index]
    inputs[1] = _Permuted(np.array(moved, dtype=np.int64), f"{node.outputs[0].name}_pads")
    return _Step(node, 0, inputs, attributes, [])


def _static_shape(value: ir.Value | None) -> list[int] | None:
    fact = ir.fact_type(value) if value is not None else None
    if not isinstance(fact, ir.TensorType) or fact.shape is None:
        return None
    if not all(isinstance(d, int) and d > 0 for d in fact.shape):
        return None
    return [int(d) for d in fact.shape]  # type: ignore[arg-type]


def _groups(before: list[int], after: list[int]) -> list[tuple[list[int], list[int]]] | None:
    """Pair a reshape's dims in row-major order: splits of one dim, merges of adjacent ones.

    None when the reshape does anything else (regroups across dims).
    """
    groups: list[tuple[list[int], list[int]]] = []
    i = j = 0
    while i < len(before) and j < len(after):
        if before[i] == after[j]:
            groups.append(([i], [j]))
            i, j = i + 1, j + 1
        elif before[i] > after[j]:
            taken, product = [j], after[j]
            while product < before[i] and j + len(taken) < len(after):
                product *= after[j + len(taken)]
                taken.append(j + len(taken))
            if product != before[i]:
                return None
            groups.append(([i], taken))
            i, j = i + 1, j + len(taken)
        else:
            taken, product = [i], before[i]
            while product < after[j] and i + len(taken) < len(before):
                product *= before[i + len(taken)]
                taken.append(i + len(taken))
            if product != after[j]:
                return None
            groups.append((taken, [j]))
            i, j = i + len(taken), j + 1
    if i != len(before) or j != len(after):
        return None
    return groups


def _reshape_step(
    node: ir.Node,
    inputs: list[ir.Value | _Permuted | _Held | None],
    attributes: dict[str, object],
    perm: list[int],
) -> _Step | None:
    """A Reshape that only splits dims or merges adjacent ones, moved above the Transpose.

    Below the Transpose it splits dim i of the transposed value; above, it splits dim
    perm[i] of the original the same way, and the Transpose's perm grows to move the pieces
    as one block. A merge moves up only when the merged dims are adjacent, in order, in the
    original too. Needs static shapes on both sides.
    """
    before = _static_shape(node.inputs[0])
    after = _static_shape(node.outputs[0])
    if before is None or after is None or len(before) != len(perm):
        return None
    groups = _groups(before, after)
    if groups is None:
        return None
    owner: dict[int, int] = {}  # original dim -> its group
    for index, (dims, _) in enumerate(groups):
        sources = [perm[d] for d in dims]
        if sources != list(range(sources[0], sources[0] + len(sources))):
            return None  # merged dims that are not adjacent and in order above the Transpose
        for source in sources:
            owner[source] = index
    shape: list[int] = []
    block_start: dict[int, int] = {}
    for dim in range(len(perm)):
        index = owner[dim]
        if index in block_start:
            continue  # a merged group is written once, at its first dim
        block_start[index] = len(shape)
        shape.extend(after[j] for j in groups[index][1])
    moved = [
        block_start[index] + k for index, (_, outs) in enumerate(groups) for k in range(len(outs))
    ]
    inputs[1] = _Permuted(np.array(shape, dtype=np.int64), f"{node.outputs[0].name}_shape")
    fact = ir.fact_type(node.outputs[0])
    dtype = fact.dtype if isinstance(fact, ir.TensorType) else None
    layout = ir.TensorType(dtype, tuple(shape)) if dtype is not None else None
    return _Step(node, 0, inputs, attributes, [], moved, layout)


def _apply(
    graph: ir.Graph,
    region: _Region,
    source: ir.Value,
    names: ir.NameAllocator,
    log: ChangeLog,
    touched: dict[ir.Node, None],
) -> None:
    """Rewrite the region: its nodes rebuilt on un-transposed values, Transposes at the edges.

    Each rebuilt node goes just before the node it replaces (whatever else it reads is
    defined there); a Transpose put back for an exit goes just before the exit's producer's
    replacement is used, i.e. before that producer; ends compose in place.
    """
    start = region.start
    plain: dict[ir.Value, ir.Value] = {start.outputs[0]: source}
    for node in _in_graph_order(graph, list(region.steps)):
        step = region.steps[node]
        inputs: list[ir.Value | None] = []
        for index, value in enumerate(step.inputs):
            if index == step.slot:
                inputs.append(plain[node.inputs[index]])  # type: ignore[index]
            elif isinstance(value, _Held):
                inputs.append(plain[value.value])
            elif isinstance(value, _Permuted):
                inputs.append(_constant(graph, value, names, log))
            else:
                inputs.append(value)
        old = node.outputs[0]
        out = ir.Value(names.fresh(f"{old.name}_layout"))
        known = step.layout_type or _unpermuted(old, step.perm_after)
        if known is not None:
            ir.record_inferred_type(out, known)
        rebuilt = ir.Node(
            step.op_type or node.op_type,
            inputs,
            step.attributes,
            domain=node.domain,
            name=names.fresh(node.name or node.op_type),
            outputs=[out],
        )
        graph.insert_before(node, [rebuilt])
        log.created(graph, _trace.distinct_label(rebuilt))
        touched[rebuilt] = None
        plain[old] = out
    renames: list[tuple[ir.Value, str]] = []
    for end, composed in region.ends.items():
        held = end.inputs[0]
        assert held is not None, "an end reads a value of the region"
        _replace(graph, end.outputs[0], plain[held], composed, end, names, log, touched, renames)
    for held in region.exits:
        if held is start.outputs[0]:
            continue  # the Transpose stays for the readers outside the region
        producer = held.producer()
        assert producer is not None, "a held value other than the start's is computed"
        perm = region.perms[held]
        _replace(graph, held, plain[held], perm, producer, names, log, touched, renames)
    old_nodes = [
        *region.steps,
        *region.ends,
        *(n for st in region.steps.values() for n in st.freed),
    ]
    if start.outputs[0] not in region.exits:
        old_nodes.append(start)
    for node in reversed(_in_graph_order(graph, old_nodes)):
        log.removed(graph, _trace.distinct_label(node))
        graph.remove(node)
    for value, name in renames:
        value.name = name  # the name downstream nodes and graph outputs knew


def _replace(
    graph: ir.Graph,
    old: ir.Value,
    plain: ir.Value,
    perm: list[int],
    before: ir.Node,
    names: ir.NameAllocator,
    log: ChangeLog,
    touched: dict[ir.Node, None],
    renames: list[tuple[ir.Value, str]],
) -> None:
    """Make the readers of `old` read `Transpose(plain, perm)` (or `plain` for the identity).

    Readers inside the region go with their nodes; the others, and graph outputs, move.
    """
    for use in old.uses:
        touched[use.node] = None
    if perm == sorted(perm) and not old.is_graph_output():
        old.replace_all_uses_with(plain)
        return
    if perm == sorted(perm) and can_take_output_name(plain, graph):
        if plain.type is None:
            plain.type = old.type  # a graph output declares its type
        old.replace_all_uses_with(plain, replace_graph_outputs=True)
        renames.append((plain, old.name))  # the graph output's name, no Identity needed
        return
    replacement = ir.Value(names.fresh(old.name), type=old.type)
    if perm == sorted(perm):
        node = ir.Node("Identity", [plain], outputs=[replacement])
    else:
        node = ir.Node(
            "Transpose",
            [plain],
            {"perm": perm},
            name=names.fresh(f"{old.name}_transpose"),
            outputs=[replacement],
        )
    graph.insert_before(before, [node])
    log.created(graph, _trace.distinct_label(node))
    touched[node] = None
    old.replace_all_uses_with(replacement, replace_graph_outputs=True)
    renames.append((replacement, old.name))


def _in_graph_order(graph: ir.Graph, nodes: list[ir.Node]) -> list[ir.Node]:
    """`nodes` producers first, ordered among themselves only.

    The node list is not kept sorted while rules run, and sorting the whole graph for every
    region would make the pass quadratic: a depth-first walk over the producers inside the
    set orders them in time proportional to their inputs.
    """
    wanted = dict.fromkeys(nodes)
    done: dict[ir.Node, None] = {}
    for root in wanted:
        stack: list[tuple[ir.Node, bool]] = [(root, False)]
        while stack:
            node, expanded = stack.pop()
            if node in done:
                continue
            if expanded:
                done[node] = None
                continue
            stack.append((node, True))
            for value in node.reads():
                producer = value.producer()
                if producer is not None and producer in wanted and producer not in done:
                    stack.append((producer, False))
    return list(done)


def _constant(
    graph: ir.Graph, permuted: _Permuted, names: ir.NameAllocator, log: ChangeLog
) -> ir.Value:
    name = names.fresh(permuted.stem)
    value = ir.Value(name, const_value=ir.NumpyTensor(np.ascontiguousarray(permuted.array), name))
    graph.add_initializer(value)
    log.created(graph, _trace.value_label(value))
    return value


def _unpermuted(value: ir.Value, perm: list[int]) -> ir.Type | None:
    """`value`'s type before the Transpose of `perm` (its dims put back in place)."""
    fact = ir.fact_type(value)
    if not isinstance(fact, ir.TensorType) or fact.shape is None or len(fact.shape) != len(perm):
        return ir.TensorType(fact.dtype) if isinstance(fact, ir.TensorType) else None
    dims: list[ir.Dim] = [None] * len(perm)
    for index, axis in enumerate(perm):
        dims[axis] = fact.shape[index]
    return ir.TensorType(fact.dtype, tuple(dims))
