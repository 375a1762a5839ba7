"""Lifting and lowering: what is preserved, what is reused, and what every mutation reaches."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx
import onnx.helper
import onnx.parser
import pytest

import ir
from ir import _serde, _serde_origin
from ir._serde_tensors import ProtoTensor
from tests.ir._roundtrip import assert_roundtrip_exact, assert_same_proto

_OPSET = [onnx.helper.make_opsetid("", 18)]


def _parse(text: str) -> onnx.ModelProto:
    model = onnx.parser.parse_model(text)
    onnx.checker.check_model(model, full_check=True)
    return model


def _if_model() -> onnx.ModelProto:
    return _parse(
        """
        <ir_version: 10, opset_import: ["" : 18]>
        main (float[2] x, bool c) => (float[2] y) {
            t = Neg (x)
            y = If (c) <
                then_branch = g1 () => (float[2] a) { a = Abs (t) },
                else_branch = g2 () => (float[2] b) { b = Relu (t) }
            >
        }
        """
    )


def _loop_model() -> onnx.ModelProto:
    return _parse(
        """
        <ir_version: 10, opset_import: ["" : 18]>
        main (float[2] x, int64 n) => (float[2] y) {
            w = Neg (x)
            cond = Constant <value: tensor = bool {1}> ()
            y = Loop (n, cond, x) <body = step (int64 i, bool c_in, float[2] acc) => (
                bool c_out, float[2] acc_out) {
                c_out = Identity (c_in)
                acc_out = Add (acc, w)
            }>
        }
        """
    )


def _function_model() -> onnx.ModelProto:
    return _parse(
        """
        <ir_version: 10, opset_import: ["" : 18, "local" : 1]>
        main (float[2] x) => (float[2] y, float[2] z) {
            y = local.scaled <alpha: float = 3.0> (x)
            z = local.plain (x)
        }
        <domain: "local", opset_import: ["" : 18]>
        scaled <alpha: float = 1.0> (a) => (b) {
            s = Constant <value_float: float = @alpha> ()
            b = Mul (a, s)
        }
        <domain: "local", opset_import: ["" : 18]>
        plain (a) => (b) {
            b = Abs (a)
        }
        """
    )


def _rich_model() -> onnx.ModelProto:
    """A model using every model-level field lowering has to keep."""
    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", 3], "input doc")
    y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["N", 3])
    mid = onnx.helper.make_tensor_value_info("mid", onnx.TensorProto.FLOAT, ["N", 3])
    onnx.helper.set_metadata_props(mid, {"role": "activation"})
    dangling = onnx.helper.make_tensor_value_info("not_in_graph", onnx.TensorProto.INT64, [1])
    relu = onnx.helper.make_node("Relu", ["x"], ["mid"], name="relu", doc_string="node doc")
    onnx.helper.set_metadata_props(relu, {"source": "test"})
    add = onnx.helper.make_node("Add", ["mid", "bias"], ["y"], name="add")
    bias = onnx.helper.make_tensor("bias", onnx.TensorProto.FLOAT, [3], [1.0, 2.0, 3.0])
    sparse_values = onnx.helper.make_tensor("sp", onnx.TensorProto.FLOAT, [2], [5.0, 6.0])
    sparse_indices = onnx.helper.make_tensor("sp_idx", onnx.TensorProto.INT64, [2], [1, 4])
    sparse = onnx.helper.make_sparse_tensor(sparse_values, sparse_indices, [2, 3])
    graph = onnx.helper.make_graph(
        [relu, add],
        "rich",
        [x],
        [y],
        [bias],
        doc_string="graph doc",
        value_info=[mid, dangling],
        sparse_initializer=[sparse],
    )
    onnx.helper.set_metadata_props(graph, {"graph_key": "graph_value"})
    annotation = graph.quantization_annotation.add()
    annotation.tensor_name = "mid"
    model = onnx.helper.make_model(
        graph,
        opset_imports=[*_OPSET, onnx.helper.make_opsetid("com.example", 2)],
        producer_name="ir-tests",
        producer_version="1.0",
        domain="org.example",
        model_version=7,
        doc_string="model doc",
    )
    onnx.helper.set_model_props(model, {"author": "tests", "license": "none"})
    training = model.training_info.add()
    training.algorithm.name = "update"
    training.algorithm.node.add().CopyFrom(onnx.helper.make_node("Identity", ["bias"], ["b2"]))
    training.update_binding.add().key = "bias"
    return model


# ---------------------------------------------------------------------------------------------
# Preservation


def test_every_model_level_field_round_trips() -> None:
    assert_roundtrip_exact(_rich_model())


@pytest.mark.parametrize("factory", [_if_model, _loop_model, _function_model])
def test_control_flow_and_functions_round_trip(factory: Callable[[], onnx.ModelProto]) -> None:
    assert_roundtrip_exact(factory())


def test_training_info_and_annotations_survive_a_mutation() -> None:
    proto = _rich_model()
    model = ir.from_onnx(proto)
    model.graph.nodes[0].name = "relu_renamed"
    lowered = ir.to_onnx(model)
    assert lowered.training_info == proto.training_info
    assert lowered.graph.quantization_annotation == proto.graph.quantization_annotation
    assert lowered.graph.node[0].name == "relu_renamed"
    assert lowered.graph.node[0].doc_string == "node doc"


def test_value_info_is_kept_after_an_unrelated_mutation() -> None:
    proto = _rich_model()
    model = ir.from_onnx(proto)
    model.graph.nodes[1].name = "add_renamed"
    lowered = ir.to_onnx(model)
    assert list(lowered.graph.value_info) == list(proto.graph.value_info)
    assert lowered.graph.input == proto.graph.input


def test_value_info_of_removed_values_is_dropped_and_new_types_are_added() -> None:
    model = ir.from_onnx(_rich_model())
    graph = model.graph
    relu, add = graph.nodes
    x = graph.inputs[0]
    add.replace_input_with(0, x)
    graph.remove(relu)
    sigmoid = ir.Node("Sigmoid", [x], outputs=[ir.Value("s", ir.TensorType(ir.DataType.FLOAT))])
    graph.insert_before(add, [sigmoid])
    lowered = ir.to_onnx(model)
    names = [vi.name for vi in lowered.graph.value_info]
    assert names == ["not_in_graph", "s"]
    assert lowered.graph.value_info[1].type.tensor_type.elem_type == onnx.TensorProto.FLOAT


def test_lifting_takes_types_and_metadata_from_value_info() -> None:
    model = ir.from_onnx(_rich_model())
    mid = model.graph.nodes[0].outputs[0]
    assert mid.type == ir.TensorType(ir.DataType.FLOAT, ("N", 3))
    assert mid.metadata_props == {"role": "activation"}
    assert model.graph.inputs[0].doc_string == "input doc"


def test_sparse_initializers_are_lifted_and_densify() -> None:
    model = ir.from_onnx(_rich_model())
    sparse = model.graph.sparse_initializers["sp"].const_value
    assert sparse is not None
    assert sparse.shape == (2, 3)
    expected = np.array([[0, 5, 0], [0, 6, 0]], np.float32)
    assert np.array_equal(sparse.numpy(), expected)


def test_metadata_everywhere_is_lifted() -> None:
    model = ir.from_onnx(_rich_model())
    assert model.metadata_props == {"author": "tests", "license": "none"}
    assert model.graph.metadata_props == {"graph_key": "graph_value"}
    assert dict(model.graph.nodes[0].metadata_props) == {"source": "test"}
    assert model.opset_imports == {"": 18, "com.example": 2}
    assert model.producer_name == "ir-tests"
    assert model.model_version == 7


def test_opset_imports_keep_their_order_and_take_changes() -> None:
    proto = _rich_model()
    model = ir.from_onnx(proto)
    assert list(ir.to_onnx(model).opset_import) == list(proto.opset_import)
    model.opset_imports["com.other"] = 1
    del model.opset_imports["com.example"]
    lowered = ir.to_onnx(model)
    assert [(o.domain, o.version) for o in lowered.opset_import] == [("", 18), ("com.other", 1)]


# ---------------------------------------------------------------------------------------------
# Every mutation reaches lowering


def _graph_of(model: ir.Model) -> ir.Graph:
    return model.graph


def _then_branch(model: ir.Model) -> ir.Graph:
    graph = model.graph.nodes[1].attribute("then_branch")
    assert isinstance(graph, ir.Graph)
    return graph


_MUTATIONS: dict[str, tuple[Callable[[ir.Model], None], Callable[[onnx.ModelProto], object]]] = {
    "graph name": (
        lambda m: setattr(_graph_of(m), "name", "renamed"),
        lambda p: p.graph.name,
    ),
    "graph doc_string": (
        lambda m: setattr(_graph_of(m), "doc_string", "new doc"),
        lambda p: p.graph.doc_string,
    ),
    "graph metadata in place": (
        lambda m: _graph_of(m).metadata_props.update(k="v"),
        lambda p: {e.key: e.value for e in p.graph.metadata_props},
    ),
    "subgraph name": (
        lambda m: setattr(_then_branch(m), "name", "then_renamed"),
        lambda p: p.graph.node[1].attribute[0].g.name,
    ),
    "subgraph node attribute": (
        lambda m: _then_branch(m).nodes[0].set_attribute(ir.attr_str("note", "x")),
        lambda p: p.graph.node[1].attribute[0].g.node[0].attribute[0].s,
    ),
    "input doc_string": (
        lambda m: setattr(_graph_of(m).inputs[0], "doc_string", "input doc"),
        lambda p: p.graph.input[0].doc_string,
    ),
    "input metadata in place": (
        lambda m: _graph_of(m).inputs[0].metadata_props.__setitem__("k", "v"),
        lambda p: {e.key: e.value for e in p.graph.input[0].metadata_props},
    ),
    "input type": (
        lambda m: setattr(_graph_of(m).inputs[0], "type", ir.TensorType(ir.DataType.DOUBLE)),
        lambda p: p.graph.input[0].type.tensor_type.elem_type,
    ),
    "node metadata": (
        lambda m: _graph_of(m).nodes[0].set_metadata("k", "v"),
        lambda p: {e.key: e.value for e in p.graph.node[0].metadata_props},
    ),
    "node doc_string": (
        lambda m: setattr(_graph_of(m).nodes[0], "doc_string", "node doc"),
        lambda p: p.graph.node[0].doc_string,
    ),
    "model metadata": (
        lambda m: m.metadata_props.update(k="v"),
        lambda p: {e.key: e.value for e in p.metadata_props},
    ),
    "attribute replaced by an equal one with a doc string": (
        lambda m: _graph_of(m).nodes[1].set_attribute(_documented(_graph_of(m).nodes[1])),
        lambda p: p.graph.node[1].attribute[0].doc_string,
    ),
    "type given to an untyped value": (
        lambda m: setattr(
            _graph_of(m).nodes[0].outputs[0], "type", ir.TensorType(ir.DataType.FLOAT)
        ),
        lambda p: [info.name for info in p.graph.value_info],
    ),
    "input rewired to another value": (
        lambda m: _graph_of(m).nodes[0].replace_input_with(0, _graph_of(m).inputs[1]),
        lambda p: list(p.graph.node[0].input),
    ),
    "node renamed and renamed back": (
        lambda m: [setattr(_graph_of(m).nodes[0], "name", n) for n in ("other", "")],
        lambda p: p.graph.node[0].name,
    ),
    "producer": (
        lambda m: setattr(m, "producer_name", "someone"),
        lambda p: p.producer_name,
    ),
}

_EXPECTED = {
    "graph name": "renamed",
    "graph doc_string": "new doc",
    "graph metadata in place": {"k": "v"},
    "subgraph name": "then_renamed",
    "subgraph node attribute": b"x",
    "input doc_string": "input doc",
    "input metadata in place": {"k": "v"},
    "input type": onnx.TensorProto.DOUBLE,
    "node metadata": {"k": "v"},
    "node doc_string": "node doc",
    "model metadata": {"k": "v"},
    "producer": "someone",
    "attribute replaced by an equal one with a doc string": "documented",
    "type given to an untyped value": ["t"],
    "input rewired to another value": ["c"],
    "node renamed and renamed back": "",
}


def _documented(node: ir.Node) -> ir.Attr:
    """The node's first attribute with a doc string: equal to it (Attr equality ignores docs)."""
    attr = next(iter(node.attributes.values()))
    documented = ir.Attr(attr.name, attr.type, attr.value, doc_string="documented")
    assert documented == attr
    return documented


