"""Recipes: how to instantiate one op so that it type-checks, and the registry of recipes.

A recipe receives a `LineBuild` whose known slots carry shapes and dtypes and decides the
rest. Ops without a recipe of their own use `generic`, which handles any op whose inputs
share one type variable and one shape (unary and same-shape elementwise ops), drawing open
attributes by name and schema type. Broadcasting ops use `elementwise`, which offers the
shapes a rule's constant operand typically has: a scalar, `[1]`, a suffix of the other
operand's shape, a per-channel `[C, 1, 1]` or `[1, C, 1, 1]`, or the full shape.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any

import ir
from rewriter.checkrules._line import (
    CAST_DTYPES,
    LineBuild,
    RecipeError,
    Shape,
    Slot,
)
from rewriter.checkrules._values import EPSILONS

Recipe = Callable[[LineBuild], None]

RECIPES: dict[tuple[str, str], Recipe] = {}


def recipe(*ops: str, domain: str = "") -> Callable[[Recipe], Recipe]:
    """Register a recipe for `ops` of `domain`."""

    def register(fn: Recipe) -> Recipe:
        for op in ops:
            RECIPES[(domain, op)] = fn
        return fn

    return register


def find_recipe(op_type: str, domain: str) -> Recipe:
    """The recipe for an op (`generic` when none is registered)."""
    return RECIPES.get((ir.schemas.normalize_domain(domain), op_type), generic)


# ---------------------------------------------------------------------------------------------
# Attribute values by name and type


def axis_in(lb: LineBuild, key: Hashable, rank: int, *, allow_rank: bool = False) -> int:
    """An axis of a tensor of `rank` (negative half the time)."""
    high = rank if allow_rank else rank - 1
    if high < 0:
        raise RecipeError("no axis in a 0-d tensor")
    axis = lb.choices.integer(key, 0, max(high, 0))
    negative_ok = lb.negative_axes or lb.op_type in ("Softmax", "LogSoftmax", "Hardmax")
    if negative_ok and lb.choices.chance((key, "negative"), 40):
        return axis - rank - (1 if allow_rank else 0)
    return axis


def float_attr(name: str) -> tuple[float, ...]:
    """Typical values of a float attribute called `name`."""
    lowered = name.lower()
    if "eps" in lowered:
        return EPSILONS
    if lowered in ("momentum",):
        return (0.9, 0.0, 0.99)
    if lowered in ("ratio",):
        return (0.5, 0.0, 0.1)
    return (1.0, 0.5, 2.0, -1.0, 0.0, 0.01, 1.5)


def draw_generic_attr(lb: LineBuild, name: str, rank: int) -> Callable[[Hashable], Any]:
    """A drawer for an attribute the recipe knows nothing about, by name and schema type."""
    kind = ir.schemas.attribute_type(lb.op_type, name, lb.domain, lb.opset)
    choices = lb.choices

    def draw(key: Hashable) -> Any:
        if name == "axis" and rank > 0:
            return axis_in(lb, key, rank)
        if name == "to":
            return int(choices.pick(key, CAST_DTYPES))
        if name in ("perm",) and rank > 0:
            return choices.permutation(key, rank)
        if kind == ir.AttrType.FLOAT:
            return float(choices.pick(key, float_attr(name)))
        if kind == ir.AttrType.INT:
            return int(choices.pick(key, (0, 1)))
        return None

    return draw


def open_attributes(lb: LineBuild, rank: int, skip: tuple[str, ...] = ()) -> None:
    """Decide every attribute of the schema not decided yet (fixed ones, drawn open ones)."""
    if lb.schema is None:
        for name, value in lb.fixed_attrs.items():
            if value is not None:
                lb.attrs[name] = value
        return
    for name in sorted(lb.schema.attributes):
        if name in lb.attrs or name in skip:
            continue
        required = bool(lb.schema.attributes[name].required)
        if name in lb.fixed_attrs or name in lb.attr_keys or required:
            lb.attr(name, draw_generic_attr(lb, name, rank))


# ---------------------------------------------------------------------------------------------
# Generic and elementwise recipes


def generic(lb: LineBuild) -> None:
    """Inputs share the first input's shape and type; other attributes by name."""
    if lb.schema is None:
        raise RecipeError(f"no recipe for custom op {lb.domain}.{lb.op_type}")
    reference = lb.reference()
    first = lb.present(0)
    if reference is None:
        if first is None:
            raise RecipeError(f"no recipe for {lb.op_type} without a first input")
        reference = lb.draw_shape(first)
    first_type = lb.type_var(0)
    for slot in lb.slots:
        if not slot.present or slot.resolved is not None:
            continue
        if lb.type_var(slot.position) != first_type:
            raise RecipeError(f"no recipe for {lb.op_type}: input {slot.position} has its own type")
        lb.set(slot, lb.dtype_for(slot.position), reference)
    open_attributes(lb, len(reference))


