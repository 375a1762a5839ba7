"""Statistics of a model: opsets, node counts by op type, parameters and their bytes.

Nothing here reads weight bytes: sizes come from tensor types, so a model of gigabytes of
external weights is summarized without loading them. `rewrite stats` prints these figures and
the HTML reports show them.
"""

from __future__ import annotations

import dataclasses
from collections import Counter

import ir
from rewriter.engine import op_histogram


@dataclasses.dataclass(frozen=True, slots=True)
class _TensorStats:
    """Sizes of one parameter tensor (an initializer or a Constant node's value)."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    size: int
    nbytes: int
    external: bool
    in_constant: bool


# Constant's list and scalar forms: (element type, bytes per element; 0 for strings).
_CONSTANT_FORMS = {
    "value_float": ("float", 4),
    "value_floats": ("float", 4),
    "value_int": ("int64", 8),
    "value_ints": ("int64", 8),
    "value_string": ("string", 0),
    "value_strings": ("string", 0),
}


def _initializer_tensors(model: ir.Model) -> list[_TensorStats]:
    tensors = []
    for graph in model.graphs():
        # Sparse initializers count by their dense size: the weight the model computes with.
        stored = {**graph.initializers, **graph.sparse_initializers}
        for name, value in stored.items():
            tensor = value.const_value
            if tensor is not None:
                tensors.append(_of_tensor(name, tensor, in_constant=False))
    return tensors


def _constant_tensors(model: ir.Model) -> list[_TensorStats]:
    """The values Constant nodes hold (in every graph), sized without reading tensor data."""
    tensors = []
    for graph in model.graphs():
        for node in graph:
            if node.op_type != "Constant" or node.domain not in ("", "ai.onnx"):
                continue
            label = f"{node.outputs[0].name if node.outputs else node.name} (Constant)"
            for attr in node.attributes.values():
                found = _of_constant_attr(label, attr)
                if found is not None:
                    tensors.append(found)
    return tensors


def _of_tensor(name: str, tensor: ir.Tensor, *, in_constant: bool) -> _TensorStats:
    return _TensorStats(
        name,
        tensor.dtype.onnx_name,
        tuple(tensor.shape),
        tensor.size,
        tensor.nbytes,
        tensor.is_external,
        in_constant,
    )


def _of_constant_attr(label: str, attr: ir.Attr) -> _TensorStats | None:
    value = attr.value
    if isinstance(value, ir.Tensor):
        return _of_tensor(label, value, in_constant=True)
    form = _CONSTANT_FORMS.get(attr.name)
    if form is None:
        return None
    dtype, width = form
    items = value if isinstance(value, tuple) else (value,)
    shape = (len(items),) if isinstance(value, tuple) else ()
    nbytes = width * len(items) if width else sum(len(str(item).encode()) for item in items)
    return _TensorStats(label, dtype, shape, len(items), nbytes, False, True)


def collect(model: ir.Model, top: int = 10) -> dict[str, object]:
    """The statistics of a model, without reading any weight bytes.

    Parameters are the elements of initializers and of the values of Constant nodes (a
    rewrite may turn one into the other); nodes are counted in the main graph and in its
    subgraphs (the bodies of Loop, If, Scan).
    """
    initializers = _initializer_tensors(model)
    constants = _constant_tensors(model)
    tensors = initializers + constants
    by_dtype: Counter[str] = Counter()
    for tensor in tensors:
        by_dtype[tensor.dtype] += tensor.size
    largest = sorted(tensors, key=lambda t: (-t.nbytes, t.name))[:top]
    ops = op_histogram(model)
    nodes = sum(ops.values())
    return {
        "ir_version": model.ir_version,
        "producer": f"{model.producer_name} {model.producer_version}".strip(),
        "opsets": dict(model.opset_imports),
        "nodes": nodes,
        "main_graph_nodes": len(model.graph),
        "subgraph_nodes": nodes - len(model.graph),
        "ops": ops,
        "functions": [f"{f.domain}.{f.name}" for f in model.functions.values()],
        "inputs": [f"{v.name}: {v.type}" for v in model.graph.inputs],
        "outputs": [f"{v.name}: {v.type}" for v in model.graph.outputs],
        "initializers": len(initializers),
        "constant_tensors": len(constants),
        "parameters": sum(t.size for t in tensors),
        "initializer_parameters": sum(t.size for t in initializers),
        "constant_parameters": sum(t.size for t in constants),
        "parameter_bytes": sum(t.nbytes for t in tensors),
        "external_tensors": sum(1 for t in tensors if t.external),
        "parameters_by_dtype": dict(by_dtype),
        "largest_tensors": [
            {
                "name": t.name,
                "dtype": t.dtype,
                "shape": list(t.shape),
                "bytes": t.nbytes,
                "external": t.external,
            }
            for t in largest
        ],
    }


def describe_counts(stats: dict[str, object]) -> list[str]:
    """The node and parameter lines of `rewrite stats`."""
    nodes = f"{stats['nodes']} nodes"
    if stats["subgraph_nodes"]:
        nodes += (
            f" ({stats['main_graph_nodes']} in the main graph, "
            f"{stats['subgraph_nodes']} in subgraphs)"
        )
    size = human_bytes(_int(stats["parameter_bytes"]))
    parameters = (
        f"{_int(stats['parameters']):,} parameters ({size}): "
        f"{_int(stats['initializer_parameters']):,} in "
        f"{_plural(_int(stats['initializers']), 'initializer')}, "
        f"{_int(stats['constant_parameters']):,} in "
        f"{_plural(_int(stats['constant_tensors']), 'Constant node')}; "
        f"{_plural(_int(stats['external_tensors']), 'external tensor')}"
    )
    return [nodes, parameters]


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _int(value: object) -> int:
    assert isinstance(value, int), "collect() returns counts as ints"
    return value


def human_bytes(n: int) -> str:
    """A byte count in B, KiB, MiB or GiB, one decimal."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.1f} {unit}" if unit != "B" else f"{int(size)} B"
        size /= 1024
    return f"{n} B"