@pytest.mark.parametrize("name", list(_MUTATIONS))
def test_mutation_reaches_the_lowered_model(name: str) -> None:
    mutate, read = _MUTATIONS[name]
    model = ir.from_onnx(_if_model())
    mutate(model)
    assert read(ir.to_onnx(model)) == _EXPECTED[name]


@pytest.mark.parametrize(
    ("field", "value", "read"),
    [
        ("name", "scaled2", lambda f: f.name),
        ("doc_string", "documented", lambda f: f.doc_string),
        ("overload", "v2", lambda f: f.overload),
    ],
)
def test_function_field_changes_reach_the_lowered_model(
    field: str, value: str, read: Callable[[onnx.FunctionProto], str]
) -> None:
    model = ir.from_onnx(_function_model())
    fn = next(iter(model.functions.values()))
    setattr(fn, field, value)
    assert read(ir.to_onnx(model).functions[0]) == value


def test_function_container_changes_reach_the_lowered_model() -> None:
    model = ir.from_onnx(_function_model())
    fn = next(iter(model.functions.values()))
    fn.metadata_props["k"] = "v"
    fn.opset_imports["com.example"] = 1
    fn.attributes.append("beta")
    lowered = ir.to_onnx(model).functions[0]
    assert {e.key: e.value for e in lowered.metadata_props} == {"k": "v"}
    assert [o.domain for o in lowered.opset_import] == ["", "com.example"]
    assert list(lowered.attribute) == ["beta"]


