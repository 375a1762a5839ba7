"""Static facts about a rule that instance building needs.

* the match lines in dependency order (a line after the lines defining its inputs);
* the *free* input variables (read but defined by no line): graph inputs or constants;
* which of them should be constants: those the `where` asks `is_const`/`value`/`is_scalar`
  of, and those the rewrite computes with (`let k = scale / sqrt(var + eps)`);
* the attribute variables, and the opset versions at which every match line can exist and
  the rule applies (its `requires` holds and the ops it emits exist);
* the shape templates the wiring and the `where` lines ask for (see `_templates`), and the
  base dtypes every match line's op accepts.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import ir
from rewriter import rules
from rewriter.checkrules._line import PREFERRED_DTYPES
from rewriter.checkrules._templates import ShapeTemplates, solve_templates
from rewriter.engine import CompiledRule, applicability

# Default-domain opsets instances are built at (21 first, the newest the exporters write;
# the newer ones only for rules that require them).
CANDIDATE_OPSETS = (21, 20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 7, 22, 23, 24)
CUSTOM_DOMAIN_VERSION = 1
_FACT_FUNCTIONS = frozenset(
    {"rank", "shape", "dtype", "has_static_shape", "numel", "size", "uses", "len", "is_const"}
)
_CONST_TESTS = frozenset({"is_const", "value", "is_scalar"})


@dataclasses.dataclass(frozen=True, slots=True)
class RulePlan:
    """What instance building needs to know about one rule."""

    compiled: CompiledRule
    order: tuple[int, ...]
    defined: frozenset[str]
    free: tuple[str, ...]
    const_tested: frozenset[str]
    computed_with: frozenset[str]
    attr_vars: frozenset[str]
    opsets: tuple[OpsetChoice, ...]
    # Outputs the rewrite replaces by a free variable (`y = x`).
    outputs_to_free: frozenset[str] = frozenset()
    templates: ShapeTemplates = dataclasses.field(default_factory=ShapeTemplates)
    dtypes: tuple[ir.DataType, ...] = PREFERRED_DTYPES
    # Dtypes tried besides `dtypes` when no instance has one of their class (see `_check`).
    extra_dtypes: tuple[ir.DataType, ...] = ()

    @property
    def rule(self) -> rules.Rule:
        """The rule's AST."""
        return self.compiled.rule

    @property
    def lines(self) -> tuple[rules.NodePattern, ...]:
        """The match lines."""
        return self.compiled.lines

    @property
    def conditions(self) -> tuple[rules.Expr, ...]:
        """The `where` lines, with the named constraints they call spelled out."""
        return self.compiled.conditions


class NotInstantiableError(Exception):
    """The rule cannot be instantiated at all (the message says why).

    `by_tests` marks kinds of rule that check-rules never builds and the project's own tests
    verify instead (loop rules, rules over sequence values): `--strict` lets them pass.
    """

    def __init__(self, message: str, *, by_tests: bool = False) -> None:
        super().__init__(message)
        self.by_tests = by_tests


_EXPR_TYPES = (
    rules.Name,
    rules.Const,
    rules.ListExpr,
    rules.Unary,
    rules.Binary,
    rules.Compare,
    rules.BoolOp,
    rules.Coalesce,
    rules.Conditional,
    rules.Call,
    rules.Attribute,
    rules.Index,
)


def children(expr: rules.Expr) -> tuple[rules.Expr, ...]:
    """The direct sub-expressions of `expr`."""
    found: tuple[object, ...] = ()
    if isinstance(expr, rules.ListExpr):
        found = expr.items
    elif isinstance(expr, rules.Unary):
        found = (expr.operand,)
    elif isinstance(expr, rules.Binary | rules.Compare | rules.BoolOp | rules.Coalesce):
        found = (expr.left, expr.right)
    elif isinstance(expr, rules.Conditional):
        found = (expr.cond, expr.then, expr.otherwise)
    elif isinstance(expr, rules.Call):
        found = (*expr.args, *(v for _, v in expr.kwargs))
    elif isinstance(expr, rules.Attribute):
        found = (expr.obj,)
    elif isinstance(expr, rules.Index):
        index = expr.index
        parts = (
            (index.start, index.stop, index.step) if isinstance(index, rules.Slice) else (index,)
        )
        found = (expr.obj, *parts)
    return tuple(c for c in found if isinstance(c, _EXPR_TYPES))


