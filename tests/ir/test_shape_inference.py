"""Shape facts: symbolic propagation, its soundness against onnxruntime, and facts per scope.

Every model here is small and built in the test. Where a numeric check makes sense, the
model is run with onnxruntime at several sizes of its symbolic dims (distinct per symbol) and
every fact is evaluated at those sizes and compared with the shape onnxruntime produced.
"""

from __future__ import annotations

import math
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np
import onnx
import onnx.helper
import onnx.parser
import pytest

import ir
from ir import _shape_inference
from tests.helpers import session

ROOT = Path(__file__).resolve().parents[2]


def parse(text: str) -> onnx.ModelProto:
    model = onnx.parser.parse_model(text)
    onnx.checker.check_model(model, full_check=True)
    return model


def inferred(proto: onnx.ModelProto) -> ir.Model:
    model = ir.from_onnx(proto)
    ir.infer_types(model)
    return model


def facts(model: ir.Model, graph: ir.Graph | None = None) -> dict[str, tuple[ir.Dim, ...] | None]:
    """Shape facts of the values `graph` (default: the main graph) defines, by name."""
    found = {}
    for value in (graph or model.graph).values():
        t = ir.fact_type(value)
        found[value.name] = t.shape if isinstance(t, ir.TensorType) else None
    return found


def evaluate(dim: ir.Dim, sizes: Mapping[str, int]) -> int | None:
    """A fact's dim at the given sizes (None when it names a symbol not in `sizes`)."""
    if isinstance(dim, int) or dim is None:
        return dim
    try:
        return int(eval(dim, {"floor": math.floor, "min": min}, dict(sizes)))
    except NameError:
        return None  # a symbol onnx invented: nothing to check


def run_every_value(
    proto: onnx.ModelProto, feeds: Mapping[str, np.ndarray]
) -> dict[str, tuple[int, ...]]:
    """The shape onnxruntime gives every value of the main graph."""
    probed = onnx.ModelProto()
    probed.CopyFrom(proto)
    outputs = {o.name for o in probed.graph.output}
    for node in probed.graph.node:
        for name in node.output:
            if name and name not in outputs:
                probed.graph.output.append(onnx.ValueInfoProto(name=name))
                outputs.add(name)
    names = [o.name for o in probed.graph.output]
    results = session(probed).run(names, dict(feeds))
    return {name: np.asarray(r).shape for name, r in zip(names, results, strict=True)}


def assert_facts_hold(
    proto: onnx.ModelProto, sizes_list: Iterable[Mapping[str, int]]
) -> dict[str, tuple[ir.Dim, ...] | None]:
    """Every fact of the main graph holds at each of the given symbol sizes."""
    model = inferred(proto)
    found = facts(model)
    for sizes in sizes_list:
        feeds = {}
        for value in proto.graph.input:
            tensor = value.type.tensor_type
            dims = [
                d.dim_value if d.HasField("dim_value") else sizes[d.dim_param]
                for d in tensor.shape.dim
            ]
            dtype = onnx.helper.tensor_dtype_to_np_dtype(tensor.elem_type)
            feeds[value.name] = np.ones(dims, dtype=dtype)
        actual = run_every_value(proto, feeds)
        for name, shape in actual.items():
            fact = found.get(name)
            if fact is None:
                continue
            assert len(fact) == len(shape), (name, fact, shape, sizes)
            for dim, size in zip(fact, shape, strict=True):
                expected = evaluate(dim, sizes)
                assert expected is None or expected == size, (name, fact, shape, sizes)
    return found


# -- shape chains ---------------------------------------------------------------------------

ATTENTION_CHAIN = """<ir_version: 8, opset_import: ["" : 17]>
g (float[batch, seq, 64] x) => (float[batch, seq, 64] y, float[batch, 4, seq, seq] scores,
                                float[?, 64] flat) {
    i0 = Constant <value = int64 {0}> ()
    i1 = Constant <value = int64 {1}> ()
    axis0 = Constant <value = int64[1] {0}> ()
    heads = Constant <value = int64[1] {4}> ()
    head_dim = Constant <value = int64[1] {16}> ()
    hidden = Constant <value = int64[1] {64}> ()
    flat_shape = Constant <value = int64[2] {-1, 64}> ()
    s = Shape (x)
    b = Gather <axis = 0> (s, i0)
    t = Gather <axis = 0> (s, i1)
    b1 = Unsqueeze (b, axis0)
    t1 = Unsqueeze (t, axis0)
    split_shape = Concat <axis = 0> (b1, t1, heads, head_dim)
    r = Reshape (x, split_shape)
    q = Transpose <perm = [0, 2, 1, 3]> (r)
    k = Transpose <perm = [0, 2, 3, 1]> (r)
    scores = MatMul (q, k)
    back = Transpose <perm = [0, 2, 1, 3]> (q)
    merge_shape = Concat <axis = 0> (b1, t1, hidden)
    y = Reshape (back, merge_shape)
    flat = Reshape (x, flat_shape)
}"""


