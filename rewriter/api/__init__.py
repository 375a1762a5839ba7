"""The Python API that `rewriter` re-exports: `rewrite(model, rules)` and rule loading."""

from __future__ import annotations

from rewriter.api._rewrite import (
    RewriteResult,
    as_model,
    default_library_files,
    library_path,
    load_ruleset,
    rewrite,
    rule_files,
)
from rewriter.api._vocabulary import (
    PASSES,
    VOCABULARY,
    check_files,
    load_rules,
    pass_manager,
)

__all__ = [
    "PASSES",
    "VOCABULARY",
    "RewriteResult",
    "as_model",
    "check_files",
    "default_library_files",
    "library_path",
    "load_rules",
    "load_ruleset",
    "pass_manager",
    "rewrite",
    "rule_files",
]
