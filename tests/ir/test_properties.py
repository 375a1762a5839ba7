"""Property tests of the IR (hypothesis; profiles in tests/conftest.py).

* Random sequences of mutations (append node, append If reading outer values, remove an
  unused node, replace an input, replace all uses, rename a value) keep `ir.verify` passing
  and use-def links symmetric, and the lowered model is valid ONNX that round-trips exactly.
* Random small models built with onnx.helper (chains of elementwise ops; custom-domain ops
  carrying attributes of every kind, including subgraphs and type protos; random value_info,
  doc strings and metadata everywhere) round-trip exactly through both lowering paths.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import onnx.checker
import onnx.helper
import onnx.numpy_helper
import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import ir
from ir import _serde
from tests.ir._roundtrip import assert_roundtrip_exact, assert_same_proto

_FLOAT2 = ir.TensorType(ir.DataType.FLOAT, (2,))
_UNARY = ("Relu", "Neg", "Abs", "Sigmoid", "Tanh", "Exp", "Identity", "Softplus")
_BINARY = ("Add", "Sub", "Mul", "Max", "Min")


# ---------------------------------------------------------------------------------------------
# Random mutation sequences


class _Mutator:
    """Applies random, always-legal mutations to a graph of float[2] values."""

    def __init__(self, data: st.DataObject) -> None:
        self.data = data
        x = ir.Value("x", _FLOAT2)
        c = ir.Value("c", ir.TensorType(ir.DataType.BOOL, ()))
        relu = ir.Node("Relu", [x], outputs=[ir.Value("r0", _FLOAT2)])
        self.graph = ir.Graph([x, c], [relu.outputs[0]], [relu], name="fuzz")
        self.model = ir.Model(self.graph, opset_imports={"": 18})
        self.counter = 0

    def fresh(self, stem: str) -> str:
        self.counter += 1
        return f"{stem}{self.counter}"

    def float_values(self) -> list[ir.Value]:
        """Float values of the main graph, in definition order (inputs first)."""
        values = [v for v in self.graph.inputs if v.type == _FLOAT2]
        for node in self.graph:
            values.extend(v for v in node.outputs if v.name and v.type == _FLOAT2)
        return values

    def pick(self, items: list[Any], label: str) -> Any:
        return items[self.data.draw(st.integers(0, len(items) - 1), label=label)]

    # mutations --------------------------------------------------------------------------------
    def append_node(self) -> None:
        values = self.float_values()
        if self.data.draw(st.booleans(), label="binary"):
            op = self.pick(list(_BINARY), "op")
            inputs = [self.pick(values, "lhs"), self.pick(values, "rhs")]
        else:
            op = self.pick(list(_UNARY), "op")
            inputs = [self.pick(values, "operand")]
        typed = self.data.draw(st.booleans(), label="typed")
        out = ir.Value(self.fresh("v"), _FLOAT2 if typed else None)
        self.graph.append(ir.Node(op, inputs, outputs=[out]))
        out.type = _FLOAT2  # typed later: the value_info path differs
        if self.data.draw(st.booleans(), label="make output"):
            self.graph.add_output(out)

    def append_if(self) -> None:
        values = self.float_values()
        c = self.graph.inputs[1]
        then_in = self.pick(values, "then reads")
        else_in = self.pick(values, "else reads")
        then_node = ir.Node("Neg", [then_in], outputs=[ir.Value(self.fresh("t"), _FLOAT2)])
        else_node = ir.Node("Abs", [else_in], outputs=[ir.Value(self.fresh("e"), _FLOAT2)])
        then_branch = ir.Graph([], [then_node.outputs[0]], [then_node], name=self.fresh("then"))
        else_branch = ir.Graph([], [else_node.outputs[0]], [else_node], name=self.fresh("else"))
        attrs = [
            ir.attr_graph("then_branch", then_branch),
            ir.attr_graph("else_branch", else_branch),
        ]
        out = ir.Value(self.fresh("if"), _FLOAT2)
        self.graph.append(ir.Node("If", [c], attrs, outputs=[out]))

    def remove_unused(self) -> None:
        candidates = [
            n for n in self.graph if all(not o.uses and not o.is_graph_output() for o in n.outputs)
        ]
        if candidates:
            self.graph.remove(self.pick(candidates, "dead node"))

    def replace_input(self) -> None:
        nodes = [n for n in self.graph if n.op_type != "If" and n.inputs]
        if not nodes:
            return
        node = self.pick(nodes, "node")
        index = self.data.draw(st.integers(0, len(node.inputs) - 1), label="input index")
        earlier = self._defined_before(node)
        node.replace_input_with(index, self.pick(earlier, "new input"))

    def replace_all_uses(self) -> None:
        values = [v for v in self.float_values() if v.producer() is not None]
        if not values:
            return
        old = self.pick(values, "old")
        producer = old.producer()
        assert producer is not None
        earlier = self._defined_before(producer)
        new = self.pick(earlier, "new")
        swap = self.data.draw(st.booleans(), label="swap outputs")
        if swap and new.is_graph_output() and old.is_graph_output():
            swap = False  # would list the same value twice; legal, but not the point here
        old.replace_all_uses_with(new, replace_graph_outputs=swap)

    def rename(self) -> None:
        value = self.pick(self.float_values(), "renamed")
        value.name = self.fresh("renamed")

    def describe(self) -> None:
        """Change a node's or a value's plain fields (what only the value compare finds)."""
        nodes = list(self.graph)
        if not nodes:
            return
        node = self.pick(nodes, "described node")
        value = self.pick(self.float_values(), "described value")
        what = self.data.draw(st.integers(0, 4), label="field")
        if what == 0:
            node.name = self.fresh("node")
        elif what == 1:
            node.doc_string = self.fresh("doc")
        elif what == 2:
            node.set_metadata("k", self.fresh("meta"))
        elif what == 3:
            value.doc_string = self.fresh("doc")
        else:
            value.metadata_props["k"] = self.fresh("meta")

    def _defined_before(self, node: ir.Node) -> list[ir.Value]:
        values = [v for v in self.graph.inputs if v.type == _FLOAT2]
        for other in self.graph:
            if other is node:
                break
            values.extend(v for v in other.outputs if v.type == _FLOAT2)
        return values


def _check_use_def(model: ir.Model) -> None:
    for graph in model.graphs():
        for node in graph:
            for i, value in enumerate(node.inputs):
                if value is not None:
                    assert ir.Use(node, i) in value.uses, (node, i)
        for value in graph.values():
            for use in value.uses:
                assert use.node.inputs[use.index] is value, (value, use)
                assert use.node.graph is not None, (value, use)


_MUTATIONS = ("append_node", "append_if", "remove_unused", "replace_input", "replace_all_uses")


@given(st.data())
def test_random_mutations_keep_the_ir_consistent(data: st.DataObject) -> None:
    mutator = _Mutator(data)
    steps = data.draw(st.lists(st.sampled_from([*_MUTATIONS, "rename"]), max_size=25))
    for step in steps:
        note(step)
        getattr(mutator, step)()
        ir.verify(mutator.model)
        _check_use_def(mutator.model)
    lowered = ir.to_onnx(mutator.model)
    onnx.checker.check_model(lowered, full_check=True)
    assert_roundtrip_exact(lowered)
    # Lowering is a pure function of the IR: doing it again gives the same bytes.
    assert ir.to_onnx(mutator.model).SerializeToString() == lowered.SerializeToString()


@given(st.data())
def test_mutations_of_a_lifted_model_match_the_same_mutations_on_a_fresh_lift(
    data: st.DataObject,
) -> None:
    """Mutating a lifted model lowers like the same model built anew from the IR.

    Lowering reuses the messages of what did not change since lifting: a change it missed
    would show as a difference from lowering without reuse.
    """
    mutator = _Mutator(data)
    for step in data.draw(st.lists(st.sampled_from(_MUTATIONS), max_size=8), label="build"):
        getattr(mutator, step)()
    base = ir.to_onnx(mutator.model)
    lifted = ir.from_onnx(base)
    mutator.graph = lifted.graph
    mutator.model = lifted
    steps = st.lists(st.sampled_from([*_MUTATIONS, "rename", "describe"]), max_size=8)
    for step in data.draw(steps):
        note(step)
        getattr(mutator, step)()
    ir.verify(lifted)
    lowered = ir.to_onnx(lifted)
    onnx.checker.check_model(lowered, full_check=True)
    assert_same_proto(lowered, ir.to_onnx(ir.from_onnx(lowered)))
    assert_same_proto(lowered, _serde.lower_model(lifted, reuse=False))


# ---------------------------------------------------------------------------------------------
# Random models built with onnx.helper

_DTYPES = [
    onnx.TensorProto.FLOAT,
    onnx.TensorProto.DOUBLE,
    onnx.TensorProto.INT64,
    onnx.TensorProto.INT32,
    onnx.TensorProto.INT8,
    onnx.TensorProto.UINT8,
    onnx.TensorProto.BOOL,
    onnx.TensorProto.FLOAT16,
]
_names = st.text(st.sampled_from("abcdefgh_0123456789"), min_size=1, max_size=6)
_texts = st.text(max_size=12)
_float32 = st.floats(width=32, allow_nan=False)
_int64 = st.integers(-(2**63), 2**63 - 1)


@st.composite
def _arrays(draw: st.DrawFn) -> np.ndarray:
    elem = draw(st.sampled_from(_DTYPES))
    dtype = onnx.helper.tensor_dtype_to_np_dtype(elem)
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=3, max_side=3))
    return draw(hnp.arrays(dtype, shape, elements=hnp.from_dtype(dtype, allow_nan=False)))


@st.composite
def _tensors(draw: st.DrawFn, name: str = "") -> onnx.TensorProto:
    array = draw(_arrays())
    if draw(st.booleans()):
        tensor = onnx.numpy_helper.from_array(array, name)
    else:
        elem = onnx.helper.np_dtype_to_tensor_dtype(array.dtype)
        tensor = onnx.helper.make_tensor(name, elem, array.shape, array.flatten().tolist())
    if draw(st.booleans()):
        tensor.doc_string = draw(_texts)
    return tensor


@st.composite
def _type_protos(draw: st.DrawFn, depth: int = 2) -> onnx.TypeProto:
    dims = st.lists(st.one_of(st.none(), st.integers(0, 9), _names), max_size=3)
    shape = draw(st.one_of(st.none(), dims))
    elem = draw(st.sampled_from(_DTYPES))
    kinds = ["tensor", "sparse"] + (["sequence", "optional", "map"] if depth else [])
    kind = draw(st.sampled_from(kinds))
    if kind == "tensor":
        denotations = None
        if shape is not None and draw(st.booleans()):
            # Non-empty only: a rebuilt TypeProto does not keep an explicitly set empty
            # denotation (proto2 field presence), which is not a change of meaning.
            denotations = [draw(st.sampled_from(["DATA_BATCH", "DATA_CHANNEL"])) for _ in shape]
        proto = onnx.helper.make_tensor_type_proto(elem, shape, denotations)
    elif kind == "sparse":
        proto = onnx.helper.make_sparse_tensor_type_proto(elem, shape)
    elif kind == "sequence":
        proto = onnx.helper.make_sequence_type_proto(draw(_type_protos(depth - 1)))
    elif kind == "optional":
        proto = onnx.helper.make_optional_type_proto(draw(_type_protos(depth - 1)))
    else:
        key = draw(st.sampled_from([onnx.TensorProto.INT64, onnx.TensorProto.STRING]))
        proto = onnx.helper.make_map_type_proto(key, draw(_type_protos(depth - 1)))
    if draw(st.booleans()):
        proto.denotation = draw(st.sampled_from(["TENSOR", "IMAGE", "AUDIO"]))
    return proto


def _sparse(draw: st.DrawFn) -> onnx.SparseTensorProto:
    n = draw(st.integers(1, 4))
    values = onnx.helper.make_tensor(
        "", onnx.TensorProto.FLOAT, [n], draw(st.lists(_float32, min_size=n, max_size=n))
    )
    indices = onnx.helper.make_tensor(
        "",
        onnx.TensorProto.INT64,
        [n],
        sorted(draw(st.sets(st.integers(0, 9), min_size=n, max_size=n))),
    )
    return onnx.helper.make_sparse_tensor(values, indices, [10])


@st.composite
def _attribute(draw: st.DrawFn, name: str, allow_graph: bool) -> onnx.AttributeProto:
    kinds = [
        "float",
        "int",
        "string",
        "bytes",
        "floats",
        "ints",
        "strings",
        "tensor",
        "tensors",
        "sparse",
        "type",
        "types",
    ]
    if allow_graph:
        kinds += ["graph", "graphs"]
    kind = draw(st.sampled_from(kinds))
    value: Any
    attr_type = None
    if kind == "float":
        value = draw(_float32)
    elif kind == "int":
        value = draw(_int64)
    elif kind == "string":
        value = draw(_texts)
    elif kind == "bytes":
        value = draw(st.binary(max_size=8))
        attr_type = onnx.AttributeProto.STRING
    elif kind == "floats":
        value = draw(st.lists(_float32, min_size=1, max_size=4))
    elif kind == "ints":
        value = draw(st.lists(_int64, min_size=1, max_size=4))
    elif kind == "strings":
        value = draw(st.lists(st.one_of(_texts, st.binary(max_size=4)), min_size=1, max_size=3))
        attr_type = onnx.AttributeProto.STRINGS
    elif kind == "tensor":
        value = draw(_tensors())
    elif kind == "tensors":
        value = draw(st.lists(_tensors(), min_size=1, max_size=2))
    elif kind == "sparse":
        value = _sparse(draw)
    elif kind == "type":
        value = draw(_type_protos())
    elif kind == "types":
        value = draw(st.lists(_type_protos(), min_size=1, max_size=2))
    elif kind == "graph":
        value = draw(_subgraphs())
    else:
        value = draw(st.lists(_subgraphs(), min_size=1, max_size=2))
    doc = draw(st.one_of(st.none(), _texts))
    return onnx.helper.make_attribute(name, value, doc_string=doc, attr_type=attr_type)


@st.composite
def _subgraphs(draw: st.DrawFn) -> onnx.GraphProto:
    """A small custom-domain subgraph with one input and one output.

    Half the time its node also reads `x` of the main graph (an outer-scope reference).
    """
    inputs = ["sub_in", "x"] if draw(st.booleans()) else ["sub_in"]
    node = onnx.helper.make_node("Inner", inputs, ["sub_out"], domain="test.fuzz")
    if draw(st.booleans()):
        node.attribute.append(draw(_attribute("inner_attr", allow_graph=False)))
    return onnx.helper.make_graph(
        [node],
        draw(_names),
        [onnx.helper.make_value_info("sub_in", draw(_type_protos()))],
        [onnx.helper.make_value_info("sub_out", draw(_type_protos()))],
    )


def _metadata(draw: st.DrawFn) -> dict[str, str]:
    return draw(st.dictionaries(_names, _texts, max_size=2))


@st.composite
def _models(draw: st.DrawFn) -> onnx.ModelProto:
    """A chain of elementwise and custom ops over x, with everything optional drawn."""
    n_nodes = draw(st.integers(1, 6))
    nodes = []
    value_info = []
    available = ["x"]
    for i in range(n_nodes):
        out = f"v{i}"
        custom = draw(st.booleans())
        if custom:
            n_in = draw(st.integers(0, 3))
            inputs = [draw(st.sampled_from([*available, ""])) for _ in range(n_in)]
            attr_names = draw(st.lists(_names, max_size=3, unique=True))
            attrs = [draw(_attribute(a, allow_graph=True)) for a in attr_names]
            node = onnx.helper.make_node(
                draw(st.sampled_from(["Fuzz", "Other"])), inputs, [out], domain="test.fuzz"
            )
            node.attribute.extend(attrs)
        elif draw(st.booleans()):
            node = onnx.helper.make_node(draw(st.sampled_from(_UNARY)), [available[-1]], [out])
        else:
            lhs = draw(st.sampled_from(available))
            node = onnx.helper.make_node(
                draw(st.sampled_from(_BINARY)), [lhs, available[-1]], [out]
            )
        if draw(st.booleans()):
            node.name = draw(_names)
        if draw(st.booleans()):
            node.doc_string = draw(_texts)
        if draw(st.booleans()):
            onnx.helper.set_metadata_props(node, _metadata(draw))
        nodes.append(node)
        available.append(out)
        # value_info describes values other than graph inputs and outputs (the last value is
        # the output): a second, different description of one value cannot survive a rebuild.
        if i < n_nodes - 1 and draw(st.booleans()):
            info = onnx.helper.make_value_info(out, draw(_type_protos()), draw(_texts))
            if draw(st.booleans()):
                onnx.helper.set_metadata_props(info, _metadata(draw))
            value_info.append(info)
    if draw(st.booleans()):
        value_info.append(onnx.helper.make_value_info("dangling", draw(_type_protos())))
    initializers = []
    if draw(st.booleans()):
        initializers.append(draw(_tensors("unused_init")))
    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2], draw(_texts))
    y = onnx.helper.make_value_info(available[-1], draw(_type_protos()))
    graph = onnx.helper.make_graph(
        nodes, draw(_names), [x], [y], initializers, doc_string=draw(_texts), value_info=value_info
    )
    if draw(st.booleans()):
        graph.sparse_initializer.append(_sparse(draw))
        graph.sparse_initializer[-1].values.name = "sparse_init"
    onnx.helper.set_metadata_props(graph, _metadata(draw))
    opsets = [onnx.helper.make_opsetid("", draw(st.integers(13, 21)))]
    opsets.append(onnx.helper.make_opsetid("test.fuzz", draw(st.integers(1, 3))))
    model = onnx.helper.make_model(
        graph,
        opset_imports=opsets,
        producer_name=draw(_texts),
        doc_string=draw(_texts),
        model_version=draw(st.integers(0, 5)),
    )
    onnx.helper.set_model_props(model, _metadata(draw))
    if draw(st.booleans()):
        _add_function(draw, model)
    if draw(st.booleans()):
        model.training_info.append(_training_info(draw))
    return model


def _add_function(draw: st.DrawFn, model: onnx.ModelProto) -> None:
    """A local function (with attributes, doc and metadata) and a call of it on `x`."""
    body = [
        onnx.helper.make_node(draw(st.sampled_from(_UNARY)), ["a"], ["t"]),
        onnx.helper.make_node("Fuzz", ["t"], ["b"], domain="test.fuzz"),
    ]
    if draw(st.booleans()):
        body[1].attribute.append(draw(_attribute("inner_attr", allow_graph=False)))
    function = onnx.helper.make_function(
        "test.local",
        draw(st.sampled_from(["Block", "Layer"])),
        ["a"],
        ["b"],
        body,
        [onnx.helper.make_opsetid("", 18), onnx.helper.make_opsetid("test.fuzz", 1)],
        attributes=draw(st.lists(_names, max_size=2, unique=True)),
        doc_string=draw(_texts),
    )
    if draw(st.booleans()):
        function.value_info.append(onnx.helper.make_value_info("t", draw(_type_protos())))
    model.functions.append(function)
    call = onnx.helper.make_node(function.name, ["x"], ["called"], domain="test.local")
    model.graph.node.append(call)
    model.opset_import.append(onnx.helper.make_opsetid("test.local", 1))


def _training_info(draw: st.DrawFn) -> onnx.TrainingInfoProto:
    """An algorithm graph updating an initializer of its own (training_info is kept as is)."""
    step = onnx.helper.make_node(draw(st.sampled_from(_UNARY)), ["w"], ["w_new"])
    algorithm = onnx.helper.make_graph(
        [step],
        draw(_names),
        [],
        [onnx.helper.make_tensor_value_info("w_new", onnx.TensorProto.FLOAT, [2])],
        [onnx.numpy_helper.from_array(np.ones(2, np.float32), "w")],
    )
    info = onnx.TrainingInfoProto()
    info.algorithm.CopyFrom(algorithm)
    binding = info.update_binding.add()
    binding.key = "w"
    binding.value = "w_new"
    return info


@given(_models())
def test_random_models_round_trip_exactly(model: onnx.ModelProto) -> None:
    assert_roundtrip_exact(model)


@given(_models())
def test_random_models_lift_to_a_verified_ir(model: onnx.ModelProto) -> None:
    lifted = ir.from_onnx(model)
    ir.verify(lifted)
    assert str(lifted) == str(ir.from_onnx(model))


@pytest.mark.slow
@settings(max_examples=1000)
@given(_models())
def test_random_models_round_trip_exactly_long(model: onnx.ModelProto) -> None:
    """The same property with many more examples (run with --run-slow)."""
    assert_roundtrip_exact(model)


@pytest.mark.slow
@settings(max_examples=500)
@given(st.data())
def test_random_mutations_keep_the_ir_consistent_long(data: st.DataObject) -> None:
    """The mutation property with many more examples (run with --run-slow)."""
    test_random_mutations_keep_the_ir_consistent.hypothesis.inner_test(data)  # type: ignore[attr-defined]
