"""`rewriter.api.rewrite`: one run (`_rewrite`), or with an accuracy budget several (`_budget`).

The budget measures the model rewritten with some approximate sites left out, so it calls
the one-run `rewrite` many times (in worker processes too, `_sensitivity`); this module sits
above both so that neither imports the other's caller.
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import TYPE_CHECKING

import ir
from rewriter._errors import RewriteError
from rewriter.api import _budget
from rewriter.api import _rewrite as one_run
from rewriter.api._library import RulesLike, load_rules
from rewriter.api._options import RewriteOptions
from rewriter.api._rewrite import PhaseClock, RewriteResult
from rewriter.rules import RuleSet
from rewriter.verification import VerifyError

if TYPE_CHECKING:
    import onnx


def rewrite(
    model: str | os.PathLike[str] | ir.Model | onnx.ModelProto,
    rules: RulesLike = None,
    options: RewriteOptions | None = None,
) -> RewriteResult:
    """Apply `rules` (default: the shipped library) to `model` until nothing changes.

    With `options.budget` (an `AccuracyBudget`), the approximate rewrites are measured and
    the most sensitive left out until the model meets the budget; `result.budget` says what
    was measured and decided, and the result is always a new model.

    Args:
        model: a path, an onnx.ModelProto, or an ir.Model (copied unless `options.copy` is
            false).
        rules: rule files or folders, a loaded RuleSet, or None for the shipped library.
        options: how to run (see `RewriteOptions`); the defaults when None.

    Returns:
        The rewritten model, its trace and statistics.

    Raises:
        RewriteError: bad rules, a model that cannot be read, a model the budget cannot
            measure, or (an internal error) a result that onnx's checker refuses although
            the input passes it.
    """
    options = options or RewriteOptions()
    if options.budget is None:
        return one_run.rewrite(model, rules, options)
    return _within_budget(model, rules, options)


def _within_budget(
    model: str | os.PathLike[str] | ir.Model | onnx.ModelProto,
    rules: RulesLike,
    options: RewriteOptions,
) -> RewriteResult:
    """`rewrite` with an accuracy budget (`rewriter.api._budget`): tune, rewrite, check.

    The result is always a new model (the original is needed again for the measurements).

    Raises:
        RewriteError: as `rewrite`, or the models cannot be measured.
    """
    budget = options.budget
    assert budget is not None
    ruleset = rules if isinstance(rules, RuleSet) else None
    clock = PhaseClock()
    if ruleset is None:
        with clock.phase("load_rules"):
            ruleset = load_rules(rules, allow_python=options.allow_python, params=options.params)
    snapshot = _budget.source_snapshot(model, budget)
    plain = dataclasses.replace(options, budget=None)
    first = one_run.rewrite(model, ruleset, dataclasses.replace(plain, copy=True))
    start = time.perf_counter()
    try:
        decision, final_data, notes = _budget.tune(snapshot, ruleset, options, first)
    except VerifyError as exc:
        raise RewriteError(f"accuracy budget: {exc}") from exc
    result = first
    excluded = decision.excluded(budget.accept) if decision is not None else {}
    if budget.progress is not None:
        budget.progress("the final rewrite and its check on independent inputs")
    if excluded:
        merged = {**options.excluded_sites, **excluded}
        again = dataclasses.replace(plain, excluded_sites=merged, copy=True)
        result = one_run.rewrite(_budget.snapshot_model(snapshot), ruleset, again)
    checked = _budget.finish(decision, final_data, notes, first, result, budget)
    timings = {**clock.seconds, **first.timings, "budget": time.perf_counter() - start}
    return dataclasses.replace(result, budget=checked, timings=timings)
