"""Opset conversion and model checking with onnx's own tools (serde layer)."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator

import onnx
import onnx.checker
import onnx.helper
import onnx.shape_inference
import onnx.version_converter

from ir._core import IRError, Model, Node
from ir._held_weights import HeldWeightsError, lower_holding_weights
from ir._runtime_ops import RuntimeOp, find_runtime_op
from ir._schemas import find_schema
from ir._serde import from_onnx, to_onnx

logger = logging.getLogger(__name__)


class ConversionError(IRError):
    """onnx's version converter could not convert the model."""


def convert_version(model: Model, target: int) -> Model:
    """A new model with the default-domain opset converted to `target`.

    The converter is given the model without its large tensors, which the converted model
    then shares with `model` (see `ir._held_weights`): converting costs no copy of the weights.

    Raises:
        ConversionError: the converter has no adapter for some op, or failed.
    """
    current = model.opset_imports.get("", model.opset_imports.get("ai.onnx"))
    if current == target:
        return model
    proto, held = lower_holding_weights(model)
    stand_ins = _stand_in_runtime_ops(proto, current, target)
    try:
        converted = onnx.version_converter.convert_version(proto, target)
    except (
        RuntimeError,
        ValueError,
        onnx.checker.ValidationError,
        onnx.shape_inference.InferenceError,
    ) as exc:
        raise ConversionError(
            f"cannot convert from opset {current} to {target}: {_converter_message(exc)}"
        ) from exc
    if stand_ins:
        _restore_runtime_ops(converted, target)
    _drop_added_value_info(proto.graph, converted.graph)
    # onnx's converter leaves local functions out of the model it returns; their calls would
    # then name no function. Bodies are converted like the graph (the checker wants one
    # version of a domain across the model and its functions).
    del converted.functions[:]
    converted.functions.extend(_convert_function(f, target) for f in proto.functions)
    result = from_onnx(converted, base_dir=model.base_dir)
    try:
        held.restore(result)
    except HeldWeightsError as exc:
        raise ConversionError(f"cannot convert from opset {current} to {target}: {exc}") from exc
    return result


# onnxruntime's default-domain ops (`_runtime_ops`) cross onnx's converter in this domain, which
# it passes through untouched; they come back to the default domain as the standard op of the
# same meaning, or as themselves where onnxruntime still runs them at the target opset.
_STAND_IN_DOMAIN = "ir.onnxruntime.default_domain"


def _stand_in_runtime_ops(proto: onnx.ModelProto, current: int | None, target: int) -> int:
    """Move the runtime-only ops of `proto` (graphs and subgraphs) to the stand-in domain.

    Returns how many nodes moved.

    Raises:
        ConversionError: such an op has no standard counterpart at `target` and onnxruntime
            does not run it there (it would refuse the converted model).
    """
    if current is None:
        return 0
    moved = 0
    for node, op in _runtime_nodes(proto.graph, current):
        if not _converts(op, target):
            raise ConversionError(
                f"cannot convert from opset {current} to {target}: node "
                f"{node.name or node.op_type!r} is onnxruntime's {op.op_type!r}, which it runs "
                f"in the default domain only from opset {op.first_opset} to "
                f"{(op.end_opset or target) - 1}, and onnx has no op of the same meaning at "
                f"opset {target}"
            )
        node.domain = _STAND_IN_DOMAIN
        moved += 1
    if moved:
        proto.opset_import.append(onnx.helper.make_opsetid(_STAND_IN_DOMAIN, 1))
    return moved


def _runtime_nodes(
    graph: onnx.GraphProto, opset: int
) -> Iterator[tuple[onnx.NodeProto, RuntimeOp]]:
    """The nodes of onnxruntime's ops onnx has no schema for at `opset` (subgraphs too)."""
    for node in _all_nodes(graph):
        op = _runtime_op(node.op_type, node.domain, opset)
        if op is not None:
            yield node, op


def _runtime_op(op_type: str, domain: str, opset: int) -> RuntimeOp | None:
    """The op onnxruntime runs by that name in the default domain at `opset`, onnx none."""
    if domain not in ("", "ai.onnx") or find_schema(op_type, domain, opset) is not None:
        return None
    return find_runtime_op(op_type, domain, opset)


def runtime_ops_lost(model: Model, target: int) -> tuple[Node, ...]:
    """The nodes (nested graphs too) a conversion of `model` to `target` would refuse.

    They are onnxruntime's own default-domain ops (`_runtime_ops`) that it no longer runs at
    `target` and that onnx has no op of the same meaning for there: the old experimental ops
    (`ImageScaler`, `Affine`, ...) above opset 9. Rewritten in standard ops first, the model
    converts.
    """
    current = model.opset_imports.get("", model.opset_imports.get("ai.onnx"))
    if current is None or current == target:
        return ()
    lost = []
    for node in model.graph.all_nodes():
        op = _runtime_op(node.op_type, node.domain, current)
        if op is not None and not _converts(op, target):
            lost.append(node)
    return tuple(lost)


def _converts(op: RuntimeOp, target: int) -> bool:
    """Whether `op` can be written at `target`: as its standard op, or as itself."""
    if op.standard_since is not None and target >= op.standard_since:
        return True
    return op.runs_at(target)


