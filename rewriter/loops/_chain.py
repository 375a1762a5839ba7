"""A chain of repeated blocks and its validation (`analyze_chain`).

A chain is a list of blocks, each an ordered tuple of nodes; position `o` in every block holds
"the same" node. `analyze_chain` checks that the blocks can be rolled into one Loop body (or
outlined into one function) and describes every input of the template block by its source:

* `Internal(o, x)`: output `x` of the node at position `o` of the same block;
* `Carried(j)`: the `j`-th carried value, produced by the previous block (for the first block:
  a value from before the chain, the slot's `init`);
* `ConstantInput(c)`: a constant (initializer or `Constant` output) of one dtype and shape in
  every block; column `c` says whether the blocks share one value, hold equal contents, or
  hold different contents (then the pass stacks them);
* `Invariant(v)`: the same non-constant value `v` from outside the chain in every block;
* `None`: an omitted optional input.

Every block must be *clean*: its values are read only by itself, by the next block (only the
carried values) and, for the last block, by anything (only the carried values). With
`share_first`, the first block's values may also be read outside: that block was matched onto
nodes an exporter shared with the code before the chain, the Loop recomputes them and the
shared nodes stay. Validation reads constants' bytes only to compare the blocks' weights.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Sequence

import ir
from rewriter.engine import const_array, dtype_of, shape_of
from rewriter.loops._options import DEFAULT_MAX_CARRIED
from rewriter.loops._signature import StructureCache, node_label


@dataclasses.dataclass(frozen=True, slots=True)
class Internal:
    """Output `output` of the node at position `offset` of the same block."""

    offset: int
    output: int


@dataclasses.dataclass(frozen=True, slots=True)
class Carried:
    """The carried value number `slot` (produced by the previous block)."""

    slot: int


@dataclasses.dataclass(frozen=True, slots=True)
class ConstantInput:
    """A constant: column `column` of the plan."""

    column: int


@dataclasses.dataclass(frozen=True, slots=True)
class Invariant:
    """The same value from outside the chain in every block."""

    value: ir.Value


Source = Internal | Carried | ConstantInput | Invariant | None


class ColumnMode(enum.Enum):
    """How the blocks' constants for one input position relate."""

    SAME = "same"  # one value read by every block
    EQUAL = "equal"  # different values with equal contents
    STACKED = "stacked"  # different contents: stacked along a new leading axis


@dataclasses.dataclass(frozen=True, slots=True)
class ConstantColumn:
    """The constants that input positions read, one per block (`mode` reads their bytes)."""

    values: tuple[ir.Value, ...]

    @property
    def mode(self) -> ColumnMode:
        """Whether the blocks share one value, hold equal contents, or different ones."""
        return column_mode(self.values)


@dataclasses.dataclass(frozen=True, slots=True)
class CarriedSlot:
    """A value threaded from each block to the next.

    `values[k]` is block k's output; `init` is what the first block reads. `rank` is None
    when the blocks disagree on it or it is unknown.
    """

    offset: int
    output: int
    init: ir.Value
    values: tuple[ir.Value, ...]
    dtype: ir.DataType
    rank: int | None


@dataclasses.dataclass(frozen=True, slots=True)
class ChainPlan:
    """A validated chain: the blocks and the source of every template input."""

    graph: ir.Graph
    blocks: tuple[tuple[ir.Node, ...], ...]
    sources: tuple[tuple[Source, ...], ...]
    carried: tuple[CarriedSlot, ...]
    columns: tuple[ConstantColumn, ...]
    shared_first: tuple[int, ...] = ()

    @property
    def length(self) -> int:
        """Number of blocks."""
        return len(self.blocks)

    @property
    def block_size(self) -> int:
        """Nodes per block."""
        return len(self.blocks[0])

    @property
    def template(self) -> tuple[ir.Node, ...]:
        """The block whose nodes name and describe the body (never a shared first block)."""
        return self.blocks[1] if self.shared_first else self.blocks[0]

    def nodes(self) -> list[ir.Node]:
        """Every node of every block, in chain order."""
        return [node for block in self.blocks for node in block]


@dataclasses.dataclass(frozen=True, slots=True)
class Refusal:
    """Why blocks cannot be rolled; `block` is the first block at fault, when one is."""

    reason: str
    block: int | None = None


# A per-block view of one input: what kind of value it is, relative to that block.
_Kind = tuple[object, ...]


