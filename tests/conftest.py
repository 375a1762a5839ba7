"""Shared pytest configuration: hypothesis profiles and the `--run-slow` switch.

Hypothesis profiles (choose with the environment variable HYPOTHESIS_PROFILE):

* ``ci`` (default): derandomized, no deadline, at most 50 examples per test, so a run is
  reproducible and bounded in time.
* ``dev``: random seeds, 100 examples, for local exploration.
* ``long``: random seeds, 2000 examples, for an occasional deep search.

Tests marked ``@pytest.mark.slow`` (full conformance sweeps, long fuzzing) are deselected
unless pytest is given ``--run-slow``. ``--slow-sample FRACTION`` keeps a slice of them: each
slow test is kept when a hash of its id and ``--slow-seed`` falls below the fraction, so a
seed picks the same slice every time and another seed another slice (CI passes the date, so
the whole slow suite is covered over a few days and any day's slice can be rerun).
"""

from __future__ import annotations

import hashlib
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
    parser.addoption(
        "--slow-sample",
        type=float,
        default=1.0,
        help="with --run-slow, run only this fraction of the slow tests (chosen by --slow-seed)",
    )
    parser.addoption(
        "--slow-seed", default="0", help="which slice --slow-sample picks (any string)"
    )


def _in_sample(nodeid: str, seed: str, fraction: float) -> bool:
    digest = hashlib.sha256(f"{seed}:{nodeid}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < fraction


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Slow tests are deselected rather than skipped, so the summary's "skipped" counts only
    # tests that could not run here (a missing Chromium, a kernel onnxruntime lacks).
    if config.getoption("--run-slow"):
        fraction = config.getoption("--slow-sample")
        if fraction >= 1.0:
            return
        seed = config.getoption("--slow-seed")
        slow = [
            item
            for item in items
            if "slow" in item.keywords and not _in_sample(item.nodeid, seed, fraction)
        ]
    else:
        slow = [item for item in items if "slow" in item.keywords]
    if not slow:
        return
    config.hook.pytest_deselected(items=slow)
    dropped = {id(item) for item in slow}
    items[:] = [item for item in items if id(item) not in dropped]
