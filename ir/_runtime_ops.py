"""Ops onnxruntime runs in the default domain at opsets where onnx defines none (data).

onnxruntime registers a few ops in the default ONNX domain beyond onnx's own schemas
(onnxruntime/core/graph/contrib_ops/contrib_defs.cc and onnx_deprecated_operators.cc):

* `LayerNormalization` from opset 1, which onnx defines only from 17 on: onnxruntime's
  transformer optimizer writes it into opset-12/14 BERT and GPT-2 models;
* `SimplifiedLayerNormalization` (RMS normalization), at every opset, written by onnxruntime's
  and onnxscript's fusers; onnx has no such op;
* the experimental ops onnx dropped (`Affine`, `Crop`, `ImageScaler`, `ParametricSoftplus`,
  `Scale`, `ScaledTanh`, and the old `ThresholdedRelu` and `MeanVarianceNormalization`), which
  onnxruntime still runs below opset 10 (old opset-7/8 converter output).

This table restates what those schemas and kernels say: the opsets where each op runs, its
inputs, outputs and attributes, how its output types follow from its inputs, and the standard
op with the same meaning when there is one (what a version conversion turns it into). It is
the only place this package knows about onnxruntime; nothing here loads onnxruntime.

Invariant: an op is listed only for opsets where onnx has no schema of that name, so a
standard op is never mistaken for onnxruntime's.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Sequence

from ir._core import Node, TensorType, Type
from ir._enums import AttrType, DataType

_DEFAULT_DOMAINS = ("", "ai.onnx")


class OutputTypes(enum.Enum):
    """How an op's output types follow from its first input's type."""

    LIKE_INPUT = "like_input"
    """Every output has the type and shape of input 0 (elementwise ops)."""
    LIKE_INPUT_RANK = "like_input_rank"
    """Output 0 has input 0's element type and rank; its dims are not known (Crop)."""
    NORMALIZATION = "normalization"
    """Output 0 is like input 0; the others are statistics: element type `stash_type`
    (float by default), input 0's dims before `axis`, 1 from `axis` on."""


@dataclasses.dataclass(frozen=True, slots=True)
class RuntimeOp:
    """One op onnxruntime runs in the default domain where onnx has no schema for it.

    Attributes:
        op_type: the op's name.
        first_opset: the first default-domain opset where onnxruntime runs it.
        end_opset: the first opset where it no longer does (onnx defines its own op of that
            name there, or onnxruntime dropped it); None when it runs at every later opset.
        inputs: input names, in order.
        required_inputs: how many leading inputs are required.
        outputs: output names, in order (all but the first are optional).
        attributes: attribute names and kinds.
        output_types: how the output types follow.
        standard_op: the onnx op with the same meaning and attributes, or None.
        standard_since: the opset from which `standard_op` has that meaning.
    """

    op_type: str
    first_opset: int
    end_opset: int | None
    inputs: tuple[str, ...]
    required_inputs: int
    outputs: tuple[str, ...]
    attributes: tuple[tuple[str, AttrType], ...]
    output_types: OutputTypes
    standard_op: str | None = None
    standard_since: int | None = None

    def runs_at(self, opset: int) -> bool:
        """True when onnxruntime runs this op at default-domain opset `opset`."""
        return opset >= self.first_opset and (self.end_opset is None or opset < self.end_opset)

    def attribute_names(self) -> frozenset[str]:
        """The attribute names the op accepts."""
        return frozenset(name for name, _ in self.attributes)


_NORMALIZATION_ATTRIBUTES = (
    ("axis", AttrType.INT),
    ("epsilon", AttrType.FLOAT),
    ("stash_type", AttrType.INT),
)