class _Analysis:
    """One run of `analyze_chain` (holds the lookup tables)."""

    def __init__(
        self, graph: ir.Graph, blocks: Sequence[tuple[ir.Node, ...]], cache: StructureCache
    ) -> None:
        self.graph = graph
        self.cache = cache
        self.blocks = tuple(blocks)
        self.owner: dict[ir.Node, int] = {}
        self.offset: list[dict[ir.Node, int]] = []

    def index(self) -> Refusal | None:
        size = len(self.blocks[0])
        for k, block in enumerate(self.blocks):
            if len(block) != size:
                return Refusal(f"block {k} has {len(block)} nodes, block 0 has {size}", k)
            offsets: dict[ir.Node, int] = {}
            for o, node in enumerate(block):
                if node.graph is not self.graph:
                    return Refusal(f"{node_label(node)} is not in the graph", k)
                if node in self.owner or node in offsets:
                    return Refusal(f"{node_label(node)} belongs to two blocks", k)
                offsets[node] = o
            self.offset.append(offsets)
            self.owner.update(dict.fromkeys(block, k))
        return None

    def check_structure(self) -> Refusal | None:
        for o, first in enumerate(self.blocks[0]):
            key = self.cache.structure_key(first)
            if key is None:
                return Refusal(f"{node_label(first)} holds a subgraph", 0)
            for k in range(1, len(self.blocks)):
                other = self.blocks[k][o]
                if self.cache.structure_key(other) != key:
                    return Refusal(
                        f"{node_label(other)} in block {k} differs from {node_label(first)} "
                        "in block 0 (op, attributes or arity)",
                        k,
                    )
        return None

    def kind(self, k: int, value: ir.Value | None) -> _Kind:
        if value is None:
            return ("absent",)
        producer = value.producer()
        if producer is not None and producer in self.owner:
            at = self.owner[producer]
            offset = self.offset[at][producer]
            if at == k:
                return ("internal", offset, value.index)
            if at == k - 1:
                return ("carried", offset, value.index)
            return ("far", at)
        kind = self.cache.constant_kind(value)
        if kind is not None:
            return ("const", kind)
        return ("outside", value)


def _ints(kind: _Kind) -> tuple[int, int]:
    offset, output = kind[1], kind[2]
    assert isinstance(offset, int), "positions are ints"
    assert isinstance(output, int), "output indices are ints"
    return offset, output


def _same_kind(a: _Kind, b: _Kind) -> bool:
    if a[0] != b[0] or len(a) != len(b):
        return False
    if a[0] == "outside":
        return a[1] is b[1]
    return a == b


class _Sources:
    """Collects sources, carried slots and constant columns while inputs are classified."""

    def __init__(self) -> None:
        self.slots: dict[tuple[int, int], int] = {}
        self.inits: dict[int, ir.Value] = {}
        self.columns: dict[tuple[ir.Value, ...], int] = {}

    def slot(self, offset: int, output: int) -> int:
        key = (offset, output)
        if key not in self.slots:
            self.slots[key] = len(self.slots)
        return self.slots[key]

    def column(self, values: tuple[ir.Value, ...]) -> int:
        if values not in self.columns:
            self.columns[values] = len(self.columns)
        return self.columns[values]


def _classify_input(analysis: _Analysis, sources: _Sources, o: int, t: int) -> Source | Refusal:
    blocks = analysis.blocks
    values = [block[o].inputs[t] for block in blocks]
    kinds = [analysis.kind(k, v) for k, v in enumerate(values)]
    for k, kind in enumerate(kinds):
        if kind[0] == "far":
            return Refusal(
                f"{node_label(blocks[k][o])} in block {k} reads a value of block {kind[1]}, "
                "more than one block back",
                k,
            )
    reference = kinds[1]
    for k in range(2, len(blocks)):
        if not _same_kind(kinds[k], reference):
            return Refusal(
                f"input {t} of {node_label(blocks[k][o])} in block {k} is wired differently "
                f"from block 1",
                k,
            )
    if reference[0] == "carried":
        init = values[0]
        if kinds[0][0] not in ("outside", "const") or init is None:
            return Refusal(
                f"input {t} of {node_label(blocks[0][o])}: the first block does not read "
                "the chain's input where the others read the previous block",
                0,
            )
        slot = sources.slot(*_ints(reference))
        known = sources.inits.setdefault(slot, init)
        if known is not init:
            return Refusal("the first block reads two different values for one carried value", 0)
        return Carried(slot)
    if not _same_kind(kinds[0], reference):
        return Refusal(
            f"input {t} of {node_label(blocks[0][o])} in block 0 is wired differently from block 1",
            0,
        )
    if reference[0] == "absent":
        return None
    if reference[0] == "internal":
        offset, output = _ints(reference)
        if offset >= o:
            return Refusal(f"the nodes of a block are not in topological order at position {o}")
        return Internal(offset, output)
    if reference[0] == "const":
        return ConstantInput(sources.column(tuple(v for v in values if v is not None)))
    value = values[0]
    assert value is not None, "an outside input is a value"
    return Invariant(value)


