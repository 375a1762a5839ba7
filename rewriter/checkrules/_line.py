"""One match line being instantiated: its slots (inputs), attributes and the op's schema.

A *recipe* (see `_recipes*`) fills a `LineBuild`: it decides the attributes the pattern
leaves open and the shapes, dtypes and (for structural inputs such as a Reshape's target)
the values of the inputs not known yet, so that the node type-checks. Values the pattern
fixes (literal attributes, variables bound earlier, interior values) are respected; every
decision goes through `Choices` under a key, so repairs can override it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable, Mapping
from typing import Any

import numpy as np

import ir
from rewriter.checkrules._choices import Choices
from rewriter.engine import attr_to_python

Shape = tuple[int, ...]
Array = np.ndarray[Any, Any]

# Base dtypes an instance is drawn with (repeats weight the draw; float first: simplest).
PREFERRED_DTYPES = (
    ir.DataType.FLOAT,
    ir.DataType.FLOAT,
    ir.DataType.FLOAT,
    ir.DataType.FLOAT,
    ir.DataType.DOUBLE,
    ir.DataType.FLOAT16,
    ir.DataType.INT64,
    ir.DataType.INT32,
)
CAST_DTYPES = (
    ir.DataType.FLOAT,
    ir.DataType.DOUBLE,
    ir.DataType.FLOAT16,
    ir.DataType.BFLOAT16,
    ir.DataType.INT8,
    ir.DataType.INT16,
    ir.DataType.INT32,
    ir.DataType.INT64,
    ir.DataType.UINT8,
    ir.DataType.UINT16,
    ir.DataType.UINT32,
    ir.DataType.UINT64,
    ir.DataType.BOOL,
)
_NAME_TO_DTYPE = {f"tensor({dtype.onnx_name})": dtype for dtype in ir.DataType if dtype.onnx_name}

SMALL_DIMS = (1, 4)
"""The range fresh dims are drawn from."""
SIZES = ("sizes",)
"""The choice key of an instance drawn at the sizes its rule mentions (see `draw_dim`)."""
# A tensor drawn at the rule's sizes holds at most this many elements: later dims stay small.
MAX_SIZED_ELEMENTS = 1 << 16


def draw_dim(choices: Choices, key: Hashable, elements: int = 1) -> int:
    """A fresh dim: small, or one of the rule's sizes when the instance is drawn at them.

    Under the `SIZES` override (a tuple of sizes the rule mentions, and twice the largest,
    set by `_check` for a few attempts), each dim takes one of them while the tensor
    (`elements` so far) stays under `MAX_SIZED_ELEMENTS`: `Slice(x, 0, 8) -> x` is exact
    on every dim up to 8 and wrong on 16.
    """
    menu = choices.overrides.get(SIZES)
    if menu and elements * max(menu) <= MAX_SIZED_ELEMENTS:
        return int(choices.pick(("sized", key), tuple(menu)))
    return choices.integer(key, *SMALL_DIMS)


class TemplateDims:
    """Draws the sizes of a rule's shape-template symbols (`ShapeTemplates.concretize`).

    Each symbol is a dim (`draw_dim`); their running product keeps instances drawn at the
    rule's sizes small enough, as for one tensor.
    """

    def __init__(self, choices: Choices) -> None:
        self._choices = choices
        self._elements = 1

    def __call__(self, symbol: int) -> int:
        """The size of template symbol `symbol`."""
        size = draw_dim(self._choices, ("symbol", symbol), self._elements)
        self._elements *= size
        return size


class RecipeError(Exception):
    """The line cannot be instantiated with the choices made (the attempt is rejected)."""


@dataclasses.dataclass(slots=True)
class TensorSpec:
    """A tensor's element type and static shape."""

    dtype: ir.DataType
    shape: Shape


@dataclasses.dataclass(slots=True)
class Slot:
    """One input position of a line.

    `known` is set for values realized earlier (interior values, free variables bound by an
    earlier line); the recipe sets `spec` (and `values`, `const`) for the others.
    """

    position: int
    key: str
    known: TensorSpec | None = None
    literal: Any = None
    present: bool = True
    spec: TensorSpec | None = None
    values: Array | None = None
    const: bool | None = None

    @property
    def resolved(self) -> TensorSpec | None:
        """The known or decided type."""
        return self.known if self.known is not None else self.spec

    @property
    def shape(self) -> Shape | None:
        """The known or decided shape."""
        spec = self.resolved
        return None if spec is None else spec.shape


