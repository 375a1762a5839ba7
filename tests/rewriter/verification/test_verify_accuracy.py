"""The accuracy criterion: float outputs judged against a float64 evaluation of the original."""

from __future__ import annotations

import math

import numpy as np
import onnx
import onnx.numpy_helper
import onnx.parser
import pytest

import ir
from rewriter import AdvisedError
from rewriter.verification import (
    Criterion,
    InputOptions,
    RuntimeOptions,
    VerifyError,
    VerifyOptions,
    accuracy_floor,
    check_equivalence,
    find_first_bad,
    oracle_model,
    run_model,
)
from rewriter.verification._compare import compare_accuracy, compare_close
from tests.rewriter.verification import _models as models

ACCURACY = Criterion()
EPS32 = float(np.finfo(np.float32).eps)


# ---------------------------------------------------------------------------------------------
# The criterion on arrays


def test_a_rounding_only_change_passes_against_the_oracle():
    oracle = np.linspace(-3, 3, 64)
    original = oracle.astype(np.float32)
    # One ULP off everywhere: as far from float64 as float32 can be, a few times over.
    rewritten = np.nextafter(original, np.float32(np.inf))
    verdict = compare_accuracy(oracle, original, rewritten, ACCURACY)
    assert verdict.ok, verdict.reason
    assert verdict.basis == "oracle"
    assert verdict.ratio is not None
    assert verdict.ratio <= ACCURACY.factor


def test_an_error_of_a_tenth_of_a_percent_fails_and_says_how_much_less_accurate():
    oracle = np.linspace(-3, 3, 64)
    original = oracle.astype(np.float32)
    rewritten = (original * np.float32(1.001)).astype(np.float32)
    verdict = compare_accuracy(oracle, original, rewritten, ACCURACY)
    assert not verdict.ok
    assert "less accurate than allowed" in verdict.reason
    assert verdict.ratio is not None
    assert verdict.ratio > 100


def test_the_ulp_floor_credits_an_exact_original_with_a_few_roundings():
    # The original is exact (error 0): a rewrite that rounds once must still pass.
    oracle = np.array([0.1, 0.2, 0.3], dtype=np.float32).astype(np.float64)
    original = oracle.astype(np.float32)
    rewritten = np.nextafter(original, np.float32(0))
    verdict = compare_accuracy(oracle, original, rewritten, ACCURACY)
    assert verdict.ok, verdict.reason
    assert verdict.original_err == 0.0
    assert verdict.floor == pytest.approx(4 * EPS32)


def test_exact_zero_regions_are_measured_against_the_output_scale():
    oracle = np.array([0.0, 0.0, 1.0, -1.0])
    original = oracle.astype(np.float32)
    rewritten = np.array([1e-8, -1e-8, 1.0, -1.0], dtype=np.float32)
    verdict = compare_accuracy(oracle, original, rewritten, ACCURACY)
    assert verdict.ok, verdict.reason
    assert math.isfinite(verdict.rewritten_err or 0.0)


def test_a_more_accurate_rewrite_passes_however_far_from_the_original():
    # x + 1e4 - 1e4 loses most digits of x in float32; the rewrite x keeps them.
    x = np.random.default_rng(0).uniform(-1, 1, 33).astype(np.float32).astype(np.float64)
    original = ((x.astype(np.float32) + np.float32(1e4)) - np.float32(1e4)).astype(np.float32)
    rewritten = x.astype(np.float32)
    verdict = compare_accuracy(x, original, rewritten, ACCURACY)
    assert verdict.ok, verdict.reason
    assert (verdict.original_err or 0) > 1e-5


def test_nan_positions_are_compared_where_the_original_and_the_oracle_are_nan():
    oracle = np.array([np.nan, 1.0, 2.0])
    original = oracle.astype(np.float32)
    dropped = np.array([0.0, 1.0, 2.0], dtype=np.float32)
    assert not compare_accuracy(oracle, original, dropped, ACCURACY).ok
    kept = np.array([np.nan, 1.0, 2.0], dtype=np.float32)
    assert compare_accuracy(oracle, original, kept, ACCURACY).ok


def test_a_nan_only_the_rewrite_makes_fails():
    oracle = np.array([1.0, 2.0, 3.0])
    original = oracle.astype(np.float32)
    rewritten = np.array([1.0, np.nan, 3.0], dtype=np.float32)
    verdict = compare_accuracy(oracle, original, rewritten, ACCURACY)
    assert not verdict.ok
    assert "NaN/inf positions differ" in verdict.reason


