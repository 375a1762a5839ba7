"""Shape templates: the shapes a rule's wiring and `where` lines ask for, solved up front.

Recipes decide shapes line by line in dependency order, so a requirement that a *later* line
puts on an *earlier* value would be met only by chance: a `Transpose <perm = [0, 2, 1, 3]>`
needs its input, the output of an earlier Reshape, to have rank 4; `shape(qr)[0:2] ==
shape(q)[0:2]` ties a Reshape's result to its input; two scaled operands of one MatMul must
agree on the contracted dim. Templates pass such requirements backwards. Every tensor
variable of the pattern may get a template, a tuple of symbolic dims, solved once per rule
from

* the ops' shape relations (`RELATIONS`): same-shape ops, broadcasting ops (the result has
  the shape of the operand the recipe takes as its reference), Transpose with a fixed perm,
  MatMul, and Reshape (same element count);
* the equalities between ranks and dims in the `where` lines (`rank(v) == 4`,
  `shape(a)[0:2] == shape(b)[0:2]`, `shape(m)[-2:] == [shape(q)[2], shape(k)[3]]`), read
  from the top-level `and`s of each line (an `or` is left to the where-hints).

A dim is a monomial, an integer times a product of symbols, so a Reshape that splits a
hidden dim into heads and head size gives the hidden dim `H*D`. An equation is solved by
substitution when, after cancelling common factors, one side is a lone symbol; any other
equation (or a conflict) is left alone. Each attempt draws a size for every free symbol
(`ShapeTemplates.concretize`).

Templates are hints and never a verdict: recipes use a template only where it fits their own
constraints, and an instance is still accepted only when the matcher matches it and every
`where` line holds.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from rewriter import rules
from rewriter.engine import EvalContext, EvalError, evaluate

MAX_ROUNDS = 32


@dataclasses.dataclass(frozen=True, slots=True)
class Dim:
    """A symbolic dim: `coef` times the product of `symbols` (sorted; repeats allowed)."""

    coef: int
    symbols: tuple[int, ...] = ()

    def times(self, other: Dim) -> Dim:
        """The product of two dims."""
        return Dim(self.coef * other.coef, tuple(sorted(self.symbols + other.symbols)))

    def size(self, sizes: Mapping[int, int]) -> int:
        """The dim's value for the given symbol sizes."""
        return self.coef * math.prod(sizes[s] for s in self.symbols)

    def __str__(self) -> str:
        parts = [f"s{s}" for s in self.symbols]
        if self.coef != 1 or not parts:
            parts.insert(0, str(self.coef))
        return "*".join(parts)


@dataclasses.dataclass(frozen=True, slots=True)
class ShapeTemplates:
    """The solved templates of one rule."""

    entries: tuple[tuple[str, tuple[Dim, ...]], ...] = ()
    symbols: tuple[int, ...] = ()

    def get(self, name: str) -> tuple[Dim, ...] | None:
        """The template of variable `name`, if it has one."""
        for key, dims in self.entries:
            if key == name:
                return dims
        return None

    def concretize(self, draw: Callable[[int], int]) -> dict[str, tuple[int, ...]]:
        """Concrete shapes, with `draw(symbol)` giving each free symbol's size."""
        sizes = {symbol: draw(symbol) for symbol in self.symbols}
        return {name: tuple(d.size(sizes) for d in dims) for name, dims in self.entries}

    def render(self) -> dict[str, str]:
        """Readable templates (`{"q": "[s0, s1, 2*s2]"}`), for tests and debugging."""
        return {name: "[" + ", ".join(str(d) for d in dims) + "]" for name, dims in self.entries}


# ---------------------------------------------------------------------------------------------
# The solver


