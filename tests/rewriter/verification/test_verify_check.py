"""check_equivalence: equivalent pairs pass on every seed, planted wrong rewrites are caught."""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys

import numpy as np
import onnx
import pytest

import ir
import rewriter.verification
from rewriter.verification import (
    Criterion,
    InputOptions,
    VerifyError,
    VerifyOptions,
    VerifyResult,
    check_equivalence,
    check_on_inputs,
    load_counterexample,
    save_counterexample,
)
from tests.rewriter.verification import _models as models

SEEDS = range(5)


@pytest.fixture(scope="module")
def equivalent_pairs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ort")
    return {
        "add_zero_vs_identity": (models.add_zero(), models.unary("Identity")),
        "matmul_add_vs_gemm": (models.matmul_add(), models.gemm()),
        "layernorm_decomposed_vs_op": (models.layernorm_decomposed(), models.layernorm_fused()),
        "layernorm_wide": (
            models.layernorm_decomposed(width=64),
            models.layernorm_fused(width=64),
        ),
        "mlp_vs_ort_optimized": (models.mlp_block(), models.ort_optimized(models.mlp_block(), tmp)),
        "embedding_self": (models.embedding(offset=2), models.embedding(offset=2)),
    }


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(
    "pair",
    [
        "add_zero_vs_identity",
        "matmul_add_vs_gemm",
        "layernorm_decomposed_vs_op",
        "layernorm_wide",
        "mlp_vs_ort_optimized",
        "embedding_self",
    ],
)
def test_equivalent_pairs_pass_on_every_seed(equivalent_pairs, pair, seed):
    original, rewritten = equivalent_pairs[pair]
    result = check_equivalence(
        original,
        rewritten,
        VerifyOptions(inputs=InputOptions(seed=seed), save_counterexample=False),
    )
    assert result.ok, result.render_table()
    assert result.examples_run == 20
    assert result.counterexample is None
    assert result.counterexample_path is None


def test_ort_optimized_model_really_differs():
    optimized = models.ort_optimized(models.mlp_block(), _tmp())
    ops = {node.op_type for node in optimized.graph.node}
    assert "LayerNormalization" in ops
    assert "Gelu" in ops


def _tmp():
    import pathlib
    import tempfile

    return pathlib.Path(tempfile.mkdtemp())


PLANTED = {
    "relu_to_abs": (lambda: models.unary("Relu"), lambda: models.unary("Abs")),
    "mul_by_two_dropped": (lambda: models.times(2.0), lambda: models.unary("Identity")),
    "layernorm_epsilon_1e-2": (
        lambda: models.layernorm_decomposed(1e-5),
        lambda: models.layernorm_decomposed(1e-2),
    ),
    "layernorm_epsilon_1e-6": (
        lambda: models.layernorm_decomposed(1e-5),
        lambda: models.layernorm_fused(1e-6),
    ),
    "transpose_wrong_perm": (
        lambda: models.transpose("0, 2, 1"),
        lambda: models.transpose("1, 0, 2"),
    ),
    "transpose_wrong_perm_same_rank_order": (
        lambda: models.transpose("2, 1, 0"),
        lambda: models.transpose("2, 0, 1"),
    ),
    "bias_dropped": (lambda: models.matmul_add(), lambda: models.matmul_add(bias=False)),
    "softmax_wrong_axis": (lambda: models.softmax(1), lambda: models.softmax(0)),
}


