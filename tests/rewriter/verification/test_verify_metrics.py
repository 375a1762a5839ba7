"""Accuracy metrics for approximate rewrites: values on known signals, NaN never hidden."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rewriter.verification import Acceptance, measure, parse_acceptance


def test_snr_of_known_noise() -> None:
    reference = [np.ones((10, 10), np.float32)]
    actual = [np.full((10, 10), 1.1, np.float32)]
    # signal 100, noise 100 * 0.01 -> 20 dB
    assert measure("snr", reference, actual) == pytest.approx(20.0, abs=1e-4)
    assert measure("snr", reference, reference) == math.inf


def test_cosine_max_rel_max_abs() -> None:
    reference = [np.array([3.0, 4.0]), np.array([0.0])]
    actual = [np.array([3.0, 4.5]), np.array([0.0])]
    assert measure("cosine", reference, actual) == pytest.approx(
        (9 + 18) / (5 * math.hypot(3, 4.5))
    )
    assert measure("max_abs", reference, actual) == pytest.approx(0.5)
    assert measure("max_rel", reference, actual) == pytest.approx(0.5 / 4.0)


def test_top1_counts_rows_by_the_last_axis() -> None:
    reference = [np.array([[0.1, 0.9], [0.8, 0.2], [0.3, 0.7], [0.6, 0.4]])]
    actual = [np.array([[0.2, 0.8], [0.4, 0.6], [0.3, 0.7], [0.6, 0.4]])]
    assert measure("top1", reference, actual) == 0.75


@pytest.mark.parametrize("metric", ["snr", "cosine", "max_rel", "max_abs"])
def test_a_nan_the_reference_does_not_have_is_the_worst_value(metric: str) -> None:
    reference = [np.array([1.0, 2.0, 3.0])]
    actual = [np.array([1.0, np.nan, 3.0])]
    value = measure(metric, reference, actual)
    assert not Acceptance(metric, {"snr": 0.0, "cosine": 0.0}.get(metric, 1e9)).met_by(value)


def test_matching_nan_and_inf_are_not_errors() -> None:
    reference = [np.array([1.0, np.nan, -np.inf])]
    assert measure("snr", reference, [reference[0].copy()]) == math.inf
    assert measure("max_abs", reference, [reference[0].copy()]) == 0.0


@pytest.mark.parametrize(
    ("text", "metric", "bound"),
    [
        ("snr>=35", "snr", 35.0),
        ("cosine >= 0.999", "cosine", 0.999),
        ("max_rel<=1e-2", "max_rel", 0.01),
    ],
)
def test_parse_acceptance(text: str, metric: str, bound: float) -> None:
    acceptance = parse_acceptance(text)
    assert (acceptance.metric, acceptance.bound) == (metric, bound)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("psnr>=3", "unknown accuracy metric 'psnr'"),
        ("snr<=3", "snr takes >= (a bound to meet), not <="),
        ("snr>=high", "expected a number after >="),
        ("snr=3", "expected METRIC>=VALUE or METRIC<=VALUE"),
    ],
)
def test_parse_acceptance_errors(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_acceptance(text)
