"""Symbolic tensors made concrete: every element evaluated, in a z3 model or as numerals.

Used to read a counterexample's inputs and outputs out of the solver's model, and by the
tests to compare the semantics with onnxruntime on concrete inputs bit for bit.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any

import numpy as np
import z3

import ir
from rewriter.prove._dtypes import to_python
from rewriter.prove._tensor import SymbolicTensor, as_int, term

# Tensors with more elements than this are not read out of a model.
MAX_EVALUATED_ELEMENTS = 1 << 14


class NotConcreteError(ValueError):
    """A tensor whose shape or elements do not evaluate to numbers."""


@dataclasses.dataclass(frozen=True, slots=True)
class Concrete:
    """A tensor's values, and which elements are poison (unspecified)."""

    values: np.ndarray[Any, Any]
    poison: np.ndarray[Any, Any]


def _evaluator(model: z3.ModelRef | None) -> Any:
    if model is None:
        return z3.simplify

    def evaluate(expression: z3.ExprRef) -> z3.ExprRef:
        return model.eval(expression, model_completion=True)

    return evaluate


def concrete_shape(tensor: SymbolicTensor, model: z3.ModelRef | None = None) -> tuple[int, ...]:
    """The tensor's dims as ints (in `model` when given).

    Raises:
        NotConcreteError: a dim does not evaluate to a number.
    """
    evaluate = _evaluator(model)
    dims = []
    for dim in tensor.shape:
        number = as_int(evaluate(term(dim)))
        if number is None:
            raise NotConcreteError(f"dim {dim} is not a number")
        dims.append(number)
    return tuple(dims)


def concrete(tensor: SymbolicTensor, model: z3.ModelRef | None = None) -> Concrete:
    """Every element of `tensor` (in `model` when given, else by simplification).

    Raises:
        NotConcreteError: the shape or an element does not evaluate to a number, or the
            tensor has more than `MAX_EVALUATED_ELEMENTS` elements.
    """
    evaluate = _evaluator(model)
    shape = concrete_shape(tensor, model)
    count = int(np.prod(shape)) if shape else 1
    if count > MAX_EVALUATED_ELEMENTS:
        raise NotConcreteError(f"{count} elements are too many to evaluate")
    values = np.zeros(shape, dtype=ir.numpy_dtype(tensor.dtype))
    poison = np.zeros(shape, dtype=bool)
    for position in itertools.product(*(range(d) for d in shape)):
        element = tensor.at(tuple(z3.IntVal(p) for p in position))
        if element.poison is not None and z3.is_true(evaluate(element.poison)):
            poison[position] = True  # its value is unspecified (left 0)
            continue
        try:
            values[position] = to_python(evaluate(element.value), tensor.dtype)
        except ValueError as exc:
            raise NotConcreteError(str(exc)) from exc
    return Concrete(values, poison)
