"""`rewriter.api.rewrite`: one run (`_rewrite`), or a measured one (`_precision`).

A run with a quantization preset, an accuracy budget or a speed check measures its
approximate rewrites before it keeps them (`_precision`); every other run is one staged
fixed point (`_rewrite`). This module sits above both so that neither imports the other's
caller.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import ir
from rewriter.api import _rewrite as one_run
from rewriter.api._library import RulesLike
from rewriter.api._options import RewriteOptions
from rewriter.api._precision import is_measured, rewrite_measured
from rewriter.api._rewrite import RewriteResult

if TYPE_CHECKING:
    import onnx


def rewrite(
    model: str | os.PathLike[str] | ir.Model | onnx.ModelProto,
    rules: RulesLike = None,
    options: RewriteOptions | None = None,
) -> RewriteResult:
    """Apply `rules` (default: the shipped library) to `model` until nothing changes.

    Rules that declare themselves `approximate` run after the exact ones have reached their
    fixed point. With `options.quantize` (a preset), `options.budget` (an `AccuracyBudget`)
    or `options.speed_check`, the approximate rewrites are measured before they are kept:
    `result.budget` and `result.speed` say what was measured and decided, and the result is
    always a new model.

    Args:
        model: a path, an onnx.ModelProto, or an ir.Model (copied unless `options.copy` is
            false).
        rules: rule files or folders, a loaded RuleSet, or None for the shipped library.
        options: how to run (see `RewriteOptions`); the defaults when None.

    Returns:
        The rewritten model, its trace and statistics.

    Raises:
        RewriteError: bad rules, a model that cannot be read, a model the budget or the speed
            check cannot measure, or (an internal error) a result that onnx's checker refuses
            although the input passes it.
    """
    options = options or RewriteOptions()
    if not is_measured(options):
        return one_run.rewrite(model, rules, options)
    return rewrite_measured(model, rules, options)
