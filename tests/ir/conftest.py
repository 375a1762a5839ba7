"""Fixtures for the IR tests, and the conformance summary printed at the end of a session.

The summary gives the counts the conformance suite is judged by: cases run, exact round
trips (reusing cached messages, rebuilt from the IR, and through files), cases whose
round-tripped model onnxruntime ran to the expected outputs, and the skipped ones grouped by
reason. It is also written to ``.pytest_cache/ir_conformance/summary.md``.
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Any

import pytest

_CHECKS = {
    "exact_reused": "exact round trip, cached messages reused",
    "exact_rebuilt": "exact round trip, everything rebuilt from the IR",
    "exact_file": "exact round trip through ir.load / ir.save (on-disk models)",
    "ort_equal": "onnxruntime outputs of the round-tripped model equal the expected ones",
}


# Skip reasons whose cases are listed one by one (the ones worth a human look).
_LIST_CASES_FOR = "onnxruntime disagrees"


@dataclasses.dataclass
class ConformanceReport:
    """Outcomes of the conformance cases run in this session."""

    cases: dict[str, None] = dataclasses.field(default_factory=dict)
    passed: dict[str, dict[str, None]] = dataclasses.field(
        default_factory=lambda: collections.defaultdict(dict)
    )
    skipped: dict[str, str] = dataclasses.field(default_factory=dict)

    def seen(self, case_id: str) -> None:
        self.cases[case_id] = None

    def record(self, case_id: str, check: str) -> None:
        self.cases[case_id] = None
        self.passed[check][case_id] = None

    def skip(self, case_id: str, reason: str) -> None:
        self.cases[case_id] = None
        self.skipped[case_id] = reason

    def lines(self) -> list[str]:
        groups: dict[str, dict[str, int]] = collections.defaultdict(collections.Counter)
        for case_id in self.cases:
            groups[case_id.split("/")[0]]["cases"] += 1
        for check, ids in self.passed.items():
            for case_id in ids:
                groups[case_id.split("/")[0]][check] += 1
        lines = [f"IR conformance: {len(self.cases)} cases"]
        header = f"  {'group':10} {'cases':>6} " + " ".join(f"{c:>13}" for c in _CHECKS)
        lines.append(header)
        for group in sorted(groups):
            counts = groups[group]
            cells = " ".join(f"{counts.get(c, 0):>13}" for c in _CHECKS)
            lines.append(f"  {group:10} {counts['cases']:>6} {cells}")
        totals = " ".join(f"{len(self.passed.get(c, {})):>13}" for c in _CHECKS)
        lines.append(f"  {'total':10} {len(self.cases):>6} {totals}")
        for check, meaning in _CHECKS.items():
            lines.append(f"  {check}: {meaning}")
        if self.skipped:
            lines.append(f"  onnxruntime checks skipped: {len(self.skipped)}, by reason:")
            reasons = collections.Counter(self.skipped.values())
            for reason, count in reasons.most_common():
                lines.append(f"    {count:5}  {reason}")
                if reason.startswith(_LIST_CASES_FOR):
                    listed = sorted(k for k, v in self.skipped.items() if v == reason)
                    lines.extend(f"             {case_id}" for case_id in listed)
        return lines


_REPORT_KEY = pytest.StashKey[ConformanceReport]()


@pytest.fixture(scope="session")
def conformance_report(request: pytest.FixtureRequest) -> ConformanceReport:
    stash = request.config.stash
    if _REPORT_KEY not in stash:
        stash[_REPORT_KEY] = ConformanceReport()
    return stash[_REPORT_KEY]


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    report = config.stash.get(_REPORT_KEY, None)
    if report is None or not report.cases:
        return
    lines = report.lines()
    terminalreporter.section("IR conformance summary")
    for line in lines:
        terminalreporter.write_line(line)
    cache = getattr(config, "cache", None)
    if cache is not None:
        path = cache.mkdir("ir_conformance") / "summary.md"
        path.write_text("\n".join(lines) + "\n")
        terminalreporter.write_line(f"  (written to {path})")