def walk(expr: rules.Expr) -> Iterator[rules.Expr]:
    """Every sub-expression of `expr`, itself first."""
    yield expr
    for child in children(expr):
        yield from walk(child)


def names_in(expr: rules.Expr) -> list[str]:
    """Variable names an expression reads, in order."""
    return [e.name for e in walk(expr) if isinstance(e, rules.Name)]


def _computed_names(expr: rules.Expr) -> Iterator[str]:
    """Names used for their contents (not as an argument of a fact built-in, not `v == none`)."""
    if isinstance(expr, rules.Name):
        yield expr.name
        return
    if isinstance(expr, rules.Call) and expr.func in _FACT_FUNCTIONS:
        return
    if isinstance(expr, rules.Compare) and (_is_none(expr.left) or _is_none(expr.right)):
        return
    if isinstance(expr, rules.Attribute):
        return
    for child in children(expr):
        yield from _computed_names(child)


def _is_none(expr: rules.Expr) -> bool:
    return isinstance(expr, rules.Const) and expr.value is None


def _order(lines: tuple[rules.NodePattern, ...]) -> tuple[int, ...]:
    producer: dict[str, int] = {}
    for index, line in enumerate(lines):
        for out in line.outputs:
            if isinstance(out, rules.OutputVar):
                producer[out.name] = index
    order: list[int] = []
    visiting: set[int] = set()

    def visit(index: int) -> None:
        if index in order:
            return
        if index in visiting:
            raise NotInstantiableError("the match lines form a cycle")
        visiting.add(index)
        for pattern in lines[index].inputs:
            if isinstance(pattern, rules.InputVar) and pattern.name in producer:
                visit(producer[pattern.name])
        visiting.discard(index)
        order.append(index)

    for index in range(len(lines)):
        visit(index)
    return tuple(order)


def _const_facts(rule: rules.Rule, conditions: tuple[rules.Expr, ...]) -> tuple[set[str], set[str]]:
    tested: set[str] = set()
    for condition in conditions:
        for expr in walk(condition):
            if isinstance(expr, rules.Call) and expr.func in _CONST_TESTS:
                for arg in expr.args:
                    tested.update(names_in(arg))
    computed: set[str] = set()
    if isinstance(rule.rewrite, rules.Rewrite):
        for stmt in rule.rewrite.stmts:
            exprs: list[rules.Expr] = []
            if isinstance(stmt, rules.Let):
                exprs.append(stmt.expr)
            elif isinstance(stmt, rules.NewNode):
                exprs.extend(e for e in stmt.inputs if not isinstance(e, rules.Name))
                exprs.extend(a.value for a in stmt.attrs if isinstance(a, rules.SetAttr))
            elif not isinstance(stmt.source, rules.Name):
                exprs.append(stmt.source)
            for expr in exprs:
                computed.update(_computed_names(expr))
    return tested, computed


def _line_possible(line: rules.NodePattern, opset: int) -> bool:
    """Some alternative of the line exists at `opset` with room for the pattern's inputs."""
    if not line.ops:
        return False
    required = sum(
        1 for p in line.inputs if not (isinstance(p, rules.InputVar) and (p.optional or p.variadic))
    )
    for ref in line.ops:
        domain = ir.schemas.normalize_domain(ref.domain)
        if not ir.schemas.is_known_domain(domain) or domain != "":
            return True
        schema = ir.schemas.find_schema(ref.op_type, domain, opset, runtime=True)
        if schema is None:
            continue
        arity = ir.schemas.input_arity(schema)
        if arity.max_inputs is not None and required > arity.max_inputs:
            continue
        literal_attrs = [a.name for a in line.attrs if isinstance(a, rules.AttrEquals)]
        if any(name not in schema.attributes for name in literal_attrs):
            continue
        return True
    return False


def _domains(plan_lines: tuple[rules.NodePattern, ...], compiled: CompiledRule) -> dict[str, int]:
    domains: dict[str, int] = {}
    refs = [ref for line in plan_lines for ref in line.ops]
    refs.extend(compiled.emitted_ops)
    for ref in refs:
        domain = ir.schemas.normalize_domain(ref.domain)
        if domain:
            domains[domain] = CUSTOM_DOMAIN_VERSION
    for req in compiled.rule.requires:
        domain = ir.schemas.normalize_domain(req.domain)
        if domain:
            domains[domain] = max(domains.get(domain, 1), req.version + (req.op == ">"))
    return domains


OpsetChoice = tuple[dict[str, int], int | None]
"""The opsets an instance is built with, and the `--target-opset` its rewrite runs with."""