@pytest.mark.parametrize("name", list(PLANTED))
def test_planted_wrong_rewrites_are_caught_and_named(name, tmp_path):
    make_original, make_rewritten = PLANTED[name]
    path = tmp_path / "ce.npz"
    result = check_equivalence(
        make_original(), make_rewritten(), VerifyOptions(counterexample_path=str(path))
    )
    assert not result.ok
    assert result.mismatched_outputs == ("y",)
    assert "output `y`" in result.message
    # Shrunk: one small example (every dim at most 2 for symbolic dims; static dims kept).
    assert result.counterexample is not None
    for array in result.counterexample.values():
        assert array.size <= 24, array.shape
    assert result.counterexample_path == str(path)
    saved = load_counterexample(path)
    assert saved.keys() == result.counterexample.keys()
    for key, array in saved.items():
        np.testing.assert_array_equal(array, result.counterexample[key])
    # The saved counterexample reproduces the mismatch on its own.
    replay = check_on_inputs(make_original(), make_rewritten(), saved)
    assert not replay.ok


@pytest.mark.parametrize("seed", SEEDS)
def test_relu_to_abs_is_caught_on_every_seed(seed):
    result = check_equivalence(
        models.unary("Relu"),
        models.unary("Abs"),
        VerifyOptions(inputs=InputOptions(seed=seed), save_counterexample=False),
    )
    assert not result.ok
    assert np.any(result.counterexample["x"] < 0)


def test_a_bug_only_special_elements_trigger_is_shrunk_to_a_few_elements():
    original = models.unary("Identity", shape="N, M")
    clipped = models.parse(
        "(float[N, M] x) => (float[N, M] y)",
        "lo = Constant<value = float {-100.0}>()\n y = Max(x, lo)",
    )
    result = check_equivalence(original, clipped, VerifyOptions(save_counterexample=False))
    assert not result.ok
    assert result.shrink_runs > 0
    x = result.counterexample["x"]
    assert x.size <= 3
    assert np.any(x < -100)  # "large" (-1e4) or -inf: what only special elements reach
    assert "no --factor accepts that" in result.render_table()


def test_whole_models_draw_no_float_extremes_unless_asked():
    # x * 2 * 0.5 - x is exactly 0 unless x * 2 overflows: a Clip turns that inf into 1.
    constants = (
        "lo = Constant<value = float {-1.0}>()\n hi = Constant<value = float {1.0}>()\n"
        " two = Constant<value = float {2.0}>()\n half = Constant<value = float {0.5}>()\n"
    )
    original = models.parse(
        "(float[N] x) => (float[N] y)", constants + " d = Sub(x, x)\n y = Clip(d, lo, hi)"
    )
    doubled = models.parse(
        "(float[N] x) => (float[N] y)",
        constants + " a = Mul(x, two)\n b = Mul(a, half)\n d = Sub(b, x)\n y = Clip(d, lo, hi)",
    )
    assert check_equivalence(
        original,
        doubled,
        VerifyOptions(inputs=InputOptions(examples=40), save_counterexample=False),
    ).ok
    extremes = check_equivalence(
        original,
        doubled,
        VerifyOptions(
            inputs=InputOptions(examples=40, float_extremes=True), save_counterexample=False
        ),
    )
    assert not extremes.ok


def test_softmax_axis_counterexample_keeps_just_enough_elements():
    result = check_equivalence(
        models.softmax(1), models.softmax(0), VerifyOptions(save_counterexample=False)
    )
    assert result.counterexample["x"].shape in ((1, 2), (2, 1))


def test_only_the_wrong_output_is_named():
    body = "a = Relu(x)\n b = Relu(x)"
    original = models.parse("(float[N] x) => (float[N] a, float[N] b)", body)
    rewritten = models.parse("(float[N] x) => (float[N] a, float[N] b)", "a = Relu(x)\n b = Abs(x)")
    result = check_equivalence(original, rewritten, VerifyOptions(save_counterexample=False))
    assert result.mismatched_outputs == ("b",)
    stats = {o.name: o for o in result.outputs}
    assert stats["a"].ok
    assert stats["a"].max_abs_err == 0.0
    assert not stats["b"].ok
    assert stats["b"].mismatched >= 1
    assert "`b`" in result.render_table()