RUNTIME_OPS: tuple[RuntimeOp, ...] = (
    RuntimeOp(
        "LayerNormalization",
        1,
        17,
        ("X", "Scale", "B"),
        2,
        ("Y", "Mean", "InvStdDev"),
        _NORMALIZATION_ATTRIBUTES,
        OutputTypes.NORMALIZATION,
        standard_op="LayerNormalization",
        standard_since=17,
    ),
    RuntimeOp(
        "SimplifiedLayerNormalization",
        1,
        None,
        ("X", "scale"),
        2,
        ("Y", "inv_std_var"),
        _NORMALIZATION_ATTRIBUTES,
        OutputTypes.NORMALIZATION,
    ),
    RuntimeOp(
        "ThresholdedRelu",
        1,
        10,
        ("X",),
        1,
        ("Y",),
        (("alpha", AttrType.FLOAT),),
        OutputTypes.LIKE_INPUT,
        standard_op="ThresholdedRelu",
        standard_since=10,
    ),
    RuntimeOp(
        "MeanVarianceNormalization",
        1,
        9,
        ("input",),
        1,
        ("output",),
        (("across_channels", AttrType.INT), ("normalize_variance", AttrType.INT)),
        OutputTypes.LIKE_INPUT,
    ),
    RuntimeOp(
        "Affine",
        1,
        10,
        ("X",),
        1,
        ("Y",),
        (("alpha", AttrType.FLOAT), ("beta", AttrType.FLOAT)),
        OutputTypes.LIKE_INPUT,
    ),
    RuntimeOp(
        "ParametricSoftplus",
        1,
        10,
        ("X",),
        1,
        ("Y",),
        (("alpha", AttrType.FLOAT), ("beta", AttrType.FLOAT)),
        OutputTypes.LIKE_INPUT,
    ),
    RuntimeOp(
        "ScaledTanh",
        1,
        10,
        ("input",),
        1,
        ("output",),
        (("alpha", AttrType.FLOAT), ("beta", AttrType.FLOAT)),
        OutputTypes.LIKE_INPUT,
    ),
    RuntimeOp(
        "Scale",
        1,
        10,
        ("input",),
        1,
        ("output",),
        (("scale", AttrType.FLOAT),),
        OutputTypes.LIKE_INPUT,
    ),
    RuntimeOp(
        "ImageScaler",
        1,
        10,
        ("input",),
        1,
        ("output",),
        (("bias", AttrType.FLOATS), ("scale", AttrType.FLOAT)),
        OutputTypes.LIKE_INPUT,
    ),
    RuntimeOp(
        "Crop",
        1,
        10,
        ("input",),
        1,
        ("output",),
        (("border", AttrType.INTS), ("scale", AttrType.INTS)),
        OutputTypes.LIKE_INPUT_RANK,
    ),
)

_BY_NAME: dict[str, tuple[RuntimeOp, ...]] = {}
for _op in RUNTIME_OPS:
    _BY_NAME[_op.op_type] = (*_BY_NAME.get(_op.op_type, ()), _op)


def find_runtime_op(op_type: str, domain: str, opset: int | None) -> RuntimeOp | None:
    """The op onnxruntime defines by that name in the default domain at `opset` (or any)."""
    if domain not in _DEFAULT_DOMAINS:
        return None
    for op in _BY_NAME.get(op_type, ()):
        if opset is None or op.runs_at(opset):
            return op
    return None


def runtime_op_names() -> frozenset[str]:
    """The names of every op in the table."""
    return frozenset(_BY_NAME)


def runtime_op_types(op: RuntimeOp, node: Node, inputs: Sequence[Type | None]) -> list[Type | None]:
    """The output types of `node` (an `op` node) as onnxruntime's kernels produce them.

    Computed from the types of its inputs; None where not known.
    """
    found: list[Type | None] = [None] * len(node.outputs)
    first = inputs[0] if inputs else None
    if not isinstance(first, TensorType) or not found:
        return found
    found[0] = first
    if op.output_types is OutputTypes.LIKE_INPUT_RANK:
        shape = None if first.shape is None else (None,) * len(first.shape)
        found[0] = TensorType(first.dtype, shape)
    elif op.output_types is OutputTypes.NORMALIZATION:
        for index in range(1, len(found)):
            found[index] = _statistics_type(node, first)
    return found


def _statistics_type(node: Node, first: TensorType) -> TensorType | None:
    """The type of a normalization's saved mean or inverse standard deviation."""
    stash = node.attribute("stash_type", int(DataType.FLOAT))
    if not isinstance(stash, int) or stash not in _STASH_TYPES:
        return None
    dtype = DataType(stash)
    if first.shape is None:
        return TensorType(dtype)
    rank = len(first.shape)
    axis = node.attribute("axis", -1)
    if not isinstance(axis, int) or not -rank <= axis < rank:
        return TensorType(dtype)
    axis = axis + rank if axis < 0 else axis
    return TensorType(dtype, (*first.shape[:axis], *(1,) * (rank - axis)))


_STASH_TYPES = frozenset(int(t) for t in (DataType.FLOAT, DataType.DOUBLE, DataType.BFLOAT16))


__all__ = [
    "RUNTIME_OPS",
    "OutputTypes",
    "RuntimeOp",
    "find_runtime_op",
    "runtime_op_names",
    "runtime_op_types",
]