def _opsets(
    compiled: CompiledRule, lines: tuple[rules.NodePattern, ...]
) -> tuple[OpsetChoice, ...]:
    """Opsets at which the rule applies; else (model, target) pairs for conversions.

    A rule such as `requires opset < 20` that matches an op of opset 20 (a decomposition for
    older runtimes) only fires when the model is converted down: its instances are built at
    an opset that has the op and rewritten with `target_opset` below it. One that matches an
    op only old opsets have and `requires opset >= 10` (patterns/decompose/legacy_ops.rw)
    fires before a conversion up: built at the old opset, rewritten with a newer target.
    """
    custom = _domains(lines, compiled)
    possible = [v for v in CANDIDATE_OPSETS if all(_line_possible(line, v) for line in lines)]
    if not possible:
        raise NotInstantiableError(
            "no opset has every match line's op with room for the pattern's inputs"
        )
    found: list[OpsetChoice] = []
    reasons: list[str] = []
    for version in possible:
        opsets = {"": version, **custom}
        reason = applicability(compiled, opsets)
        if reason is None:
            found.append((opsets, None))
        else:
            reasons.append(reason)
    if found:
        return tuple(found)
    for version in possible:
        opsets = {"": version, **custom}
        down = [t for t in sorted(CANDIDATE_OPSETS, reverse=True) if t < version]
        up = [t for t in sorted(CANDIDATE_OPSETS) if t > version]
        for target in (*down, *up):
            if applicability(compiled, opsets, target) is None:
                found.append((opsets, target))
                break
    if not found:
        raise NotInstantiableError(reasons[0] if reasons else "no opset fits the rule")
    return tuple(found)


def _uses_sequences(ref: rules.OpId) -> bool:
    """True when some version of the op has a sequence-typed input or output."""
    for schema in ir.schemas.schema_versions(ref.op_type, ref.domain):
        formals = [*schema.inputs, *schema.outputs]
        constraints = {c.type_param_str: c.allowed_type_strs for c in schema.type_constraints}
        for formal in formals:
            allowed = constraints.get(formal.type_str, [formal.type_str])
            if allowed and all(t.startswith("seq(") for t in allowed):
                return True
    return False


def analyze(compiled: CompiledRule) -> RulePlan:
    """The plan of one compiled rule.

    Raises:
        NotInstantiableError: a wildcard op, a repeat pattern, or no opset fits.
    """
    rule = compiled.rule
    if rule.pattern.repeat is not None or not isinstance(rule.rewrite, rules.Rewrite):
        raise NotInstantiableError(
            "a loop (repeat) rule (verified by its own tests)", by_tests=True
        )
    lines = compiled.lines
    if any(not line.ops for line in lines):
        raise NotInstantiableError("a match line with any op (`_`) has no model to build")
    sequence_ops = [ref.op_type for line in lines for ref in line.ops if _uses_sequences(ref)]
    if sequence_ops:
        raise NotInstantiableError(
            f"`{sequence_ops[0]}` reads or makes sequence values, which check-rules does not "
            "build (verified by its own tests)",
            by_tests=True,
        )
    defined: dict[str, None] = {}
    for line in lines:
        for out in line.outputs:
            if isinstance(out, rules.OutputVar):
                defined[out.name] = None
    free: dict[str, None] = {}
    attr_vars: set[str] = set()
    for line in lines:
        for pattern in line.inputs:
            if isinstance(pattern, rules.InputVar) and pattern.name not in defined:
                free[pattern.name] = None
        for entry in line.attrs:
            if isinstance(entry, rules.AttrBind):
                attr_vars.add(entry.var)
    tested, computed = _const_facts(rule, compiled.conditions)
    opsets = _opsets(compiled, lines)
    return RulePlan(
        compiled=compiled,
        order=_order(lines),
        defined=frozenset(defined),
        free=tuple(free),
        const_tested=frozenset(tested & set(free)),
        computed_with=frozenset(computed & set(free)),
        attr_vars=frozenset(attr_vars),
        opsets=opsets,
        outputs_to_free=_outputs_to_free(rule, free),
        templates=solve_templates(lines, compiled.conditions, frozenset(defined)),
        dtypes=_base_dtypes(lines, opsets[0][0]),
        extra_dtypes=_extra_dtypes(lines, opsets[0][0]),
    )


