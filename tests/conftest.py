"""Shared pytest configuration: hypothesis profiles and the `--run-slow` switch.

Hypothesis profiles (choose with the environment variable HYPOTHESIS_PROFILE):

* ``ci`` (default): derandomized, no deadline, at most 50 examples per test, so a run is
  reproducible and bounded in time.
* ``dev``: random seeds, 100 examples, for local exploration.
* ``long``: random seeds, 2000 examples, for an occasional deep search.

Tests marked ``@pytest.mark.slow`` (full conformance sweeps, long fuzzing) are deselected
unless pytest is given ``--run-slow``.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    derandomize=True,
    deadline=None,
    max_examples=50,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", deadline=None, max_examples=100, print_blob=True)
settings.register_profile(
    "long",
    deadline=None,
    max_examples=2000,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--run-slow",
        action="store_true",
        default=False,
        help="also run tests marked @pytest.mark.slow",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Slow tests are deselected rather than skipped, so the summary's "skipped" counts only
    # tests that could not run here (a missing Chromium, a kernel onnxruntime lacks).
    if config.getoption("--run-slow"):
        return
    slow = [item for item in items if "slow" in item.keywords]
    if not slow:
        return
    config.hook.pytest_deselected(items=slow)
    items[:] = [item for item in items if "slow" not in item.keywords]