class LineBuild:
    """The state of one line while its recipe runs."""

    def __init__(
        self,
        *,
        index: int,
        op_type: str,
        domain: str,
        opset: int,
        slots: list[Slot],
        fixed_attrs: dict[str, Any],
        attr_keys: dict[str, Hashable],
        choices: Choices,
        base_dtype: ir.DataType,
        output_count: int,
        outputs_open: bool,
        templates: Mapping[str, Shape] | None = None,
        output_names: tuple[str | None, ...] = (),
    ) -> None:
        self.index = index
        self.op_type = op_type
        self.domain = domain
        self.opset = opset
        self.schema = ir.schemas.find_schema(op_type, domain, opset, runtime=True)
        self.slots = slots
        self.fixed_attrs = fixed_attrs
        self.attr_keys = attr_keys
        self.choices = choices
        self.base_dtype = base_dtype
        self.attrs: dict[str, Any] = {}
        self.output_count = output_count
        self.more_outputs = outputs_open
        # Shapes the rule's shape templates ask for (see `_templates`), by variable name.
        self.templates: Mapping[str, Shape] = templates or {}
        self.output_names = output_names
        # Output types for ops onnx cannot infer (custom domains); None: onnx infers them.
        self.output_specs: list[TensorSpec] | None = None

    @property
    def negative_axes(self) -> bool:
        """True when the op accepts negative axes (ONNX allows them from opset 11)."""
        return self.opset >= 11 or self.domain != ""

    # keys ----------------------------------------------------------------------------------
    def key(self, *parts: Hashable) -> Hashable:
        """A choice key local to this line."""
        return ("line", self.index, *parts)

    # attributes ----------------------------------------------------------------------------
    def default(self, name: str) -> Any:
        """The schema default of attribute `name` (None when it has none)."""
        attr = ir.schemas.attribute_default(self.op_type, name, self.domain, self.opset)
        return None if attr is None else attr_to_python(attr)

    def has_attr(self, name: str) -> bool:
        """True when the op's schema at this opset has attribute `name`."""
        return self.schema is not None and name in self.schema.attributes

    def attr(self, name: str, draw: Callable[[Hashable], Any], *, omit_percent: int = 25) -> Any:
        """Decide attribute `name`; returns its effective (default-aware) value.

        A value the pattern fixes is kept (and, when it equals the default, sometimes omitted
        to exercise default-aware matching). Otherwise `draw(key)` proposes a value (None:
        leave the attribute out), and an attribute with a default is sometimes left out.
        """
        if self.schema is not None and name not in self.schema.attributes:
            return None
        default = self.default(name)
        if name in self.fixed_attrs:
            value = self.fixed_attrs[name]
            if value is None:
                self.attrs.pop(name, None)
                return default
            if not (default is not None and _same(value, default) and self._omit(name, 50)):
                self.attrs[name] = value
            return value
        key = self.attr_keys.get(name, self.key("attr", name))
        if key in self.choices.overrides and self.choices.overrides[key] is None:
            return default  # a repair asked for the attribute to be left out
        if (
            key not in self.choices.overrides
            and default is not None
            and self._omit(name, omit_percent)
        ):
            return default
        value = draw(key)
        if value is None:
            return default
        self.attrs[name] = value
        return value

    def _omit(self, name: str, percent: int) -> bool:
        return percent > 0 and self.choices.chance(self.key("omit", name), percent)

    # slots ---------------------------------------------------------------------------------
    def present(self, position: int) -> Slot | None:
        """The slot at `position` when it is present."""
        if position < len(self.slots) and self.slots[position].present:
            return self.slots[position]
        return None

    # shape templates -----------------------------------------------------------------------
    def template(self, slot: Slot) -> Shape | None:
        """The shape the rule's templates ask of a slot's variable (None: no template).

        A rank a repair forced wins over the template.
        """
        shape = self.templates.get(slot.key)
        rank = self.choices.overrides.get(("rank", slot.key))
        if shape is None or (rank is not None and int(rank) != len(shape)):
            return None
        return shape

    def output_template(self, index: int = 0) -> Shape | None:
        """The shape the templates ask of output `index` (None: no template)."""
        if index >= len(self.output_names):
            return None
        name = self.output_names[index]
        return None if name is None else self.templates.get(name)

    def shape_choice(self, slot: Slot, options: list[Shape]) -> Shape:
        """One of `options` for the slot's shape (overridable under ("shape", key)).

        The template's shape when it is one of the options.
        """
        forced = self.choices.overrides.get(("shape", slot.key))
        if forced is not None:
            return tuple(int(d) for d in forced)
        template = self.template(slot)
        if template is not None and template in options:
            return template
        rank = self.choices.overrides.get(("rank", slot.key))
        if rank is not None:
            options = [o for o in options if len(o) == rank] or options
        return self.choices.pick(("shape", slot.key), options)

    def draw_shape(
        self,
        slot: Slot,
        min_rank: int = 1,
        max_rank: int = 4,
        *,
        template_max_rank: int | None = None,
    ) -> Shape:
        """A fresh shape for a slot with nothing known (rank and dims small).

        The template's shape when it has a rank in `[min_rank, template_max_rank]` (by
        default `max_rank`: a recipe may take a template's higher rank without drawing one).
        """
        forced = self.choices.overrides.get(("shape", slot.key))
        if forced is not None:
            return tuple(int(d) for d in forced)
        template = self.template(slot)
        if template is not None and min_rank <= len(template) <= (template_max_rank or max_rank):
            return template
        rank_key = ("rank", slot.key)
        if rank_key in self.choices.overrides:
            rank = int(self.choices.overrides[rank_key])
        else:
            rank = self.choices.integer(rank_key, min_rank, max_rank)
        dims: list[int] = []
        for axis in range(rank):
            dims.append(draw_dim(self.choices, ("dim", slot.key, axis), int(np.prod(dims))))
        return tuple(dims)

    def set(
        self,
        slot: Slot,
        dtype: ir.DataType,
        shape: Shape,
        *,
        values: Array | None = None,
        const: bool | None = None,
    ) -> None:
        """Decide an unknown slot (a known slot, or one the rule's literal fills, is left)."""
        if slot.known is not None or not slot.present:
            return
        if slot.literal is not None and slot.values is not None:
            return  # a list literal of the rule, filled before the recipe ran: it wins
        forced = self.choices.overrides.get(("value", slot.key))
        if values is not None and forced is not None:
            forced = np.asarray(forced)
            values = np.broadcast_to(forced, shape) if forced.ndim == 0 else forced
            shape = tuple(values.shape)
        if values is not None:
            values = np.asarray(values, dtype=ir.numpy_dtype(dtype)).reshape(shape)
            const = True
        slot.spec = TensorSpec(dtype, tuple(int(d) for d in shape))
        slot.values = values
        slot.const = const

    def int_values(self, slot: Slot, values: list[int] | Array) -> None:
        """Decide a structural int64 slot (shape, axes, pads, ...) as a constant."""
        array = np.asarray(values, dtype=np.int64).reshape(-1)
        self.set(slot, ir.DataType.INT64, (array.size,), values=array)

    def known_values(self, slot: Slot) -> Array | None:
        """Constant contents of a slot when known (a literal or decided values)."""
        if slot.values is not None:
            return slot.values
        if slot.literal is not None:
            return np.asarray(slot.literal)
        return None

    # dtypes --------------------------------------------------------------------------------
    def type_var(self, position: int) -> str | None:
        """The schema's type string for input `position` (variadic last input repeats)."""
        if self.schema is None or not self.schema.inputs:
            return None
        params = self.schema.inputs
        param = params[min(position, len(params) - 1)]
        return str(param.type_str)

    def allowed(self, type_str: str) -> tuple[ir.DataType, ...]:
        """Element types a type variable (or a fixed `tensor(x)` string) allows."""
        if type_str in _NAME_TO_DTYPE:
            return (_NAME_TO_DTYPE[type_str],)
        assert self.schema is not None, "allowed() needs a schema"
        for constraint in self.schema.type_constraints:
            if constraint.type_param_str == type_str:
                return tuple(
                    _NAME_TO_DTYPE[t] for t in constraint.allowed_type_strs if t in _NAME_TO_DTYPE
                )
        return ()

    def dtype_for(self, position: int) -> ir.DataType:
        """The element type of input `position`.

        Shared with a known slot of the same type variable, else the instance's base dtype
        when allowed, else float or int64.
        """
        slot = self.slots[position] if position < len(self.slots) else None
        if slot is not None and slot.resolved is not None:
            return slot.resolved.dtype
        type_str = self.type_var(position)
        if type_str is None:
            return self.base_dtype
        for other in self.slots:
            if other.resolved is not None and self.type_var(other.position) == type_str:
                return other.resolved.dtype
        allowed = self.allowed(type_str)
        if slot is not None:
            forced = self.choices.overrides.get(("dtype", slot.key))
            if forced is not None and forced in allowed:
                return ir.DataType(forced)
        if not allowed or self.base_dtype in allowed:
            return self.base_dtype
        for fallback in (ir.DataType.FLOAT, ir.DataType.INT64, ir.DataType.BOOL):
            if fallback in allowed:
                return fallback
        return allowed[0]

    def reference(self) -> Shape | None:
        """The shape of the first slot with a known or decided shape."""
        for slot in self.slots:
            if slot.present and slot.shape is not None:
                return slot.shape
        return None


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(np.array_equal(np.asarray(a), np.asarray(b)))
    except (TypeError, ValueError):
        return False