def _outputs_to_free(rule: rules.Rule, free: dict[str, None]) -> frozenset[str]:
    if not isinstance(rule.rewrite, rules.Rewrite):
        return frozenset()
    return frozenset(
        stmt.target
        for stmt in rule.rewrite.stmts
        if isinstance(stmt, rules.Alias)
        and isinstance(stmt.source, rules.Name)
        and stmt.source.name in free
    )


def _data_type_var(schema: Any) -> str:
    """The type variable of the data an op carries: an input's that an output shares too."""
    outputs = {str(param.type_str) for param in schema.outputs}
    for param in schema.inputs:
        if str(param.type_str) in outputs:
            return str(param.type_str)
    return str(schema.inputs[0].type_str)


def _allowed(schema: Any, type_str: str) -> set[ir.DataType]:
    for constraint in schema.type_constraints:
        if constraint.type_param_str == type_str:
            names = set(constraint.allowed_type_strs)
            return {d for d in PREFERRED_DTYPES if f"tensor({d.onnx_name})" in names}
    return {d for d in PREFERRED_DTYPES if type_str == f"tensor({d.onnx_name})"}


INTEGER_DTYPES = (ir.DataType.INT32, ir.DataType.INT64)
_QUANTIZED_DTYPES = (ir.DataType.UINT8, ir.DataType.INT8)
_CLASS_DTYPES = (*INTEGER_DTYPES, ir.DataType.BOOL)


def _extra_dtypes(
    lines: tuple[rules.NodePattern, ...], opsets: dict[str, int]
) -> tuple[ir.DataType, ...]:
    """An integer dtype and bool, when every match line's op takes them as its data type.

    Only lines whose op has a schema count; a rule of custom ops gets none.
    """
    found: list[ir.DataType] = []
    for dtype in _CLASS_DTYPES:
        if dtype in INTEGER_DTYPES and any(d in INTEGER_DTYPES for d in found):
            continue
        if lines and all(_line_takes(line, opsets, dtype) for line in lines):
            found.append(dtype)
    return tuple(found)


def _line_takes(line: rules.NodePattern, opsets: dict[str, int], dtype: ir.DataType) -> bool:
    for ref in line.ops:
        domain = ir.schemas.normalize_domain(ref.domain)
        schema = ir.schemas.find_schema(ref.op_type, domain, opsets.get(domain, 1), runtime=True)
        if schema is None or not schema.inputs:
            continue
        if f"tensor({dtype.onnx_name})" in _allowed_strings(schema, _data_type_var(schema)):
            return True
    return False


def _allowed_strings(schema: Any, type_str: str) -> set[str]:
    for constraint in schema.type_constraints:
        if constraint.type_param_str == type_str:
            return set(constraint.allowed_type_strs)
    return {type_str}


def _base_dtypes(
    lines: tuple[rules.NodePattern, ...], opsets: dict[str, int]
) -> tuple[ir.DataType, ...]:
    """The preferred base dtypes the data of every match line's op may have.

    A base dtype that some op of the rule refuses (an integer tensor for Softmax) only gives
    attempts that do not type-check. Lines whose op takes none of the preferred dtypes (a
    quantized op) do not narrow the choice, unless every line takes 8-bit integers and no
    preferred dtype in common: then those are the base dtypes.
    """
    allowed = set(PREFERRED_DTYPES)
    every: set[str] | None = None  # the data types every line's op takes, preferred or not
    for line in lines:
        accepted: set[ir.DataType] = set()
        strings: set[str] = set()
        for ref in line.ops:
            domain = ir.schemas.normalize_domain(ref.domain)
            schema = ir.schemas.find_schema(
                ref.op_type, domain, opsets.get(domain, 1), runtime=True
            )
            if schema is None or not schema.inputs:
                accepted = set(PREFERRED_DTYPES)
                strings = {f"tensor({d.onnx_name})" for d in PREFERRED_DTYPES}
                break
            accepted |= _allowed(schema, _data_type_var(schema))
            strings |= _allowed_strings(schema, _data_type_var(schema))
        every = strings if every is None else every & strings
        if accepted & allowed:
            allowed &= accepted
    common = every or set()
    quantized = [d for d in _QUANTIZED_DTYPES if f"tensor({d.onnx_name})" in common]
    if quantized and not any(f"tensor({d.onnx_name})" in common for d in PREFERRED_DTYPES):
        # Every line takes 8-bit integers and no preferred dtype in common (a Pad before a
        # ConvInteger): those are the data.
        return tuple(quantized)
    return tuple(d for d in PREFERRED_DTYPES if d in allowed)
