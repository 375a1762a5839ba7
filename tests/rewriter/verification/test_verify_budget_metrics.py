"""`check_accuracy` / `verify(accept=...)`: metrics against the original, judged by a budget."""

from __future__ import annotations

import math

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import ir
import rewriter
from rewriter.api import rewrite
from rewriter.verification import (
    ALL_OUTPUTS,
    AccuracyResult,
    InputOptions,
    VerifyError,
    VerifyOptions,
    VerifyResult,
    accuracy_data,
    check_accuracy,
    format_metric,
)
from tests.budget_models import FP16_RULE, ROUNDED_RULE, outlier_mlp


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    folder = tmp_path_factory.mktemp("accuracy")
    original = folder / "mlp.onnx"
    onnx.save(outlier_mlp(), original)
    rules = folder / "rounded.rw"
    rules.write_text(ROUNDED_RULE)
    rounded = rewrite(original, [str(rules)]).model
    return original, rounded


def _outputs(model, feeds):
    session = ort.InferenceSession(
        ir.to_onnx(model).SerializeToString() if not isinstance(model, str) else model,
        providers=["CPUExecutionProvider"],
    )
    return [session.run(None, f)[0] for f in feeds]


def test_snr_and_cosine_are_those_of_the_outputs_on_the_same_inputs(models):
    original, rounded = models
    data = accuracy_data(original, inputs=InputOptions(examples=6, seed=3))
    assert len(data) == 6
    assert data.outputs == ("y",)
    expected = np.concatenate([r["y"].ravel() for r in data.reference]).astype(np.float64)
    actual = np.concatenate([a.ravel() for a in _outputs(rounded, data.feeds)]).astype(np.float64)
    snr = 10 * math.log10(np.sum(expected**2) / np.sum((expected - actual) ** 2))
    cosine = expected @ actual / (np.linalg.norm(expected) * np.linalg.norm(actual))
    result = check_accuracy(original, rounded, ["snr>=10"], inputs=InputOptions(examples=6, seed=3))
    assert isinstance(result, AccuracyResult)
    assert result.ok
    assert result.overall("snr") == pytest.approx(snr, rel=1e-6)
    assert result.overall("cosine") == pytest.approx(cosine, rel=1e-9)
    levels = {row.level for row in result.rows if row.output == ALL_OUTPUTS}
    assert levels == {"ORT_DISABLE_ALL", "ORT_ENABLE_ALL"}
    # Generated inputs are plain: finite, normal-looking values.
    assert all(np.isfinite(f["x"]).all() for f in data.feeds)


def test_a_budget_the_model_misses_fails_and_names_the_metric(models):
    original, rounded = models
    result = rewriter.verify(
        original,
        rounded,
        VerifyOptions(inputs=InputOptions(examples=4)),
        accept=["snr>=60", "cosine>=0.5"],
    )
    assert isinstance(result, AccuracyResult)
    assert not result.ok
    assert result.failing[0].startswith("snr>=60 (")
    assert all("cosine" not in failure for failure in result.failing)
    assert "OUTSIDE the accuracy budget: snr>=60" in result.summary()
    statuses = [row[-1] for row in result.table_rows()]
    assert statuses == ["-", "FAIL", "-", "FAIL"]
    assert result.to_json()["ok"] is False


def test_verify_without_accept_still_checks_equivalence(models):
    original, _ = models
    assert isinstance(
        rewriter.verify(original, original, VerifyOptions(inputs=InputOptions(examples=2))),
        VerifyResult,
    )


def test_samples_only_and_top1(models):
    original, rounded = models
    rng = np.random.default_rng(0)
    stacked = {"x": rng.standard_normal((5, 3, 16)).astype(np.float32)}
    result = check_accuracy(
        original, rounded, ["top1>=0.5"], inputs=InputOptions(examples=0, samples=[stacked])
    )
    assert result.examples_run == 5
    assert 0.5 <= result.overall("top1") <= 1.0
    assert "top1" in result.metrics


