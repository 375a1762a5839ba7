"""One instance of a rule: its match and rewrite built over shared symbolic inputs.

An instance fixes what a proof cannot leave symbolic (every value's rank, each dtype class's
dtype, the op of a line with alternatives, integer attributes and axes, whether an optional
input is there, the shapes of constants whose contents the rule reads) by asking a `Chooser`;
`rewriter.prove._proof` enumerates the answers. Everything else stays symbolic: dims, the
elements of inputs and constants, float attributes. The match lines are applied to the inputs
in order (`apply_op`), the `where` lines become assumptions (`_expressions`), the rewrite's
statements are applied over the same inputs, and every value the rewrite replaces is compared
with the match's (`equivalent`).

An instance the rule could not match (a false condition, an op that refuses its inputs) is
`ImpossibleInstanceError`; a rule that cannot be stated at all is `UnsupportedRuleError`.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import z3

import ir
from rewriter import rules
from rewriter.prove._attributes import DOMAINS, IGNORED, SYMBOLIC_FLOAT, axes_lists
from rewriter.prove._choices import Chooser
from rewriter.prove._dtypes import kind_of, sort_of
from rewriter.prove._expressions import (
    EvaluationFailedError,
    Evaluator,
    Facts,
    FreeAttribute,
    MatchedNode,
    TensorRef,
    UnboundNameError,
    Value,
)
from rewriter.prove._functions import FUNCTIONS, run_engine_builtin
from rewriter.prove._plan import RulePlan, UnsupportedRuleError
from rewriter.prove._registry import (
    SEMANTICS,
    IllFormedOpError,
    NodeSpec,
    UnsupportedOpError,
    apply_op,
)
from rewriter.prove._symbolic import (
    NotTranslatableError,
    Sym,
    Tracker,
    array_dtype,
    is_symbolic,
    lift,
    symbolic_array,
)
from rewriter.prove._tensor import (
    Element,
    Index,
    SymbolicTensor,
    as_int,
    constant,
    symbolic_input,
    tensor_of_terms,
    term,
)
from rewriter.prove._typing import TypeClasses, type_classes


class ImpossibleInstanceError(ValueError):
    """These choices give no instance of the rule (the message says why)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Settings:
    """How far instances go: the largest rank, and constants' shapes when contents are read."""

    max_rank: int = 3
    constant_shapes: tuple[tuple[int, ...], ...] = ((), (1,), (2,), (1, 1), (2, 1))
    vector_lengths: tuple[int, ...] = (1, 2)
    steps: tuple[int, ...] = (1, -1, 2)
    variadic_counts: tuple[int, ...] = (0, 1, 2)


@dataclasses.dataclass(frozen=True, slots=True)
class Leaf:
    """An input of an instance: a graph input, a constant (initializer) or a literal."""

    name: str
    tensor: SymbolicTensor
    kind: str  # "input", "constant", "literal", "computed"
    literal: object = None
    contents: np.ndarray[Any, Any] | None = None  # a computed constant's Syms


@dataclasses.dataclass(frozen=True, slots=True)
class Instance:
    """One instance, ready for `equivalent` and for replaying a counterexample."""

    lhs: tuple[SymbolicTensor, ...]
    rhs: tuple[SymbolicTensor, ...]
    outputs: tuple[str, ...]
    rewritten: tuple[str, ...]
    leaves: tuple[Leaf, ...]
    assumptions: tuple[z3.BoolRef, ...]
    pattern_nodes: tuple[NodeSpec, ...]
    rewrite_nodes: tuple[NodeSpec, ...]
    opset: int
    opaque: tuple[str, ...]

    @property
    def inputs(self) -> dict[str, SymbolicTensor]:
        """The leaves' tensors by name (what a counterexample reads back)."""
        return {leaf.name: leaf.tensor for leaf in self.leaves}


# Inputs whose contents an op's semantics needs as numbers (enumerated) or of a fixed length.
_AXES_SLOTS = {("Squeeze", 1), ("Unsqueeze", 1), ("Slice", 3)} | {
    (op, 1)
    for op in (
        "ReduceSum",
        "ReduceMean",
        "ReduceMax",
        "ReduceMin",
        "ReduceProd",
        "ReduceL1",
        "ReduceL2",
        "ReduceLogSum",
        "ReduceLogSumExp",
        "ReduceSumSquare",
    )
}
_STEPS_SLOTS = {("Slice", 4)}
_VECTOR_SLOTS = {("Reshape", 1), ("Expand", 1), ("Slice", 1), ("Slice", 2)}


