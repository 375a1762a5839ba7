"""What a model costs and what its weights look like: the profile `rewrite stats` shows.

* FLOPs per node, per op type and in total (counted as `rewriter.api._flops` says), and
  bytes moved per node: the bytes of every tensor a node reads plus those it writes, from the
  facts' shapes. Symbolic dims count as 1 unless `input_shapes` fixes the graph inputs'
  shapes first (`--input-shape x=1x128x768`).
* Parameter bytes per layer: initializers grouped by the scope of the first node that reads
  them (`/encoder/layer.0/attention/query/MatMul` -> `/encoder/layer.0/attention/query`),
  else by their own name without its last part (`layer.0.query.weight` -> `layer.0.query`).
* Weight distributions of float initializers: a histogram of the finite values, the counts
  of NaN, infinities and subnormals, an outlier flag (values beyond 8 robust standard
  deviations of the median, sigma = 1.4826 x the median absolute deviation) and a
  bimodality flag (Sarle's bimodality coefficient (skew^2 + 1) / kurtosis above 5/9, the
  value of a uniform distribution: two separated modes push it up).
* Shape-inference disagreements: values whose declared dims and inferred dims differ.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence

import numpy as np

import ir
from rewriter.api._flops import node_flops
from rewriter.api._models import set_input_shapes

_HISTOGRAM_BINS = 32
_OUTLIER_SIGMAS = 8.0
_BIMODAL = 5 / 9
# Tensors smaller than this are not judged for outliers or modes (too few values).
_JUDGED_ELEMENTS = 64


@dataclasses.dataclass(frozen=True)
class NodeCost:
    """One node's estimated FLOPs and bytes moved."""

    node: str
    op_type: str
    flops: int
    bytes_moved: int


@dataclasses.dataclass(frozen=True)
class WeightStats:
    """The distribution of one float initializer's values."""

    name: str
    elements: int
    nan: int
    inf: int
    subnormal: int
    minimum: float
    maximum: float
    mean: float
    std: float
    histogram: tuple[int, ...]
    edges: tuple[float, ...]
    outliers: int
    bimodality: float

    @property
    def flags(self) -> tuple[str, ...]:
        """What stands out: special values, outliers, two modes."""
        found = []
        if self.nan:
            found.append(f"{self.nan} NaN")
        if self.inf:
            found.append(f"{self.inf} inf")
        if self.subnormal:
            found.append(f"{self.subnormal} subnormal")
        if self.outliers:
            found.append(f"{self.outliers} outliers")
        if self.bimodality > _BIMODAL:
            found.append(f"bimodal ({self.bimodality:.2f})")
        return tuple(found)


@dataclasses.dataclass(frozen=True)
class Profile:
    """FLOPs and bytes per node, parameters per layer, weight distributions, disagreements."""

    nodes: tuple[NodeCost, ...]
    layers: tuple[tuple[str, int], ...]
    weights: tuple[WeightStats, ...]
    disagreements: tuple[str, ...]

    @property
    def flops(self) -> int:
        """Total estimated FLOPs of one run."""
        return sum(n.flops for n in self.nodes)

    @property
    def bytes_moved(self) -> int:
        """Total bytes read and written by the nodes of one run."""
        return sum(n.bytes_moved for n in self.nodes)

    def by_op(self) -> list[tuple[str, int, int, int]]:
        """(op type, nodes, FLOPs, bytes moved), costliest first."""
        flops: Counter[str] = Counter()
        moved: Counter[str] = Counter()
        count: Counter[str] = Counter()
        for node in self.nodes:
            flops[node.op_type] += node.flops
            moved[node.op_type] += node.bytes_moved
            count[node.op_type] += 1
        return sorted(
            ((op, count[op], flops[op], moved[op]) for op in count),
            key=lambda row: (-row[2], -row[3], row[0]),
        )

    def as_json(self) -> dict[str, object]:
        """The profile as JSON-ready data (`flops` is the total)."""
        return {
            "flops": self.flops,
            "bytes_moved": self.bytes_moved,
            "flops_by_op": {op: flops for op, _, flops, _ in self.by_op()},
            "bytes_moved_by_op": {op: moved for op, _, _, moved in self.by_op()},
            "nodes_profile": [dataclasses.asdict(n) for n in self.nodes],
            "parameter_bytes_by_layer": dict(self.layers),
            "weights": [
                {**dataclasses.asdict(w), "flags": list(w.flags)} for w in self.weights if w.flags
            ],
            "shape_disagreements": list(self.disagreements),
        }