def test_rewritten_model_that_raises_is_a_mismatch():
    original = models.unary("Relu", shape="N")
    broken = models.parse(
        "(float[N] x) => (float[N] y)",
        "shape = Constant<value = int64[1] {5}>()\n y = Reshape(x, shape)",
    )
    result = check_equivalence(original, broken, VerifyOptions(save_counterexample=False))
    assert not result.ok
    assert "the rewritten model failed" in result.message
    assert result.counterexample is not None


def test_original_model_failing_on_every_input_is_an_error():
    broken = models.parse(
        "(float[N] x) => (float[N] y)",
        "shape = Constant<value = int64[2] {7, 7}>()\n y = Reshape(x, shape)",
    )
    with pytest.raises(VerifyError, match="failed on every generated input"):
        check_equivalence(broken, broken, VerifyOptions(inputs=InputOptions(examples=5)))


def test_inputs_the_original_rejects_are_skipped_not_failed():
    # Reshape to [2, -1] needs an even number of elements: odd sizes are outside the domain.
    model = models.parse(
        "(float[N] x) => (float[A, B] y)",
        "shape = Constant<value = int64[2] {2, -1}>()\n y = Reshape(x, shape)",
    )
    result = check_equivalence(model, model, VerifyOptions(inputs=InputOptions(examples=20)))
    assert result.ok
    assert result.examples_rejected > 0


@pytest.mark.parametrize(
    ("signature", "body", "message"),
    [
        ("(float[N, 4] z) => (float[N, 4] y)", "y = Relu(z)", "different inputs"),
        ("(float[N, 4] x) => (float[N, 4] w)", "w = Relu(x)", "different outputs"),
    ],
)
def test_different_signatures_are_errors(signature, body, message):
    with pytest.raises(VerifyError, match=message):
        check_equivalence(models.unary("Relu"), models.parse(signature, body))


def test_different_input_dtype_is_an_error():
    other = models.parse("(double[N, 4] x) => (double[N, 4] y)", "y = Relu(x)")
    with pytest.raises(VerifyError, match="float in the original model but double"):
        check_equivalence(models.unary("Relu"), other)


def test_accepts_paths_protos_and_ir_models(tmp_path):
    path = tmp_path / "relu.onnx"
    onnx.save(models.unary("Relu"), str(path))
    lifted = ir.load(str(path))
    for original in (str(path), path, models.unary("Relu"), lifted):
        assert check_equivalence(
            original, lifted, VerifyOptions(inputs=InputOptions(examples=3))
        ).ok


def test_rejects_other_objects():
    with pytest.raises(TypeError, match=r"path, an onnx\.ModelProto or an ir\.Model"):
        check_equivalence(42, models.unary("Relu"))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("make", "error"),
    [
        (lambda: InputOptions(examples=0), ValueError),
        (lambda: InputOptions(examples=-1, samples=({"x": np.zeros(1)},)), ValueError),
        (lambda: Criterion(rtol=-1.0), ValueError),
        (lambda: InputOptions(seed="1"), TypeError),
    ],
)
def test_bad_options_raise_programmer_errors(make, error):
    with pytest.raises(error):
        make()


def test_default_counterexample_path_is_beside_the_rewritten_file(tmp_path):
    onnx.save(models.unary("Relu"), str(tmp_path / "a.onnx"))
    onnx.save(models.unary("Abs"), str(tmp_path / "a.opt.onnx"))
    result = check_equivalence(str(tmp_path / "a.onnx"), str(tmp_path / "a.opt.onnx"))
    assert result.counterexample_path == str(tmp_path / "a.opt.counterexample.npz")
    assert os.path.exists(result.counterexample_path)


def test_in_memory_counterexample_goes_to_a_temporary_folder():
    result = check_equivalence(models.unary("Relu"), models.unary("Abs"))
    assert result.counterexample_path is not None
    folder = os.path.dirname(result.counterexample_path)
    try:
        assert os.path.basename(folder).startswith("rewrite-verify-")
        assert os.path.exists(result.counterexample_path)
    finally:
        shutil.rmtree(folder)