class _Builder:
    """Builds one instance of a plan, asking a chooser what to fix."""

    def __init__(self, plan: RulePlan, chooser: Chooser, settings: Settings) -> None:
        self.plan = plan
        self.rule = plan.rule
        self.chooser = chooser
        self.settings = settings
        self.opset = (
            chooser.choose("opset", plan.opsets) if len(plan.opsets) > 1 else plan.opsets[0]
        )
        self.tracker = Tracker()
        self.facts = Facts(self.opset, self.tracker)
        self.env: dict[str, Value] = {}
        self.leaves: dict[str, Leaf] = {}
        self.pattern_nodes: list[NodeSpec] = []
        self.rewrite_nodes: list[NodeSpec] = []
        self.assumptions: list[z3.BoolRef] = []
        self.dtypes: dict[int, ir.DataType] = {}
        self.classes: TypeClasses | None = None
        self.aliases: dict[str, str] = {}
        self.opaque: dict[str, None] = {}
        self.read_by_match: list[SymbolicTensor] = []
        self.unit_dims: dict[str, bool] = {}
        self.counter = itertools.count()

    # -- the match -------------------------------------------------------------------------
    def build(self) -> Instance:
        lines = self.rule.pattern.nodes
        ops = [self._op_of(k, node) for k, node in enumerate(lines)]
        schemas = []
        for op in ops:
            schema = ir.schemas.find_schema(op.op_type, op.domain, self.opset)
            if schema is None:
                raise ImpossibleInstanceError(f"`{op}` does not exist at opset {self.opset}")
            schemas.append(schema)
        self.classes = type_classes(list(zip(lines, schemas, strict=True)), self.plan.mentioned)
        for a, b in self.plan.identities:
            if self.chooser.choose(f"{b} is {a}", (False, True), _yes_no):
                self.aliases[b] = a
        for index in self.plan.order:
            self._match_line(index, lines[index], ops[index])
        self._conditions()
        return self._rewrite()

    def _op_of(self, index: int, node: rules.NodePattern) -> rules.OpId:
        if len(node.ops) == 1:
            return node.ops[0]
        return self.chooser.choose(f"op of match line {index + 1}", node.ops)

    def _dtype_of_class(self, cid: int) -> ir.DataType:
        assert self.classes is not None, "classes are computed first"
        if cid not in self.dtypes:
            options = self.classes.options[cid]
            if not options:
                raise ImpossibleInstanceError("no modelled dtype fits the schemas")
            label = f"dtype of {self._class_label(cid)}"
            self.dtypes[cid] = self.chooser.choose(label, options, lambda d: d.onnx_name)
        return self.dtypes[cid]

    def _require_class(self, cid: int, dtype: ir.DataType) -> None:
        assert self.classes is not None, "classes are computed first"
        if cid in self.dtypes:
            if self.dtypes[cid] != dtype:
                raise ImpossibleInstanceError("an op gives another dtype than its class has")
            return
        if dtype not in self.classes.options[cid]:
            raise ImpossibleInstanceError(f"{dtype.onnx_name} is not among the dtypes tried")
        self.dtypes[cid] = dtype

    def _class_label(self, cid: int) -> str:
        assert self.classes is not None, "classes are computed first"
        names = [
            str(key[1])
            for key, c in self.classes.class_of.items()
            if c == cid and key[0] == "value"
        ]
        return ", ".join(names) if names else "a literal"

    def _match_line(self, index: int, node: rules.NodePattern, op: rules.OpId) -> None:
        assert self.classes is not None, "classes are computed first"
        if op.op_type == "Constant":
            self._constant_line(index, node)
            return
        inputs: list[SymbolicTensor | None] = []
        names: list[str] = []
        for position, item in enumerate(node.inputs):
            if isinstance(item, rules.InputVar) and item.variadic:
                count = self.chooser.choose(f"{item.name}... count", self.settings.variadic_counts)
                bound: list[TensorRef] = []
                for k in range(count):
                    # Every element takes the binding's dtype class (the typing pass keys a
                    # variadic binding by its name, not by slots).
                    ref = self._input(f"{item.name}{k}", index, position + k, op.op_type, item.name)
                    bound.append(ref)
                    inputs.append(ref.tensor)
                    names.append(ref.name)
                self.env[item.name] = tuple(bound)
                continue
            tensor, name = self._input_item(item, index, position, op.op_type, inputs)
            inputs.append(tensor)
            names.append(name)
        while inputs and inputs[-1] is None:
            inputs.pop()
            names.pop()
        attributes = self._match_attributes(index, node, op, inputs)
        outputs = self._apply(op, attributes, inputs, rewrite=False)
        if len(outputs) < len(node.outputs):
            raise ImpossibleInstanceError(f"`{op}` has fewer outputs than the match line")
        out_names: list[str] = []
        for position, (pattern, tensor) in enumerate(zip(node.outputs, outputs, strict=False)):
            if isinstance(pattern, rules.OutputVar):
                self._require_class(self.classes.of_value(pattern.name), tensor.dtype)
                self.env[pattern.name] = self._ref(pattern.name, tensor, defined=True)
                out_names.append(pattern.name)
            else:
                out_names.append(f"_out{index}_{position}")
        for tensor in inputs:
            if tensor is not None:
                self.read_by_match.append(tensor)
        self.pattern_nodes.append(
            NodeSpec(op.op_type, op.domain, attributes, tuple(names), tuple(out_names))
        )
        self.assumptions.extend(t.valid for t in outputs)
        if node.node_var:
            self.env[node.node_var] = MatchedNode(op.op_type, op.domain, attributes, self.opset)
        self._prune()

    def _prune(self) -> None:
        """Stop early when a condition over what is built so far is already false.

        Conditions that read values not built yet wait; the final evaluation
        (`_conditions`) states them all.
        """
        mark = len(self.facts.assumptions)
        evaluator = self._evaluator(self.env)
        try:
            for number, condition in enumerate(self.rule.conditions, start=1):
                try:
                    found = evaluator.condition(condition)
                except (UnboundNameError, NotTranslatableError):
                    continue
                except EvaluationFailedError as exc:
                    raise ImpossibleInstanceError(f"where line {number} fails: {exc}") from exc
                if found is False:
                    raise ImpossibleInstanceError(f"where line {number} is false")
        finally:
            del self.facts.assumptions[mark:]

    def _constant_line(self, index: int, node: rules.NodePattern) -> None:
        """A matched Constant: a constant leaf of some shape and symbolic contents."""
        assert self.classes is not None, "classes are computed first"
        if len(node.output_names) != 1 or node.inputs:
            raise UnsupportedRuleError("a Constant match line with inputs or several outputs")
        name = node.output_names[0]
        dtype = self._dtype_of_class(self.classes.of_value(name))
        shape = self.chooser.choose(f"shape of {name}", self._constant_shapes(), _shape_text)
        tensor = self._finish_leaf(name, z3_input(name, dtype, shape), "constant")
        self.env[name] = self._ref(name, tensor, const=True)
        if node.node_var:
            self.env[node.node_var] = MatchedNode("Constant", "", {}, self.opset)

    def _input_item(
        self,
        item: rules.InputPattern,
        line: int,
        position: int,
        op_type: str,
        before: Sequence[SymbolicTensor | None],
    ) -> tuple[SymbolicTensor | None, str]:
        if isinstance(item, rules.InputVar):
            name = self.aliases.get(item.name, item.name)
            if name in self.env:
                found = self.env[name]
                if found is None:
                    return None, ""
                assert isinstance(found, TensorRef), "a match input binds a value"
                self._check_slot_dtype(item.name, found.tensor)
                if item.name != name:
                    self.env[item.name] = found
                return found.tensor, found.name
            if item.optional:
                present = self.chooser.choose(f"{item.name}?", (True, False), _present)
                if not present:
                    self.env[item.name] = None
                    return None, ""
            ref = self._input(name, line, position, op_type, item.name, before)
            if item.name != name:
                self.env[item.name] = ref
            return ref.tensor, ref.name
        if isinstance(item, rules.AnyValue):
            ref = self._input(f"_{line}_{position}", line, position, op_type, None, before)
            return ref.tensor, ref.name
        tensor = self._literal(item, line, position, op_type, before)
        return tensor, self._leaf_name_of(tensor)

    def _check_slot_dtype(self, name: str, tensor: SymbolicTensor) -> None:
        assert self.classes is not None, "classes are computed first"
        self._require_class(self.classes.of_value(name), tensor.dtype)

    def _leaf_name_of(self, tensor: SymbolicTensor) -> str:
        for leaf in self.leaves.values():
            if leaf.tensor is tensor:
                return leaf.name
        raise AssertionError("a literal is a leaf")

    def _input(
        self,
        name: str,
        line: int,
        position: int,
        op_type: str,
        var: str | None,
        before: Sequence[SymbolicTensor | None] = (),
    ) -> TensorRef:
        """A new leaf for a match input (a graph input or a constant of the model)."""
        assert self.classes is not None, "classes are computed first"
        cid = (
            self.classes.of_value(var) if var is not None else self.classes.of_slot(line, position)
        )
        dtype = self._dtype_of_class(cid)
        slot = (op_type, position)
        reads = var in self.plan.contents_read if var is not None else False
        if slot in _AXES_SLOTS or slot in _STEPS_SLOTS:
            values = self._structural_values(name, op_type, position, before)
            tensor = self._finish_leaf(name, constant(np.array(values), dtype), "constant")
            return self._register(name, var, tensor)
        if reads:
            if slot in _VECTOR_SLOTS:
                length = self.chooser.choose(f"length of {name}", self.settings.vector_lengths)
                shape: tuple[int, ...] = (length,)
            else:
                shape = self.chooser.choose(
                    f"shape of {name}", self._constant_shapes(), _shape_text
                )
            tensor = self._finish_leaf(name, z3_input(name, dtype, shape), "constant")
            return self._register(name, var, tensor)
        if slot in _VECTOR_SLOTS or (var is not None and var in self.plan.vectors):
            lengths = tuple(range(1, self.settings.max_rank + 1))
            if op_type == "Slice":
                lengths = self.settings.vector_lengths
            length = self.chooser.choose(f"length of {name}", lengths)
            tensor = self._finish_leaf(name, z3_input(name, dtype, (length,)), "input")
            return self._register(name, var, tensor)
        rank = self.chooser.choose(f"rank of {name}", tuple(range(self.settings.max_rank + 1)))
        dims = [z3.Int(f"{name}.d{k}") for k in range(rank)]
        tensor = self._finish_leaf(name, z3_input(name, dtype, dims), "input")
        return self._register(name, var, tensor)

    def _register(self, name: str, var: str | None, tensor: SymbolicTensor) -> TensorRef:
        ref = self._ref(name, tensor)
        self.env[var if var is not None else name] = ref
        if var is not None and var != name:
            self.env[name] = ref
        return ref

    def _constant_shapes(self) -> tuple[tuple[int, ...], ...]:
        return tuple(s for s in self.settings.constant_shapes if len(s) <= self.settings.max_rank)

    def _structural_values(
        self, name: str, op_type: str, position: int, before: Sequence[SymbolicTensor | None]
    ) -> list[int]:
        """Axes or steps: enumerated over the values legal at the instance's ranks."""
        data = before[0] if before else None
        rank = data.rank if data is not None else 0
        if op_type == "Slice":
            starts = before[1] if len(before) > 1 else None
            length = starts.shape[0] if starts is not None and starts.rank == 1 else 1
            assert isinstance(length, int), "a Slice's starts have a concrete length"
            if position == 4:
                return [
                    self.chooser.choose(f"{name}[{k}]", self.settings.steps) for k in range(length)
                ]
            options = [a for a in axes_lists(rank) if isinstance(a, list) and len(a) == length]
        elif op_type == "Unsqueeze":
            options = [
                a
                for a in axes_lists(rank + 2)
                if isinstance(a, list) and all(-(rank + len(a)) <= x < rank + len(a) for x in a)
            ]
        else:
            options = axes_lists(rank)
        if not options:
            raise ImpossibleInstanceError(f"no axes fit rank {rank}")
        chosen = self.chooser.choose(f"values of {name}", options)
        assert isinstance(chosen, list), "axes are lists"
        return [int(a) for a in chosen]

    def _finish_leaf(self, name: str, tensor: SymbolicTensor, kind: str) -> SymbolicTensor:
        """The leaf's tensor under the rule's assumptions (finite, bounded), registered."""
        tensor = self._restricted(name, tensor)
        self.leaves[name] = Leaf(name, tensor, kind)
        return tensor

    def _restricted(self, name: str, tensor: SymbolicTensor) -> SymbolicTensor:
        """Elements limited to what the rule assumes of them, by construction.

        `assumes finite` makes every float input finite; `lower_bound(x) >= ...` gives x's
        elements a symbolic lower bound. Each element is its raw value where that satisfies
        the restriction and a witness (a value assumed to satisfy it) elsewhere: every
        allowed input is still reachable, and no quantifier is needed.
        """
        kind = kind_of(tensor.dtype)
        if not kind.is_float:
            return tensor
        tests: list[Callable[[z3.ExprRef], z3.BoolRef]] = []
        if self.rule.assumes_finite:
            tests.append(lambda v: z3.Not(z3.Or(z3.fpIsInf(v), z3.fpIsNaN(v))))
        for which in ("lower_bound", "upper_bound", "is_finite"):
            if (name, which) in self.plan.bounded:
                tests.append(self._bound_test(name, which, tensor.dtype))
        if not tests:
            return tensor
        witness = z3.Const(f"{name}.witness", sort_of(tensor.dtype))
        self.assumptions.extend(test(witness) for test in tests)
        raw = tensor.at

        def at(index: Index) -> Element:
            element = raw(index)
            holds = z3.And(*[test(element.value) for test in tests])
            return Element(z3.If(holds, element.value, witness), element.poison)

        return SymbolicTensor(tensor.dtype, tensor.shape, at, tensor.key, tensor.valid)

    def _bound_test(
        self, name: str, which: str, dtype: ir.DataType
    ) -> Callable[[z3.ExprRef], z3.BoolRef]:
        if which == "is_finite":
            self.facts.bounds[(name, which)] = True
            return lambda v: z3.Not(z3.Or(z3.fpIsInf(v), z3.fpIsNaN(v)))
        double = sort_of(ir.DataType.DOUBLE)
        bound = z3.Const(f"{which}({name})", double)
        self.facts.bounds[(name, which)] = Sym(bound, ir.DataType.DOUBLE, self.tracker)
        rne = z3.RNE()

        def test(v: z3.ExprRef) -> z3.BoolRef:
            wide = v if dtype == ir.DataType.DOUBLE else z3.fpFPToFP(rne, v, double)
            inside = z3.fpGEQ(wide, bound) if which == "lower_bound" else z3.fpLEQ(wide, bound)
            return z3.Or(z3.fpIsNaN(v), inside)

        return test

    def _literal(
        self,
        item: rules.InputConst,
        line: int,
        position: int,
        op_type: str,
        before: Sequence[SymbolicTensor | None],
    ) -> SymbolicTensor:
        """A literal input: a constant equal to it in its dtype (a scalar: any shape)."""
        assert self.classes is not None, "classes are computed first"
        dtype = self._dtype_of_class(self.classes.of_slot(line, position))
        array = literal_in_dtype(item.value, dtype)
        if array is None:
            raise ImpossibleInstanceError(f"{item.value!r} is no {dtype.onnx_name}")
        name = f"literal{line}_{position}"
        if isinstance(item.value, list):
            tensor = constant(array, dtype)
        else:
            rank = self.chooser.choose(
                f"rank of the literal {item.value!r}", tuple(range(self.settings.max_rank + 1))
            )
            dims = [z3.Int(f"{name}.d{k}") for k in range(rank)]
            self.assumptions.extend(d >= 1 for d in dims)
            value = constant(array.reshape(()), dtype).at(())

            def at(index: Index) -> Element:
                del index
                return value

            tensor = SymbolicTensor(dtype, tuple(dims), at, ("literal", repr(item.value), dtype))
        self.leaves[name] = Leaf(name, tensor, "literal", literal=item.value)
        self.env[name] = self._ref(name, tensor, const=True)
        return tensor

    def _match_attributes(
        self,
        index: int,
        node: rules.NodePattern,
        op: rules.OpId,
        inputs: Sequence[SymbolicTensor | None],
    ) -> dict[str, object]:
        """Every attribute of a matched node: pinned, bound, or open (see `_attributes`)."""
        schema = ir.schemas.find_schema(op.op_type, op.domain, self.opset)
        assert schema is not None, "checked when the line's schema was found"
        named: dict[str, rules.AttrPattern] = {a.name: a for a in node.attrs}
        attributes: dict[str, object] = {}
        for name in schema.attributes:
            pattern = named.get(name)
            if op.op_type == "Cast" and name == "to":
                value = self._cast_target(index, node, pattern)
            elif isinstance(pattern, rules.AttrEquals):
                value = _literal_attribute(op, name, pattern.value, self.opset)
            elif isinstance(pattern, rules.AttrBind) and pattern.var in self.env:
                value = self.env[pattern.var]
            else:
                value = self._open_attribute(index, op, name, inputs, pattern is not None)
            if isinstance(pattern, rules.AttrBind):
                self.env[pattern.var] = value
            if value is not None:
                attributes[name] = value
        for name, pattern in named.items():
            if name not in schema.attributes and isinstance(pattern, rules.AttrBind):
                self.env.setdefault(pattern.var, None)
            elif name not in schema.attributes:
                raise ImpossibleInstanceError(f"`{op}` has no attribute `{name}` here")
        return attributes

    def _cast_target(
        self, index: int, node: rules.NodePattern, pattern: rules.AttrPattern | None
    ) -> object:
        assert self.classes is not None, "classes are computed first"
        outputs = node.output_names
        if not outputs:
            raise UnsupportedRuleError("a Cast whose output is not named")
        dtype = self._dtype_of_class(self.classes.of_value(outputs[0]))
        if isinstance(pattern, rules.AttrEquals):
            pinned = _dtype_number(pattern.value)
            if pinned != int(dtype):
                raise ImpossibleInstanceError("Cast's `to` is pinned to another dtype")
        return int(dtype)

    def _open_attribute(
        self,
        index: int,
        op: rules.OpId,
        name: str,
        inputs: Sequence[SymbolicTensor | None],
        bound: bool,
    ) -> object:
        label = f"{op.op_type}.{name} of match line {index + 1}"
        domain = DOMAINS.get((op.op_type, name))
        if domain is not None:
            options = domain(inputs)
            if options == SYMBOLIC_FLOAT:
                variable = z3.Const(label, sort_of(ir.DataType.FLOAT))
                return Sym(variable, ir.DataType.FLOAT, self.tracker)
            assert isinstance(options, list), "a domain is a list or a symbolic float"
            if not options:
                raise ImpossibleInstanceError(f"no value of `{name}` fits")
            return self.chooser.choose(label, options)
        default = ir.schemas.attribute_default(op.op_type, name, op.domain, self.opset)
        if (op.op_type, name) in IGNORED or op.op_type in _EXACT_OPS:
            return _default_value(default)
        if not bound and default is None:
            return None
        return FreeAttribute(label)

    def _apply(
        self,
        op: rules.OpId,
        attributes: dict[str, object],
        inputs: Sequence[SymbolicTensor | None],
        *,
        rewrite: bool,
    ) -> list[SymbolicTensor]:
        if op.op_type not in _EXACT_OPS:
            self.opaque[op.op_type] = None
        semantic = _semantic_attributes(attributes)
        absent = attributes.get("axes") is None and (len(inputs) < 2 or inputs[1] is None)
        if op.op_type == "Squeeze" and absent and inputs:
            unit = self._unit_dims(inputs[0])
            if unit is not None:
                semantic = {**semantic, "axes": unit}
        try:
            return apply_op(op.op_type, op.domain, semantic, inputs)
        except IllFormedOpError as exc:
            if rewrite:
                raise
            raise ImpossibleInstanceError(str(exc)) from exc
        except UnsupportedOpError as exc:
            raise UnsupportedRuleError(str(exc)) from exc

    def _unit_dims(self, x: SymbolicTensor | None) -> list[int] | None:
        """The axes a Squeeze without axes drops from `x` when some of its dims are symbolic.

        Which dims are 1 is a choice of the instance (asked once per dim, so both sides of
        the rule agree), made an assumption; None when every dim is a number.
        """
        if x is None or all(as_int(d) is not None for d in x.shape):
            return None
        axes: list[int] = []
        for k, dim in enumerate(x.shape):
            fixed = as_int(dim)
            if fixed is not None:
                if fixed == 1:
                    axes.append(k)
                continue
            label = str(dim)
            if label not in self.unit_dims:
                self.unit_dims[label] = self.chooser.choose(f"{label} is 1", (False, True), _yes_no)
                one = term(dim) == 1
                self.assumptions.append(one if self.unit_dims[label] else z3.Not(one))
            if self.unit_dims[label]:
                axes.append(k)
        return axes

    def _ref(
        self, name: str, tensor: SymbolicTensor, *, const: bool | None = None, defined: bool = False
    ) -> TensorRef:
        flag: z3.BoolRef | bool = (
            const if const is not None else self.facts.fresh_bool(f"is_const({name})")
        )
        if defined and const is None:
            flag = self.facts.fresh_bool(f"is_const({name})")
        return TensorRef(name, tensor, flag, _contents_of(tensor, self.tracker))

    # -- conditions ------------------------------------------------------------------------
    def _evaluator(self, env: dict[str, Value]) -> Evaluator:
        return Evaluator(env, self.facts, FUNCTIONS, run_engine_builtin(self.opset))

    def _conditions(self) -> None:
        evaluator = self._evaluator(self.env)
        for number, condition in enumerate(self.rule.conditions, start=1):
            try:
                found = evaluator.condition(condition)
            except EvaluationFailedError as exc:
                raise ImpossibleInstanceError(f"where line {number} fails: {exc}") from exc
            except NotTranslatableError as exc:
                raise UnsupportedRuleError(str(exc)) from exc
            if found is False:
                raise ImpossibleInstanceError(f"where line {number} is false")
            if found is not True:
                self.assumptions.append(found)
        if self.rule.assumes_nonempty:
            for tensor in self.read_by_match:
                self.assumptions.extend(term(d) >= 1 for d in tensor.shape)

    # -- the rewrite -----------------------------------------------------------------------
    def _rewrite(self) -> Instance:
        env = dict(self.env)
        evaluator = self._evaluator(env)
        replaced: dict[str, SymbolicTensor] = {}
        rewritten: dict[str, str] = {}
        for stmt in self.plan.rewrite.stmts:
            try:
                self.tracker.exact = True
                if isinstance(stmt, rules.Let):
                    env[stmt.name] = evaluator.evaluate(stmt.expr)
                elif isinstance(stmt, rules.NewNode):
                    self._new_node(stmt, env, evaluator, replaced, rewritten)
                else:
                    source = evaluator.evaluate(stmt.source)
                    tensor, name = self._as_input(source, stmt.target, None, 0, [])
                    if tensor is None:
                        raise ImpossibleInstanceError(f"`{stmt.target}` becomes an absent value")
                    replaced[stmt.target] = tensor
                    rewritten[stmt.target] = name
                    env[stmt.target] = self._ref(name, tensor, const=False)
            except EvaluationFailedError as exc:
                raise ImpossibleInstanceError(f"the rewrite fails: {exc}") from exc
            except NotTranslatableError as exc:
                raise UnsupportedRuleError(str(exc)) from exc
            finally:
                self.tracker.exact = False
        outputs = [name for name in replaced if name in self.plan.defined]
        if not outputs:
            raise UnsupportedRuleError("the rewrite replaces no value of the match")
        lhs = []
        for name in outputs:
            ref = self.env[name]
            assert isinstance(ref, TensorRef), "a match output binds a value"
            lhs.append(ref.tensor)
        assumptions = [
            *self.assumptions,
            *self.facts.assumptions,
            *self.facts.fresh_assumptions,
            *self.tracker.assumptions,
        ]
        return Instance(
            lhs=tuple(lhs),
            rhs=tuple(replaced[name] for name in outputs),
            outputs=tuple(outputs),
            rewritten=tuple(rewritten[name] for name in outputs),
            leaves=tuple(self.leaves.values()),
            assumptions=tuple(assumptions),
            pattern_nodes=tuple(self.pattern_nodes),
            rewrite_nodes=tuple(self.rewrite_nodes),
            opset=self.opset,
            opaque=tuple(self.opaque),
        )

    def _new_node(
        self,
        stmt: rules.NewNode,
        env: dict[str, Value],
        evaluator: Evaluator,
        replaced: dict[str, SymbolicTensor],
        rewritten: dict[str, str],
    ) -> None:
        op = self._rewrite_op(stmt.op, env)
        attributes: dict[str, object] = {}
        for entry in stmt.attrs:
            if isinstance(entry, rules.CopyAttrs):
                source = env.get(entry.node_var)
                if not isinstance(source, MatchedNode):
                    raise UnsupportedRuleError(f"`...{entry.node_var}` names no matched node")
                attributes.update(source.attributes)
                continue
            value = evaluator.evaluate(entry.value)
            if value is None:
                attributes.pop(entry.name, None)
            else:
                attributes[entry.name] = _rewrite_attribute(op, entry.name, value, self.opset)
        raw = [evaluator.evaluate(expr) for expr in stmt.inputs]
        schema = ir.schemas.find_schema(op.op_type, op.domain, self.opset)
        inputs: list[SymbolicTensor | None] = []
        names: list[str] = []
        for position, value in enumerate(raw):
            given = stmt.inputs[position]
            stem = given.name if isinstance(given, rules.Name) else f"{op.op_type}_in{position}"
            tensor, name = self._as_input(value, stem, schema, position, raw)
            inputs.append(tensor)
            names.append(name)
        while inputs and inputs[-1] is None:
            inputs.pop()
            names.pop()
        out_names = [
            f"{o.name}'" if isinstance(o, rules.OutputVar) else f"_new{next(self.counter)}"
            for o in stmt.outputs
        ]
        try:
            outputs = self._apply(op, attributes, inputs, rewrite=True)
        except IllFormedOpError:
            # onnxruntime would refuse the rewrite: outputs no input makes valid
            outputs = [
                _refused(env.get(o.name) if isinstance(o, rules.OutputVar) else None)
                for o in stmt.outputs
            ]
        self.rewrite_nodes.append(
            NodeSpec(op.op_type, op.domain, attributes, tuple(names), tuple(out_names))
        )
        for pattern, tensor, name in zip(stmt.outputs, outputs, out_names, strict=False):
            if isinstance(pattern, rules.OutputVar):
                env[pattern.name] = self._ref(name, tensor, const=False)
                if pattern.name in self.plan.defined:
                    replaced[pattern.name] = tensor
                    rewritten[pattern.name] = name
        if stmt.node_var:
            env[stmt.node_var] = MatchedNode(op.op_type, op.domain, attributes, self.opset)

    def _rewrite_op(self, op: rules.OpId | rules.MatchedOp, env: dict[str, Value]) -> rules.OpId:
        if isinstance(op, rules.OpId):
            return op
        found = env.get(op.node_var)
        if not isinstance(found, MatchedNode):
            raise UnsupportedRuleError(f"`...{op.node_var}` names no matched node")
        return rules.OpId(found.domain, found.op_type)

    def _as_input(
        self,
        value: Value,
        stem: str,
        schema: object,
        position: int,
        siblings: Sequence[Value],
    ) -> tuple[SymbolicTensor | None, str]:
        """A rewrite's node input (or replacement) as a tensor: a value, or a new constant."""
        if value is None:
            return None, ""
        if isinstance(value, TensorRef):
            return value.tensor, value.name
        if isinstance(value, MatchedNode | tuple):
            raise ImpossibleInstanceError("a node or a variadic binding as a single input")
        if isinstance(value, Sym):
            items = np.empty((), dtype=object)
            items[()] = value
            value = items
        if isinstance(value, np.ndarray) and value.dtype == object:
            dtype = array_dtype(value)
            terms = [v.term for v in value.reshape(-1)]
            name = f"{stem}~{next(self.counter)}"
            tensor = tensor_of_terms(terms, value.shape, dtype, ("computed", name))
            self.leaves[name] = Leaf(name, tensor, "computed", contents=value)
            return tensor, name
        if is_symbolic(value):
            raise NotTranslatableError("a symbolic list as a node input")
        if isinstance(value, np.ndarray | np.generic):
            # as the engine's builder: a numpy value keeps its dtype (`const(v, "int64")`)
            array = np.asarray(value)
        else:
            dtype = literal_dtype(value, schema, position, siblings)
            try:
                array = np.asarray(value, dtype=ir.numpy_dtype(dtype))
            except (TypeError, ValueError, OverflowError) as exc:
                raise ImpossibleInstanceError(f"literal {value!r}: {exc}") from exc
        name = f"{stem}~{next(self.counter)}"
        tensor = constant(array)
        self.leaves[name] = Leaf(name, tensor, "computed", contents=array)
        return tensor, name


