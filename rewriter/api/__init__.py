"""The Python API that `rewriter` re-exports: `rewrite(model, rules, options)`, rule loading.

`rewrite` runs the whole job on a model (see `RewriteOptions` for what it can be told:
approximate rules run after the exact rules' fixed point, `_stages`; with a quantization
preset, an `AccuracyBudget` or a speed check the approximate rewrites are measured before
they are kept, `_precision`, by `rewriter.quantize`);
`load_rules` reads rule files against the standard vocabulary (the engine's built-ins and
every standard pass); `pass_manager` gives an engine pass manager with that vocabulary.
"""

from __future__ import annotations

from rewriter.api._budgeted import rewrite
from rewriter.api._extract import extract, verify_extracted
from rewriter.api._find import find
from rewriter.api._graft import Grafted, graft, parse_connection
from rewriter.api._library import (
    OPT_IN_FOLDERS,
    RulesLike,
    default_library_files,
    inline_files,
    library_path,
    load_ruleset,
    rule_files,
)
from rewriter.api._models import as_model, freeze_inputs_with_initializers
from rewriter.api._options import RewriteOptions
from rewriter.api._precision import preset_rule_paths
from rewriter.api._rewrite import PhaseClock, RewriteResult
from rewriter.api._split import Stage, load_pipeline, split, write_pipeline
from rewriter.api._vocabulary import (
    PASSES,
    VOCABULARY,
    check_files,
    load_rules,
    pass_manager,
)
from rewriter.quantize import (
    AccuracyBudget,
    BudgetResult,
    BudgetStep,
    CalibrationSamples,
    SiteResult,
    SpeedCheck,
    SpeedResult,
)

__all__ = [
    "OPT_IN_FOLDERS",
    "PASSES",
    "VOCABULARY",
    "AccuracyBudget",
    "BudgetResult",
    "BudgetStep",
    "CalibrationSamples",
    "Grafted",
    "PhaseClock",
    "RewriteOptions",
    "RewriteResult",
    "RulesLike",
    "SiteResult",
    "SpeedCheck",
    "SpeedResult",
    "Stage",
    "as_model",
    "check_files",
    "default_library_files",
    "extract",
    "find",
    "freeze_inputs_with_initializers",
    "graft",
    "inline_files",
    "library_path",
    "load_pipeline",
    "load_rules",
    "load_ruleset",
    "parse_connection",
    "pass_manager",
    "preset_rule_paths",
    "rewrite",
    "rule_files",
    "split",
    "verify_extracted",
    "write_pipeline",
]