def test_fp16_weights_are_far_more_accurate_than_rounded_ones(models, tmp_path):
    original, rounded = models
    rules = tmp_path / "fp16.rw"
    rules.write_text(FP16_RULE)
    half = rewrite(original, [str(rules)]).model
    coarse = check_accuracy(original, rounded, ["snr>=0"], inputs=InputOptions(examples=4))
    fine = check_accuracy(original, half, ["snr>=0"], inputs=InputOptions(examples=4))
    assert fine.overall("snr") > coarse.overall("snr") + 20


def test_malformed_budgets_and_models_are_clear_errors(models, tmp_path):
    original, rounded = models
    with pytest.raises(ValueError, match="unknown accuracy metric 'psnr'"):
        check_accuracy(original, rounded, ["psnr>=3"])
    with pytest.raises(ValueError, match="snr takes >="):
        check_accuracy(original, rounded, ["snr<=3"])
    with pytest.raises(ValueError, match="at least one"):
        check_accuracy(original, rounded, [])
    renamed = ir.from_onnx(outlier_mlp())
    renamed.graph.outputs[0].name = "z"
    with pytest.raises(VerifyError, match="the rewritten model has no output `y`"):
        check_accuracy(original, renamed, ["snr>=1"], inputs=InputOptions(examples=1))
    narrow = ir.from_onnx(outlier_mlp(widths=(16, 4)))
    result = check_accuracy(original, narrow, ["snr>=1"], inputs=InputOptions(examples=1))
    assert not result.ok
    assert "output `y` has shape (" in result.notes()[0]


@pytest.mark.parametrize(
    ("metric", "value", "text"),
    [
        ("snr", 38.24, "38.2 dB"),
        ("snr", math.inf, "inf dB"),
        ("cosine", 0.99987, "0.999870"),
        ("cosine", 1 - 1.7e-8, "1-1.7e-08"),
        ("cosine", 1.0, "1.000000"),
        ("max_rel", 0.01234, "0.0123"),
        ("top1", 0.975, "97.5%"),
    ],
)
def test_metrics_are_written_for_people(metric, value, text):
    assert format_metric(metric, value) == text


def _scaled(op: str) -> onnx.ModelProto:
    """y = x * 0 (original) or y = (x * 0) / 0 (NaN everywhere): a model that loses numbers."""
    from onnx import TensorProto, helper, numpy_helper

    nodes = [helper.make_node("Mul", ["x", "zero"], ["z"])]
    nodes.append(helper.make_node(op, ["z", "zero"], ["y"]))
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4])],
        [numpy_helper.from_array(np.array(0.0, np.float32), "zero")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_nan_where_the_original_has_none_fails_in_words():

    result = check_accuracy(
        _scaled("Add"), _scaled("Div"), ["max_abs<=1"], inputs=InputOptions(examples=2)
    )
    assert not result.ok
    assert result.failing[0] == "NaN in 24 elements where the original has none (`y`)"
    assert "off: output `y`: NaN in 24 elements where the original has none" in result.notes()
    assert [row[-1] for row in result.table_rows()][:2] == ["NaN", "FAIL"]


def test_bootstrap_resamples_measure_what_concatenation_measures():
    from rewriter.verification import measure
    from rewriter.verification._metrics import resampled

    rng = np.random.default_rng(0)
    reference = [[rng.standard_normal((4, 8)), rng.standard_normal(3)] for _ in range(6)]
    actual = [[r[0] + 0.1 * rng.standard_normal((4, 8)), r[1] * 1.01] for r in reference]
    actual[2][0][0, 0] = np.nan  # input 2: every resample that draws it is the worst value
    picks = rng.integers(0, 6, (40, 6))
    for metric in ("snr", "cosine", "max_abs", "max_rel", "top1"):
        slow = [
            measure(
                metric, [a for i in row for a in reference[i]], [a for i in row for a in actual[i]]
            )
            for row in picks
        ]
        np.testing.assert_allclose(resampled(metric, reference, actual, picks), slow, rtol=1e-9)
