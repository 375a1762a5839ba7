"""Check node lines against ONNX operator schemas: op names, attribute names, arities.

Lint accepts what any version of a schema accepts; the model's opset decides at match
time. The default domain and every domain onnx knows are checked; custom domains are not.
Errors point at the op name (unknown op, wrong arity) or the attribute name.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
from collections.abc import Sequence

import ir
from rewriter.dsl import _ast as ast
from rewriter.dsl._opsets import OpsetRange
from rewriter.dsl._reporter import Reporter, head


@dataclasses.dataclass(frozen=True, slots=True)
class Count:
    """A range of counts; `high` None means unbounded."""

    low: int
    high: int | None

    def overlaps(self, other: Count) -> bool:
        """True when some count lies in both ranges."""
        low = max(self.low, other.low)
        highs = [h for h in (self.high, other.high) if h is not None]
        return not highs or low <= min(highs)

    def describe(self, noun: str) -> str:
        """`1 input`, `2 to 3 inputs`, `at least 1 input`."""
        if self.high is None:
            return f"at least {_plural(self.low, noun)}"
        if self.high == self.low:
            return _plural(self.low, noun)
        return f"{self.low} to {_plural(self.high, noun)}"


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def is_checked(ref: ast.OpRef) -> bool:
    """True when onnx knows the op's domain (custom domains are not checked)."""
    domain = ir.schemas.normalize_domain(ref.domain)
    return domain == "" or ir.schemas.is_known_domain(domain)


def known_op(ref: ast.OpRef) -> bool:
    """True when the op exists in some version of its (checked) domain.

    onnxruntime's own ops in the default domain (`SimplifiedLayerNormalization`, see
    `ir.schemas.find_runtime_op`) count: models it runs hold them, and rules may match them.
    """
    if ref.op_type in ir.schemas.op_names(ref.domain):
        return True
    return ir.schemas.find_runtime_op(ref.op_type, ref.domain, None) is not None


def check_op_exists(ref: ast.OpRef, report: Reporter) -> bool:
    """Report an unknown op; True when the op is known and its schema can be checked."""
    if not is_checked(ref):
        return False
    if known_op(ref):
        return True
    domain = ir.schemas.normalize_domain(ref.domain)
    where = "" if domain == "" else f" in domain `{domain}`"
    message = f"unknown op `{ref.op_type}`{where}"
    report.error(ref.span, message + _suggestion(ref.op_type, ir.schemas.op_names(domain)))
    return False


def check_attributes(
    refs: tuple[ast.OpRef, ...],
    attrs: tuple[ast.AttrEntry | ast.AttrCopy, ...],
    report: Reporter,
    ranges: tuple[OpsetRange, ...] = (),
    *,
    matched: bool = False,
) -> None:
    """Report attribute names that no listed (checkable) op knows, and repeated names.

    `ranges` (one per ref; default: every opset) are the opsets the rule can apply at. An
    attribute given a literal must be declared by a version of the op's schema in force
    there (`Mul <axis = 1>` never matches from opset 7 on); one bound to a name may belong to
    any version, since it binds `none` where the op has no such attribute (a pattern that
    reads `ReduceMean <axes = a> (x, i?)` covers the attribute and the input form alike).
    A `matched` line reads a model at least as new as the range's low end but possibly newer
    than its high end: while `--target-opset` converts down, `requires` is judged at the
    target, so a decomposition rule (`requires opset < 23`) matches opset-23 ops.
    """
    seen: dict[str, None] = {}
    for entry in attrs:
        if not isinstance(entry, ast.AttrEntry):
            continue
        if entry.name in seen:
            report.error(head(entry.span, len(entry.name)), f"attribute `{entry.name}` is repeated")
        seen[entry.name] = None
    if not refs or not all(is_checked(r) and known_op(r) for r in refs):
        return
    ranges = ranges or tuple(OpsetRange() for _ in refs)
    read_at = tuple(OpsetRange(r.low, None) for r in ranges) if matched else ranges
    known: set[str] = set()
    ever: set[str] = set()
    for ref, opsets in zip(refs, read_at, strict=True):
        domain = ir.schemas.normalize_domain(ref.domain)
        ever.update(_attribute_names(ref.op_type, domain))
        known.update(_attribute_names_in(ref.op_type, domain, opsets))
    ops = " | ".join(f"`{r.op_type}`" for r in refs)
    for entry in attrs:
        if not isinstance(entry, ast.AttrEntry) or entry.name in known:
            if isinstance(entry, ast.AttrEntry):
                _check_literal_kind(refs, entry, report)
                _warn_if_only_old(refs, ranges, entry, report)
            continue
        if entry.name in ever:
            literal = _literal(entry.value)
            if literal is _NOT_LITERAL or literal is None:
                _check_literal_kind(refs, entry, report)
                continue
            message = _lost_attribute(refs, read_at, entry.name)
        else:
            message = f"{ops} has no attribute `{entry.name}`" + _suggestion(entry.name, known)
        report.error(head(entry.span, len(entry.name)), message)
        known.add(entry.name)  # report each unknown name once


