"""Turn a subgraph of a model into a `.rw` rule skeleton (`rewrite extract-rule`).

The subgraph is every node that the chosen outputs depend on, back to the chosen inputs,
initializers and `Constant` outputs. The skeleton's match block lists those nodes in
topological order with their attributes as literals; constants become variables required
by `is_const(...)` in `where`; the rewrite block is left for the user (lint reports it as
empty until it is written). Graph value names become short variable names: the original
name when it is short and readable, else one derived from the producing op (`mm`, `add_1`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

import numpy as np

import ir
from rewriter._errors import AdvisedError, RewriteError
from rewriter.dsl._keywords import KEYWORDS
from rewriter.rules import format_const

_OP_SHORT_NAMES = {
    "MatMul": "mm",
    "Gemm": "gemm",
    "Add": "add",
    "Sub": "sub",
    "Mul": "mul",
    "Div": "div",
    "Pow": "pow",
    "Conv": "conv",
    "BatchNormalization": "bn",
    "LayerNormalization": "ln",
    "Transpose": "tr",
    "Reshape": "rs",
    "Softmax": "sm",
    "ReduceMean": "mean",
    "Concat": "cat",
    "Unsqueeze": "unsq",
    "Squeeze": "sq",
    "Sigmoid": "sig",
    "Where": "sel",
}
_MAX_KEPT_NAME = 12
_SNAKE = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


class ExtractError(RewriteError):
    """The requested subgraph cannot be extracted (names a value or explains why)."""


class ExtractBoundaryError(ExtractError, AdvisedError):
    """The given inputs or outputs do not bound the subgraph; `remedies` names which to change."""


def extract_rule(
    model: ir.Model, inputs: Sequence[str], outputs: Sequence[str], name: str = "extracted"
) -> str:
    """A rule skeleton matching the subgraph between `inputs` and `outputs`.

    Raises:
        ExtractError: a name does not exist, an output depends on something that is neither
            an input nor a constant, or an input does not feed the outputs.
    """
    if not name.isidentifier() or name in KEYWORDS:
        raise ExtractError(f"`{name}` is not a valid rule name")
    if not outputs:
        raise ExtractBoundaryError("name at least one output", ("outputs",))
    graph = model.graph
    values = {v.name: v for v in graph.values() if v.name}
    input_values = [_find(values, n, "input") for n in inputs]
    output_values = [_find(values, n, "output") for n in outputs]
    nodes, constants = _subgraph(graph, input_values, output_values)
    if not nodes:
        raise ExtractError("no node lies between the inputs and the outputs")
    _refuse_outside_uses(nodes, output_values)
    names = _VariableNames()
    for value in [*input_values, *constants]:
        names.of(value)
    lines = _match_lines(nodes, names)
    constant_names = [names.of(c) for c in constants]
    output_names = [names.of(v) for v in output_values]
    return _skeleton(name, inputs, outputs, lines, constant_names, output_names)


def _find(values: dict[str, ir.Value], name: str, role: str) -> ir.Value:
    value = values.get(name)
    if value is None:
        raise ExtractError(f"{role} `{name}` is not a value of the model's main graph")
    return value


def _is_constant(value: ir.Value) -> bool:
    producer = value.producer()
    if producer is not None:
        return producer.op_type == "Constant" and producer.domain in ("", "ai.onnx")
    return value.is_initializer() or value.const_value is not None


def _subgraph(
    graph: ir.Graph, inputs: Sequence[ir.Value], outputs: Sequence[ir.Value]
) -> tuple[list[ir.Node], list[ir.Value]]:
    """The nodes between inputs and outputs (graph order) and the constants they read."""
    boundary = dict.fromkeys(inputs)
    needed: dict[ir.Node, None] = {}
    constants: dict[ir.Value, None] = {}
    reached: dict[ir.Value, None] = {}
    pending = list(outputs)
    while pending:
        value = pending.pop()
        if value in boundary:
            reached[value] = None
            continue
        if _is_constant(value):
            constants[value] = None
            continue
        producer = value.producer()
        if producer is None:
            raise ExtractBoundaryError(
                f"the outputs depend on `{value.name}`, which is neither one of the given "
                "inputs nor a constant",
                ("inputs",),
            )
        if producer in needed:
            continue
        needed[producer] = None
        pending.extend(v for v in producer.inputs if v is not None)
    for value in inputs:
        if value not in reached:
            raise ExtractError(f"input `{value.name}` does not feed the outputs")
    order = [n for n in ir.topological_order(graph) if n in needed]
    ordered_constants = sorted(constants, key=_first_use(order))
    return order, ordered_constants


def _refuse_outside_uses(nodes: list[ir.Node], outputs: Sequence[ir.Value]) -> None:
    """Refuse a subgraph with an inner value that something outside it reads.

    The rule's match would define that value without its rewrite redefining it, so the
    matcher would never accept it (DSL.md's outside-uses rule).

    Raises:
        ExtractError: naming the value and a reader, and what to do.
    """
    inside = dict.fromkeys(nodes)
    chosen = dict.fromkeys(outputs)
    for node in nodes:
        for value in node.outputs:
            if not value.name or value in chosen:
                continue
            readers = [u for u in value.users() if u not in inside]
            if readers or value.is_graph_output():
                reader = (
                    f"node `{readers[0].name or readers[0].op_type}`"
                    if readers
                    else "a graph output"
                )
                raise ExtractBoundaryError(
                    f"`{value.name}`, computed inside the subgraph, is also read by {reader}: "
                    "a rule matching it would never fire unless its rewrite redefines it; make "
                    "it one of the outputs",
                    ("outputs",),
                )


def _first_use(order: list[ir.Node]) -> _UseOrder:
    return _UseOrder({node: index for index, node in enumerate(order)})


class _UseOrder:
    """Sort key: a constant comes where it is first read."""

    def __init__(self, positions: dict[ir.Node, int]) -> None:
        self.positions = positions

    def __call__(self, value: ir.Value) -> int:
        indices = [self.positions[u.node] for u in value.uses if u.node in self.positions]
        return min(indices, default=len(self.positions))


class _VariableNames:
    """Short, unique, readable variable names for graph values."""

    def __init__(self) -> None:
        self.by_value: dict[ir.Value, str] = {}
        self.taken: dict[str, None] = {}
        self.absent = 0

    def of(self, value: ir.Value) -> str:
        """The variable for `value` (allocated on first request)."""
        known = self.by_value.get(value)
        if known is not None:
            return known
        base = _readable(value.name) or _from_producer(value)
        chosen = self._unique(base)
        self.by_value[value] = chosen
        return chosen

    def absent_input(self) -> str:
        """A fresh optional-input variable for an absent input in the middle of a list."""
        self.absent += 1
        return self._unique(f"_absent{self.absent}")

    def _unique(self, base: str) -> str:
        candidate = base
        suffix = 0
        while candidate in self.taken or candidate in KEYWORDS:
            suffix += 1
            candidate = f"{base}_{suffix}"
        self.taken[candidate] = None
        return candidate


def _readable(name: str) -> str | None:
    cleaned = re.sub(r"[^0-9A-Za-z_]+", "_", name).strip("_")
    if not cleaned or len(cleaned) > _MAX_KEPT_NAME or cleaned[0].isdigit():
        return None
    return cleaned


def _from_producer(value: ir.Value) -> str:
    producer = value.producer()
    if producer is None:
        return "w" if value.is_initializer() else "x"
    if producer.op_type == "Constant":
        return "c"
    short = _OP_SHORT_NAMES.get(producer.op_type)
    if short is None:
        short = _SNAKE.sub("_", producer.op_type).lower()[:_MAX_KEPT_NAME].strip("_")
    return short or "v"


def _match_lines(nodes: Iterable[ir.Node], names: _VariableNames) -> list[str]:
    lines = []
    for node in nodes:
        outputs = ", ".join(names.of(v) for v in node.outputs) or "..."
        op = node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}"
        attrs = [_attribute(a) for a in node.attributes.values()]
        shown = [a for a in attrs if a is not None]
        attr_text = f" <{', '.join(shown)}>" if shown else ""
        lines.append(f"{outputs} = {op}{attr_text} ({_inputs(node, names)})")
    return lines


def _inputs(node: ir.Node, names: _VariableNames) -> str:
    present = list(node.inputs)
    while present and present[-1] is None:
        present.pop()
    parts = [names.absent_input() + "?" if v is None else names.of(v) for v in present]
    return ", ".join(parts)


def _attribute(attr: ir.Attr) -> str | None:
    """`name = literal`, or None for attributes a literal cannot express (graphs, tensors)."""
    literal = _literal(attr.type, attr.value)
    return None if literal is None or attr.ref_attr_name else f"{attr.name} = {literal}"


def _literal(kind: ir.AttrType, value: object) -> str | None:
    if kind == ir.AttrType.INT and isinstance(value, int):
        return str(value)
    if kind == ir.AttrType.FLOAT and isinstance(value, float):
        return _float(value)
    if kind == ir.AttrType.STRING and isinstance(value, str | bytes):
        return format_const(_text(value))
    if kind in (ir.AttrType.INTS, ir.AttrType.FLOATS, ir.AttrType.STRINGS):
        assert isinstance(value, tuple), f"a list attribute holds a tuple, not {value!r}"
        if kind == ir.AttrType.INTS:
            items = [str(v) for v in value]
        elif kind == ir.AttrType.FLOATS:
            items = [_float(float(v)) for v in value]
        else:
            items = [format_const(_text(v)) for v in value]
        return "[" + ", ".join(items) + "]"
    return None


def _float(value: float) -> str:
    """The shortest text that reads back as the same float32 (attributes are float32)."""
    text = str(np.float32(value))
    return text if any(c in text for c in ".einf") else text + ".0"


def _text(value: object) -> str:
    return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else str(value)


def _skeleton(
    name: str,
    inputs: Sequence[str],
    outputs: Sequence[str],
    match_lines: list[str],
    constants: list[str],
    output_names: list[str],
) -> str:
    shown_outputs = ", ".join(f"`{o}`" for o in outputs)
    shown_inputs = ", ".join(f"`{i}`" for i in inputs) or "constants only"
    lines = [
        f"# Extracted subgraph: {shown_inputs} -> {shown_outputs}.",
        "# TODO: state the algebra of this rule here, e.g. `# x*1 -> x`.",
        f"rule {name} {{",
        "  match {",
        *(f"    {line}" for line in match_lines),
        "  }",
    ]
    if constants:
        lines += ["  where {", f"    is_const({', '.join(constants)})", "  }"]
    defined = ", ".join(f"`{o}`" for o in output_names)
    lines += [
        "  rewrite {",
        f"    # TODO: redefine {defined} from the values bound above, for example",
        f"    #   {output_names[0]} = SomeOp <attribute = value> (...)",
        "  }",
        "}",
    ]
    return "\n".join(lines) + "\n"
