"""Input generation: dims, index ranges found in the IR, masks, user ranges, special values."""

from __future__ import annotations

import math
import os

import numpy as np
import onnx
import pytest
from hypothesis import given, settings

import ir
from rewriter.verification import InputOptions, VerifyError, VerifyOptions, check_equivalence
from rewriter.verification._inputs import analyze_inputs, example_strategy, materialize
from tests.rewriter.verification import _models as models

MODELS = os.path.join(os.path.dirname(__file__), "..", "..", "models")


def specs_of(model: onnx.ModelProto, **ranges):
    lifted = ir.from_onnx(model)
    return analyze_inputs(lifted, lifted, ranges or None)


def draw_feeds(specs, *, special_values=False):
    """A strategy of input dicts (examples expanded to arrays)."""
    strategy = example_strategy(specs, special_values=special_values)
    return strategy.map(lambda ex: materialize(ex, specs))


# ---------------------------------------------------------------------------------------------
# Dims


def test_symbolic_dims_are_shared_across_inputs():
    model = models.parse(
        "(float[N, K] a, float[K, M] b, float[N, M] c) => (float[N, M] y)",
        "p = MatMul(a, b)\n y = Add(p, c)",
    )
    specs = specs_of(model)

    @given(draw_feeds(specs))
    def shapes_agree(feeds):
        n, k = feeds["a"].shape
        assert feeds["b"].shape[0] == k
        assert feeds["c"].shape == (n, feeds["b"].shape[1])
        assert all(1 <= d <= 6 for array in feeds.values() for d in array.shape)

    shapes_agree()


def test_consistent_dims_mean_no_rejected_examples():
    model = models.parse(
        "(float[N, K] a, float[K, M] b) => (float[N, M] y)",
        "y = MatMul(a, b)",
    )
    result = check_equivalence(model, model, VerifyOptions(inputs=InputOptions(examples=30)))
    assert result.ok
    assert result.examples_rejected == 0
    assert result.examples_run == 30


def test_static_dims_are_kept():
    specs = specs_of(models.transpose("0, 2, 1"))

    @given(draw_feeds(specs))
    def static(feeds):
        assert feeds["x"].shape == (2, 3, 4)

    static()


def test_unknown_dims_are_sampled_and_shared_by_axis():
    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [None, 3])
    z = onnx.helper.make_tensor_value_info("z", onnx.TensorProto.FLOAT, [None, 3])
    y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)
    node = onnx.helper.make_node("Add", ["x", "z"], ["y"])
    model = onnx.helper.make_model(
        onnx.helper.make_graph([node], "g", [x, z], [y]),
        opset_imports=[onnx.helper.make_opsetid("", 17)],
    )
    specs = specs_of(model)
    seen = set()

    @settings(max_examples=30)
    @given(draw_feeds(specs))
    def sampled(feeds):
        assert feeds["x"].shape == feeds["z"].shape
        seen.add(feeds["x"].shape[0])

    sampled()
    assert len(seen) > 1


def test_unknown_rank_gets_a_small_shape():
    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, None)
    y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)
    model = onnx.helper.make_model(
        onnx.helper.make_graph([onnx.helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y]),
        opset_imports=[onnx.helper.make_opsetid("", 17)],
    )
    assert check_equivalence(model, model, VerifyOptions(inputs=InputOptions(examples=10))).ok


# ---------------------------------------------------------------------------------------------
# Index inputs


@pytest.mark.parametrize("offset", [0, 3, -2])
def test_gather_indices_stay_in_range_through_add_and_cast(offset):
    vocab = 7
    specs = specs_of(models.embedding(offset=offset, vocab=vocab))
    ids = next(s for s in specs if s.name == "ids")
    assert ids.role == "index"

    @settings(max_examples=60)
    @given(draw_feeds(specs))
    def in_range(feeds):
        moved = feeds["ids"] + offset
        assert moved.min() >= 0
        assert moved.max() < vocab

    in_range()


def test_embedding_model_never_fails_on_an_out_of_range_index():
    model = models.embedding(offset=3, vocab=5)
    result = check_equivalence(model, model, VerifyOptions(inputs=InputOptions(examples=40)))
    assert result.ok
    assert result.examples_rejected == 0


