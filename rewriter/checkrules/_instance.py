"""Building one instance of a rule: a small ONNX model containing exactly its match lines.

Lines are built in dependency order. For each line the op is chosen among the alternatives,
its input slots are gathered (interior values and free variables bound earlier are known;
fresh free variables, wildcards and literals are not), the op's recipe decides what is
open, and onnx's shape inference (strict, with data propagation) gives the outputs' types
for the lines that read them. Free variables become initializers when the rule needs them
constant (or a recipe fixed their values), graph inputs otherwise. The outputs of the lines
no other line reads become graph outputs. A model that does not type-check is rejected.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable
from typing import Any

import numpy as np

import ir
from rewriter import rules
from rewriter.checkrules import _recipes_custom, _recipes_legacy, _recipes_nn, _recipes_shape
from rewriter.checkrules._analysis import RulePlan
from rewriter.checkrules._choices import Choices
from rewriter.checkrules._dynamic import SYMBOLIC, DynamicError, computed_pieces, make_symbolic
from rewriter.checkrules._line import (
    PREFERRED_DTYPES,
    LineBuild,
    RecipeError,
    Slot,
    TemplateDims,
    TensorSpec,
)
from rewriter.checkrules._recipes import find_recipe
from rewriter.checkrules._values import draw_constant
from rewriter.engine import NodeRef, attr_to_python

# Registered by import (the registry is filled as a side effect of these modules).
_RECIPE_MODULES = (_recipes_nn, _recipes_shape, _recipes_custom, _recipes_legacy)


class RejectedError(Exception):
    """The attempt produced no valid instance (the message says why).

    `partial` holds the lines built before the one that failed, when a line failed (so that
    the `where` lines about them can still hint the next attempt).
    """

    partial: Instance | None = None


@dataclasses.dataclass(slots=True)
class Realized:
    """A value of the instance: its tensor name, type, and constant contents if any."""

    name: str
    spec: TensorSpec
    values: np.ndarray[Any, Any] | None = None
    is_input: bool = False


@dataclasses.dataclass(slots=True)
class Instance:
    """A built instance: the model and what the rule's variables are bound to."""

    proto: Any
    opsets: dict[str, int]
    target: int | None
    anchor_name: str
    var_names: dict[str, str | tuple[str, ...] | None]
    attr_values: dict[str, tuple[int, str]]
    node_refs: dict[str, int]
    const_vars: frozenset[str]
    base_dtype: ir.DataType = ir.DataType.FLOAT


