"""Whether a rule can apply to a model at all: its `requires` and the ops it emits.

A rule that cannot apply is skipped for the whole run, with the reason in the trace, before
any matching: `requires opset >= 17` not met, or an emitted op that the model's opset (or the
`--target-opset` a conversion heads for) does not define. A rule that requires onnxruntime's
contrib domain may also emit the ops onnxruntime runs in the default domain.
"""

from __future__ import annotations

from collections.abc import Mapping

import ir
from rewriter import rules
from rewriter.engine._compile import CompiledRule


def _requirement_holds(req: rules.Requirement, opsets: Mapping[str, int]) -> bool:
    domain = ir.schemas.normalize_domain(req.domain)
    version = opsets.get(domain)
    if version is None and domain == "":
        version = opsets.get("ai.onnx")
    if version is None:
        return False
    return {
        ">=": version >= req.version,
        ">": version > req.version,
        "<=": version <= req.version,
        "<": version < req.version,
        "==": version == req.version,
        "!=": version != req.version,
    }.get(req.op, False)


def applicability(
    rule: CompiledRule, opsets: Mapping[str, int], target: int | None = None
) -> str | None:
    """Why `rule` cannot apply to a model with these opsets (None when it can).

    With a conversion `target`, `requires` is judged at the target opset and emitted ops must
    exist both now and at the target (the result is converted afterwards).
    """
    judged = dict(opsets)
    if target is not None:
        judged[""] = target
    for req in rule.rule.requires:
        if not _requirement_holds(req, judged):
            domain = req.domain or "ai.onnx"
            have = judged.get(ir.schemas.normalize_domain(req.domain))
            what = (
                "the target opset is"
                if target is not None and req.domain in ("", "ai.onnx")
                else "the model has"
            )
            return f"requires opset {domain} {req.op} {req.version}, {what} {have or 'none'}"
    for op in rule.emitted_ops:
        domain = op.domain
        if not ir.schemas.is_known_domain(domain):
            continue
        version = opsets.get(domain) or (opsets.get("ai.onnx") if domain == "" else None)
        label = f"{domain}.{op.op_type}" if domain else op.op_type
        if version is None:
            return f"emits `{label}` but the model does not import domain {domain or 'ai.onnx'}"
        versions = [version] if target is None or domain != "" else [version, target]
        for v in versions:
            if ir.schemas.find_schema(op.op_type, domain, v) is not None:
                continue
            if may_write_runtime_op(rule, op.op_type, domain, v):
                continue
            since = ir.schemas.since_version(op.op_type, domain)
            return f"emits `{label}`, which needs opset {since}; the model has {v}"
    return None


def may_write_runtime_op(rule: CompiledRule, op_type: str, domain: str, opset: int) -> bool:
    """Whether `rule` may write an op onnx does not define that onnxruntime runs at `opset`.

    Only a rule for onnxruntime's models may: one that requires its contrib domain
    (patterns/ort), writing an op onnxruntime runs in the default domain where onnx defines
    none (`SimplifiedLayerNormalization`, as onnxruntime's and onnxscript's fusers write it).
    Every other rule writes onnx's ops only.
    """
    for_onnxruntime = any(
        ir.schemas.normalize_domain(req.domain) == _ORT_DOMAIN and req.op in (">=", ">", "==")
        for req in rule.rule.requires
    )
    return for_onnxruntime and ir.schemas.find_runtime_op(op_type, domain, opset) is not None


_ORT_DOMAIN = "com.microsoft"