def _check_uses(
    analysis: _Analysis, slots: dict[tuple[int, int], int], share_first: bool
) -> tuple[tuple[int, ...], Refusal | None]:
    """Check who reads each block's values; returns the shared first-block positions."""
    last = len(analysis.blocks) - 1
    shared: dict[int, None] = {}
    for k, block in enumerate(analysis.blocks):
        for o, node in enumerate(block):
            for x, out in enumerate(node.outputs):
                if not out.name:
                    continue
                carried = (o, x) in slots
                outside = out.is_graph_output()
                for user in out.users():
                    at = analysis.owner.get(user)
                    if at == k or (at == k + 1 and carried):
                        continue
                    outside = True
                if not outside or (k == last and carried):
                    continue
                if k == 0 and share_first:
                    shared[o] = None
                    continue
                what = "carried value" if carried else "value"
                return (), Refusal(f"{what} {out.name!r} of block {k} is read outside the chain", k)
    return tuple(shared), None


def column_mode(values: tuple[ir.Value, ...]) -> ColumnMode:
    """How constants, one per block, relate (reads their bytes unless they are one value)."""
    first = values[0]
    if all(v is first for v in values):
        return ColumnMode.SAME
    reference = const_array(first)
    assert reference is not None, "a constant column holds constants"
    for value in values[1:]:
        if value is first:
            continue
        array = const_array(value)
        if array is None or array.dtype != reference.dtype or array.shape != reference.shape:
            return ColumnMode.STACKED
        if reference.dtype == object:
            if array.tolist() != reference.tolist():
                return ColumnMode.STACKED
        elif array.tobytes() != reference.tobytes():
            return ColumnMode.STACKED
    return ColumnMode.EQUAL


def _carried_slot(
    analysis: _Analysis, offset: int, output: int, init: ir.Value
) -> CarriedSlot | Refusal:
    values = tuple(block[offset].outputs[output] for block in analysis.blocks)
    dtypes = {dtype_of(v) for v in (init, *values)}
    dtype = dtype_of(init)
    if len(dtypes) != 1 or dtype is None:
        return Refusal(f"the element type of carried value {values[0].name!r} is not known")
    ranks = []
    for value in (init, *values):
        shape = shape_of(value)
        ranks.append(None if shape is None else len(shape))
    rank = ranks[0] if all(r == ranks[0] for r in ranks) else None
    return CarriedSlot(offset, output, init, values, dtype, rank)


def analyze_chain(
    graph: ir.Graph,
    blocks: Sequence[tuple[ir.Node, ...]],
    *,
    share_first: bool = False,
    max_carried: int = DEFAULT_MAX_CARRIED,
    cache: StructureCache | None = None,
) -> ChainPlan | Refusal:
    """Validate aligned blocks as a rollable chain and describe the template's inputs.

    Args:
        graph: the graph holding every block node.
        blocks: at least two blocks, each a tuple of nodes in the same (topological) order.
        share_first: allow the first block's values to be read outside the chain.
        max_carried: most values threaded from one block to the next.
        cache: memoized structure keys (valid while the graph is unchanged).

    Returns:
        The plan, or a `Refusal` saying why (and which block is at fault, when one is).
    """
    if len(blocks) < 2:
        return Refusal("a chain needs at least two blocks")
    if not blocks[0]:
        return Refusal("blocks are empty")
    analysis = _Analysis(graph, blocks, cache or StructureCache())
    refusal = analysis.index() or analysis.check_structure()
    if refusal is not None:
        return refusal
    collected = _Sources()
    rows: list[tuple[Source, ...]] = []
    for o, node in enumerate(analysis.blocks[0]):
        row: list[Source] = []
        for t in range(len(node.inputs)):
            source = _classify_input(analysis, collected, o, t)
            if isinstance(source, Refusal):
                return source
            row.append(source)
        rows.append(tuple(row))
    if not collected.slots:
        return Refusal("no value threads from one block to the next (the blocks are parallel)")
    if len(collected.slots) > max_carried:
        return Refusal(
            f"{len(collected.slots)} values thread between blocks (at most {max_carried})"
        )
    shared, refusal = _check_uses(analysis, collected.slots, share_first)
    if refusal is not None:
        return refusal
    slots: list[CarriedSlot] = []
    for (offset, output), slot in collected.slots.items():
        made = _carried_slot(analysis, offset, output, collected.inits[slot])
        if isinstance(made, Refusal):
            return made
        slots.append(made)
    columns = tuple(ConstantColumn(values) for values in collected.columns)
    return ChainPlan(graph, analysis.blocks, tuple(rows), tuple(slots), columns, shared)