def test_shape_gather_concat_reshape_chains_keep_batch_and_sequence() -> None:
    found = assert_facts_hold(
        parse(ATTENTION_CHAIN), [{"batch": 2, "seq": 5}, {"batch": 3, "seq": 1}]
    )
    assert found["r"] == ("batch", "seq", 4, 16)
    assert found["scores"] == ("batch", 4, "seq", "seq")
    assert found["y"] == ("batch", "seq", 64)
    assert found["flat"] == ("batch*seq", 64)


def test_static_model_needs_no_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self: object) -> None:
        raise AssertionError("the symbolic walk ran on a static model")

    monkeypatch.setattr(_shape_inference._Walk, "run", refuse)
    model = inferred(parse(ATTENTION_CHAIN.replace("batch", "2").replace("seq", "5")))
    assert facts(model)["scores"] == (2, 4, 5, 5)


def test_dims_computed_with_arithmetic_on_the_shape() -> None:
    text = """<ir_version: 8, opset_import: ["" : 17]>
    g (float[batch, seq, 8] x) => (float[batch, seq, 2, 4] y, float[?] d) {
        start = Constant <value = int64[1] {0}> ()
        end = Constant <value = int64[1] {2}> ()
        stop = Constant <value = int64[1] {3}> ()
        two = Constant <value = int64[1] {2}> ()
        s = Shape (x)
        head = Slice (s, start, end)
        last = Slice (s, end, stop)
        half = Div (last, two)
        shape = Concat <axis = 0> (head, two, half)
        y = Reshape (x, shape)
        n = Size (x)
        double = Mul (n, n)
        d1 = Unsqueeze (double, start)
        d = ConstantOfShape (d1)
    }"""
    found = assert_facts_hold(parse(text), [{"batch": 2, "seq": 3}])
    assert found["y"] == ("batch", "seq", 2, 4)
    assert found["d"] == ("64*batch*batch*seq*seq",)


def test_products_and_sums_of_shape_values_through_int32() -> None:
    # TensorFlow's Tensordot (a Keras Dense layer on a 4-D input) as tf2onnx writes it: the
    # leading dims' product in int32, then back to int64 for the Reshape
    text = """<ir_version: 8, opset_import: ["" : 15]>
    g (float[batch, 8, 8, 16] x) => (float[?, 16] y, float[?] z) {
        lead = Constant <value = int64[3] {0, 1, 2}> ()
        last = Constant <value = int64[1] {3}> ()
        s = Shape (x)
        s32 = Cast <to = 6> (s)
        a = Gather <axis = 0> (s32, lead)
        b = Gather <axis = 0> (s32, last)
        pa = ReduceProd <axes = [0], keepdims = 1> (a)
        pb = ReduceProd <axes = [0], keepdims = 0> (b)
        zero = Constant <value = int64[1] {0}> ()
        pb1 = Unsqueeze (pb, zero)
        shape32 = Concat <axis = 0> (pa, pb1)
        shape = Cast <to = 7> (shape32)
        y = Reshape (x, shape)
        total = ReduceSum <keepdims = 1> (s)
        z = ConstantOfShape (total)
    }"""
    found = assert_facts_hold(parse(text), [{"batch": 2}, {"batch": 3}])
    assert found["y"] == ("64*batch", 16)
    assert found["z"] == ("batch + 32",)