def test_within_a_few_floors_of_the_original_needs_no_oracle():
    original = np.linspace(-3, 3, 16).astype(np.float32)
    close = compare_close(original, np.nextafter(original, np.float32(0)), ACCURACY)
    assert close is not None
    assert close.ok
    assert close.basis == "close"
    far = compare_close(original, original * np.float32(1.001), ACCURACY)
    assert far is None


def test_a_larger_factor_accepts_more():
    oracle = np.linspace(-3, 3, 64)
    original = oracle.astype(np.float32)
    rewritten = (original * np.float32(1.0001)).astype(np.float32)
    assert not compare_accuracy(oracle, original, rewritten, ACCURACY).ok
    assert compare_accuracy(oracle, original, rewritten, Criterion(factor=1e4)).ok


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"compare": "loose"}, "compare must be one of"),
        ({"factor": 0.5}, "factor must be a finite number >= 1"),
        ({"factor": math.inf}, "factor must be a finite number >= 1"),
        ({"rtol": -1.0}, "rtol must be a finite number >= 0"),
    ],
)
def test_criterion_arguments_are_checked(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Criterion(**kwargs)


def test_floor_is_four_ulps_of_the_dtype():
    assert accuracy_floor(np.dtype(np.float32)) == pytest.approx(4 * EPS32)
    assert accuracy_floor(np.dtype(np.float16)) == pytest.approx(4 * 2.0**-10)


# ---------------------------------------------------------------------------------------------
# The float64 oracle model


def _erf_gelu_conv() -> onnx.ModelProto:
    model = models.parse(
        "(float[1, 2, 5] x) => (float[1, 3, 3] y)",
        """
        c = Conv <kernel_shape = [3]> (x, W)
        e = Erf (c)
        y = Tanh (e)
        """,
        check=False,
    )
    rng = np.random.default_rng(0)
    return models.with_initializers(model, W=rng.standard_normal((3, 2, 3)).astype(np.float32))


def test_the_oracle_computes_the_original_in_float64():
    proto = _erf_gelu_conv()
    built = oracle_model(ir.from_onnx(proto))
    proto64 = ir.to_onnx(built.model)
    assert proto64.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.DOUBLE
    assert proto64.graph.output[0].type.tensor_type.elem_type == onnx.TensorProto.DOUBLE
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 2, 5))
    wide = np.asarray(run_model(proto64, {"x": x})["y"])
    narrow = np.asarray(run_model(proto, {"x": x.astype(np.float32)})["y"])
    assert wide.dtype == np.float64
    # float32 is within a few ULPs of float64's answer, and float64 is not float32's answer.
    assert np.max(np.abs(wide - narrow)) < 1e-5
    assert np.any(wide != narrow.astype(np.float64))


def test_the_oracle_leaves_the_original_model_unchanged():
    model = ir.from_onnx(_erf_gelu_conv())
    before = ir.to_onnx(model).SerializeToString()
    oracle_model(model)
    assert ir.to_onnx(model).SerializeToString() == before


def _skip_norms_around_a_matmul() -> onnx.ModelProto:
    """SkipLayerNormalization (onnxruntime's, no double kernel), a MatMul by a weight, and a
    second SkipLayerNormalization reading the first directly: onnx's inference types nothing
    after the contrib ops."""
    text = """
    <ir_version: 8, opset_import: ["" : 17, "com.microsoft" : 1]>
    g (float[2, 3, 8] x, float[2, 3, 8] s) => (float[2, 3, 8] y) {
        a = com.microsoft.SkipLayerNormalization <epsilon = 0.001> (x, s, gamma, beta)
        m = MatMul (a, w)
        y = com.microsoft.SkipLayerNormalization <epsilon = 0.001> (a, m, gamma, beta)
    }
    """
    model = onnx.parser.parse_model(text)
    rng = np.random.default_rng(0)
    for name, array in (
        ("gamma", rng.uniform(0.5, 1.5, 8)),
        ("beta", rng.uniform(-0.5, 0.5, 8)),
        ("w", rng.standard_normal((8, 8))),
    ):
        model.graph.initializer.append(onnx.numpy_helper.from_array(array.astype(np.float32), name))
    return model