class _Build:
    """The mutable state of one build."""

    def __init__(self, plan: RulePlan, choices: Choices) -> None:
        self.plan = plan
        self.choices = choices
        self.opsets, self.target = choices.pick("opset", plan.opsets)
        self.base_dtype = ir.DataType(choices.pick("dtype", plan.dtypes or PREFERRED_DTYPES))
        self.templates = plan.templates.concretize(TemplateDims(choices))
        self.values: dict[str, Realized] = {}
        self.var_names: dict[str, str | tuple[str, ...] | None] = {}
        self.attr_bound: dict[str, Any] = {}
        self.attr_values: dict[str, tuple[int, str]] = {}
        self.node_refs: dict[str, int] = {}
        self.nodes: list[Any] = []
        self.custom_types: dict[str, TensorSpec] = {}
        self.const_vars: dict[str, None] = {}
        self.variadic_of: dict[str, str] = {}  # item slot key -> its variadic binding's name

    # free variables ------------------------------------------------------------------------
    def wants_const(self, var: str) -> bool:
        """Constant or graph input for a free variable (the rule's needs decide the odds).

        An item of a variadic binding (`cs_0` of `cs...`) follows what is asked of `cs`.
        """
        var = self.variadic_of.get(var, var)
        forced = self.choices.overrides.get(("const", var))
        if forced is not None:
            return bool(forced)
        if var in self.plan.const_tested:
            return not self.choices.chance(("input", var), 5)
        if var in self.plan.computed_with:
            return not self.choices.chance(("input", var), 20)
        return False

    def slot_for(self, line_index: int, position: int, pattern: rules.InputPattern) -> Slot | None:
        """The slot of one pattern input (None for an absent optional input)."""
        if isinstance(pattern, rules.AnyValue):
            return Slot(position, f"_in{line_index}_{position}")
        if isinstance(pattern, rules.InputConst):
            return Slot(position, f"_lit{line_index}_{position}", literal=pattern.value)
        name = pattern.name
        alias = self.choices.overrides.get(("alias", name))
        if alias is not None and alias in self.values:
            self.var_names[name] = self.values[alias].name
            return Slot(position, alias, known=self.values[alias].spec)
        if name in self.values:
            return Slot(position, name, known=self.values[name].spec)
        if name in self.var_names and self.var_names[name] is None:
            return None
        return Slot(position, name)

    # one line --------------------------------------------------------------------------------
    def build_line(self, index: int) -> None:
        """Instantiate match line `index` and append its node."""
        line = self.plan.lines[index]
        refs = [r for r in line.ops if self._exists(r)]
        if not refs:
            raise RejectedError(f"no alternative of line {index + 1} exists at {self.opsets}")
        ref = self.choices.pick(("op", index), refs)
        domain = ir.schemas.normalize_domain(ref.domain)
        opset = self.opsets.get(domain, 1)
        schema = ir.schemas.find_schema(ref.op_type, domain, opset, runtime=True)
        slots = self._slots(index, line, schema)
        fixed, keys = self._attributes(line)
        lb = LineBuild(
            index=index,
            op_type=ref.op_type,
            domain=domain,
            opset=opset,
            slots=slots,
            fixed_attrs=fixed,
            attr_keys=keys,
            choices=self.choices,
            base_dtype=self.base_dtype,
            output_count=len(line.outputs),
            outputs_open=line.more_outputs,
            templates=self.templates,
            output_names=tuple(
                p.name if isinstance(p, rules.OutputVar) else None for p in line.outputs
            ),
        )
        self._prefill_literals(lb)
        try:
            find_recipe(ref.op_type, domain)(lb)
        except RecipeError as exc:
            raise RejectedError(f"line {index + 1} ({ref.op_type}): {exc}") from exc
        except (IndexError, ValueError, TypeError, KeyError, ZeroDivisionError) as exc:
            # Shapes a recipe does not expect (a 0-d operand where it needs an axis): reject.
            raise RejectedError(f"line {index + 1} ({ref.op_type}): no instance ({exc})") from exc
        self._realize_slots(index, lb)
        self._record_attributes(line, lb)
        self._append_node(index, line, lb)

    def _exists(self, ref: rules.OpId) -> bool:
        domain = ir.schemas.normalize_domain(ref.domain)
        if domain and not ir.schemas.is_known_domain(domain):
            return True
        return (
            ir.schemas.find_schema(ref.op_type, domain, self.opsets.get(domain, 1), runtime=True)
            is not None
        )

    def _slots(self, index: int, line: rules.NodePattern, schema: Any) -> list[Slot]:
        arity = ir.schemas.input_arity(schema) if schema is not None else None
        slots: list[Slot] = []
        for position, pattern in enumerate(line.inputs):
            if isinstance(pattern, rules.InputVar) and pattern.variadic:
                slots.extend(self._variadic(index, pattern.name, len(slots), arity))
                continue
            slot = self.slot_for(index, position, pattern)
            if slot is None:
                slots.append(Slot(position, f"_absent{index}_{position}", present=False))
                continue
            if isinstance(pattern, rules.InputVar) and pattern.optional and slot.known is None:
                fits = arity is None or arity.max_inputs is None or position < arity.max_inputs
                required = arity is not None and position < arity.min_inputs
                if not fits or not (required or self.choices.chance(("present", pattern.name), 50)):
                    slot.present = False
                    self.var_names[pattern.name] = None
            slots.append(slot)
        while slots and not slots[-1].present:
            slots.pop()
        return slots

    def _variadic(self, index: int, name: str, start: int, arity: Any) -> list[Slot]:
        room = 2
        if arity is not None and arity.max_inputs is not None:
            room = min(room, arity.max_inputs - start)
        count = self.choices.integer(("extra", name), 0, max(room, 0))
        self.var_names[name] = tuple(f"{name}_{j}" for j in range(count))
        self.variadic_of.update({f"{name}_{j}": name for j in range(count)})
        return [Slot(start + j, f"{name}_{j}") for j in range(count)]

    def _attributes(self, line: rules.NodePattern) -> tuple[dict[str, Any], dict[str, Hashable]]:
        fixed: dict[str, Any] = {}
        keys: dict[str, Hashable] = {}
        for entry in line.attrs:
            if isinstance(entry, rules.AttrBind):
                var = entry.var
                if var in self.attr_bound:
                    fixed[entry.name] = self.attr_bound[var]
                else:
                    keys[entry.name] = ("attr", var)
            else:
                fixed[entry.name] = entry.value
        return fixed, keys

    def _prefill_literals(self, lb: LineBuild) -> None:
        for slot in lb.slots:
            if isinstance(slot.literal, list):
                dtype = lb.dtype_for(slot.position)
                lb.set(slot, dtype, (len(slot.literal),), values=np.asarray(slot.literal))

    def _realize_slots(self, index: int, lb: LineBuild) -> None:
        for slot in lb.slots:
            if not slot.present or slot.known is not None:
                continue
            if slot.spec is None:
                raise RejectedError(
                    f"line {index + 1} ({lb.op_type}): input {slot.position} undecided"
                )
            values = slot.values
            if slot.literal is not None and values is None:
                np_dtype = ir.numpy_dtype(slot.spec.dtype)
                values = np.full(slot.spec.shape, slot.literal).astype(np_dtype)
            if values is not None and self._computed(slot.key, values):
                self._compute(lb, slot.key, values)
                continue
            const = values is not None or (slot.const is not False and self.wants_const(slot.key))
            if const and values is None:
                values = draw_constant(self.choices, slot.key, slot.spec.dtype, slot.spec.shape)
            if const and not slot.key.startswith(("_lit", "_in")):
                self.const_vars[slot.key] = None
            realized = Realized(slot.key, slot.spec, values, is_input=not const)
            self.values[slot.key] = realized
            if not slot.key.startswith(("_lit", "_in")):
                self.var_names.setdefault(slot.key, slot.key)

    def _computed(self, key: str, values: np.ndarray[Any, Any]) -> bool:
        """True for a structural int vector that a where-hint wants computed, not constant."""
        return (
            self.choices.overrides.get(("const", key)) is False
            and not key.startswith(("_lit", "_in"))
            and values.ndim == 1
            and values.dtype.kind in "iu"
        )

    def _compute(self, lb: LineBuild, key: str, values: np.ndarray[Any, Any]) -> None:
        """Realize `key` as a Concat of dims of the graph inputs and constants (`_dynamic`)."""
        line_inputs = [s.key for s in lb.slots if s.present]
        inputs = [v for v in self.values.values() if v.is_input]
        inputs.sort(key=lambda v: v.name not in line_inputs)
        sources = [(v.name, v.spec.shape) for v in inputs]
        try:
            nodes, constants = computed_pieces(
                key, values.tolist(), sources, self.opsets.get("", 1)
            )
        except DynamicError as exc:
            raise RejectedError(str(exc)) from exc
        for name, array in constants:
            self.values[name] = Realized(name, TensorSpec(ir.DataType.INT64, array.shape), array)
        self.nodes.extend(nodes)
        self.values[key] = Realized(key, TensorSpec(ir.DataType.INT64, (len(values),)))
        self.var_names.setdefault(key, key)

    def _record_attributes(self, line: rules.NodePattern, lb: LineBuild) -> None:
        for entry in line.attrs:
            if isinstance(entry, rules.AttrBind):
                var = entry.var
                if var not in self.attr_bound:
                    self.attr_bound[var] = lb.attrs.get(entry.name, lb.default(entry.name))
                    self.attr_values[var] = (lb.index, entry.name)
        if line.node_var is not None:
            self.node_refs[line.node_var] = lb.index

    def _append_node(self, index: int, line: rules.NodePattern, lb: LineBuild) -> None:
        import onnx.helper

        inputs = []
        for slot in lb.slots:
            if not slot.present:
                inputs.append("")
            elif slot.known is not None:
                inputs.append(self.values[slot.key].name)
            else:
                inputs.append(slot.key)
        outputs = []
        for k, pattern in enumerate(line.outputs):
            outputs.append(
                pattern.name if isinstance(pattern, rules.OutputVar) else f"_out{index}_{k}"
            )
        node = onnx.helper.make_node(
            lb.op_type, inputs, outputs, name=f"n{index}", domain=lb.domain
        )
        node.attribute.extend(self._attribute_protos(lb))
        self.nodes.append(node)
        if lb.output_specs is not None:
            for name, spec in zip(outputs, lb.output_specs, strict=False):
                self.custom_types[name] = spec
        for name, spec in self._infer(outputs).items():
            self.values[name] = Realized(name, spec)
            self.var_names.setdefault(name, name)

    def _attribute_protos(self, lb: LineBuild) -> list[Any]:
        """The line's attributes as protos; an empty list takes its kind from the schema.

        (`make_attribute` cannot tell an empty INTS from an empty FLOATS by the value: a
        rank-0 value gets `perm = []`.)
        """
        import onnx.helper

        made = []
        for name, value in sorted(lb.attrs.items()):
            if isinstance(value, list | tuple) and not value:
                kind = ir.schemas.attribute_type(
                    lb.op_type, name, lb.domain, self.opsets.get(lb.domain, 1)
                )
                if kind is None:
                    raise RejectedError(f"the kind of an empty `{name}` attribute is not known")
                made.append(onnx.helper.make_attribute(name, [], attr_type=int(kind)))
            else:
                made.append(onnx.helper.make_attribute(name, value))
        return made

    def sink(self, name: str) -> str:
        """The graph output for `name`: itself, or (half the time) an Identity of it.

        So the rule also meets results that feed other nodes, not only graph outputs. Always
        an Identity when the rewrite makes `name` a free variable of the pattern: a graph
        output copied from a graph input or a constant keeps its Identity, and the engine
        would decline the rewrite ("nothing to do").
        """
        import onnx.helper

        forced = name in self.plan.outputs_to_free
        if not forced and not self.choices.chance(("sink", name), 50):
            return name
        out = f"{name}_out"
        self.nodes.append(onnx.helper.make_node("Identity", [name], [out], name=f"sink_{name}"))
        self.values[out] = Realized(out, self.values[name].spec)
        return out

    def extra_readers(self) -> list[str]:
        """Graph outputs that read interior values a `uses(v) > k` hint asked readers for."""
        import onnx.helper

        added = []
        for key, count in self.choices.overrides.items():
            if not (isinstance(key, tuple) and len(key) == 2 and key[0] == "extra_uses"):
                continue
            name = self.var_names.get(key[1], key[1])
            if name not in self.values:
                continue
            for k in range(int(count)):
                out = f"{name}_reader{k}"
                self.nodes.append(
                    onnx.helper.make_node("Identity", [name], [out], name=f"reader{k}_{name}")
                )
                self.values[out] = Realized(out, self.values[name].spec)
                added.append(out)
        return added

    # models ----------------------------------------------------------------------------------
    def instance(self, proto: Any) -> Instance:
        """The instance of `proto`, with the variables bound by the lines built so far."""
        return Instance(
            proto=proto,
            opsets=dict(self.opsets),
            target=self.target,
            anchor_name=f"n{self.plan.compiled.anchor}",
            var_names=dict(self.var_names),
            attr_values=dict(self.attr_values),
            node_refs=dict(self.node_refs),
            const_vars=frozenset(self.const_vars),
            base_dtype=self.base_dtype,
        )

    def model(self, outputs: list[str]) -> Any:
        """The ModelProto of the lines built so far, with `outputs` as graph outputs."""
        import onnx
        import onnx.helper
        import onnx.numpy_helper

        graph_inputs = []
        initializers = []
        for value in self.values.values():
            if value.is_input:
                graph_inputs.append(_value_info(value.name, value.spec))
            elif value.values is not None:
                initializers.append(onnx.numpy_helper.from_array(value.values, value.name))
        outs = [_value_info(n, self.values[n].spec) for n in outputs if n in self.values]
        value_info = [_value_info(n, s) for n, s in self.custom_types.items() if n not in outputs]
        graph = onnx.helper.make_graph(
            list(self.nodes), "instance", graph_inputs, outs, initializers, value_info=value_info
        )
        imports = [onnx.helper.make_opsetid(d, v) for d, v in sorted(self.opsets.items())]
        model = onnx.helper.make_model(graph, opset_imports=imports, producer_name="check-rules")
        model.ir_version = _ir_version(self.opsets.get("", 21))
        return model

    def _infer(self, outputs: list[str]) -> dict[str, TensorSpec]:
        import onnx.shape_inference

        found: dict[str, TensorSpec] = {}
        for name in outputs:
            if name in self.custom_types:
                found[name] = self.custom_types[name]
        if len(found) == len(outputs):
            return found
        try:
            inferred = onnx.shape_inference.infer_shapes(
                self.model([]), check_type=True, strict_mode=True, data_prop=True
            )
        except Exception as exc:  # onnx raises several types; every one rejects the attempt
            raise RejectedError(f"shape inference: {_first_line(exc)}") from exc
        infos = {v.name: v for v in inferred.graph.value_info}
        for name in outputs:
            if name in found:
                continue
            spec = _spec_of(infos.get(name))
            if spec is None:
                spec = self._run_shape(name, infos.get(name))
            found[name] = spec
        return found

    def _run_shape(self, name: str, info: Any) -> TensorSpec:
        """The type of `name` from running the lines built so far on all-zero inputs.

        For a value whose shape follows from the graph inputs' static shapes although onnx's
        inference leaves it open (a Range up to a gathered dim). The element type is still
        inference's.
        """
        from onnx.reference import ReferenceEvaluator

        if (
            info is None
            or not info.type.HasField("tensor_type")
            or not info.type.tensor_type.elem_type
        ):
            raise RejectedError(f"shape inference gives no static type for `{name}`")
        feeds = {
            v.name: np.zeros(v.spec.shape, ir.numpy_dtype(v.spec.dtype))
            for v in self.values.values()
            if v.is_input
        }
        try:
            (result,) = ReferenceEvaluator(self.model([])).run([name], feeds)
        except Exception as exc:  # any failure of the run rejects the attempt
            raise RejectedError(f"no static type for `{name}`: {_first_line(exc)}") from exc
        dtype = ir.DataType(info.type.tensor_type.elem_type)
        return TensorSpec(dtype, tuple(int(d) for d in np.shape(result)))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[-1] if text else type(exc).__name__