def profile(model: ir.Model, *, input_shapes: Mapping[str, Sequence[int]] | None = None) -> Profile:
    """The profile of `model` (changed only by `input_shapes` and recorded facts).

    Weight distributions read the float initializers' bytes (memory-mapped when external).
    """
    if input_shapes:
        set_input_shapes(model, input_shapes)
    ir.infer_types(model)
    costs = tuple(
        NodeCost(node.name or node.outputs[0].name, node.op_type, node_flops(node), _moved(node))
        for node in model.graph.all_nodes()
    )
    return Profile(costs, _layers(model), _weights(model), _disagreements(model))


def _moved(node: ir.Node) -> int:
    total = 0
    for value in (*node.inputs, *node.outputs):
        fact = ir.fact_type(value) if value is not None else None
        if isinstance(fact, ir.TensorType) and fact.shape is not None:
            count = math.prod(d if isinstance(d, int) and d >= 0 else 1 for d in fact.shape)
            total += count * max(fact.dtype.bitwidth, 8) // 8
    return total


def _layers(model: ir.Model) -> tuple[tuple[str, int], ...]:
    layers: Counter[str] = Counter()
    for name, value in _stored_weights(model):
        tensor = value.const_value
        if tensor is not None:
            layers[_layer_of(name, value)] += tensor.nbytes
    return tuple(sorted(layers.items(), key=lambda item: (-item[1], item[0])))


def _stored_weights(model: ir.Model) -> list[tuple[str, ir.Value]]:
    """The main graph's initializers, dense then sparse (a sparse one by its dense array)."""
    graph = model.graph
    return [*graph.initializers.items(), *graph.sparse_initializers.items()]


def _layer_of(name: str, value: ir.Value) -> str:
    """The layer a weight belongs to: its first reader's scope, else its own name's.

    Exporters name nodes by module path (`/encoder/layer.0/attention/query/MatMul`) but not
    always weights (`onnx::MatMul_894`); the reader's path without its last part is the
    layer. A weight named by module path (`layer.0.query.weight`) drops its last part.
    """
    users = value.users()
    scope = users[0].name.rpartition("/")[0] if users else ""
    if scope:
        return scope
    return name.rpartition(".")[0] or name


def _weights(model: ir.Model) -> tuple[WeightStats, ...]:
    found = []
    for name, value in _stored_weights(model):
        tensor = value.const_value
        if tensor is None or not tensor.dtype.is_floating or tensor.size == 0:
            continue
        found.append(weight_stats(name, tensor.numpy()))
    return tuple(found)


# Elements read at a time: a weight of gigabytes (memory-mapped) is summarized in bounded
# memory, pass by pass.
_CHUNK = 1 << 22
_SAMPLE = 1 << 20


def _chunks(array: np.ndarray) -> Iterator[np.ndarray]:
    flat = array.reshape(-1)
    for start in range(0, flat.size, _CHUNK):
        yield np.asarray(flat[start : start + _CHUNK], dtype=np.float64)