def test_slice_of_a_longer_buffer_broadcasts_to_the_sequence() -> None:
    # position_ids[:, :seq] of a [1, 128] buffer is min(seq, 128) long; added to a
    # [batch, seq] tensor it can only be seq (or the node fails), so seq <= 128 on every run
    # and the cut is seq long.
    text = """<ir_version: 8, opset_import: ["" : 17]>
    g (float[batch, seq] x) => (float[batch, seq] y) {
        buffer_shape = Constant <value = int64[2] {1, 128}> ()
        buffer = ConstantOfShape <value = float[1] {0.5}> (buffer_shape)
        zero = Constant <value = int64[1] {0}> ()
        one = Constant <value = int64[1] {1}> ()
        two = Constant <value = int64[1] {2}> ()
        s = Shape (x)
        length = Slice (s, one, two)
        p = Slice (buffer, zero, length, one)
        y = Add (x, p)
    }"""
    found = assert_facts_hold(parse(text), [{"batch": 2, "seq": 5}, {"batch": 1, "seq": 128}])
    assert found["p"] == (1, "seq")
    assert found["y"] == ("batch", "seq")


def test_causal_mask_cut_from_a_fixed_buffer_keeps_the_query_rows() -> None:
    # GPT-2's mask[:, :, total - seq : total, :total] of a [1, 1, 32, 32] buffer: its rows are
    # min(total, 32) - min(past, 32); against the scores [batch, heads, seq, total] the
    # columns run only where total <= 32, so the rows are seq (the cut as well).
    text = """<ir_version: 8, opset_import: ["" : 17]>
    g (float[batch, 4, seq, 16] q, float[batch, 4, past, 16] past_k, float[batch, 4, seq, 16] k)
      => (float[batch, 4, seq, ?] y) {
        buffer_shape = Constant <value = int64[4] {1, 1, 32, 32}> ()
        buffer = ConstantOfShape <value = bool[1] {1}> (buffer_shape)
        zero = Constant <value = int64[1] {0}> ()
        two = Constant <value = int64[1] {2}> ()
        three = Constant <value = int64[1] {3}> ()
        big = Constant <value = float {-10000.0}> ()
        keys = Concat <axis = 2> (past_k, k)
        kt = Transpose <perm = [0, 1, 3, 2]> (keys)
        scores = MatMul (q, kt)
        q_shape = Shape (q)
        seq_len = Slice (q_shape, two, three)
        k_shape = Shape (keys)
        total = Slice (k_shape, two, three)
        start = Sub (total, seq_len)
        rows = Slice (buffer, start, total, two)
        mask = Slice (rows, zero, total, three)
        y = Where (mask, scores, big)
    }"""
    sizes = [{"batch": 2, "seq": 3, "past": 4}, {"batch": 1, "seq": 1, "past": 31}]
    found = assert_facts_hold(parse(text), sizes)
    assert found["rows"] == (1, 1, "seq", 32)
    assert found["y"] == ("batch", 4, "seq", "past + seq")


def test_where_equal_minus_one_pattern_of_torchscript_expand() -> None:
    # x.expand(batch, -1, -1): the exporter replaces -1 by 1 with Where(Equal(shape, -1), ...)
    text = """<ir_version: 8, opset_import: ["" : 17]>
    g (float[batch, 3, 8] x, float[1, 1, 8] c) => (float[batch, 1, 8] y) {
        i0 = Constant <value = int64 {0}> ()
        axis0 = Constant <value = int64[1] {0}> ()
        minus = Constant <value = int64[2] {-1, -1}> ()
        three = Constant <value = int64[1] {3}> ()
        neg = Constant <value = int64 {-1}> ()
        s = Shape (x)
        b = Gather <axis = 0> (s, i0)
        b1 = Unsqueeze (b, axis0)
        shape = Concat <axis = 0> (b1, minus)
        ones = ConstantOfShape <value = int64[1] {1}> (three)
        is_minus = Equal (shape, neg)
        fixed = Where (is_minus, ones, shape)
        y = Expand (c, fixed)
    }"""
    found = assert_facts_hold(parse(text), [{"batch": 4}, {"batch": 1}])
    assert found["y"] == ("batch", 1, 8)


# -- broadcasting -----------------------------------------------------------------------------

BROADCAST = """<ir_version: 8, opset_import: ["" : 17]>
g (float[A, 3] a, float[B, 3] b, float[A, 3] a2, float[1, 3] one, float[5, 3] five)
  => (float[?, 3] ab, float[?, 3] a_one, float[?, 3] a_a2) {
    ab = Add (a, b)
    a_one = Add (a, one)
    a_a2 = Add (a, a2)
}"""


