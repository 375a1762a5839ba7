"""What every op's semantics shares: its signature, its errors, and how results are keyed."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import z3

import ir
from rewriter.prove._tensor import SymbolicTensor

Attributes = Mapping[str, object]
Inputs = Sequence[SymbolicTensor | None]
Values = Sequence[z3.ExprRef]
Computed = tuple[z3.ExprRef, z3.BoolRef | None]
"""A value and its own poison condition (None: never poison)."""
Semantics = Callable[[Attributes, Inputs], list[SymbolicTensor]]
"""An op's semantics: attributes and inputs (None for absent ones) to its outputs."""


class OpError(ValueError):
    """An op applied to inputs it does not accept (wrong count, types, attributes)."""


class NotModelledError(ValueError):
    """A well-formed use of an op that the semantics does not cover (a symbolic axis)."""


def key_of(op: str, attributes: Attributes, inputs: Inputs) -> object:
    """The structural key of an op's result: the op, its attributes and its inputs' keys."""
    written = tuple(sorted((name, repr(value)) for name, value in attributes.items()))
    return (op, written, tuple(i.key if i is not None else None for i in inputs))


def present(op: str, inputs: Inputs, count: int) -> list[SymbolicTensor]:
    """The first `count` inputs, which must be there.

    Raises:
        OpError: fewer inputs, or an absent one among them.
    """
    if len(inputs) < count or any(i is None for i in inputs[:count]):
        raise OpError(f"{op} takes {count} input(s)")
    return [i for i in inputs[:count] if i is not None]


def same_dtype(op: str, tensors: Sequence[SymbolicTensor]) -> ir.DataType:
    """The one element type of `tensors`.

    Raises:
        OpError: they differ.
    """
    dtypes = {t.dtype for t in tensors}
    if len(dtypes) != 1:
        raise OpError(f"{op}: inputs of different types {sorted(d.onnx_name for d in dtypes)}")
    return tensors[0].dtype