def weight_stats(name: str, array: np.ndarray) -> WeightStats:
    """The distribution of one float tensor's values (see the module's description).

    Passes over the values, a chunk at a time: range, counts and mean; the histogram and
    central moments; values far from the median (the median and the median absolute
    deviation come from an evenly strided sample of at most 2^20 values).
    """
    tiny = float(np.finfo(array.dtype).tiny) if array.dtype.kind == "f" else 0.0
    nan = inf = subnormal = finite_count = 0
    low, high, total = math.inf, -math.inf, 0.0
    for chunk in _chunks(array):
        finite = chunk[np.isfinite(chunk)]
        nan += int(np.isnan(chunk).sum())
        inf += int(np.isinf(chunk).sum())
        subnormal += int(((finite != 0) & (np.abs(finite) < tiny)).sum())
        finite_count += finite.size
        if finite.size:
            low, high = min(low, float(finite.min())), max(high, float(finite.max()))
            total += float(finite.sum())
    if finite_count == 0:
        return WeightStats(name, array.size, nan, inf, 0, 0.0, 0.0, 0.0, 0.0, (), (), 0, 0.0)
    mean = total / finite_count
    span = (low, high) if high > low else (low - 0.5, high + 0.5)
    counts = np.zeros(_HISTOGRAM_BINS, dtype=np.int64)
    moments = np.zeros(3)  # sums of (x - mean)^2, ^3, ^4
    for chunk in _chunks(array):
        finite = chunk[np.isfinite(chunk)]
        counts += np.histogram(finite, bins=_HISTOGRAM_BINS, range=span)[0]
        centered = finite - mean
        squared = centered * centered
        moments += (squared.sum(), (squared * centered).sum(), (squared * squared).sum())
    edges = np.linspace(span[0], span[1], _HISTOGRAM_BINS + 1)
    variance = moments[0] / finite_count
    outliers, bimodality = 0, 0.0
    if finite_count >= _JUDGED_ELEMENTS and variance > 0:
        bimodality = _bimodality(variance, moments[1] / finite_count, moments[2] / finite_count)
        # Median and median absolute deviation of an evenly strided sample: robust to the
        # outliers being counted, and bounded in memory.
        flat = array.reshape(-1)
        sample = np.asarray(flat[:: max(1, flat.size // _SAMPLE)], dtype=np.float64)
        sample = sample[np.isfinite(sample)]
        median = float(np.median(sample))
        sigma = 1.4826 * float(np.median(np.abs(sample - median)))
        if sigma > 0:
            for chunk in _chunks(array):
                finite = chunk[np.isfinite(chunk)]
                outliers += int((np.abs(finite - median) > _OUTLIER_SIGMAS * sigma).sum())
    return WeightStats(
        name,
        array.size,
        nan,
        inf,
        subnormal,
        low,
        high,
        mean,
        math.sqrt(variance),
        tuple(int(c) for c in counts),
        tuple(float(e) for e in edges),
        outliers,
        bimodality,
    )


def _bimodality(variance: float, third: float, fourth: float) -> float:
    """Sarle's bimodality coefficient (skew^2 + 1) / kurtosis from central moments."""
    skew = third / variance**1.5
    kurtosis = fourth / variance**2
    return float((skew**2 + 1) / kurtosis)


def _disagreements(model: ir.Model) -> tuple[str, ...]:
    """Values whose declared shape differs from what inference computes for them.

    Each node with a declared output shape is typed by onnx's per-node inference from its
    inputs' facts, and the two are compared (a model whose value_info contradicts its ops
    leaves whole-model inference stuck on the declaration).
    """
    found = []
    for graph in model.graph.all_graphs():
        for node in graph:
            declared = [_shaped(value.type) for value in node.outputs]
            if not any(declared):
                continue
            try:
                inferred = ir.infer_node_types(node, model.opset_imports)
            except ir.NodeInferenceError:
                continue
            for value, mine, theirs in zip(node.outputs, declared, inferred or (), strict=False):
                theirs = _shaped(theirs)
                if mine is not None and theirs is not None and _clash(mine, theirs):
                    found.append(f"{value.name}: declared {mine}, inferred {theirs}")
    return tuple(found)


def _shaped(kind: ir.Type | None) -> ir.TensorType | None:
    return kind if isinstance(kind, ir.TensorType) and kind.shape is not None else None


def _clash(declared: ir.TensorType, inferred: ir.TensorType) -> bool:
    assert declared.shape is not None, "only shaped types are compared"
    assert inferred.shape is not None, "only shaped types are compared"
    if len(declared.shape) != len(inferred.shape):
        return True
    return any(
        isinstance(a, int) and isinstance(b, int) and a >= 0 and b >= 0 and a != b
        for a, b in zip(declared.shape, inferred.shape, strict=True)
    )