# ---------------------------------------------------------------------------------------------
# Reuse of untouched parts


def _lowering(model: ir.Model) -> tuple[_serde._Lowering, _serde_origin.ModelOrigin]:
    origin = _serde_origin.origin_of(model)
    assert origin is not None
    return _serde._Lowering(origin), origin


def test_untouched_nodes_lower_to_their_original_messages() -> None:
    proto = _rich_model()
    model = ir.from_onnx(proto)
    relu, add = model.graph.nodes
    add.name = "changed"
    lowering, origin = _lowering(model)
    graph = origin.graphs[model.graph]
    assert lowering.node(relu, graph, 0) is proto.graph.node[0]
    assert lowering.node(add, graph, 1) is not proto.graph.node[1]
    assert lowering.graph(model.graph) is not proto.graph


def test_untouched_graph_lowers_to_its_original_message() -> None:
    proto = _rich_model()
    model = ir.from_onnx(proto)
    lowering, _ = _lowering(model)
    assert lowering.graph(model.graph) is proto.graph


def test_untouched_function_lowers_to_its_original_message() -> None:
    proto = _function_model()
    model = ir.from_onnx(proto)
    scaled, plain = model.functions.values()
    plain.graph.nodes[0].name = "abs"
    lowering, _ = _lowering(model)
    assert lowering.function(scaled) is proto.functions[0]
    lowered = lowering.function(plain)
    assert lowered is not proto.functions[1]
    assert lowered.node[0].name == "abs"