def _warn_if_only_old(
    refs: tuple[ast.OpRef, ...],
    ranges: tuple[OpsetRange, ...],
    entry: ast.AttrEntry,
    report: Reporter,
) -> None:
    """Warn when a literal attribute exists in the rule's opsets but not at their newest.

    `Mul <axis = 1>` in a rule without `requires` matches only models before opset 7: almost
    always a mistake, and when meant, `requires opset < 7` says so.
    """
    literal = _literal(entry.value)
    if literal is _NOT_LITERAL or literal is None:
        return
    newest_declares = False
    for ref, opsets in zip(refs, ranges, strict=True):
        domain = ir.schemas.normalize_domain(ref.domain)
        schema = ir.schemas.find_schema(ref.op_type, domain, opsets.newest(domain))
        newest_declares = newest_declares or (
            schema is not None and entry.name in schema.attributes
        )
    if newest_declares:
        return
    ref, opsets = refs[0], ranges[0]
    domain = ir.schemas.normalize_domain(ref.domain)
    holders = [
        int(s.since_version)
        for s in opsets.schemas(ref.op_type, domain)
        if entry.name in s.attributes
    ]
    if not holders:
        return
    after = next(
        int(s.since_version)
        for s in ir.schemas.schema_versions(ref.op_type, domain)
        if int(s.since_version) > holders[-1]
    )
    report.warning(
        head(entry.span, len(entry.name)),
        f"`{ref.op_type}` declares `{entry.name}` only before opset {after}: this line "
        f"matches no newer model (say `requires opset < {after}` if that is meant)",
    )


def _lost_attribute(refs: tuple[ast.OpRef, ...], ranges: tuple[OpsetRange, ...], name: str) -> str:
    """Why an attribute some version of the op knows is refused: the rule's opsets."""
    ref, opsets = next(
        (r, o)
        for r, o in zip(refs, ranges, strict=True)
        if name in _attribute_names(r.op_type, ir.schemas.normalize_domain(r.domain))
    )
    holders = [
        int(s.since_version)
        for s in ir.schemas.schema_versions(ref.op_type, ir.schemas.normalize_domain(ref.domain))
        if name in s.attributes
    ]
    versions = ", ".join(f"{ref.op_type}-{v}" for v in holders)
    return (
        f"`{ref.op_type}` has no attribute `{name}` at {opsets.describe()} (this rule's "
        f"`requires`); only {versions} declared it"
    )


@functools.cache
def _attribute_names_in(op_type: str, domain: str, opsets: OpsetRange) -> frozenset[str]:
    """Attribute names of the op's schema versions in force somewhere in `opsets`."""
    names: set[str] = set()
    for schema in opsets.schemas(op_type, domain):
        names.update(schema.attributes)
    runtime = ir.schemas.find_runtime_op(op_type, domain, None)
    if runtime is not None and _runs_within(runtime, opsets):
        names.update(runtime.attribute_names())
    return frozenset(names)


