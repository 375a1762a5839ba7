"""Operator documentation from onnx's schemas, at the opsets a rule applies at.

The schema shown is the version in force at the newest opset the rule's `requires` admits
(the newest onnx defines when it says nothing); attributes come with their kind, whether
they are required, and their default.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable

import ir
from rewriter import dsl


def op_documentation(op_type: str, domain: str, opsets: dsl.OpsetRange) -> str | None:
    """Markdown for an op: its version, summary, attributes, inputs, outputs, type constraints.

    None when onnx does not know the op (a custom domain, or a misspelling).
    """
    domain = ir.schemas.normalize_domain(domain)
    opset = opsets.newest(domain)
    schema = ir.schemas.find_schema(op_type, domain, opset)
    if schema is None:
        schema = ir.schemas.find_schema(op_type, domain)
    if schema is None:
        return None
    since = int(schema.since_version)
    shown_domain = domain or "ai.onnx"
    where = f"in force at opset {opset}" if since <= opset else f"opset {since} and later"
    lines = [
        f"**{op_type}** ({shown_domain}) — {op_type}-{since}, {where}"
        + ("" if not opsets.bounded else f"; this rule: {opsets.describe()}"),
    ]
    attributes = sorted(schema.attributes.items())
    if attributes:
        lines += ["", "**Attributes**", ""]
        lines += [_attribute_line(op_type, domain, since, name, a) for name, a in attributes]
    lines += ["", "**Inputs**: " + _parameters(schema.inputs)]
    lines += ["", "**Outputs**: " + _parameters(schema.outputs)]
    constraints = [
        f"`{c.type_param_str}`: {', '.join(c.allowed_type_strs)}" for c in schema.type_constraints
    ]
    if constraints:
        lines += ["", "**Types**: " + "; ".join(constraints)]
    lines += ["", "---", "", _summary(str(schema.doc))]
    return "\n".join(lines)


def attribute_names(op_type: str, domain: str, opsets: dsl.OpsetRange) -> list[str]:
    """The op's attribute names at the newest opset of the range, sorted."""
    domain = ir.schemas.normalize_domain(domain)
    return sorted(ir.schemas.attribute_names(op_type, domain, opsets.newest(domain)))


def op_names(opsets: dsl.OpsetRange) -> list[str]:
    """The default-domain ops defined at some opset of the range (deprecated ones left out)."""
    names = []
    for op_type in ir.schemas.op_names(""):
        schemas = opsets.schemas(op_type, "")
        if schemas and not all(s.deprecated for s in schemas):
            names.append(op_type)
    return sorted(names)


def _summary(doc: str) -> str:
    """The schema's documentation, its common indentation removed (onnx indents it)."""
    return textwrap.dedent(doc).strip()


def _attribute_line(op_type: str, domain: str, since: int, name: str, attribute: object) -> str:
    kind = ir.AttrType(int(attribute.type.value)).name.lower()  # type: ignore[attr-defined]
    default = ir.schemas.attribute_default(op_type, name, domain, since)
    if attribute.required:  # type: ignore[attr-defined]
        given = "required"
    elif default is not None:
        given = f"default `{_value(default.value)}`"
    else:
        given = "optional, no default"
    description = " ".join(str(attribute.description).split())  # type: ignore[attr-defined]
    return f"- `{name}` ({kind}, {given}): {description}"


def _value(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.7g}"
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    return str(value)


def _parameters(parameters: Iterable[object]) -> str:
    shown = []
    for parameter in parameters:
        option = str(parameter.option.name)  # type: ignore[attr-defined]
        mark = {"Optional": ", optional", "Variadic": ", variadic"}.get(option, "")
        shown.append(f"`{parameter.name}` ({parameter.type_str}{mark})")  # type: ignore[attr-defined]
    return ", ".join(shown) if shown else "none"