def test_attributes_of_plain_ops_are_lifted_lazily() -> None:
    proto = _parse(
        """
        <ir_version: 10, opset_import: ["" : 18]>
        main (float[2, 3] x) => (float[3, 2] y) {
            y = Transpose <perm = [1, 0]> (x)
        }
        """
    )
    model = ir.from_onnx(proto)
    node = model.graph.nodes[0]
    assert isinstance(node._attributes, ir.DeferredAttributes)
    assert node.attribute("perm") == (1, 0)
    assert_same_proto(proto, ir.to_onnx(model))
    lowering, _ = _lowering(model)
    assert lowering.graph(model.graph) is proto.graph  # loading is not a change


def test_an_attribute_set_to_negative_zero_is_lowered_though_it_equals_zero() -> None:
    proto = _parse(
        """
        <ir_version: 10, opset_import: ["" : 18]>
        main (float[2] x) => (float[2] y) {
            y = LeakyRelu <alpha = 0.0> (x)
        }
        """
    )
    model = ir.from_onnx(proto)
    node = model.graph.nodes[0]
    node.set_attribute(ir.attr_float("alpha", -0.0))
    assert node.attributes["alpha"] == ir.attr_float("alpha", 0.0)
    lowered = ir.to_onnx(model).graph.node[0].attribute[0].f
    assert np.signbit(lowered)


def test_an_unchanged_model_shares_no_message_with_its_lowered_copy() -> None:
    proto = _rich_model()
    model = ir.from_onnx(proto)
    lowered = ir.to_onnx(model)
    lowered.graph.node[0].name = "edited"
    assert proto.graph.node[0].name != "edited"
    assert ir.to_onnx(model).graph.node[0].name == proto.graph.node[0].name