def test_sub_and_mul_by_constants_map_the_range_back():
    model = models.parse(
        "(int64[S] ids) => (float[S, 2] y)",
        """
        c = Constant<value = int64 {10}>()
        flipped = Sub(c, ids)
        k = Constant<value = int64 {2}>()
        doubled = Mul(flipped, k)
        y = Gather(table, doubled)
        """,
        check=False,
    )
    model = models.with_initializers(model, table=np.zeros((9, 2), np.float32))
    specs = specs_of(model)

    @settings(max_examples=60)
    @given(draw_feeds(specs))
    def in_range(feeds):
        index = (10 - feeds["ids"]) * 2
        assert index.min() >= 0
        assert index.max() < 9

    in_range()


def test_gather_over_a_symbolic_axis_uses_the_sampled_size():
    model = models.parse(
        "(float[V, 3] table, int64[S] ids) => (float[S, 3] y)",
        "y = Gather<axis = 0>(table, ids)",
    )
    specs = specs_of(model)

    @settings(max_examples=60)
    @given(draw_feeds(specs))
    def in_range(feeds):
        assert feeds["ids"].max() < feeds["table"].shape[0]
        assert feeds["ids"].min() >= 0

    in_range()
    assert (
        check_equivalence(
            model, model, VerifyOptions(inputs=InputOptions(examples=30))
        ).examples_rejected
        == 0
    )


def test_gather_axis_attribute_is_respected():
    model = models.parse(
        "(int64[S] ids) => (float[4, S] y)",
        "y = Gather<axis = 1>(table, ids)",
        check=False,
    )
    model = models.with_initializers(model, table=np.zeros((4, 3), np.float32))
    specs = specs_of(model)

    @given(draw_feeds(specs))
    def in_range(feeds):
        assert feeds["ids"].min() >= 0
        assert feeds["ids"].max() < 3

    in_range()


def test_mask_inputs_hold_zero_and_one():
    specs = specs_of(models.embedding())
    mask = next(s for s in specs if s.name == "attention")
    assert mask.role == "mask"
    seen = set()

    @settings(max_examples=40)
    @given(draw_feeds(specs))
    def binary(feeds):
        values = set(np.unique(feeds["attention"]).tolist())
        assert values <= {0, 1}
        seen.update(values)

    binary()
    assert seen == {0, 1}


def test_plain_integer_inputs_get_small_signed_values():
    model = models.parse("(int32[N] a, int32[N] b) => (int32[N] y)", "y = Add(a, b)")
    specs = specs_of(model)
    assert {s.role for s in specs} == {"int"}
    seen = set()

    @settings(max_examples=40)
    @given(draw_feeds(specs))
    def small(feeds):
        assert np.abs(feeds["a"]).max() <= 8
        seen.update(np.unique(feeds["a"]).tolist())

    small()
    assert min(seen) < 0 < max(seen)


@pytest.mark.skipif(
    not os.path.exists(os.path.join(MODELS, "bert_ts14.onnx")), reason="no exported BERT"
)
def test_bert_inputs_are_recognized_as_ids_and_mask():
    model = ir.load(os.path.join(MODELS, "bert_ts14.onnx"))
    specs = {s.name: s for s in analyze_inputs(model, model)}
    assert specs["input_ids"].role == "index"
    assert specs["input_ids"].index_chains[0].size == 512
    assert specs["attention_mask"].role == "mask"


# ---------------------------------------------------------------------------------------------
# User ranges and special values


def test_user_range_overrides_floats_and_ints():
    model = models.parse(
        "(float[N] x, int64[N] k) => (float[N] y)",
        "kf = Cast<to = 1>(k)\n y = Add(x, kf)",
    )
    specs = specs_of(model, x=(0.5, 2.0), k=(-3, 3))

    @settings(max_examples=60)
    @given(draw_feeds(specs))
    def inside(feeds):
        assert feeds["x"].min() >= 0.5
        assert feeds["x"].max() <= 2.0
        assert feeds["k"].min() >= -3
        assert feeds["k"].max() <= 3

    inside()


def test_user_range_for_an_unknown_input_is_an_error():
    with pytest.raises(VerifyError, match=r"unknown input.*'nope'.*'x'"):
        specs_of(models.unary("Relu"), nope=(0, 1))


@pytest.mark.parametrize("bounds", [(2.0, 1.0), (0.2, 0.8), (math.inf, 1.0)])
def test_empty_ranges_are_errors(bounds):
    model = models.parse("(int64[N] k) => (int64[N] y)", "y = Identity(k)")
    with pytest.raises(VerifyError):
        specs_of(model, k=bounds)


