"""The speed check's decision: paired ratios and a sign-test bound, not medians of few runs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rewriter.quantize._speed import Comparison, median_bounds


def test_median_bounds_are_the_order_statistics_of_a_sign_test():
    assert median_bounds(list(range(4))) == (0.0, math.inf)  # 4 pairs: no 95% bound exists
    assert median_bounds(list(range(7))) == (0, 6)  # 7 pairs: every one must agree
    # 14 pairs: P(Binomial(14, 1/2) <= 3) = 0.029 <= 0.05 < P(<= 4) = 0.090.
    assert median_bounds(list(range(14))) == (3, 10)


def test_median_bounds_cover_the_median_at_least_95_percent_of_the_time():
    rng = np.random.default_rng(0)
    above = below = 0
    trials = 2000
    for _ in range(trials):
        sample = sorted(rng.lognormal(0.0, 0.3, size=11))  # true median 1.0
        low, high = median_bounds(sample)
        above += low > 1.0
        below += high < 1.0
    assert above / trials <= 0.05
    assert below / trials <= 0.05


def _paired_runs(rng, slower_by: float, pairs: int) -> tuple[list[float], list[float]]:
    """Run times on a machine whose load changes between pairs (each pair 1x to 3x slower),
    with a few percent of noise per run."""
    approximate, reference = [], []
    for _ in range(pairs):
        load = rng.uniform(1.0, 3.0)
        reference.append(0.1 * load * rng.uniform(0.97, 1.03))
        approximate.append(0.1 * (1 + slower_by) * load * rng.uniform(0.97, 1.03))
    return approximate, reference


@pytest.mark.parametrize("seed", range(20))
def test_a_changing_load_does_not_make_an_equal_group_slower(seed):
    approximate, reference = _paired_runs(np.random.default_rng(seed), 0.0, 7)
    comparison = Comparison.of(approximate, reference)
    assert not comparison.slower(0.03)


@pytest.mark.parametrize("seed", range(20))
def test_a_group_slower_by_a_fifth_is_slower_under_a_changing_load(seed):
    approximate, reference = _paired_runs(np.random.default_rng(seed), 0.2, 7)
    comparison = Comparison.of(approximate, reference)
    assert comparison.slower(0.03)
    assert 0.14 < comparison.ratio - 1 < 0.26


def test_too_few_pairs_decide_nothing():
    comparison = Comparison.of([2.0, 2.0, 2.0], [1.0, 1.0, 1.0])
    assert not comparison.slower(0.03)
    assert comparison.undecided(0.03)