# Ops whose semantics is exact (everything else the prover knows is an unknown function).
_EXACT_OPS = frozenset(SEMANTICS) - frozenset(
    {
        "Exp", "Log", "Tanh", "Erf", "Sigmoid", "Sin", "Cos", "Tan", "Asin", "Acos", "Atan",
        "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "Softplus", "Softsign", "Elu", "Selu",
        "Celu", "Gelu", "Mish", "ThresholdedRelu", "Pow", "Mod", "BitShift",
        "ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
        "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare", "Softmax",
        "LogSoftmax", "Hardmax", "LpNormalization", "InstanceNormalization", "CumSum", "MatMul",
    }
)  # fmt: skip


def _refused(original: Value) -> SymbolicTensor:
    """A stand-in for a rewritten value onnxruntime would refuse: valid for no input."""
    if isinstance(original, TensorRef):
        base = original.tensor
        return SymbolicTensor(base.dtype, base.shape, base.at, ("refused",), z3.BoolVal(False))
    value = constant(np.zeros((), np.float32))
    return SymbolicTensor(value.dtype, (), value.at, ("refused",), z3.BoolVal(False))


def z3_input(name: str, dtype: ir.DataType, shape: Sequence[int | z3.ArithRef]) -> SymbolicTensor:
    """A leaf with unknown elements (an uninterpreted function of the index)."""
    return symbolic_input(name, dtype, list(shape))


