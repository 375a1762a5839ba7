"""Which element types a rule's values may have: classes of values that share one dtype.

The schemas say which types each input and output of an op takes (`T` of Add for both inputs
and the output, `tensor(int64)` for a Reshape's shape). A rule's values are linked through
them: `t = Add (x, b)` and `y = Mul (t, s)` put x, b, t, s and y in one class. Each class gets
the types every schema in it allows; the prover then picks one dtype per class for each
instance, from the floats (float, float16, double) where they are allowed and from the
integer and bool types where the rule mentions them (or nothing else is allowed).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

import onnx

import ir
from rewriter import rules

FLOATS = (ir.DataType.FLOAT, ir.DataType.FLOAT16, ir.DataType.DOUBLE)
INTEGERS = (
    ir.DataType.INT64,
    ir.DataType.INT32,
    ir.DataType.INT8,
    ir.DataType.UINT8,
    ir.DataType.INT16,
    ir.DataType.UINT16,
    ir.DataType.UINT32,
    ir.DataType.UINT64,
)
DEFAULT_INTEGERS = (ir.DataType.INT64, ir.DataType.INT32)
MODELLED = (*FLOATS, *INTEGERS, ir.DataType.BOOL)

Key = tuple[object, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class TypeClasses:
    """Classes of a rule's values that share a dtype, and each class's dtype options."""

    class_of: dict[Key, int]
    options: tuple[tuple[ir.DataType, ...], ...]

    def of_value(self, name: str) -> int:
        """The class of a named value of the match."""
        return self.class_of[("value", name)]

    def of_slot(self, line: int, position: int) -> int:
        """The class of an unnamed input (a literal, `_`) of a match line."""
        return self.class_of[("slot", line, position)]


class _Union:
    def __init__(self) -> None:
        self.parent: dict[Key, Key] = {}
        self.allowed: dict[Key, frozenset[ir.DataType]] = {}

    def find(self, key: Key) -> Key:
        self.parent.setdefault(key, key)
        root = key
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[key] != root:
            self.parent[key], key = root, self.parent[key]
        return root

    def restrict(self, key: Key, allowed: frozenset[ir.DataType]) -> None:
        root = self.find(key)
        current = self.allowed.get(root)
        self.allowed[root] = allowed if current is None else current & allowed

    def union(self, a: Key, b: Key) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return
        self.parent[ra] = rb
        if ra in self.allowed:
            self.restrict(rb, self.allowed.pop(ra))


def _dtypes_of(type_strs: Iterable[str]) -> frozenset[ir.DataType]:
    found: set[ir.DataType] = set()
    for type_str in type_strs:
        if type_str.startswith("tensor(") and type_str.endswith(")"):
            try:
                found.add(ir.DataType.from_name(type_str[len("tensor(") : -1]))
            except ValueError:
                continue
    return frozenset(found)


def _formal(formals: Sequence[onnx.defs.OpSchema.FormalParameter], position: int) -> object:
    if not formals:
        return None
    if position < len(formals):
        return formals[position]
    last = formals[-1]
    variadic = last.option == onnx.defs.OpSchema.FormalParameterOption.Variadic
    return last if variadic else None


def _link(
    union: _Union,
    schema: onnx.defs.OpSchema,
    line: int,
    formal: object,
    key: Key,
) -> None:
    if formal is None:
        return
    type_str = getattr(formal, "type_str", "")
    constraints = {c.type_param_str: c for c in schema.type_constraints}
    if type_str in constraints:
        param: Key = ("param", line, type_str)
        union.restrict(param, _dtypes_of(constraints[type_str].allowed_type_strs))
        union.union(key, param)
    else:
        union.restrict(key, _dtypes_of([type_str]))


def type_classes(
    lines: Sequence[tuple[rules.NodePattern, onnx.defs.OpSchema]],
    mentioned: frozenset[ir.DataType],
) -> TypeClasses:
    """The dtype classes of a match whose lines have these schemas.

    `mentioned` are the dtypes the rule's conditions name: integer and bool types are tried
    only where the rule mentions them or a class allows nothing else.
    """
    union = _Union()
    keys: list[Key] = []
    for line, (node, schema) in enumerate(lines):
        for position, item in enumerate(node.inputs):
            key: Key = (
                ("value", item.name)
                if isinstance(item, rules.InputVar)
                else ("slot", line, position)
            )
            keys.append(key)
            union.find(key)
            _link(union, schema, line, _formal(list(schema.inputs), position), key)
        for position, output in enumerate(node.outputs):
            out_key: Key = (
                ("value", output.name)
                if isinstance(output, rules.OutputVar)
                else ("out", line, position)
            )
            keys.append(out_key)
            union.find(out_key)
            _link(union, schema, line, _formal(list(schema.outputs), position), out_key)
    roots: dict[Key, int] = {}
    options: list[tuple[ir.DataType, ...]] = []
    class_of: dict[Key, int] = {}
    for key in keys:
        root = union.find(key)
        if root not in roots:
            roots[root] = len(options)
            options.append(_options(union.allowed.get(root), mentioned))
        class_of[key] = roots[root]
    return TypeClasses(class_of, tuple(options))


def _options(
    allowed: frozenset[ir.DataType] | None, mentioned: frozenset[ir.DataType]
) -> tuple[ir.DataType, ...]:
    if allowed is None:
        allowed = frozenset(MODELLED)
    floats = [d for d in FLOATS if d in allowed]
    integers = [d for d in INTEGERS if d in allowed]
    chosen = list(floats)
    wanted_integers = [d for d in integers if d in mentioned or d in DEFAULT_INTEGERS]
    if wanted_integers and (any(d in mentioned for d in INTEGERS) or not chosen):
        chosen += wanted_integers
    elif integers and not chosen:
        chosen += integers[:2]
    if ir.DataType.BOOL in allowed and (ir.DataType.BOOL in mentioned or not chosen):
        chosen.append(ir.DataType.BOOL)
    return tuple(chosen)


def mentioned_dtypes(exprs: Iterable[rules.Expr]) -> frozenset[ir.DataType]:
    """The dtypes named by string literals in `exprs` (constraint calls spelled out)."""
    found: set[ir.DataType] = set()
    for condition in rules.inline_constraints(tuple(exprs)):
        for node, _ in rules.walk(condition):
            if isinstance(node, rules.Const) and isinstance(node.value, str):
                try:
                    found.add(ir.DataType.from_name(node.value))
                except ValueError:
                    continue
    return frozenset(d for d in found if d in MODELLED)