def test_broadcasting_two_different_symbols_gives_neither() -> None:
    # A = 4, B = 1 gives 4 = A; A = 1, B = 4 gives 4 = B: the fact may be neither.
    proto = parse(BROADCAST.replace(", float[5, 3] five", ""))
    found = assert_facts_hold(proto, [{"A": 4, "B": 4}, {"A": 4, "B": 1}, {"A": 1, "B": 4}])
    assert found["ab"] is not None
    assert found["ab"][0] not in ("A", "B")
    assert found["a_one"] == ("A", 3)
    assert found["a_a2"] == ("A", 3)


def test_broadcasting_a_number_against_a_symbol_gives_the_number() -> None:
    text = BROADCAST.replace("float[?, 3] a_a2)", "float[?, 3] a_a2, float[?, 3] a_five)")
    text = text.replace("a_a2 = Add (a, a2)", "a_a2 = Add (a, a2)\n    a_five = Add (a, five)")
    found = facts(inferred(parse(text)))
    assert found["a_five"] == (5, 3)


def test_two_symbols_are_never_merged_through_a_chain() -> None:
    text = """<ir_version: 8, opset_import: ["" : 17]>
    g (float[A] a, float[B] b) => (float[?] y, float[?] z) {
        y = Add (a, b)
        z = Mul (y, a)
    }"""
    found = assert_facts_hold(parse(text), [{"A": 3, "B": 3}, {"A": 1, "B": 3}, {"A": 3, "B": 1}])
    assert found["y"] is not None
    assert found["z"] is not None
    assert found["y"][0] not in ("A", "B")
    assert found["z"][0] not in ("A", "B")


# -- convolution and pooling ----------------------------------------------------------------

CONV = """<ir_version: 8, opset_import: ["" : 17]>
g (float[N, 3, H, W] x) => (float[N, 8, ?, ?] p, float[N, 8, ?, ?] q, float[N, 8, ?, ?] same,
                           float[N, 4, ?, ?] up) {
    w = Constant <value = float[8, 3, 3, 3] {<<w>>}> ()
    wt = Constant <value = float[8, 4, 2, 2] {<<wt>>}> ()
    c = Conv <strides = [2, 2], pads = [1, 1, 1, 1]> (x, w)
    p = MaxPool <kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1]> (c)
    q = MaxPool <kernel_shape = [2, 2], strides = [2, 2]> (c)
    same = Conv <auto_pad = "SAME_UPPER", strides = [3, 3]> (x, w)
    up = ConvTranspose <strides = [2, 2], pads = [0, 0, 1, 1]> (c, wt)
}"""


def test_conv_and_pooling_spatial_dims_are_expressions() -> None:
    text = CONV.replace("<<w>>", ", ".join(["0.1"] * 216)).replace(
        "<<wt>>", ", ".join(["0.1"] * 128)
    )
    sizes = [{"N": 1, "H": 7, "W": 8}, {"N": 2, "H": 8, "W": 5}, {"N": 1, "H": 9, "W": 12}]
    found = assert_facts_hold(parse(text), sizes)
    assert found["c"] == ("N", 8, "floor((H + 1)/2)", "floor((W + 1)/2)")
    assert found["p"] == (
        "N",
        8,
        "floor((floor((H + 1)/2) + 1)/2)",
        "floor((floor((W + 1)/2) + 1)/2)",
    )
    # A 2x2 window without padding over a dim that may be 1: onnxruntime divides the negative
    # numerator toward zero (one window), floor gives none, so the size is no fact.
    assert found["q"][:2] == ("N", 8)
    assert not any(isinstance(d, str) and "floor" in d for d in found["q"])
    assert found["same"] == ("N", 8, "floor((H + 2)/3)", "floor((W + 2)/3)")
    assert found["up"] == ("N", 4, "2*floor((H + 1)/2) - 1", "2*floor((W + 1)/2) - 1")


# -- facts per scope ------------------------------------------------------------------------

IF_BRANCHES = """<ir_version: 8, opset_import: ["" : 17]>
g (float[N, 3] x, bool c) => (float[?] y, float[N, 3] r) {
    zero = Constant <value = int64[1] {0}> ()
    minus = Constant <value = int64[1] {-1}> ()
    r = Relu (x)
    y = If (c) <
        then_branch = then_graph () => (float[?] z) {
            q = Flatten <axis = 0> (x)
            z = Squeeze (q, zero)
        },
        else_branch = else_graph () => (float[?] z) {
            q = Transpose (x)
            z = Reshape (q, minus)
        }
    >
}"""