def _value_info(name: str, spec: TensorSpec) -> Any:
    import onnx.helper

    return onnx.helper.make_tensor_value_info(name, int(spec.dtype), list(spec.shape))


def _spec_of(info: Any) -> TensorSpec | None:
    if info is None or not info.type.HasField("tensor_type"):
        return None
    tensor = info.type.tensor_type
    if not tensor.HasField("shape"):
        return None
    dims = []
    for dim in tensor.shape.dim:
        if not dim.HasField("dim_value"):
            return None
        dims.append(int(dim.dim_value))
    return TensorSpec(ir.DataType(tensor.elem_type), tuple(dims))


def _ir_version(opset: int) -> int:
    import onnx.helper

    for _, ir_version, version, *_ in onnx.helper.VERSION_TABLE:
        if version >= opset:
            return min(max(int(ir_version), 7), 11)  # onnxruntime reads IR 11 at most
    return 11


def _graph_outputs(plan: RulePlan) -> list[str]:
    """Outputs of lines no other line reads (the anchor's, and any the rewrite redefines)."""
    read = {p.name for line in plan.lines for p in line.inputs if isinstance(p, rules.InputVar)}
    anchor = plan.compiled.anchor
    names = []
    for index, line in enumerate(plan.lines):
        for out in line.outputs:
            if not isinstance(out, rules.OutputVar) or out.name in read:
                continue
            if index == anchor or out.name in plan.compiled.redefined:
                names.append(out.name)
    return names


