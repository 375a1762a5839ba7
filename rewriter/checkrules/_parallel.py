"""Checking rules in several processes (`check-rules --jobs N`).

Each rule is checked on its own with its own seeded search, so checking rules in parallel
gives exactly the reports a sequential run gives, in the same (load) order. Workers load the
rule files themselves (a RuleSet may hold plugin functions that do not pickle) and keep them
for the rules that follow. Workers are spawned, never forked (see `check_rules_in_processes`).
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor

from rewriter import rules
from rewriter.checkrules._check import CheckOptions
from rewriter.checkrules._result import RuleReport

_LOADED: dict[tuple[tuple[str, ...], bool], rules.RuleSet] = {}


def _worker(
    paths: tuple[str, ...], allow_python: bool, name: str, options: CheckOptions
) -> RuleReport:
    from rewriter.api import load_rules
    from rewriter.checkrules import check_rules

    key = (paths, allow_python)
    if key not in _LOADED:
        _LOADED[key] = load_rules(*paths, allow_python=allow_python)
    (report,) = check_rules(_LOADED[key], options, names=[name], include_passes=False)
    return report


def check_rules_in_processes(
    paths: Sequence[str],
    names: Sequence[str],
    options: CheckOptions,
    *,
    jobs: int,
    allow_python: bool = False,
    progress: Callable[[RuleReport], None] | None = None,
) -> list[RuleReport]:
    """Check the rules called `names` (from the files at `paths`) in `jobs` processes."""
    # Not "fork": a parent that already ran onnxruntime has its thread pools, and a forked
    # child can deadlock on their locks.
    context = multiprocessing.get_context("spawn")
    key = tuple(str(p) for p in paths)
    reports: list[RuleReport] = []
    with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
        futures = [pool.submit(_worker, key, allow_python, name, options) for name in names]
        for future in futures:
            report = future.result()
            reports.append(report)
            if progress is not None:
                progress(report)
    return reports
