"""Type checks of a built rewrite against the values it replaces.

Each new node's output types come from onnx's per-node inference when it is built; here a
replacement is refused when its known dtype, rank or static dims contradict the replaced
value's, and a new value inherits every fact known about the value it replaces.
"""

from __future__ import annotations

import ir
from rewriter.engine import _facts
from rewriter.engine._pending import Pending, RewriteRejectedError


def check_replacements(pending: Pending) -> None:
    """Refuse contradicting types; give new values the facts of the values they replace.

    Raises:
        RewriteRejectedError: a replacement's known type contradicts the replaced value's.
    """
    created = {id(out) for node in pending.nodes for out in node.outputs}
    for old, new in pending.replacements:
        check_compatible(old, new)
        if id(new) in created:
            inherit_type(old, new)


def check_compatible(old: ir.Value, new: ir.Value) -> None:
    """Refuse a replacement whose known type contradicts the replaced value's known type."""
    a = _facts.value_type(old)
    b = _facts.value_type(new)
    if not isinstance(a, ir.TensorType) or not isinstance(b, ir.TensorType):
        return
    if a.dtype and b.dtype and a.dtype != b.dtype:
        raise RewriteRejectedError(
            f"the rewrite would change `{old.name}` from {a.dtype.onnx_name} to {b.dtype.onnx_name}"
        )
    if a.shape is None or b.shape is None:
        return
    if len(a.shape) != len(b.shape):
        raise RewriteRejectedError(f"the rewrite would change the rank of `{old.name}`: {a} -> {b}")
    for da, db in zip(a.shape, b.shape, strict=False):
        if isinstance(da, int) and isinstance(db, int) and da != db:
            raise RewriteRejectedError(
                f"the rewrite would change the shape of `{old.name}`: {a} -> {b}"
            )


def inherit_type(old: ir.Value, new: ir.Value) -> None:
    """Give a new value every fact known about the value it replaces (they are one tensor).

    onnx's inference cannot type custom-domain ops (com.microsoft.*), and for standard ops it
    invents fresh symbols; keeping the replaced value's facts lets later rules still prove
    ranks and symbolic shape equalities downstream of a rewrite.
    """
    a = _facts.value_type(old)
    if not isinstance(a, ir.TensorType):
        return
    b = _facts.value_type(new)
    ir.record_inferred_type(new, ir.merge_types(a, b) if isinstance(b, ir.TensorType) else a)