def test_initializer_data_is_not_decoded_by_lifting_or_lowering() -> None:
    proto = _rich_model()
    model = ir.from_onnx(proto)
    tensor = model.graph.initializers["bias"].const_value
    assert isinstance(tensor, ProtoTensor)
    ir.to_onnx(model)
    assert tensor._array is None
    assert tensor.numpy().tolist() == [1.0, 2.0, 3.0]
    assert tensor._array is not None


# ---------------------------------------------------------------------------------------------
# Scopes


def test_if_branches_read_the_outer_value_object() -> None:
    model = ir.from_onnx(_if_model())
    t = model.graph.nodes[0].outputs[0]
    then_branch = _then_branch(model)
    inner = then_branch.nodes[0]
    assert inner.inputs[0] is t
    assert ir.Use(inner, 0) in t.uses
    assert t.graph is model.graph
    ir.verify(model)


def test_loop_body_reads_the_outer_value_object() -> None:
    model = ir.from_onnx(_loop_model())
    w = model.graph.nodes[0].outputs[0]
    loop = model.graph.nodes[2]
    body = loop.attribute("body")
    assert isinstance(body, ir.Graph)
    add = body.nodes[1]
    assert add.inputs[1] is w
    assert add.inputs[0] is body.inputs[2]
    assert body.owner is loop
    ir.verify(model)


def test_inner_definitions_shadow_outer_names() -> None:
    proto = onnx.parser.parse_model(
        """
        <ir_version: 10, opset_import: ["" : 18]>
        main (float[2] x, bool c) => (float[2] y) {
            t = Neg (x)
            y = If (c) <
                then_branch = g1 () => (float[2] a) { t = Abs (x)  a = Relu (t) },
                else_branch = g2 () => (float[2] b) { b = Relu (t) }
            >
        }
        """
    )
    model = ir.from_onnx(proto)
    outer_t = model.graph.nodes[0].outputs[0]
    then_branch = _then_branch(model)
    inner_t = then_branch.nodes[0].outputs[0]
    assert then_branch.nodes[1].inputs[0] is inner_t
    assert inner_t is not outer_t
    assert_roundtrip_exact(proto)


def test_undefined_input_is_a_model_load_error() -> None:
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("Relu", ["nowhere"], ["y"], name="r")],
        "g",
        [],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1])],
    )
    with pytest.raises(ir.ModelLoadError, match="nowhere"):
        ir.from_onnx(onnx.helper.make_model(graph, opset_imports=_OPSET))


def test_value_defined_twice_is_a_model_load_error() -> None:
    graph = onnx.helper.make_graph(
        [
            onnx.helper.make_node("Relu", ["x"], ["y"]),
            onnx.helper.make_node("Neg", ["x"], ["y"], name="again"),
        ],
        "g",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1])],
    )
    with pytest.raises(ir.ModelLoadError, match="defined twice"):
        ir.from_onnx(onnx.helper.make_model(graph, opset_imports=_OPSET))


# ---------------------------------------------------------------------------------------------
# Functions


def test_functions_are_lifted_with_attribute_references_and_defaults() -> None:
    model = ir.from_onnx(_function_model())
    assert list(model.functions) == [("local", "scaled", ""), ("local", "plain", "")]
    scaled = model.functions[("local", "scaled", "")]
    assert scaled.attributes == []
    assert [a.name for a in scaled.attribute_defaults] == ["alpha"]
    assert scaled.attribute_defaults[0].value == 1.0
    constant = scaled.graph.nodes[0]
    assert constant.attributes["value_float"].ref_attr_name == "alpha"
    assert scaled.opset_imports == {"": 18}
    call = model.graph.nodes[0]
    assert (call.domain, call.op_type) == ("local", "scaled")
    ir.verify(model)


def test_function_body_changes_are_lowered() -> None:
    model = ir.from_onnx(_function_model())
    plain = model.functions[("local", "plain", "")]
    a = plain.graph.inputs[0]
    neg = ir.Node("Neg", [a], outputs=["n"])
    plain.graph.insert_before(plain.graph.nodes[0], [neg])
    plain.graph.nodes[1].replace_input_with(0, neg.outputs[0])
    lowered = ir.to_onnx(model)
    body = lowered.functions[1]
    assert [n.op_type for n in body.node] == ["Neg", "Abs"]
    assert list(body.node[1].input) == ["n"]
    onnx.checker.check_model(lowered, full_check=True)