def broadcast_options(reference: Shape, *, literal: bool) -> list[Shape]:
    """Shapes that broadcast against `reference` without enlarging it (simplest first)."""
    rank = len(reference)
    options: list[Shape] = [(), (1,)] if literal else [reference, ()]
    options.append(reference)
    for start in range(1, rank):
        options.append(reference[start:])
    if rank >= 3:
        channels = reference[1]
        options.append((channels,) + (1,) * (rank - 2))
        options.append((1, channels) + (1,) * (rank - 2))
    options.append((1,) * rank)
    if rank >= 2:
        options.append((*reference[:-1], 1))
    return options


def elementwise(lb: LineBuild) -> None:
    """Broadcasting ops: unknown operands get shapes that broadcast to the known ones."""
    known = [s.shape for s in lb.slots if s.present and s.shape is not None]
    first = lb.present(0)
    if not known:
        target = next((s for s in lb.slots if s.present and s.literal is None), first)
        if target is None:
            raise RecipeError(f"{lb.op_type} has no input")
        lb.set(target, lb.dtype_for(target.position), lb.draw_shape(target, 0, 4))
        known = [target.shape]  # type: ignore[list-item]
    reference = _broadcast(known)
    for slot in lb.slots:
        if not slot.present or slot.resolved is not None:
            continue
        shape = lb.shape_choice(
            slot, broadcast_options(reference, literal=slot.literal is not None)
        )
        lb.set(slot, lb.dtype_for(slot.position), shape)
    open_attributes(lb, len(reference))


def _broadcast(shapes: Sequence[Shape | None]) -> Shape:
    rank = max(len(s) for s in shapes if s is not None)
    result = [1] * rank
    for shape in shapes:
        if shape is None:
            continue
        for i, dim in enumerate(shape):
            j = rank - len(shape) + i
            if result[j] == 1:
                result[j] = dim
            elif dim not in (1, result[j]):
                raise RecipeError(f"shapes {shapes} do not broadcast")
    return tuple(result)


for _op in (
    "Add",
    "Sub",
    "Mul",
    "Div",
    "Pow",
    "Max",
    "Min",
    "Sum",
    "Mean",
    "And",
    "Or",
    "Xor",
    "Equal",
    "Less",
    "Greater",
    "LessOrEqual",
    "GreaterOrEqual",
    "BitwiseAnd",
    "BitwiseOr",
    "BitwiseXor",
    "Mod",
    "PRelu",
):
    RECIPES[("", _op)] = elementwise


@recipe("Where")
def where_op(lb: LineBuild) -> None:
    """Where(cond, a, b): a bool condition broadcasting with two operands."""
    elementwise(lb)


@recipe("Cast", "CastLike")
def cast(lb: LineBuild) -> None:
    """Cast: any input type, `to` among the common types."""
    slot = lb.slots[0]
    shape = slot.shape if slot.shape is not None else lb.draw_shape(slot, 0, 3)
    if slot.resolved is None:
        dtype = lb.choices.pick(("dtype", slot.key), (lb.base_dtype, *CAST_DTYPES))
        lb.set(slot, ir.DataType(dtype), shape)
    lb.attr("to", lambda key: int(lb.choices.pick(key, CAST_DTYPES)), omit_percent=0)
    if lb.op_type == "CastLike" and len(lb.slots) > 1:
        target = lb.slots[1]
        lb.set(target, ir.DataType(lb.choices.pick(lb.key("like"), CAST_DTYPES)), ())
    open_attributes(lb, len(shape))


def slot_named(lb: LineBuild, position: int) -> Slot | None:
    """Alias of `LineBuild.present` for readability in recipes."""
    return lb.present(position)
