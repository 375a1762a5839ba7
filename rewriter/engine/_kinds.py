"""What a rewrite did, in one word, from the op types it matched and the ones it created.

Ops that compute nothing (Constant, Identity) do not count. A *fusion* turns several ops
into fewer, of a type not among them (seven ops into LayerNormalization); a *folding* absorbs
ops into ops of types already matched (a BatchNormalization into the Conv before it, two
Transposes into one); a *decomposition* turns an op into more ops of other types (an
ExtractImagePatches into Pads and Slices); a *cleanup* creates nothing that computes (a no-op
removed, a Constant made an initializer); anything else is another *rewrite* (as many ops
before as after). A rewrite that creates an op onnx defines as a function of other ops
(RotaryEmbedding), and takes no such op apart, is a fusion however many ops come with it. A
rewrite that creates quantization ops (QuantizeLinear, MatMulInteger, ...) it did not match is
a *quantization*, whatever else it does.
"""

from __future__ import annotations

from collections.abc import Sequence

import ir
from rewriter.rules import QUANTIZATION_OPS

QUANTIZATION = "quantization"
FUSION = "fusion"
FOLDING = "folding"
DECOMPOSITION = "decomposition"
REWRITE = "rewrite"
CLEANUP = "cleanup"
KINDS = (QUANTIZATION, FUSION, FOLDING, DECOMPOSITION, REWRITE, CLEANUP)
"""Every kind, in the order reports list them (what people look for first)."""

_NO_WORK = frozenset({"Constant", "Identity"})


def rewrite_kind(matched_ops: Sequence[str], created_ops: Sequence[str]) -> str:
    """The kind of a rewrite that replaced ops `matched_ops` with `created_ops`."""
    matched = [op for op in matched_ops if op not in _NO_WORK]
    created = [op for op in created_ops if op not in _NO_WORK]
    if not created:
        return CLEANUP
    new_types = set(created) - set(matched)
    if any(op in QUANTIZATION_OPS or op.startswith("QLinear") for op in new_types):
        return QUANTIZATION
    if len(created) < len(matched):
        return FUSION if new_types else FOLDING
    # A new op that onnx defines as a function of others, with no such op taken apart, is
    # a fusion even when the rewrite adds shape plumbing around it (RotaryEmbedding's tables).
    gone = set(matched) - set(created)
    if _fuses_into(new_types, gone):
        return FUSION
    if len(created) > len(matched) and new_types:
        return DECOMPOSITION
    return REWRITE


def _fuses_into(new_types: set[str], gone: set[str]) -> bool:
    """Whether a new composite op takes the place of the ops that went.

    It does when none of those is composite, or when each that is came to ONNX before the new
    one: Softmax -> Attention is a fusion, Attention -> Softmax and MatMuls a decomposition.
    """
    new = [op for op in new_types if _composite(op)]
    if not new:
        return False
    gone_composite = [op for op in gone if _composite(op)]
    if not gone_composite:
        return True
    newest = max(ir.schemas.since_version(op) or 0 for op in new)
    return all((ir.schemas.since_version(op) or 0) < newest for op in gone_composite)


def _composite(op_type: str) -> bool:
    return ir.schemas.is_composite(op_type)