def test_the_oracle_widens_what_follows_onnxruntimes_own_ops():
    """The contrib ops stay in float (cast down and back up), the MatMul runs in double."""
    proto = _skip_norms_around_a_matmul()
    built = oracle_model(ir.from_onnx(proto))
    proto64 = ir.to_onnx(built.model)
    assert any("SkipLayerNormalization` computed in its own precision" in n for n in built.notes)
    rng = np.random.default_rng(1)
    feeds = {"x": rng.standard_normal((2, 3, 8)), "s": rng.standard_normal((2, 3, 8))}
    wide = np.asarray(run_model(proto64, feeds)["y"])
    narrow = np.asarray(run_model(proto, {k: v.astype(np.float32) for k, v in feeds.items()})["y"])
    assert wide.dtype == np.float64
    assert np.max(np.abs(wide - narrow)) < 1e-4


# ---------------------------------------------------------------------------------------------
# Whole models


def _chain(order: str) -> onnx.ModelProto:
    """x * 1.1 * 1.3 (both orders of rounding): a fold of the constants rounds differently."""
    if order == "folded":
        body = "c = Constant <value = float {1.43}> ()\n y = Mul (x, c)"
    else:
        body = """
        a = Constant <value = float {1.1}> ()
        b = Constant <value = float {1.3}> ()
        t = Mul (x, a)
        y = Mul (t, b)
        """
    return models.parse("(float[N, 8] x) => (float[N, 8] y)", body)


def test_a_constant_fold_that_only_changes_rounding_passes_on_every_seed():
    for seed in range(5):
        result = check_equivalence(
            _chain("chain"),
            _chain("folded"),
            VerifyOptions(inputs=InputOptions(examples=10, seed=seed), save_counterexample=False),
        )
        assert result.ok, result.render_table()


def test_direct_comparison_stays_available():
    result = check_equivalence(
        models.unary("Identity"),
        models.times(1.001),
        VerifyOptions(
            inputs=InputOptions(examples=10, special_values=False),
            criterion=Criterion(compare="direct", rtol=1e-2, atol=1e-3),
            save_counterexample=False,
        ),
    )
    assert result.ok, result.render_table()
    assert result.compare == "direct"


def test_the_table_shows_errors_against_the_oracle_and_their_ratio():
    result = check_equivalence(
        models.unary("Identity"),
        models.times(1.001),
        VerifyOptions(inputs=InputOptions(examples=10), save_counterexample=False),
    )
    assert not result.ok
    table = result.render_table()
    for heading in ("original err", "rewritten err", "ratio"):
        assert heading in table


def test_bisection_uses_the_accuracy_criterion():
    # Step 1 folds the constants (rounding only), step 2 scales by 1.001 (a bug).
    original = _chain("chain")
    buggy = models.parse(
        "(float[N, 8] x) => (float[N, 8] y)",
        "c = Constant <value = float {1.43143}> ()\n y = Mul (x, c)",
    )
    steps = {0: original, 1: _chain("folded"), 2: buggy}
    inputs = {"x": np.linspace(-3, 3, 16, dtype=np.float32).reshape(2, 8)}
    assert find_first_bad(2, steps.__getitem__, original, inputs) == 2


# ---------------------------------------------------------------------------------------------
# Inputs the user controls


def _long_conv() -> onnx.ModelProto:
    """A Conv with a kernel of 40 over a symbolic length: sizes 1 to 6 all fail."""
    model = models.parse(
        "(float[1, 1, L] x) => (float[1, 1, M] y)",
        "y = Conv <kernel_shape = [40]> (x, W)",
        check=False,
    )
    weights = np.random.default_rng(0).standard_normal((1, 1, 40)).astype(np.float32)
    return models.with_initializers(model, W=weights)


def test_sizes_are_searched_when_the_usual_ones_fail():
    model = _long_conv()
    result = check_equivalence(
        model, model, VerifyOptions(inputs=InputOptions(examples=5), save_counterexample=False)
    )
    assert result.ok
    assert any("sizes found by search" in line and "`L` 40" in line for line in result.inputs)


def test_dim_option_fixes_a_symbolic_size():
    model = _long_conv()
    result = check_equivalence(
        model, model, VerifyOptions(inputs=InputOptions(examples=3, dims={"L": 50}))
    )
    assert result.ok
    assert any("50" in line for line in result.inputs)


def test_input_shape_option_fixes_an_input():
    model = _long_conv()
    result = check_equivalence(
        model, model, VerifyOptions(inputs=InputOptions(examples=3, shapes={"x": (1, 1, 64)}))
    )
    assert result.ok