def _runs_within(op: ir.schemas.RuntimeOp, opsets: OpsetRange) -> bool:
    """Whether onnxruntime runs its default-domain `op` at some opset of `opsets`."""
    low = max(opsets.low, op.first_opset)
    high = opsets.high
    if op.end_opset is not None:
        high = op.end_opset - 1 if high is None else min(high, op.end_opset - 1)
    return high is None or low <= high


# What a literal may be for each attribute kind (ints are fine where floats are expected).
_LITERAL_KINDS: dict[ir.AttrType, tuple[str, tuple[type, ...]]] = {
    ir.AttrType.INT: ("an integer", (int,)),
    ir.AttrType.FLOAT: ("a number", (int, float)),
    ir.AttrType.STRING: ("a string", (str,)),
    ir.AttrType.INTS: ("a list of integers", (int,)),
    ir.AttrType.FLOATS: ("a list of numbers", (int, float)),
    ir.AttrType.STRINGS: ("a list of strings", (str,)),
}


def _check_literal_kind(
    refs: tuple[ast.OpRef, ...], entry: ast.AttrEntry, report: Reporter
) -> None:
    """Report a literal attribute value of the wrong kind (a string for a float attribute).

    Only plain literals are judged (expressions are checked when they are evaluated); an
    attribute that different listed ops declare differently is left alone.
    """
    kinds = {
        ir.schemas.attribute_type(r.op_type, entry.name, ir.schemas.normalize_domain(r.domain))
        for r in refs
    }
    if len(kinds) != 1:
        return
    (kind,) = kinds
    if kind is None:
        return
    expected = _LITERAL_KINDS.get(kind)
    literal = _literal(entry.value)
    if expected is None or literal is _NOT_LITERAL or literal is None:
        return
    noun, types = expected
    listed = kind in (ir.AttrType.INTS, ir.AttrType.FLOATS, ir.AttrType.STRINGS)
    items = literal if isinstance(literal, list) else None
    if listed:
        # A single value where a list is expected is accepted (ONNX text does the same).
        items = items if items is not None else [literal]
        fits = all(_is_kind(v, types) for v in items)
    else:
        fits = items is None and (_is_kind(literal, types) or _is_dtype_name(literal, kind))
    if not fits:
        if kind == ir.AttrType.INT:
            noun = 'an integer or a dtype name ("float", "int64", ...)'
        found = _describe_literal(literal)
        if listed and items is not None:
            wrong = next(v for v in items if not _is_kind(v, types))
            found = f"a list holding {_describe_literal(wrong)}"
        report.error(entry.value.span, f"attribute `{entry.name}` takes {noun}, not {found}")


_NOT_LITERAL = object()


def _literal(expr: ast.Expr) -> object:
    """The Python value of a literal (a constant, a negated number, a list of them)."""
    if isinstance(expr, ast.Const):
        return expr.value
    if isinstance(expr, ast.Unary) and expr.op == "-" and isinstance(expr.operand, ast.Const):
        value = expr.operand.value
        return (
            -value
            if isinstance(value, int | float) and not isinstance(value, bool)
            else _NOT_LITERAL
        )
    if isinstance(expr, ast.ListExpr):
        items = [_literal(item) for item in expr.items]
        return _NOT_LITERAL if any(i is _NOT_LITERAL for i in items) else items
    return _NOT_LITERAL


def _is_dtype_name(value: object, kind: ir.AttrType) -> bool:
    """A dtype name ("float") for an INT attribute (Cast's `to`): the builder converts it."""
    if kind != ir.AttrType.INT or not isinstance(value, str):
        return False
    try:
        ir.DataType.from_name(value)
    except ValueError:
        return False
    return True


def _is_kind(value: object, types: tuple[type, ...]) -> bool:
    return isinstance(value, types) and not isinstance(value, bool)


