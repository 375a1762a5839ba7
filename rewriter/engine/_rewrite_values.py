"""How the Python values a rewrite computes become ONNX: literal dtypes and attributes.

A scalar literal used as a node input takes its dtype from the op's schema: from the input
sharing its type variable (Mul's `T`), or from the fixed type of that input (int64 for axes,
shapes, indices); a list literal is int64. Attribute values are converted to the kind the
schema declares (a dtype name for Cast's `to`, a list for INTS, a tensor for TENSOR).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

import ir
from rewriter.engine import _facts


def literal_dtype(raw: object, schema: Any, index: int, siblings: Sequence[object]) -> ir.DataType:
    """The dtype a Python literal takes as input `index` of a node (DSL.md's dtype rules)."""
    if schema is not None:
        formals = list(schema.inputs)
        if formals:
            formal = formals[min(index, len(formals) - 1)]
            type_str = formal.type_str
            constraints = {c.type_param_str: c for c in schema.type_constraints}
            if type_str in constraints:
                for j, other in enumerate(siblings):
                    if j == index or not isinstance(other, ir.Value):
                        continue
                    other_formal = formals[min(j, len(formals) - 1)]
                    if other_formal.type_str == type_str:
                        found = _facts.dtype_of(other)
                        if found is not None:
                            return found
                allowed = list(constraints[type_str].allowed_type_strs)
                if len(allowed) == 1:
                    return _dtype_from_type_str(allowed[0]) or _default_dtype(raw)
                # No input shares the type variable (Slice's `Tind`, Gather's indices): the
                # literal keeps its own dtype when the schema allows it, rather than copying
                # an unrelated input's (a float `x` must not make Slice's starts float).
                default = _default_dtype(raw)
                if f"tensor({default.onnx_name})" in allowed:
                    return default
            else:
                fixed = _dtype_from_type_str(type_str)
                if fixed is not None:
                    return fixed
    for other in siblings:
        if isinstance(other, ir.Value):
            found = _facts.dtype_of(other)
            if found is not None:
                return found
            break
    return _default_dtype(raw)


def _dtype_from_type_str(type_str: str) -> ir.DataType | None:
    if type_str.startswith("tensor(") and type_str.endswith(")"):
        inner = type_str[len("tensor(") : -1]
        try:
            return ir.DataType.from_name(inner)
        except ValueError:
            return None
    return None


def _default_dtype(raw: Any) -> ir.DataType:
    flat = raw
    while isinstance(flat, list) and flat:
        flat = flat[0]
    if isinstance(flat, bool):
        return ir.DataType.BOOL
    if isinstance(raw, list):
        return ir.DataType.INT64 if all(_is_int(v) for v in _flatten(raw)) else ir.DataType.FLOAT
    if isinstance(flat, int):
        return ir.DataType.INT64
    return ir.DataType.FLOAT


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _flatten(items: Iterable[Any]) -> Iterable[Any]:
    for item in items:
        if isinstance(item, list):
            yield from _flatten(item)
        else:
            yield item


def make_attr(op_type: str, domain: str, opset: int | None, name: str, value: Any) -> ir.Attr:
    kind = ir.schemas.attribute_type(op_type, name, domain, opset)
    try:
        if kind is None:
            if isinstance(value, np.ndarray):
                return ir.attr_tensor(name, ir.NumpyTensor(value))
            return ir.infer_attr(name, value)
        return _convert_attr(name, kind, value)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"attribute `{name}`: {exc}") from exc


def _convert_attr(name: str, kind: ir.AttrType, value: Any) -> ir.Attr:
    if kind == ir.AttrType.INT:
        if isinstance(value, str):
            return ir.attr_int(name, int(ir.DataType.from_name(value)))
        return ir.attr_int(
            name,
            int(np.asarray(value).reshape(-1)[0]) if isinstance(value, np.ndarray) else int(value),
        )
    # FLOAT attributes are float32 in the model: hold them so, so that a rule comparing one
    # (`alpha == float(cast(1.0 / 6.0, "float"))`) sees what the saved model holds.
    if kind == ir.AttrType.FLOAT:
        return ir.attr_float(name, float(np.float32(np.asarray(value).reshape(-1)[0])))
    if kind == ir.AttrType.STRING:
        return ir.attr_str(name, str(value))
    if kind == ir.AttrType.INTS:
        return ir.attr_ints(name, [int(v) for v in np.asarray(value).reshape(-1)])
    if kind == ir.AttrType.FLOATS:
        return ir.attr_floats(
            name, [float(v) for v in np.asarray(value, dtype=np.float32).reshape(-1)]
        )
    if kind == ir.AttrType.STRINGS:
        return ir.attr_strs(name, [str(v) for v in value])
    if kind == ir.AttrType.TENSOR:
        return ir.attr_tensor(name, ir.NumpyTensor(np.asarray(value)))
    raise TypeError(f"cannot build a {kind.name} attribute from an expression")