def test_float_inputs_include_special_elements_but_no_nan_without_special_values():
    specs = specs_of(models.unary("Relu"))
    flags = {"negative zero": False, "subnormal": False, "large": False, "negative": False}

    @settings(max_examples=200)
    @given(draw_feeds(specs))
    def elements(feeds):
        x = feeds["x"]
        assert np.all(np.isfinite(x))
        flags["negative zero"] |= bool(np.any((x == 0) & np.signbit(x)))
        flags["subnormal"] |= bool(np.any((x != 0) & (np.abs(x) < np.finfo(np.float32).tiny)))
        flags["large"] |= bool(np.any(np.abs(x) >= 1e4))
        flags["negative"] |= bool(np.any(x < 0))

    elements()
    assert all(flags.values()), flags


def test_special_values_add_nan_infinities_and_extremes_in_separate_examples():
    specs = specs_of(models.unary("Relu"))
    found = {"nan": 0, "inf": 0, "max": 0, "finite": 0, "max and nan": 0}
    top = np.finfo(np.float32).max

    @settings(max_examples=300)
    @given(draw_feeds(specs, special_values=True))
    def elements(feeds):
        x = feeds["x"]
        nan, inf, big = np.any(np.isnan(x)), np.any(np.isinf(x)), np.any(np.abs(x) == top)
        found["nan"] += int(nan)
        found["inf"] += int(inf)
        found["max"] += int(big)
        found["finite"] += int(not (nan or inf or big))
        found["max and nan"] += int(big and (nan or inf))

    elements()
    assert found["nan"], found
    assert found["inf"], found
    assert found["max"], found
    assert found["finite"] > found["nan"] + found["max"], found
    assert found["max and nan"] == 0, found


def test_special_examples_are_never_the_first_and_shrink_away():
    from hypothesis import find

    specs = specs_of(models.unary("Relu"))
    strategy = example_strategy(specs, special_values=True)
    assert find(strategy, lambda example: True).special == ""
    smallest = find(strategy, lambda example: bool(example.special))
    assert smallest.special_draw == max(1, smallest.special_draw)


def test_integer_inputs_draw_their_extremes_unless_the_model_divides():
    plain = models.parse("(int32[N] x) => (int32[N] y)", "y = Neg(x)")
    dividing = models.parse(
        "(int32[N] x) => (int32[N] y)", "two = Constant<value_int = 2>()\n y = Div(x, two)"
    )
    for model, expected in ((plain, True), (dividing, False)):
        assert _draws_int_max(specs_of(model)) is expected


def _draws_int_max(specs) -> bool:
    seen = []

    @settings(max_examples=200)
    @given(draw_feeds(specs, special_values=True))
    def elements(feeds):
        seen.append(bool(np.any(feeds["x"] == np.iinfo(np.int32).max)))

    elements()
    return any(seen)


@pytest.mark.parametrize(
    "dtype", ["float16", "bfloat16", "double", "bool", "uint8", "int8", "string"]
)
def test_other_dtypes_run(dtype):
    model = models.parse(f"({dtype}[N, 3] x) => ({dtype}[N, 3] y)", "y = Identity(x)")
    result = check_equivalence(model, model, VerifyOptions(inputs=InputOptions(examples=10)))
    assert result.ok, result.render_table()


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "double"])
def test_relu_to_abs_is_caught_in_every_float_type(dtype):
    relu = models.parse(f"({dtype}[N, 3] x) => ({dtype}[N, 3] y)", "y = Relu(x)")
    absolute = models.parse(f"({dtype}[N, 3] x) => ({dtype}[N, 3] y)", "y = Abs(x)")
    result = check_equivalence(
        relu, absolute, VerifyOptions(inputs=InputOptions(examples=10), save_counterexample=False)
    )
    assert not result.ok
    assert result.counterexample["x"].dtype.name == {"double": "float64"}.get(dtype, dtype)


def test_small_variance_rows_are_generated():
    """A row with variance near 0.01 (offset in [-0.5, 0.5]) exposes normalization epsilons."""
    specs = specs_of(models.layernorm_decomposed())
    found = []

    @settings(max_examples=100)
    @given(draw_feeds(specs))
    def rows(feeds):
        x = feeds["x"].astype(np.float64)
        found.append(float(x.var(axis=-1).min()))

    rows()
    assert min(found) < 0.02


def test_expansion_is_deterministic():
    specs = specs_of(models.embedding())

    @given(example_strategy(specs))
    def same_arrays(example):
        first = materialize(example, specs)
        second = materialize(example, specs)
        for name in first:
            np.testing.assert_array_equal(first[name], second[name])

    same_arrays()