def test_a_size_too_small_names_the_options_that_help():
    model = _long_conv()
    with pytest.raises(VerifyError, match=r"Fix the input shapes or the sizes of symbolic") as err:
        check_equivalence(
            model, model, VerifyOptions(inputs=InputOptions(examples=3, dims={"L": 5}))
        )
    assert isinstance(err.value, AdvisedError)
    assert err.value.remedies == ("shapes", "dims", "ranges", "samples")


def test_unknown_dim_and_shape_names_are_errors():
    model = _long_conv()
    with pytest.raises(VerifyError, match="no input has that symbolic dim"):
        check_equivalence(
            model, model, VerifyOptions(inputs=InputOptions(examples=3, dims={"T": 50}))
        )
    with pytest.raises(VerifyError, match="has rank 3"):
        check_equivalence(
            model, model, VerifyOptions(inputs=InputOptions(examples=3, shapes={"x": (1, 64)}))
        )


def test_samples_are_checked_first_and_stacked_samples_split():
    relu, absolute = models.unary("Relu"), models.unary("Abs")
    positive = {"x": np.abs(np.random.default_rng(0).standard_normal((3, 2, 4))).astype("f")}
    assert (
        check_equivalence(
            relu, absolute, VerifyOptions(inputs=InputOptions(examples=0, samples=[positive]))
        ).examples_run
        == 3
    )
    negative = {"x": -np.ones((2, 4), dtype=np.float32)}
    result = check_equivalence(
        relu,
        absolute,
        VerifyOptions(
            inputs=InputOptions(examples=0, samples=[negative]), save_counterexample=False
        ),
    )
    assert not result.ok
    assert result.counterexample is not None
    assert np.all(result.counterexample["x"] == -1)


# ---------------------------------------------------------------------------------------------
# Ill-conditioned examples


def test_sensitivity_raises_the_floor_of_an_ill_conditioned_output():
    oracle = np.linspace(-3, 3, 64)
    original = oracle.astype(np.float32)
    rewritten = (original * np.float32(1.0001)).astype(np.float32)
    assert not compare_accuracy(oracle, original, rewritten, ACCURACY).ok
    verdict = compare_accuracy(oracle, original, rewritten, ACCURACY, sensitivity=1e-4)
    assert verdict.ok, verdict.reason
    assert verdict.floor == 1e-4


def _layer_norm(decomposed: bool) -> onnx.ModelProto:
    signature = "(float[8] x, float[8] scale) => (float[8] y)"
    if not decomposed:
        return models.parse(
            signature, "y = LayerNormalization <axis = 0, epsilon = 1e-12> (x, scale)"
        )
    body = """
        eps = Constant <value = float {1e-12}> ()
        mean = ReduceMean <axes = [0]> (x)
        d = Sub (x, mean)
        d2 = Mul (d, d)
        var = ReduceMean <axes = [0]> (d2)
        shifted = Add (var, eps)
        deviation = Sqrt (shifted)
        normalized = Div (d, deviation)
        y = Mul (normalized, scale)
    """
    return models.parse(signature, body)


def test_a_textbook_layer_norm_on_ill_conditioned_inputs_is_not_a_bug():
    # 1e4 beside 0.1: the mean cancels, and the written-out formula errs ~30x more than
    # onnxruntime's kernel; rounding the inputs once more moves float64 as much.
    x = np.array([0.1257, 1e4, -1e4, 0.1049, -0.5357, 0.3616, 1.304, 0.9471], np.float32)
    scale = np.array([1e4, 1, 0, -2, -1, -3, -3, -3], np.float32)
    sample = {"x": x, "scale": scale}
    result = check_equivalence(
        _layer_norm(False),
        _layer_norm(True),
        VerifyOptions(
            inputs=InputOptions(examples=0, samples=[sample]),
            runtime=RuntimeOptions(ort_enable_all=False),
        ),
    )
    assert result.ok, result.render_table()
    wrong = _layer_norm(True)
    for node in wrong.graph.node:
        if node.output[0] == "eps":
            node.attribute[0].t.float_data[0] = 2.5e5  # 1% of the variance: std 0.5% off
    result = check_equivalence(
        _layer_norm(False),
        wrong,
        VerifyOptions(inputs=InputOptions(examples=0, samples=[sample]), save_counterexample=False),
    )
    assert not result.ok