def _restore_runtime_ops(proto: onnx.ModelProto, target: int) -> None:
    """Put the stand-ins back in the default domain (as the standard op at `target`)."""
    kept_ops: dict[str, int] = {}
    for node in _all_nodes(proto.graph):
        if node.domain != _STAND_IN_DOMAIN:
            continue
        node.domain = ""
        op = find_runtime_op(node.op_type, "", None)
        assert op is not None, f"{node.op_type} was moved to the stand-in domain"
        if op.standard_op is not None and target >= (op.standard_since or target + 1):
            node.op_type = op.standard_op
            continue
        kept_ops[node.op_type] = kept_ops.get(node.op_type, 0) + 1
    for op_type, count in kept_ops.items():
        logger.warning(
            "kept %d %s node(s) as they are at opset %d: onnxruntime's own op in the default "
            "domain (onnx defines none), which onnxruntime runs at that opset",
            count,
            op_type,
            target,
        )
    kept = [entry for entry in proto.opset_import if entry.domain != _STAND_IN_DOMAIN]
    del proto.opset_import[:]
    proto.opset_import.extend(kept)


def _all_nodes(graph: onnx.GraphProto) -> Iterator[onnx.NodeProto]:
    """The nodes of `graph` and of every graph nested in its nodes' attributes."""
    for node in graph.node:
        yield node
        for attribute in node.attribute:
            if attribute.type == onnx.AttributeProto.GRAPH:
                yield from _all_nodes(attribute.g)
            for sub in attribute.graphs:
                yield from _all_nodes(sub)


# The converter's C++ assertions: "<file>:<line>: <function>: Assertion `false` failed: <text>".
_ASSERTION = re.compile(r"^.*?:\d+: \w+: Assertion `[^`]*` failed: ")
_NO_ADAPTER = re.compile(r"No Adapter (From|To) Version \$(\d+) for (\S+)")


def _converter_message(exc: BaseException) -> str:
    """One line naming the op and versions, without the converter's source location."""
    lines = str(exc).strip().splitlines()
    if not lines:
        return type(exc).__name__
    text = _ASSERTION.sub("", lines[0])
    adapter = _NO_ADAPTER.search(text)
    if adapter is not None:
        direction, version, op = adapter.groups()
        where = f"{direction.lower()} opset {version}"
        return f"onnx's version converter has no adapter for `{op}` {where}"
    return text


def _convert_function(function: onnx.FunctionProto, target: int) -> onnx.FunctionProto:
    """`function` with its body converted to default-domain opset `target`.

    Raises:
        ConversionError: the converter could not convert the body.
    """
    versions = {entry.domain: entry.version for entry in function.opset_import}
    current = versions.get("", versions.get("ai.onnx"))
    if current is None or current == target:
        return function
    body = onnx.helper.make_graph(
        list(function.node),
        function.name,
        [onnx.ValueInfoProto(name=name) for name in function.input],
        [onnx.ValueInfoProto(name=name) for name in function.output],
    )
    wrapper = onnx.helper.make_model(body, opset_imports=list(function.opset_import))
    stand_ins = _stand_in_runtime_ops(wrapper, current, target)
    try:
        converted = onnx.version_converter.convert_version(wrapper, target)
    except (RuntimeError, ValueError, onnx.checker.ValidationError) as exc:
        raise ConversionError(
            f"cannot convert function `{function.domain}.{function.name}` from opset "
            f"{current} to {target}: {_converter_message(exc)}"
        ) from exc
    if stand_ins:
        _restore_runtime_ops(converted, target)
    result = onnx.FunctionProto()
    result.CopyFrom(function)
    del result.node[:]
    result.node.extend(converted.graph.node)
    del result.opset_import[:]
    result.opset_import.extend(converted.opset_import)
    return result


def _drop_added_value_info(before: onnx.GraphProto, after: onnx.GraphProto) -> None:
    """Keep only the value_info entries the model had: the converter adds its inference's.

    Those would become declared types of the model, with onnx's invented symbols (`unk__5`)
    fixed as if the user had written them.
    """
    kept = {info.name for info in before.value_info}
    entries = [info for info in after.value_info if info.name in kept]
    if len(entries) == len(after.value_info):
        return
    del after.value_info[:]
    after.value_info.extend(entries)


def check_model(model: Model) -> str | None:
    """Run onnx's checker on the lowered model; the first problem it reports, or None.

    The weights' bytes are left out (they become typed inputs): the checker would read
    external data relative to the working folder, and the bytes are not what it checks.
    """
    proto = to_onnx(model, weights=False)
    if proto.ByteSize() > 2**31 - 1:
        return None  # too big for the in-memory checker; the per-rewrite checks still ran
    try:
        check_proto(proto)
    except (onnx.checker.ValidationError, RuntimeError, ValueError) as exc:
        lines = str(exc).strip().splitlines()
        return lines[0] if lines else type(exc).__name__
    return None


def check_proto(proto: onnx.ModelProto) -> None:
    """Onnx's checker on `proto`, reading onnxruntime's default-domain ops as custom ops.

    onnx has no schema for them (`_runtime_ops`), so its checker would refuse every model
    that holds one, although onnxruntime runs it; their nodes are checked like a custom
    domain's. `proto` is not changed.

    Raises:
        onnx.checker.ValidationError: what onnx's checker raises.
    """
    versions = {entry.domain: entry.version for entry in proto.opset_import}
    opset = versions.get("", versions.get("ai.onnx"))
    if opset is not None and next(_runtime_nodes(proto.graph, opset), None) is not None:
        copy = onnx.ModelProto()
        copy.CopyFrom(proto)
        for node, _ in list(_runtime_nodes(copy.graph, opset)):
            node.domain = _STAND_IN_DOMAIN
        copy.opset_import.append(onnx.helper.make_opsetid(_STAND_IN_DOMAIN, 1))
        proto = copy
    onnx.checker.check_model(proto)