def _subgraph(model: ir.Model, op_type: str, attr: str, index: int = 0) -> ir.Graph:
    node = [n for n in model.graph if n.op_type == op_type][index]
    graph = node.attributes[attr].value
    assert isinstance(graph, ir.Graph)
    return graph


def test_two_if_branches_keep_their_own_q() -> None:
    proto = parse(IF_BRANCHES)
    model = inferred(proto)
    assert facts(model, _subgraph(model, "If", "then_branch"))["q"] == (1, "3*N")
    assert facts(model, _subgraph(model, "If", "else_branch"))["q"] == (3, "N")
    assert facts(model, _subgraph(model, "If", "else_branch"))["z"] == ("3*N",)
    assert facts(model)["y"] == ("3*N",)
    for flag in (True, False):
        feeds = {"x": np.ones((4, 3), np.float32), "c": np.array(flag)}
        assert session(proto).run(["y"], feeds)[0].shape == (12,)


TWO_LOOPS = """<ir_version: 8, opset_import: ["" : 17]>
g (int64 n) => (float[1] first, int64[?, 1] first_sizes, float[9] second, int64[?, 1] second_sizes) {
    small = Constant <value = float[1] {0.0}> ()
    big = Constant <value = float[9] {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0}> ()
    cond = Constant <value = bool {1}> ()
    first, first_sizes = Loop (n, cond, small) <
        body = small_body (int64 i, bool keep, float[1] carried)
            => (bool keep_out, float[1] u, int64[1] size) {
            keep_out = Identity (keep)
            one = Constant <value = float[1] {1.0}> ()
            t = Add (carried, one)
            u = Relu (t)
            size = Shape (t)
        }
    >
    second, second_sizes = Loop (n, cond, big) <
        body = big_body (int64 i, bool keep, float[9] carried)
            => (bool keep_out, float[9] u, int64[1] size) {
            keep_out = Identity (keep)
            one = Constant <value = float[1] {1.0}> ()
            t = Add (carried, one)
            u = Relu (t)
            size = Shape (t)
        }
    >
}"""


def test_two_loop_bodies_naming_a_value_t_keep_their_own_shapes() -> None:
    model = inferred(parse(TWO_LOOPS))
    assert facts(model, _subgraph(model, "Loop", "body", 0))["t"] == (1,)
    assert facts(model, _subgraph(model, "Loop", "body", 1))["t"] == (9,)
    assert facts(model)["first"] == (1,)
    assert facts(model)["second"] == (9,)


def test_a_loop_output_whose_body_changes_its_shape_has_no_dims_from_the_body() -> None:
    # The body declares its carried input [1] like the initial value, but appends to it: the
    # final value has n + 1 elements, not 1.
    proto = parse("""<ir_version: 8, opset_import: ["" : 17]>
    g (int64 n) => (float[?] grown) {
        small = Constant <value = float[1] {0.0}> ()
        cond = Constant <value = bool {1}> ()
        grown = Loop (n, cond, small) <
            body = grow (int64 i, bool keep, float[1] carried) => (bool keep_out, float[?] u) {
                keep_out = Identity (keep)
                one = Constant <value = float[1] {1.0}> ()
                u = Concat <axis = 0> (carried, one)
            }
        >
    }""")
    fact = facts(inferred(proto))["grown"]
    (computed,) = session(proto).run(None, {"n": np.array(3, np.int64)})
    assert computed.shape == (4,)
    assert fact is None or fact == (None,)


def test_range_to_a_dim_from_whole_float_constants_has_that_length() -> None:
    # The dynamo exporter writes Range(CastLike(0.0, n), n, CastLike(1.0, n)) for arange(n):
    # its length is the dim n was read from.
    proto = parse("""<ir_version: 8, opset_import: ["" : 18]>
    g (float[B, S] x) => (float[?, ?] y) <float zero = {0.0}, float one = {1.0}> {
        s = Shape <start = 1, end = 2> (x)
        n = Squeeze (s)
        a = CastLike (zero, n)
        d = CastLike (one, n)
        r = Range (a, n, d)
        f = Cast <to = 1> (r)
        y = Add (x, f)
    }""")
    found = assert_facts_hold(proto, [{"B": 2, "S": 5}, {"B": 3, "S": 1}])
    assert found["r"] == ("S",)
    assert found["y"] == ("B", "S")


