"""The Python API that `rewriter` re-exports: `rewrite(model, rules, options)`, rule loading.

`rewrite` runs the whole job on a model (see `RewriteOptions` for what it can be told; with
an `AccuracyBudget` it measures the approximate rewrites and keeps those the model can
afford, `_budget`, running the measurements serially, on local processes or on Ray,
`_sensitivity`);
`load_rules` reads rule files against the standard vocabulary (the engine's built-ins and
every standard pass); `pass_manager` gives an engine pass manager with that vocabulary.
"""

from __future__ import annotations

from rewriter.api._budget_types import AccuracyBudget, BudgetResult, BudgetStep, SiteResult
from rewriter.api._budgeted import rewrite
from rewriter.api._flops import node_flops
from rewriter.api._library import (
    OPT_IN_FOLDERS,
    RulesLike,
    default_library_files,
    inline_files,
    library_path,
    load_ruleset,
    rule_files,
)
from rewriter.api._models import as_model, freeze_inputs_with_initializers, set_input_shapes
from rewriter.api._options import RewriteOptions
from rewriter.api._rewrite import PhaseClock, RewriteResult
from rewriter.api._vocabulary import (
    PASSES,
    VOCABULARY,
    check_files,
    load_rules,
    pass_manager,
)

__all__ = [
    "OPT_IN_FOLDERS",
    "PASSES",
    "VOCABULARY",
    "AccuracyBudget",
    "BudgetResult",
    "BudgetStep",
    "PhaseClock",
    "RewriteOptions",
    "RewriteResult",
    "RulesLike",
    "SiteResult",
    "as_model",
    "check_files",
    "default_library_files",
    "freeze_inputs_with_initializers",
    "inline_files",
    "library_path",
    "load_rules",
    "load_ruleset",
    "node_flops",
    "pass_manager",
    "rewrite",
    "rule_files",
    "set_input_shapes",
]