def build_instance(plan: RulePlan, choices: Choices) -> Instance:
    """Build one instance from `choices` (raises RejectedError when it does not type-check)."""
    build = _Build(plan, choices)
    for index in plan.order:
        try:
            build.build_line(index)
        except RejectedError as exc:
            exc.partial = build.instance(build.model([]))
            raise
    outputs = [build.sink(name) for name in _graph_outputs(plan)]
    outputs += build.extra_readers()
    proto = build.model(outputs)
    if choices.overrides.get(SYMBOLIC):
        try:
            proto = make_symbolic(proto, choices)
        except DynamicError as exc:
            raise RejectedError(str(exc)) from exc
    try:
        ir.check_proto(proto)
    except Exception as exc:  # the checker's own error types vary across onnx versions
        raise RejectedError(f"onnx checker: {_first_line(exc)}") from exc
    return build.instance(proto)


def bindings(instance: Instance, model: ir.Model) -> dict[str, Any]:
    """The rule's variables as the matcher would bind them in `model` (the lifted instance)."""
    by_name: dict[str, ir.Value] = {}
    nodes: dict[str, ir.Node] = {}
    graph = model.graph
    for value in graph.inputs:
        by_name[value.name] = value
    for value in graph.initializers.values():
        by_name[value.name] = value
    for node in graph:
        nodes[node.name] = node
        for out in node.outputs:
            by_name[out.name] = out
    result: dict[str, Any] = {}
    for var, name in instance.var_names.items():
        if name is None:
            result[var] = None
        elif isinstance(name, tuple):
            # (a partial instance may lack the items of the line that failed)
            if all(n in by_name for n in name):
                result[var] = tuple(by_name[n] for n in name)
        elif name in by_name:
            result[var] = by_name[name]
    for var, (line, attr_name) in instance.attr_values.items():
        node = nodes[f"n{line}"]
        attr = node.attributes.get(attr_name)
        if attr is None:
            attr = ir.schemas.attribute_default(
                node.op_type, attr_name, node.domain, instance.opsets.get(node.domain or "", 1)
            )
        result[var] = None if attr is None else attr_to_python(attr)
    for var, line in instance.node_refs.items():
        node = nodes[f"n{line}"]
        result[var] = NodeRef(node, instance.opsets.get(ir.schemas.normalize_domain(node.domain)))
    return result
