"""Match patterns of the rule IR: the nodes a rule looks for, and how they connect.

A `Pattern` is a tuple of `NodePattern`s that share variables: a variable bound twice must
be the same value (`d = Sub (x, mu)` and `mu = ReduceMean (x)` share `x`). An input variable
that no node pattern defines matches any value, graph inputs and initializers included.
Literal values (an input `1.0`, an attribute `<axis = -1>`) are plain Python values here;
the rule language evaluates them once, when it lowers a rule.
"""

# ruff: noqa: RUF009  (`span_field()` builds a fresh dataclasses.field for each class)

from __future__ import annotations

import dataclasses
from typing import TypeAlias

from rewriter._errors import Span
from rewriter.rules._expr import span_field

LiteralValue: TypeAlias = "int | float | str | bool | list[LiteralValue] | None"
"""A literal in a pattern: a number, string, bool, none, or a (nested) list of them."""


@dataclasses.dataclass(frozen=True, slots=True)
class OpId:
    """One operator: its domain ("" for the standard ONNX domain) and type."""

    domain: str
    op_type: str

    def __str__(self) -> str:
        return f"{self.domain}.{self.op_type}" if self.domain else self.op_type


@dataclasses.dataclass(frozen=True, slots=True)
class InputVar:
    """A variable input: `x`, an optional `b?` (binds none when absent), or the rest `xs...`."""

    name: str
    optional: bool = False
    variadic: bool = False
    span: Span = span_field()


@dataclasses.dataclass(frozen=True, slots=True)
class AnyValue:
    """`_`: any input or output, not bound."""

    span: Span = span_field()


@dataclasses.dataclass(frozen=True, slots=True)
class InputConst:
    """A literal input: matches a constant equal to `value` in the constant's dtype.

    A scalar matches a non-empty constant whose every element equals it; a list matches a
    1-D constant element by element.
    """

    value: LiteralValue
    span: Span = span_field()


@dataclasses.dataclass(frozen=True, slots=True)
class OutputVar:
    """A named output."""

    name: str
    span: Span = span_field()


@dataclasses.dataclass(frozen=True, slots=True)
class AttrBind:
    """`<epsilon = eps>`: bind `var` to the attribute's value (the schema default if omitted).

    A variable bound twice must get equal values.
    """

    name: str
    var: str
    span: Span = span_field()


@dataclasses.dataclass(frozen=True, slots=True)
class AttrEquals:
    """`<axis = -1>`: the attribute (the schema default if omitted) must equal `value`."""

    name: str
    value: LiteralValue
    span: Span = span_field()


InputPattern: TypeAlias = InputVar | AnyValue | InputConst
OutputPattern: TypeAlias = OutputVar | AnyValue
AttrPattern: TypeAlias = AttrBind | AttrEquals


@dataclasses.dataclass(frozen=True, slots=True)
class NodePattern:
    """One node to find: `outputs = Op <attrs> (inputs) as node_var`.

    `ops` are the accepted operators (empty: any op). A node pattern matches a node with
    exactly as many non-empty outputs as `outputs` (at least as many with `more_outputs`) and
    as many inputs, ignoring trailing absent ones, as `inputs` (a variadic last input takes
    the rest). Attributes not named are unconstrained.
    """

    outputs: tuple[OutputPattern, ...]
    ops: tuple[OpId, ...]
    attrs: tuple[AttrPattern, ...] = ()
    inputs: tuple[InputPattern, ...] = ()
    node_var: str | None = None
    more_outputs: bool = False
    span: Span = span_field()

    @property
    def output_names(self) -> tuple[str, ...]:
        """The names of the bound outputs, in order."""
        return tuple(o.name for o in self.outputs if isinstance(o, OutputVar))

    @property
    def input_names(self) -> tuple[tuple[int, str], ...]:
        """(position, name) of every variable input."""
        return tuple((i, p.name) for i, p in enumerate(self.inputs) if isinstance(p, InputVar))


@dataclasses.dataclass(frozen=True, slots=True)
class RepeatPattern:
    """`repeat (n >= K) from h to out { body }`: a chain of `n` copies of a block.

    Each copy's `to_var` value feeds the next copy's `from_var` input.
    """

    count_var: str
    count_op: str
    count: int
    from_var: str
    to_var: str
    body: tuple[NodePattern, ...]
    span: Span = span_field()


@dataclasses.dataclass(frozen=True, slots=True)
class Pattern:
    """What a rule matches: node patterns, or one repeated block."""

    nodes: tuple[NodePattern, ...]
    repeat: RepeatPattern | None = None
    span: Span = span_field()

    @property
    def lines(self) -> tuple[NodePattern, ...]:
        """The node patterns searched for one match (a repeated block's body)."""
        return self.repeat.body if self.repeat is not None else self.nodes