def _contents_of(
    tensor: SymbolicTensor, tracker: Tracker
) -> Callable[[], np.ndarray[Any, Any]] | None:
    shape = []
    for dim in tensor.shape:
        number = dim if isinstance(dim, int) else None
        if number is None:
            simplified = z3.simplify(dim)
            if not z3.is_int_value(simplified):
                return None
            number = int(simplified.as_long())
        shape.append(number)
    if int(np.prod(shape)) > 64:
        return None

    def read() -> np.ndarray[Any, Any]:
        items = np.empty(tuple(shape), dtype=object)
        for position in np.ndindex(*shape):
            element = tensor.at(tuple(z3.IntVal(p) for p in position))
            items[position] = Sym(element.value, tensor.dtype, tracker)
        return symbolic_array(items)

    return read


def _semantic_attributes(attributes: dict[str, object]) -> dict[str, object]:
    """Attributes as the op semantics take them: a symbolic float as its z3 term."""
    found: dict[str, object] = {}
    for name, value in attributes.items():
        if isinstance(value, Sym):
            found[name] = value.term
        elif isinstance(value, np.ndarray) and value.dtype == object:
            found[name] = value
        else:
            found[name] = value
    return found


def _default_value(default: ir.Attr | None) -> object:
    if default is None:
        return None
    value = default.value
    if isinstance(value, tuple):
        return list(value)
    return value