def test_declared_shapes_of_computed_values_are_no_facts() -> None:
    # value_info says t is [N, M] and the output says [N, M]; both are Reshapes to a shape read
    # from an input, which onnxruntime computes as given.
    proto = parse("""<ir_version: 8, opset_import: ["" : 18]>
    g (float[N, M] x, int64[2] s) => (float[N, M] y) <float[N, M] t> {
        t = Reshape (x, s)
        y = Relu (t)
    }""")
    model = inferred(proto)
    found = facts(model)
    for name in ("t", "y"):  # two dims, neither of them N or M (onnx names unknown ones)
        assert len(found[name] or ()) == 2
        assert not {"N", "M"} & set(found[name] or ())
    (computed,) = session(proto).run(
        None, {"x": np.zeros((2, 3), np.float32), "s": np.array([3, 2])}
    )
    assert computed.shape == (3, 2)
    lowered = ir.to_onnx(model)
    assert lowered.graph.output[0].type == proto.graph.output[0].type
    assert lowered.graph.value_info[0].type == proto.graph.value_info[0].type


def test_value_info_of_an_initializer_keeps_its_data_readable() -> None:
    # dynamo exports list initializers in value_info too; their declared shape stays, so that
    # onnx's inference reads the Slice's bounds as the tensors they are.
    proto = parse("""<ir_version: 8, opset_import: ["" : 18]>
    g (float[B, 4, S, 16] x) => (float[?, ?, ?, ?] y)
        <int64[1] a = {0}, int64[1] b = {8}, int64[1] c = {3}, int64[1] d = {1},
         int64[1] a, int64[1] b, int64[1] c, int64[1] d, float[B, 4, S, 16] t> {
        t = Relu (x)
        y = Slice (t, a, b, c, d)
    }""")
    found = assert_facts_hold(proto, [{"B": 2, "S": 3}])
    assert found["y"] == ("B", 4, "S", 8)


def test_a_piece_of_a_split_to_sequence_has_its_size_on_the_axis() -> None:
    # The dynamo exporter splits the fused QKV projection with SplitToSequence; the sequence's
    # element type says nothing of one piece, the piece at a constant position does.
    proto = parse("""<ir_version: 8, opset_import: ["" : 18]>
    g (float[B, S, 12] x) => (float[?, ?, ?] q, float[?, ?, ?] k, float[?, ?] r)
        <int64 one = {1}, int64 last = {-1}, int64 five = {5}, int64[3] sizes = {2, 4, 6}> {
        parts = SplitToSequence <axis = 2> (x, sizes)
        q = SequenceAt (parts, one)
        even = SplitToSequence <axis = 2> (x, five)
        k = SequenceAt (even, last)
        rows = SplitToSequence <axis = 1, keepdims = 0> (x)
        r = SequenceAt (rows, one)
    }""")
    found = facts(inferred(proto))
    assert found["q"] == ("B", "S", 4)
    assert found["k"] == ("B", "S", 2)
    assert found["r"] == ("B", 12)
    q, k, r = session(proto).run(None, {"x": np.zeros((2, 3, 12), np.float32)})
    assert (q.shape, k.shape, r.shape) == ((2, 3, 4), (2, 3, 2), (2, 12))


def test_a_cut_that_a_main_graph_broadcast_needs_whole_is_whole_everywhere() -> None:
    # position_ids[:, :S] of a buffer of 8 rows is min(S, 8) rows; added to a tensor of S
    # rows it must be S rows (or the Add fails), so every fact takes S <= 8.
    proto = parse("""<ir_version: 8, opset_import: ["" : 18]>
    g (float[B, S, 4] x) => (float[?, ?, ?] y, float[?, ?, ?] cut)
        <float[1, 8, 4] table = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,
                                 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31},
         int64[1] zero = {0}, int64[1] one = {1}> {
        s = Shape <start = 1, end = 2> (x)
        cut = Slice (table, zero, s, one)
        y = Add (x, cut)
    }""")
    found = assert_facts_hold(proto, [{"B": 2, "S": 3}, {"B": 1, "S": 8}, {"B": 2, "S": 1}])
    assert found["cut"] == (1, "S", 4)
    assert found["y"] == ("B", "S", 4)