def _describe_literal(value: object) -> str:
    if isinstance(value, list):
        return "a list" if value else "an empty list"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, str):
        return f"the string {value!r}"
    if isinstance(value, float):
        return "a float"
    return "an integer" if isinstance(value, int) else repr(value)


def check_arity(ref: ast.OpRef, inputs: Count, outputs: Count, report: Reporter) -> None:
    """Report an input or output count that no version of the op's schema accepts."""
    input_ranges, output_ranges = _arities(ref.op_type, ir.schemas.normalize_domain(ref.domain))
    if not input_ranges:
        return
    if not any(inputs.overlaps(r) for r in input_ranges):
        accepted = _union(input_ranges).describe("input")
        given = inputs.describe("input")
        report.error(ref.span, f"`{ref.op_type}` takes {accepted}, but this line gives {given}")
    if not any(outputs.overlaps(r) for r in output_ranges):
        accepted = _union(output_ranges).describe("output")
        given = outputs.describe("output")
        report.error(ref.span, f"`{ref.op_type}` has {accepted}, but this line names {given}")


def pattern_inputs(inputs: tuple[ast.InputPattern, ...]) -> Count:
    """How many inputs (ignoring trailing absent ones) a match line's input list accepts."""
    fixed = [i for i in inputs if not (isinstance(i, ast.InputVar) and i.variadic)]
    low = 0
    for position, item in enumerate(fixed):
        if not (isinstance(item, ast.InputVar) and item.optional):
            low = position + 1
    variadic = len(fixed) != len(inputs)
    return Count(low, None if variadic else len(fixed))


def pattern_outputs(pattern: ast.NodePattern) -> Count:
    """How many outputs a match line accepts."""
    count = len(pattern.outputs)
    return Count(count, None if pattern.outputs_open else count)


def rewrite_inputs(inputs: tuple[ast.Expr, ...]) -> Count:
    """How many inputs a rewrite line creates (trailing `none` inputs are omitted)."""
    low = len(inputs)
    while low and _is_none(inputs[low - 1]):
        low -= 1
    return Count(low, len(inputs))


def _is_none(expr: ast.Expr) -> bool:
    return isinstance(expr, ast.Const) and expr.value is None


@functools.cache
def _arities(op_type: str, domain: str) -> tuple[tuple[Count, ...], tuple[Count, ...]]:
    """Input and output count ranges of every version of an op's schema."""
    versions = ir.schemas.schema_versions(op_type, domain)
    inputs = tuple(_range(ir.schemas.input_arity(s)) for s in versions)
    outputs = tuple(_range(ir.schemas.output_arity(s)) for s in versions)
    runtime = ir.schemas.find_runtime_op(op_type, domain, None)
    if runtime is not None:
        inputs += (Count(runtime.required_inputs, len(runtime.inputs)),)
        outputs += (Count(1, len(runtime.outputs)),)
    return inputs, outputs


@functools.cache
def _attribute_names(op_type: str, domain: str) -> frozenset[str]:
    names = ir.schemas.attribute_names(op_type, domain)
    runtime = ir.schemas.find_runtime_op(op_type, domain, None)
    return names if runtime is None else names | runtime.attribute_names()


def _range(arity: ir.schemas.InputArity) -> Count:
    return Count(arity.min_inputs, arity.max_inputs)


def _union(ranges: Sequence[Count]) -> Count:
    low = min(r.low for r in ranges)
    high = None if any(r.high is None for r in ranges) else max(r.high or 0 for r in ranges)
    return Count(low, high)


def _suggestion(word: str, candidates: frozenset[str] | set[str]) -> str:
    for candidate in sorted(candidates):
        if candidate.lower() == word.lower():
            return f"; did you mean `{candidate}`?"
    close = difflib.get_close_matches(word, sorted(candidates), n=1, cutoff=0.75)
    return f"; did you mean `{close[0]}`?" if close else ""