# ---------------------------------------------------------------------------------------------
# Node order


def _values(*names: str) -> list[ir.Value]:
    return [ir.Value(n, ir.TensorType(ir.DataType.FLOAT, (2,))) for n in names]


def test_lowering_sorts_nodes_appended_out_of_order() -> None:
    (x,) = _values("x")
    first = ir.Node("Relu", [x], outputs=["a"])
    second = ir.Node("Neg", [first.outputs[0]], outputs=["b"])
    third = ir.Node("Abs", [second.outputs[0]], outputs=["c"])
    graph = ir.Graph([x], [third.outputs[0]], [third, first, second], name="g")
    lowered = ir.to_onnx(ir.Model(graph))
    assert [n.op_type for n in lowered.graph.node] == ["Relu", "Neg", "Abs"]
    assert [n.op_type for n in graph] == ["Abs", "Relu", "Neg"], "the IR order is not changed"


def test_lowering_keeps_an_order_that_is_already_topological() -> None:
    (x,) = _values("x")
    nodes = [ir.Node(op, [x], outputs=[f"o_{op}"]) for op in ("Tanh", "Abs", "Relu")]
    graph = ir.Graph([x], [n.outputs[0] for n in nodes], nodes, name="g")
    lowered = ir.to_onnx(ir.Model(graph))
    assert [n.op_type for n in lowered.graph.node] == ["Tanh", "Abs", "Relu"]


def test_lowering_orders_by_outer_values_read_inside_subgraphs() -> None:
    x, c = _values("x", "c")
    neg = ir.Node("Neg", [x], outputs=["t"])
    t = neg.outputs[0]
    abs_node = ir.Node("Abs", [t], outputs=["a"])
    relu = ir.Node("Relu", [t], outputs=["b"])
    then_branch = ir.Graph([], [abs_node.outputs[0]], [abs_node], name="g1")
    else_branch = ir.Graph([], [relu.outputs[0]], [relu], name="g2")
    branches = [
        ir.attr_graph("then_branch", then_branch),
        ir.attr_graph("else_branch", else_branch),
    ]
    if_node = ir.Node("If", [c], branches, outputs=["y"])
    # The If comes first although a branch reads `t`, which the Neg after it computes.
    graph = ir.Graph([x, c], [if_node.outputs[0]], [if_node, neg], name="g")
    ir.verify(graph)  # node order is not an IR invariant, only one of the lowered model
    lowered = ir.to_onnx(ir.Model(graph, opset_imports={"": 18}))
    assert [n.op_type for n in lowered.graph.node] == ["Neg", "If"]


def test_cycle_is_reported_with_a_node_on_it() -> None:
    (x,) = _values("x")
    a = ir.Node("Add", [x, x], outputs=["a"], name="first")
    b = ir.Node("Neg", [a.outputs[0]], outputs=["b"], name="second")
    a.replace_input_with(1, b.outputs[0])
    graph = ir.Graph([x], [b.outputs[0]], [a, b], name="g")
    with pytest.raises(ir.GraphStructureError, match="cycle"):
        ir.to_onnx(ir.Model(graph))
    with pytest.raises(ir.GraphStructureError, match="cycle"):
        ir.verify(graph)


# ---------------------------------------------------------------------------------------------
# Printing


_EXPECTED_TEXT = """\
graph 'main' (
  input %x: float[2]
  input %c: bool[]
) {
  %t = Neg (%x)
  %y = If <then_branch=<graph g1 (1 nodes)>, else_branch=<graph g2 (1 nodes)>> (%c)
    graph 'g1' (
    ) {
      %a = Abs (%t)
      return %a
    }
    graph 'g2' (
    ) {
      %b = Relu (%t)
      return %b
    }
  return %y
}"""


def test_graph_prints_to_a_stable_text_form() -> None:
    first = str(ir.from_onnx(_if_model()).graph)
    second = str(ir.from_onnx(_if_model()).graph)
    assert first == second == _EXPECTED_TEXT


def test_node_prints_attributes_and_omitted_inputs() -> None:
    x = ir.Value("x")
    node = ir.Node("Clip", [x, None], [ir.attr_ints("axes", [0, 1])], outputs=["y"])
    assert str(node) == "%y = Clip <axes=[0, 1]> (%x, '')"


# ---------------------------------------------------------------------------------------------
# Renaming values that several registries know