def test_same_seed_same_result():
    first = check_equivalence(
        models.softmax(1),
        models.softmax(0),
        VerifyOptions(inputs=InputOptions(seed=7), save_counterexample=False),
    )
    second = check_equivalence(
        models.softmax(1),
        models.softmax(0),
        VerifyOptions(inputs=InputOptions(seed=7), save_counterexample=False),
    )
    assert first.examples_run == second.examples_run
    np.testing.assert_array_equal(first.counterexample["x"], second.counterexample["x"])


def test_active_hypothesis_profile_does_not_change_the_example_count():
    # tests/conftest.py loads a profile with max_examples=50; examples= wins.
    result = check_equivalence(
        models.unary("Relu"), models.unary("Relu"), VerifyOptions(inputs=InputOptions(examples=7))
    )
    assert result.examples_run == 7


def test_results_are_frozen():
    result = check_equivalence(
        models.unary("Relu"), models.unary("Abs"), VerifyOptions(save_counterexample=False)
    )
    assert isinstance(result, VerifyResult)
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.ok = True  # type: ignore[misc]
    with pytest.raises(TypeError):
        result.counterexample["x"] = np.zeros(1)  # type: ignore[index]
    with pytest.raises(ValueError, match="read-only"):
        result.counterexample["x"][...] = 0


def test_table_lists_every_output_and_the_verdict():
    result = check_equivalence(
        models.matmul_add(), models.gemm(), VerifyOptions(inputs=InputOptions(examples=5))
    )
    table = result.render_table()
    assert table.splitlines()[0].split()[:3] == ["output", "dtype", "shape"]
    assert "equivalent (5 examples; seed 0; accuracy: <= 8x the original's error" in table
    assert "original on onnxruntime, rewritten on onnxruntime" in table
    assert result.original_runtime == "onnxruntime"
    assert result.rewritten_runtime == "onnxruntime"


def test_verify_is_check_equivalence_unless_given_a_budget():
    result = rewriter.verify(
        models.unary("Relu"),
        models.unary("Relu"),
        VerifyOptions(inputs=InputOptions(examples=2, seed=1)),
    )  # type: ignore[operator]
    assert isinstance(result, VerifyResult)
    assert result.ok
    same = check_equivalence(
        models.unary("Relu"),
        models.unary("Relu"),
        VerifyOptions(inputs=InputOptions(examples=2, seed=1)),
    )
    assert result.to_json() == same.to_json()
    measured = rewriter.verify(models.unary("Relu"), models.unary("Relu"), accept=["snr>=90"])  # type: ignore[operator]
    assert measured.ok
    assert measured.overall("snr") == float("inf")


def test_importing_the_package_loads_neither_onnxruntime_nor_hypothesis():
    code = (
        "import sys, rewriter.verification, rewriter.cli._verify; "
        "print('onnxruntime' in sys.modules, 'hypothesis' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.split() == ["False", "False"]


def test_counterexample_files_keep_any_input_name_and_strings(tmp_path):
    inputs = {
        "file": np.arange(3, dtype=np.float32),
        "input.1/ids": np.array([[1, 2]], dtype=np.int64),
        "text": np.array(["a", "\u00fcn"], dtype=object),
    }
    path = save_counterexample(tmp_path / "ce.npz", inputs)
    loaded = load_counterexample(path)
    assert list(loaded) == list(inputs)
    np.testing.assert_array_equal(loaded["file"], inputs["file"])
    np.testing.assert_array_equal(loaded["input.1/ids"], inputs["input.1/ids"])
    assert loaded["text"].tolist() == ["a", "\u00fcn"]
    strings = models.parse("(string[N] text) => (string[N] y)", "y = Identity(text)")
    assert check_on_inputs(strings, strings, {"text": loaded["text"]}).ok