def test_rewriting_loop_bodies_keeps_their_outputs() -> None:
    import rewriter

    proto = parse(TWO_LOOPS)
    result = rewriter.rewrite(proto)
    feeds = {"n": np.array(3, np.int64)}
    before = session(proto).run(None, feeds)
    after = session(result.proto).run(None, feeds)
    for a, b in zip(before, after, strict=True):
        np.testing.assert_array_equal(a, b)


FUNCTION_CALL = """<ir_version: 8, opset_import: ["" : 17, "local" : 1]>
g (float[3] a, float[1] small) => (float[3] y, float[3] t) {
    t = Relu (a)
    y = local.F (small)
}
<domain: "local", opset_import: ["" : 17]>
F (a) => (b) {
    zeros = Constant <value = float[3] {-0.0, -0.0, -0.0}> ()
    t = Add (a, zeros)
    b = Identity (t)
}"""


def test_a_function_body_value_gets_its_call_facts_not_a_main_graph_namesake() -> None:
    model = inferred(parse(FUNCTION_CALL))
    body = next(iter(model.functions.values())).graph
    assert facts(model)["a"] == (3,)
    # the body's `a` is the call's `small`, float[1], not the main graph's `a`
    assert facts(model, body)["a"] == (1,)
    assert facts(model, body)["t"] == (3,)  # [1] + the constant [3]


def test_rewriting_a_function_body_keeps_its_output_shape() -> None:
    import rewriter

    proto = parse(FUNCTION_CALL)
    result = rewriter.rewrite(proto)
    feeds = {"a": np.ones(3, np.float32), "small": np.ones(1, np.float32)}
    before = session(proto).run(None, feeds)
    after = session(result.proto).run(None, feeds)
    assert [o.shape for o in after] == [o.shape for o in before] == [(3,), (3,)]


def test_sequence_elements_do_not_share_a_dim() -> None:
    text = """<ir_version: 8, opset_import: ["" : 18]>
    g (float[N, 4] x) => (float[N, 3] y) {
        k = Constant <value = int64[2] {1, 3}> ()
        i0 = Constant <value = int64 {0}> ()
        i1 = Constant <value = int64 {1}> ()
        s = SplitToSequence <axis = 1> (x, k)
        a = SequenceAt (s, i0)
        b = SequenceAt (s, i1)
        y = Mul (b, a)
    }"""
    found = facts(inferred(parse(text)))
    assert found["a"] is not None
    assert found["b"] is not None
    assert found["a"][1] is None or found["a"][1] == 1
    assert found["b"][1] is None or found["b"][1] == 3


# -- output symbols, fallbacks, isolation ---------------------------------------------------


def test_a_declared_output_symbol_names_the_dim_that_computes_it() -> None:
    text = """<ir_version: 8, opset_import: ["" : 17]>
    g (float[N, 2, L] x) => (float[N, 2, L_out] y) {
        w = Constant <value = float[2, 2, 3] {0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1}> ()
        c = Conv <strides = [2]> (x, w)
        y = Relu (c)
    }"""
    found = facts(inferred(parse(text)))
    assert found["c"] == ("N", 2, "L_out")


def test_a_declared_output_symbol_shared_with_an_input_is_no_fact() -> None:
    # The output claims L, which it is not: the facts keep what the graph computes.
    text = """<ir_version: 8, opset_import: ["" : 17]>
    g (float[N, 2, L] x) => (float[N, 2, L] y) {
        w = Constant <value = float[2, 2, 3] {0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1}> ()
        c = Conv <strides = [2]> (x, w)
        y = Relu (c)
    }"""
    found = facts(inferred(parse(text)))
    assert found["c"] == ("N", 2, "floor((L + 1)/2) - 1")  # floor((L - 1)/2)


def test_when_onnx_inference_fails_nodes_are_typed_one_by_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_shape_inference, "_onnx_inference", lambda proto: None)
    model = inferred(parse(ATTENTION_CHAIN))
    found = facts(model)
    assert found["scores"] == ("batch", 4, "seq", "seq")
    softmax_free = {v.name: ir.fact_type(v) for v in model.graph.values()}
    assert isinstance(softmax_free["scores"], ir.TensorType)
    assert softmax_free["scores"].dtype == ir.DataType.FLOAT


def test_inference_gives_the_same_facts_twice() -> None:
    first = facts(inferred(parse(ATTENTION_CHAIN)))
    second = facts(inferred(parse(ATTENTION_CHAIN)))
    assert first == second