def _dtype_number(value: object) -> int:
    if isinstance(value, str):
        return int(ir.DataType.from_name(value))
    if isinstance(value, int):
        return value
    raise UnsupportedRuleError(f"a dtype written as {value!r}")


def _literal_attribute(op: rules.OpId, name: str, value: object, opset: int) -> object:
    """A pinned attribute as the node holds it (a FLOAT is a float32)."""
    kind = ir.schemas.attribute_type(op.op_type, name, op.domain, opset)
    if kind == ir.AttrType.FLOAT and isinstance(value, int | float):
        return float(np.float32(value))
    if kind == ir.AttrType.FLOATS and isinstance(value, list):
        return [float(np.float32(v)) for v in value]
    if kind == ir.AttrType.INT and isinstance(value, str):
        return _dtype_number(value)
    return value


def _rewrite_attribute(op: rules.OpId, name: str, value: Value, opset: int) -> object:
    """A rewrite's attribute value converted to the kind the schema declares."""
    kind = ir.schemas.attribute_type(op.op_type, name, op.domain, opset)
    if isinstance(value, np.ndarray) and value.dtype == object and value.size == 1:
        value = value.reshape(-1)[0]
    if isinstance(value, FreeAttribute):
        return value
    if kind == ir.AttrType.FLOAT:
        if isinstance(value, Sym):
            return value.to(ir.DataType.FLOAT)
        if isinstance(value, z3.ArithRef):
            return lift(value, ir.DataType.FLOAT, value_tracker(value))
        return float(np.float32(np.asarray(value).reshape(-1)[0]))
    if is_symbolic(value):
        raise NotTranslatableError(f"a symbolic value for attribute `{name}`")
    if kind == ir.AttrType.INT:
        if isinstance(value, str):
            return _dtype_number(value)
        return int(np.asarray(value).reshape(-1)[0])
    if kind == ir.AttrType.INTS:
        return [int(v) for v in np.asarray(value).reshape(-1)]
    if kind == ir.AttrType.FLOATS:
        return [float(v) for v in np.asarray(value, dtype=np.float32).reshape(-1)]
    if kind == ir.AttrType.TENSOR:
        return ir.NumpyTensor(np.asarray(value))
    return value