def _cancel(left: Dim, right: Dim) -> tuple[Dim, Dim]:
    """Both sides of `left == right` divided by their common factors."""
    rest = list(right.symbols)
    kept = []
    for symbol in left.symbols:
        if symbol in rest:
            rest.remove(symbol)
        else:
            kept.append(symbol)
    common = math.gcd(left.coef, right.coef) or 1
    return Dim(left.coef // common, tuple(kept)), Dim(right.coef // common, tuple(rest))


class Solver:
    """Templates being solved: shapes per variable and the symbols bound so far."""

    def __init__(self) -> None:
        self.shapes: dict[str, list[Dim]] = {}
        self.bound: dict[int, Dim] = {}
        self.count = 0
        self.changed = False

    def fresh(self) -> Dim:
        """A new free symbol."""
        self.count += 1
        return Dim(1, (self.count - 1,))

    def norm(self, dim: Dim) -> Dim:
        """`dim` with every bound symbol substituted."""
        result = Dim(dim.coef)
        for symbol in dim.symbols:
            bound = self.bound.get(symbol)
            result = result.times(Dim(1, (symbol,)) if bound is None else self.norm(bound))
        return result

    def shape(self, name: str | None) -> list[Dim] | None:
        """The template of `name` (None when not known yet)."""
        if name is None or name not in self.shapes:
            return None
        return [self.norm(d) for d in self.shapes[name]]

    def rank(self, name: str | None) -> int | None:
        """The rank of `name`'s template."""
        shape = self.shape(name)
        return None if shape is None else len(shape)

    def set_rank(self, name: str | None, rank: int) -> None:
        """Give `name` a template of `rank` fresh dims (a known rank is kept)."""
        if name is None or rank < 0 or name in self.shapes:
            return
        self.shapes[name] = [self.fresh() for _ in range(rank)]
        self.changed = True

    def set_shape(self, name: str | None, dims: Sequence[Dim]) -> None:
        """`shape(name) == dims` (ignored when the ranks disagree)."""
        if name is None:
            return
        if name not in self.shapes:
            self.shapes[name] = list(dims)
            self.changed = True
            return
        current = self.shapes[name]
        if len(current) == len(dims):
            for a, b in zip(current, dims, strict=True):
                self.equate(a, b)

    def same(self, a: str | None, b: str | None) -> None:
        """`shape(a) == shape(b)`."""
        shape_a, shape_b = self.shape(a), self.shape(b)
        if shape_a is not None:
            self.set_shape(b, shape_a)
        elif shape_b is not None:
            self.set_shape(a, shape_b)

    def equate(self, a: Dim, b: Dim) -> None:
        """`a == b`: bind a lone symbol when that solves it, else leave it."""
        left, right = _cancel(self.norm(a), self.norm(b))
        if left == right:
            return
        for lone, other in ((left, right), (right, left)):
            if len(lone.symbols) == 1 and other.coef % lone.coef == 0:
                self.bound[lone.symbols[0]] = Dim(other.coef // lone.coef, other.symbols)
                self.changed = True
                return

    def equal_sizes(self, a: Sequence[Dim], b: Sequence[Dim]) -> None:
        """The element counts of two shapes are equal."""
        self.equate(functools.reduce(Dim.times, a, Dim(1)), functools.reduce(Dim.times, b, Dim(1)))

    def result(self) -> ShapeTemplates:
        """The solved templates (the free symbols are those still unbound)."""
        entries = tuple(
            (name, tuple(self.norm(d) for d in dims)) for name, dims in self.shapes.items()
        )
        used = sorted({s for _, dims in entries for d in dims for s in d.symbols})
        return ShapeTemplates(entries, tuple(used))


Relation = Callable[[Solver], None]


# ---------------------------------------------------------------------------------------------
# Relations of ops


@dataclasses.dataclass(frozen=True, slots=True)
class LineVars:
    """The variables of one match line: inputs and outputs (None: wildcard, literal, `_`)."""

    op_type: str
    domain: str
    inputs: tuple[str | None, ...]
    outputs: tuple[str | None, ...]
    attrs: Mapping[str, Any]
    defined: frozenset[str]


OpRelation = Callable[[Solver, LineVars], None]
RELATIONS: dict[str, OpRelation] = {}

# Ops whose (first) output has the shape of their first input.
SAME_SHAPE_OPS = (
    "Abs",
    "BatchNormalization",
    "Cast",
    "CastLike",
    "Ceil",
    "Celu",
    "Clip",
    "Cos",
    "Dropout",
    "Elu",
    "Erf",
    "Exp",
    "Floor",
    "Gelu",
    "HardSigmoid",
    "HardSwish",
    "Hardmax",
    "Identity",
    "InstanceNormalization",
    "IsInf",
    "IsNaN",
    "LayerNormalization",
    "LeakyRelu",
    "Log",
    "LogSoftmax",
    "LpNormalization",
    "Mish",
    "Neg",
    "Not",
    "RMSNormalization",
    "Reciprocal",
    "Relu",
    "Round",
    "Selu",
    "Shrink",
    "Sigmoid",
    "Sign",
    "Sin",
    "Softmax",
    "Softplus",
    "Softsign",
    "Sqrt",
    "Tan",
    "Tanh",
    "ThresholdedRelu",
)
BROADCAST_OPS = (
    "Add",
    "And",
    "BitwiseAnd",
    "BitwiseOr",
    "BitwiseXor",
    "Div",
    "Equal",
    "Greater",
    "GreaterOrEqual",
    "Less",
    "LessOrEqual",
    "Max",
    "Mean",
    "Min",
    "Mod",
    "Mul",
    "Or",
    "PRelu",
    "Pow",
    "Sub",
    "Sum",
    "Where",
    "Xor",
)


def relation(*ops: str) -> Callable[[OpRelation], OpRelation]:
    """Register the shape relation of default-domain `ops`."""

    def register(fn: OpRelation) -> OpRelation:
        for op in ops:
            RELATIONS[op] = fn
        return fn

    return register


@relation(*SAME_SHAPE_OPS)
def _same_shape(solver: Solver, line: LineVars) -> None:
    if line.inputs and line.outputs:
        solver.same(line.inputs[0], line.outputs[0])


@relation(*BROADCAST_OPS)
def _broadcast(solver: Solver, line: LineVars) -> None:
    """The result has the shape of the recipe's reference operand.

    That is the first operand computed by another line when there is one, else the first
    variable operand (the recipe draws it first and fits the others to it).
    """
    names = [name for name in line.inputs if name is not None]
    if not names or not line.outputs:
        return
    interior = [name for name in names if name in line.defined]
    solver.same((interior or names)[0], line.outputs[0])


@relation("Transpose")
def _transpose(solver: Solver, line: LineVars) -> None:
    perm = line.attrs.get("perm")
    if not isinstance(perm, list) or not line.inputs or not line.outputs:
        return
    source, result = line.inputs[0], line.outputs[0]
    solver.set_rank(source, len(perm))
    solver.set_rank(result, len(perm))
    shape_in, shape_out = solver.shape(source), solver.shape(result)
    if shape_in is None or shape_out is None or len(shape_in) != len(perm):
        return
    if len(shape_out) != len(perm) or sorted(perm) != list(range(len(perm))):
        return
    for axis, taken in enumerate(perm):
        solver.equate(shape_out[axis], shape_in[taken])


@relation("MatMul")
def _matmul(solver: Solver, line: LineVars) -> None:
    """A [..., M, K] @ B [..., K, N] = [..., M, N], all of one rank when two agree on it."""
    if len(line.inputs) < 2 or not line.outputs:
        return
    names = (line.inputs[0], line.inputs[1], line.outputs[0])
    ranks = [solver.rank(name) for name in names]
    known = {r for r in ranks if r is not None}
    if len(known) != 1 or next(iter(known)) < 2:
        return
    rank = next(iter(known))
    if sum(r is not None for r in ranks) >= 2:
        for name in names:
            solver.set_rank(name, rank)
    a, b, out = (solver.shape(name) for name in names)
    if a is None or b is None or out is None:
        return
    for i in range(rank - 2):
        solver.equate(a[i], b[i])
        solver.equate(out[i], a[i])
    solver.equate(a[-1], b[-2])
    solver.equate(out[-2], a[-2])
    solver.equate(out[-1], b[-1])


@relation("Reshape")
def _reshape(solver: Solver, line: LineVars) -> None:
    if not line.inputs or not line.outputs:
        return
    source, result = solver.shape(line.inputs[0]), solver.shape(line.outputs[0])
    if source is not None and result is not None:
        solver.equal_sizes(source, result)


@relation("Shape", "Size")
def _shape_of(solver: Solver, line: LineVars) -> None:
    if line.outputs:
        solver.set_rank(line.outputs[0], 1 if line.op_type == "Shape" else 0)


@relation("Range")
def _range(solver: Solver, line: LineVars) -> None:
    """Scalar start, limit and delta; a 1-D result."""
    for name in line.inputs:
        solver.set_rank(name, 0)
    if line.outputs:
        solver.set_rank(line.outputs[0], 1)


@relation("Gather")
def _gather(solver: Solver, line: LineVars) -> None:
    """rank(result) = rank(data) - 1 + rank(indices)."""
    if len(line.inputs) < 2 or not line.outputs:
        return
    data, result = solver.rank(line.inputs[0]), solver.rank(line.outputs[0])
    if data is not None and result is not None and result - data + 1 >= 0:
        solver.set_rank(line.inputs[1], result - data + 1)


def _line_relations(line: rules.NodePattern, defined: frozenset[str]) -> Iterator[Relation]:
    refs = [r for r in line.ops if not r.domain or r.domain == "ai.onnx"]
    if not refs or len(refs) != len(line.ops):
        return
    found = {RELATIONS.get(r.op_type) for r in refs}
    if len(found) != 1 or None in found:
        return
    (fn,) = found
    assert fn is not None, "None was excluded above"
    inputs = tuple(p.name if isinstance(p, rules.InputVar) else None for p in line.inputs)
    outputs = tuple(p.name if isinstance(p, rules.OutputVar) else None for p in line.outputs)
    attrs = {}
    for entry in line.attrs:
        if isinstance(entry, rules.AttrEquals) and entry.value is not None:
            attrs[entry.name] = entry.value
    variables = LineVars(refs[0].op_type, "", inputs, outputs, attrs, defined)
    yield functools.partial(_apply_op, fn, variables)


def _apply_op(fn: OpRelation, line: LineVars, solver: Solver) -> None:
    fn(solver, line)


# ---------------------------------------------------------------------------------------------
# Relations of `where` lines


def _literal(expr: rules.Expr) -> Any:
    """The value of an expression without variables (None when it has some or fails)."""
    if any(isinstance(e, rules.Name | rules.Call | rules.Attribute) for e in _walk(expr)):
        return None
    try:
        return evaluate(expr, EvalContext({}, {}))
    except EvalError:
        return None


def _walk(expr: rules.Expr) -> Iterator[rules.Expr]:
    yield expr
    parts: tuple[Any, ...] = ()
    if isinstance(expr, rules.ListExpr):
        parts = expr.items
    elif isinstance(expr, rules.Unary):
        parts = (expr.operand,)
    elif isinstance(expr, rules.Binary | rules.Compare | rules.BoolOp):
        parts = (expr.left, expr.right)
    elif isinstance(expr, rules.Index):
        index = expr.index
        slice_parts = (
            (index.start, index.stop, index.step) if isinstance(index, rules.Slice) else ()
        )
        parts = (expr.obj, *slice_parts) if slice_parts else (expr.obj, index)
    elif isinstance(expr, rules.Call):
        parts = expr.args
    for part in parts:
        if part is not None:
            yield from _walk(part)


def _int_literal(expr: rules.Expr | None) -> int | None:
    value = _literal(expr) if expr is not None else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _shape_var(expr: rules.Expr) -> str | None:
    """`v` for `shape(v)`."""
    if (
        isinstance(expr, rules.Call)
        and expr.func == "shape"
        and len(expr.args) == 1
        and isinstance(expr.args[0], rules.Name)
    ):
        return expr.args[0].name
    return None


def _rank_var(expr: rules.Expr) -> str | None:
    """`v` for `rank(v)`."""
    if (
        isinstance(expr, rules.Call)
        and expr.func == "rank"
        and len(expr.args) == 1
        and isinstance(expr.args[0], rules.Name)
    ):
        return expr.args[0].name
    return None


def _dims(solver: Solver, expr: rules.Expr) -> list[Dim] | Dim | None:
    """A dim or a list of dims that `expr` denotes in the current templates."""
    name = _shape_var(expr)
    if name is not None:
        return solver.shape(name)
    if isinstance(expr, rules.ListExpr):
        items = [_dims(solver, item) for item in expr.items]
        if all(isinstance(item, Dim) for item in items):
            return [item for item in items if isinstance(item, Dim)]
        return None
    if isinstance(expr, rules.Index):
        return _index_dims(solver, expr)
    if isinstance(expr, rules.Binary) and expr.op == "*":
        left, right = _dims(solver, expr.left), _dims(solver, expr.right)
        if isinstance(left, Dim) and isinstance(right, Dim):
            return left.times(right)
        return None
    value = _int_literal(expr)
    if value is not None and value >= 1:
        return Dim(value)
    return None


def _index_dims(solver: Solver, expr: rules.Index) -> list[Dim] | Dim | None:
    base = _dims(solver, expr.obj)
    if not isinstance(base, list):
        return None
    index = expr.index
    if isinstance(index, rules.Slice):
        if index.step is not None:
            return None
        start = 0 if index.start is None else _int_literal(index.start)
        stop = len(base) if index.stop is None else _int_literal(index.stop)
        if start is None or stop is None:
            return None
        return base[start:stop]
    position = _int_literal(index)
    if position is None or not -len(base) <= position < len(base):
        return None
    return base[position]


def _equal(solver: Solver, left: rules.Expr, right: rules.Expr) -> None:
    """One `left == right` of a where line, applied to the templates."""
    for a, b in ((left, right), (right, left)):
        name = _rank_var(a)
        if name is None:
            continue
        rank = _int_literal(b)
        if rank is not None:
            solver.set_rank(name, rank)
            return
        other = _rank_var(b)
        if other is not None:
            known = solver.rank(name)
            if known is not None:
                solver.set_rank(other, known)
            return
    dims_left, dims_right = _dims(solver, left), _dims(solver, right)
    if isinstance(dims_left, Dim) and isinstance(dims_right, Dim):
        solver.equate(dims_left, dims_right)
    elif isinstance(dims_left, list) and isinstance(dims_right, list):
        if len(dims_left) == len(dims_right):
            for a_dim, b_dim in zip(dims_left, dims_right, strict=True):
                solver.equate(a_dim, b_dim)
    elif isinstance(dims_right, list) and _shape_var(left) is not None:
        solver.set_shape(_shape_var(left), dims_right)
    elif isinstance(dims_left, list) and _shape_var(right) is not None:
        solver.set_shape(_shape_var(right), dims_left)


def _where_relations(condition: rules.Expr) -> Iterator[Relation]:
    if isinstance(condition, rules.BoolOp) and condition.op == "and":
        yield from _where_relations(condition.left)
        yield from _where_relations(condition.right)
    elif isinstance(condition, rules.Compare) and condition.op == "==":
        yield functools.partial(_equal, left=condition.left, right=condition.right)


# ---------------------------------------------------------------------------------------------
# Entry point


def solve_templates(
    lines: Sequence[rules.NodePattern], where: Sequence[rules.Expr], defined: frozenset[str]
) -> ShapeTemplates:
    """The templates of a rule with these match lines and `where` lines."""
    relations: list[Relation] = []
    for condition in where:
        relations.extend(_where_relations(condition))
    for line in lines:
        relations.extend(_line_relations(line, defined))
    solver = Solver()
    for _ in range(MAX_ROUNDS):
        solver.changed = False
        for apply in relations:
            apply(solver)
        if not solver.changed:
            break
    return solver.result()
