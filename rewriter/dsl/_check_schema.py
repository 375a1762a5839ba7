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
    """True when the op exists in some version of its (checked) domain."""
    return ref.op_type in ir.schemas.op_names(ref.domain)


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
) -> None:
    """Report attribute names that no listed (checkable) op knows, and repeated names."""
    seen: dict[str, None] = {}
    for entry in attrs:
        if not isinstance(entry, ast.AttrEntry):
            continue
        if entry.name in seen:
            report.error(head(entry.span, len(entry.name)), f"attribute `{entry.name}` is repeated")
        seen[entry.name] = None
    if not refs or not all(is_checked(r) and known_op(r) for r in refs):
        return
    known: set[str] = set()
    for ref in refs:
        known.update(_attribute_names(ref.op_type, ir.schemas.normalize_domain(ref.domain)))
    ops = " | ".join(f"`{r.op_type}`" for r in refs)
    for entry in attrs:
        if isinstance(entry, ast.AttrEntry) and entry.name not in known:
            message = f"{ops} has no attribute `{entry.name}`" + _suggestion(entry.name, known)
            report.error(head(entry.span, len(entry.name)), message)
            known.add(entry.name)  # report each unknown name once


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
    return inputs, outputs


@functools.cache
def _attribute_names(op_type: str, domain: str) -> frozenset[str]:
    return ir.schemas.attribute_names(op_type, domain)


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