def value_tracker(value: object) -> Tracker:
    """A tracker for converting a term outside exact arithmetic."""
    del value
    return Tracker()


def literal_in_dtype(literal: object, dtype: ir.DataType) -> np.ndarray[Any, Any] | None:
    """The literal cast to `dtype`, or None when no value of the dtype equals it."""
    source = np.asarray(literal)
    if source.dtype == object or source.dtype.kind not in "biuf":
        return None
    kind = kind_of(dtype)
    target = np.dtype(ir.numpy_dtype(dtype))
    if kind.is_bool:
        if not np.all((source == 0) | (source == 1)):
            return None
        return source.astype(np.bool_)
    if kind.is_integer:
        if source.dtype.kind == "f" and not np.all(
            np.isfinite(source) & (source == np.round(source))
        ):
            return None
        info = np.iinfo(target)
        if any(not info.min <= int(v) <= info.max for v in np.ravel(source.astype(object))):
            return None
        return source.astype(target)
    with np.errstate(over="ignore", invalid="ignore"):
        return np.asarray(source, dtype=np.float64).astype(target)


def literal_dtype(raw: Value, schema: object, index: int, siblings: Sequence[Value]) -> ir.DataType:
    """The dtype a Python literal takes as input `index` of a new node (the engine's rules)."""
    formals = list(getattr(schema, "inputs", []))
    if formals:
        formal = formals[min(index, len(formals) - 1)]
        type_str = formal.type_str
        constraints = {c.type_param_str: c for c in getattr(schema, "type_constraints", [])}
        if type_str in constraints:
            for j, other in enumerate(siblings):
                if j == index or not isinstance(other, TensorRef):
                    continue
                if formals[min(j, len(formals) - 1)].type_str == type_str:
                    return other.tensor.dtype
            allowed = list(constraints[type_str].allowed_type_strs)
            default = _default_dtype(raw)
            if len(allowed) == 1:
                return ir.DataType.from_name(allowed[0][len("tensor(") : -1])
            if f"tensor({default.onnx_name})" in allowed:
                return default
        elif type_str.startswith("tensor("):
            return ir.DataType.from_name(type_str[len("tensor(") : -1])
    for other in siblings:
        if isinstance(other, TensorRef):
            return other.tensor.dtype
    return _default_dtype(raw)


def _default_dtype(raw: Value) -> ir.DataType:
    flat = raw
    while isinstance(flat, list) and flat:
        flat = flat[0]
    if isinstance(flat, bool):
        return ir.DataType.BOOL
    if isinstance(raw, list):
        items = list(np.ravel(np.asarray(raw, dtype=object)))
        if all(isinstance(v, int) and not isinstance(v, bool) for v in items):
            return ir.DataType.INT64
        return ir.DataType.FLOAT
    if isinstance(flat, int):
        return ir.DataType.INT64
    return ir.DataType.FLOAT


def _yes_no(value: bool) -> str:
    return "yes" if value else "no"


def _present(value: bool) -> str:
    return "present" if value else "absent"


def _shape_text(shape: tuple[int, ...]) -> str:
    return f"[{', '.join(str(d) for d in shape)}]"


def build_instance(plan: RulePlan, chooser: Chooser, settings: Settings) -> Instance:
    """The instance of `plan` the chooser's answers give.

    Raises:
        ImpossibleInstanceError: these answers give no instance (skip it).
        UnsupportedRuleError: the rule cannot be stated (the message says why).
        IllFormedOpError: never (an ill-formed rewrite is refused by `valid`).
    """
    return _Builder(plan, chooser, settings).build()