def test_renaming_a_sparse_initializer_renames_its_tensor() -> None:
    model = ir.from_onnx(_rich_model())
    graph = model.graph
    sparse = graph.sparse_initializers["sp"]
    reader = ir.Node("Identity", [sparse], outputs=["sp_copy"])
    graph.append(reader)
    graph.add_output(reader.outputs[0])
    sparse.name = "sp_renamed"
    assert list(graph.sparse_initializers) == ["sp_renamed"]
    lowered = ir.to_onnx(model)
    assert [s.values.name for s in lowered.graph.sparse_initializer] == ["sp_renamed"]
    assert list(lowered.graph.node[-1].input) == ["sp_renamed"]
    ir.verify(model)


def test_renaming_an_initializer_that_is_also_an_input() -> None:
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("Add", ["x", "w"], ["y"])],
        "g",
        [
            onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2]),
            onnx.helper.make_tensor_value_info("w", onnx.TensorProto.FLOAT, [2]),
        ],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2])],
        [onnx.helper.make_tensor("w", onnx.TensorProto.FLOAT, [2], [1.0, 2.0])],
    )
    model = ir.from_onnx(onnx.helper.make_model(graph, opset_imports=_OPSET))
    w = model.graph.initializers["w"]
    assert w is model.graph.inputs[1]
    w.name = "w2"
    lowered = ir.to_onnx(model)
    assert [i.name for i in lowered.graph.input] == ["x", "w2"]
    assert [t.name for t in lowered.graph.initializer] == ["w2"]
    assert list(lowered.graph.node[0].input) == ["x", "w2"]


def test_renaming_a_function_input_reaches_its_signature_and_nodes() -> None:
    model = ir.from_onnx(_function_model())
    plain = model.functions[("local", "plain", "")]
    plain.graph.inputs[0].name = "renamed"
    lowered = ir.to_onnx(model).functions[1]
    assert list(lowered.input) == ["renamed"]
    assert list(lowered.node[0].input) == ["renamed"]


# -- structure-only lowering (shape inference and the checker) ---------------------------------


def _weights_model(ir_version: int = 8) -> onnx.ModelProto:
    big = onnx.numpy_helper.from_array(np.ones((16, 8), np.float32), "big")
    small = onnx.numpy_helper.from_array(np.array([-1, 8], np.int64), "shape")
    inputs = [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["n", 16])]
    if ir_version < 4:
        inputs.append(onnx.helper.make_tensor_value_info("big", onnx.TensorProto.FLOAT, [16, 8]))
        inputs.append(onnx.helper.make_tensor_value_info("shape", onnx.TensorProto.INT64, [2]))
    graph = onnx.helper.make_graph(
        [
            onnx.helper.make_node("MatMul", ["x", "big"], ["m"], name="mm"),
            onnx.helper.make_node("Reshape", ["m", "shape"], ["y"], name="rs"),
        ],
        "g",
        inputs,
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["n", 8])],
        [big, small],
    )
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)])
    model.ir_version = ir_version
    return model


@pytest.mark.parametrize("changed", [False, True])
@pytest.mark.parametrize("ir_version", [3, 8])
def test_structure_only_lowering_turns_large_weights_into_typed_inputs(changed, ir_version):
    model = ir.from_onnx(_weights_model(ir_version))
    if changed:
        next(iter(model.graph)).name = "mm_renamed"  # the graph is lowered anew, not copied
    proto = ir.to_onnx(model, weights=False)
    assert [t.name for t in proto.graph.initializer] == ["shape"]
    inputs = {i.name: i for i in proto.graph.input}
    assert list(inputs).count("big") == 1
    big = inputs["big"].type.tensor_type
    assert big.elem_type == onnx.TensorProto.FLOAT
    assert [d.dim_value for d in big.shape.dim] == [16, 8]
    onnx.checker.check_model(proto)
    inferred = onnx.shape_inference.infer_shapes(proto, data_prop=True)
    shapes = {vi.name: vi for vi in inferred.graph.value_info}
    assert [d.dim_value for d in shapes["m"].type.tensor_type.shape.dim][1] == 8
    # The model itself keeps its weights; a full lowering has them all.
    full = ir.to_onnx(model)
    assert [t.name for t in full.graph.initializer] == ["big", "shape"]
    assert len(full.graph.input) == (3 if ir_version < 4 else 1)
