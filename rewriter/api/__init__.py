"""The Python API that `rewriter` re-exports: `rewrite(model, rules, options)`, rule loading.

`rewrite` runs the whole job on a model (see `RewriteOptions` for what it can be told:
approximate rules run after the exact rules' fixed point, `_stages`; with a quantization
preset, an `AccuracyBudget` or a speed check the approximate rewrites are measured before
they are kept, `_precision`, by `rewriter.quantize`);
`load_rules`, the one rule loader, reads rule files and folders (or gives the shipped
library) against the standard vocabulary (the engine's built-ins and every standard pass);
`pass_manager` gives an engine pass manager with that vocabulary.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rewriter._lazy import LazyNames
from rewriter.api._budgeted import rewrite
from rewriter.api._flops import node_flops
from rewriter.api._library import (
    OPT_IN_FOLDERS,
    RulesLike,
    default_library_files,
    inline_files,
    library_path,
    load_rules,
    rule_files,
)
from rewriter.api._models import as_model, freeze_inputs_with_initializers, set_input_shapes
from rewriter.api._options import RewriteOptions
from rewriter.api._profile import Profile, profile
from rewriter.api._rewrite import PhaseClock, RewriteResult
from rewriter.api._stats import collect as collect_stats
from rewriter.api._stats import describe_counts, human_bytes
from rewriter.api._vocabulary import (
    PASSES,
    VOCABULARY,
    check_files,
    pass_manager,
)

if TYPE_CHECKING:
    from rewriter.api._precision import preset_rule_paths
    from rewriter.quantize import (
        AccuracyBudget,
        BudgetResult,
        BudgetStep,
        CalibrationSamples,
        SiteResult,
        SpeedCheck,
        SpeedResult,
    )

# The quantization names bring in the quantization and verification packages (onnxruntime
# sessions, metrics): loaded when first asked for (PEP 562), so that a plain rewrite does not.
_LAZY = {
    "AccuracyBudget": "rewriter.quantize",
    "BudgetResult": "rewriter.quantize",
    "BudgetStep": "rewriter.quantize",
    "CalibrationSamples": "rewriter.quantize",
    "SiteResult": "rewriter.quantize",
    "SpeedCheck": "rewriter.quantize",
    "SpeedResult": "rewriter.quantize",
    "preset_rule_paths": "rewriter.api._precision",
}


_NAMES = LazyNames(__name__, _LAZY, globals())


def __getattr__(name: str) -> object:
    return _NAMES.get(name)


__all__ = [
    "OPT_IN_FOLDERS",
    "PASSES",
    "VOCABULARY",
    "AccuracyBudget",
    "BudgetResult",
    "BudgetStep",
    "CalibrationSamples",
    "PhaseClock",
    "Profile",
    "RewriteOptions",
    "RewriteResult",
    "RulesLike",
    "SiteResult",
    "SpeedCheck",
    "SpeedResult",
    "as_model",
    "check_files",
    "collect_stats",
    "default_library_files",
    "describe_counts",
    "freeze_inputs_with_initializers",
    "human_bytes",
    "inline_files",
    "library_path",
    "load_rules",
    "node_flops",
    "pass_manager",
    "preset_rule_paths",
    "profile",
    "rewrite",
    "rule_files",
    "set_input_shapes",
]
