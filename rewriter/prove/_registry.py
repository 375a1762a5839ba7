"""The op semantics by (domain, op type), and applying ops and graphs of them.

`apply_op` is the one entry point: the exact fragment (`_elementwise`, `_indexing`), the ops
onnx composes of those (`_composite`: Gemm), then the uninterpreted ops (`_opaque`); anything
else raises `UnsupportedOpError` with the reason, which a proof reports as `unsupported`.
`apply_nodes` runs a list of node descriptions (op, domain, attributes, input names, output
names) over an environment of symbolic tensors, the form a rule's match or rewrite block
instantiates to.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np
import z3

import ir
from rewriter.prove._common import (
    Attributes,
    Inputs,
    NotModelledError,
    OpError,
    Semantics,
    present,
)
from rewriter.prove._composite import COMPOSITE
from rewriter.prove._dtypes import UnsupportedTypeError
from rewriter.prove._elementwise import ELEMENTWISE
from rewriter.prove._indexing import INDEXING
from rewriter.prove._opaque import opaque_table
from rewriter.prove._tensor import Element, Index, SymbolicTensor, constant

_STANDARD = ("", "ai.onnx")


class UnsupportedOpError(ValueError):
    """An op (or a use of one) outside what the prover models; the message says why."""


class IllFormedOpError(UnsupportedOpError):
    """An op applied to inputs or attributes it does not accept (onnxruntime refuses it).

    A rule instantiated at ranks, types or attribute values its ops do not take is no model
    at all: the prover skips that instance rather than calling the rule unsupported.
    """


def _identity(attributes: Attributes, inputs: Inputs) -> list[SymbolicTensor]:
    del attributes
    return present("Identity", inputs, 1)


def _dropout(attributes: Attributes, inputs: Inputs) -> list[SymbolicTensor]:
    """Dropout: its input, and an all-true mask, where it does not train.

    With a `training_mode` input that is true and a ratio that is not 0, the outputs are
    random: poison (unspecified), so only a rule that holds whatever they are is proved.
    """
    del attributes
    (x,) = present("Dropout", inputs, 1)
    ratio = inputs[1] if len(inputs) > 1 else None
    training = inputs[2] if len(inputs) > 2 else None
    if training is None:
        random = z3.BoolVal(False)
    else:
        if training.rank != 0 or training.dtype != ir.DataType.BOOL:
            raise OpError("Dropout's training_mode is a bool scalar")
        if ratio is not None and ratio.rank != 0:
            raise OpError("Dropout's ratio is a scalar")
        keeps_all = (
            z3.BoolVal(False) if ratio is None else z3.fpIsZero(ratio.at(()).value)  # 0.5 default
        )
        random = z3.And(training.at(()).value == z3.BoolVal(True), z3.Not(keeps_all))

    def output(index: Index) -> Element:
        element = x.at(index)
        poison = random if element.poison is None else z3.Or(random, element.poison)
        return Element(element.value, poison)

    def mask(index: Index) -> Element:
        return Element(z3.BoolVal(True), random)

    key = (
        "Dropout",
        x.key,
        None if ratio is None else ratio.key,
        None if training is None else training.key,
    )
    return [
        SymbolicTensor(x.dtype, x.shape, output, key, x.valid),
        SymbolicTensor(ir.DataType.BOOL, x.shape, mask, (*key, "mask"), x.valid),
    ]


def _constant(attributes: Attributes, inputs: Inputs) -> list[SymbolicTensor]:
    del inputs
    value = attributes.get("value")
    if isinstance(value, ir.Tensor):
        return [constant(value.numpy(), value.dtype)]
    if isinstance(value, np.ndarray):
        return [constant(value)]
    if "value_float" in attributes:
        return [constant(np.array(attributes["value_float"], np.float32))]
    if "value_int" in attributes:
        return [constant(np.array(attributes["value_int"], np.int64))]
    if "value_floats" in attributes:
        return [constant(np.array(attributes["value_floats"], np.float32))]
    if "value_ints" in attributes:
        return [constant(np.array(attributes["value_ints"], np.int64))]
    raise UnsupportedOpError("Constant without a numeric value")


def _table() -> dict[str, Semantics]:
    table: dict[str, Semantics] = {}
    table.update(opaque_table())
    table.update(ELEMENTWISE)
    table.update(INDEXING)
    table.update(COMPOSITE)
    table["Identity"] = _identity
    table["Dropout"] = _dropout
    table["Constant"] = _constant
    return table


SEMANTICS: Mapping[str, Semantics] = _table()
"""Every modelled op of the default domain, by op type."""


def apply_op(
    op_type: str,
    domain: str,
    attributes: Mapping[str, object],
    inputs: Sequence[SymbolicTensor | None],
) -> list[SymbolicTensor]:
    """The outputs of one op on symbolic inputs (None for an absent optional input).

    Attributes are Python values (ints, floats, lists, `ir.Tensor` for Constant); a float
    attribute may be a z3 floating-point term.

    Raises:
        IllFormedOpError: the op does not accept these inputs or attributes.
        UnsupportedOpError: the op, a type, or this use of the op is not modelled.
    """
    if domain not in _STANDARD:
        raise UnsupportedOpError(f"op `{domain}.{op_type}` is outside the default domain")
    semantics = SEMANTICS.get(op_type)
    if semantics is None:
        raise UnsupportedOpError(f"op `{op_type}` is not modelled")
    try:
        return semantics(attributes, inputs)
    except OpError as exc:
        raise IllFormedOpError(f"{op_type}: {exc}") from exc
    except (NotModelledError, UnsupportedTypeError) as exc:
        raise UnsupportedOpError(f"{op_type}: {exc}") from exc


@dataclasses.dataclass(frozen=True, slots=True)
class NodeSpec:
    """One node to apply: op, domain, attributes, input and output names ("" for absent)."""

    op_type: str
    domain: str
    attributes: Mapping[str, object]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]


def apply_nodes(
    nodes: Sequence[NodeSpec], environment: Mapping[str, SymbolicTensor]
) -> dict[str, SymbolicTensor]:
    """Every value the nodes compute, and the environment's, by name (nodes in order).

    Raises:
        UnsupportedOpError: as `apply_op`, naming the node; or a node reads a name neither
            the environment nor an earlier node defines.
    """
    values = dict(environment)
    for node in nodes:
        inputs: list[SymbolicTensor | None] = []
        for name in node.inputs:
            if not name:
                inputs.append(None)
                continue
            if name not in values:
                raise UnsupportedOpError(f"{node.op_type} reads `{name}`, which nothing defines")
            inputs.append(values[name])
        outputs = apply_op(node.op_type, node.domain, node.attributes, inputs)
        for name, tensor in zip(node.outputs, outputs, strict=False):
            if name:
                values[name] = tensor
    return values