def test_shape_inference_does_not_import_onnxruntime() -> None:
    code = (
        "import sys, onnx.parser, ir\n"
        f"model = ir.from_onnx(onnx.parser.parse_model({ATTENTION_CHAIN!r}))\n"
        "ir.infer_types(model)\n"
        "assert 'onnxruntime' not in sys.modules, 'onnxruntime was imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_a_graph_output_declared_with_another_rank_than_computed_is_no_fact() -> None:
    # An exporter's stale output type (ddddocr's OCR model): the Reshape gives 3 dims, the
    # output says 2; onnxruntime returns 3 dims and only warns.
    proto = onnx.parser.parse_model("""
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[N, 6] x) => (float[1, N] y) {
        s = Shape (x)
        z = Constant <value = int64[1] {0}> ()
        n = Gather (s, z)
        k = Constant <value = int64[2] {2, -1}> ()
        t = Concat <axis = 0> (n, k)
        y = Reshape (x, t)
    }
    """)
    model = ir.from_onnx(proto)
    ir.infer_types(model)
    fact = ir.fact_type(model.graph.outputs[0])
    (computed,) = session(proto).run(None, {"x": np.zeros((4, 6), np.float32)})
    assert computed.shape == (4, 2, 3)
    assert isinstance(fact, ir.TensorType)
    assert fact.shape is not None
    assert len(fact.shape) == 3
    for dim, size in zip(fact.shape, computed.shape, strict=True):
        assert dim in (None, "N", size)


def test_a_graph_output_declared_with_another_rank_is_no_fact_where_onnx_infers_none() -> None:
    # onnxruntime's quantizer writes value_info with an element type and no shape for the
    # output too (ddddocr's int8 OCR model): onnx's inference then gives it no shape, the walk
    # finds rank 3 from the computed shape, the output declaration says 2.
    proto = onnx.parser.parse_model("""
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[N, 6] x) => (float[1, N] y) {
        s = Shape (x)
        z = Constant <value = int64[1] {0}> ()
        n = Gather (s, z)
        k = Constant <value = int64[2] {2, -1}> ()
        t = Concat <axis = 0> (n, k)
        y = Reshape (x, t)
    }
    """)
    proto.graph.value_info.append(
        onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)
    )
    model = ir.from_onnx(proto)
    ir.infer_types(model)
    fact = ir.fact_type(model.graph.outputs[0])
    (computed,) = session(proto).run(None, {"x": np.zeros((4, 6), np.float32)})
    assert computed.shape == (4, 2, 3)
    assert isinstance(fact, ir.TensorType)
    assert fact.shape is not None
    assert len(fact.shape) == 3
    for dim, size in zip(fact.shape, computed.shape, strict=True):
        assert dim in (None, "N", size)


def test_a_graph_output_declared_without_a_shape_gets_the_shape_onnx_infers() -> None:
    # A static model takes onnx's types as they are; an output declared `float` with no shape
    # (as onnxscript's IR writes one) is typed too, so a rule can read its dims.
    proto = onnx.helper.make_model(
        onnx.helper.make_graph(
            [onnx.helper.make_node("Reshape", ["x", "s"], ["y"])],
            "g",
            [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [3, 4, 8])],
            [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
            [onnx.numpy_helper.from_array(np.array([0, 2, 2, -1], np.int64), "s")],
        ),
        opset_imports=[onnx.helper.make_opsetid("", 17)],
    )
    model = inferred(proto)
    fact = ir.fact_type(model.graph.outputs[0])
    (computed,) = session(proto).run(None, {"x": np.zeros((3, 4, 8), np.float32)})
    assert isinstance(fact, ir.TensorType)
    assert fact.shape == computed.shape == (3, 2, 2, 8)


def test_a_static_graph_output_declared_with_another_rank_is_no_fact() -> None:
    # onnx types the whole model and keeps the output's stale declared type (a scalar for a
    # 4-D Reshape); onnxruntime returns 4 dims and only warns
    proto = onnx.parser.parse_model("""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[3, 4, 8] x) => (float y) <int64[4] s = {0, 2, 2, -1}> {
        y = Reshape (x, s)
    }
    """)
    model = inferred(proto)
    fact = ir.fact_type(model.graph.outputs[0])
    (computed,) = session(proto).run(None, {"x": np.zeros((3, 4, 8), np.float32)})
    assert isinstance(fact, ir.TensorType)
    assert fact.shape == computed.shape == (3, 2, 2, 8)
