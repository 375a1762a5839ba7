"""Fuzzing the three inputs (model files, rule files, command lines) and the rewrites' soundness
(see `fuzz.py`).

The default run takes a derandomized sample of each fuzzer (a few seconds each). With
``--run-slow``, each fuzzer also runs for ``FUZZ_SECONDS`` seconds (default 60) with random
seeds; ``python -m tests.robustness.fuzz --seconds 600`` does the same outside pytest.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.robustness import fuzz


@pytest.mark.parametrize("name", list(fuzz.FUZZERS))
def test_fuzz_sample_finds_nothing_foreign(name: str, tmp_path: Path) -> None:
    fuzz.FUZZERS[name](fuzz.SAMPLES.get(name, fuzz.FAST), tmp_path, None)
    assert fuzz.TALLY[name].examples > 0
    if name in ("rewrite", "instances"):  # the sample reaches the rules, not only refusals
        assert fuzz.TALLY[name].rewritten > fuzz.TALLY[name].examples // 2


@pytest.mark.slow
@pytest.mark.parametrize("name", list(fuzz.FUZZERS))
def test_fuzz_long_run_finds_nothing_foreign(name: str, tmp_path: Path) -> None:
    seconds = float(os.environ.get("FUZZ_SECONDS", "60"))
    tally = fuzz.run_for(name, seconds, tmp_path)
    print(f"{name}: {tally.examples} examples, {tally.loaded} loaded")
    assert not tally.findings, "\n".join(tally.findings)
