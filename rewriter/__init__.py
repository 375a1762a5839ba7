"""Rules, matching, rewriting and verification for ONNX models.

`rewrite(model, rules)` applies `.rw` rules (default: the shipped library) to a fixed point;
`parse` / `load_rules` read rule files; `verify` checks two models agree on generated inputs.

The names below are imported when first used: `import rewriter.cli` (the `rewrite` command)
stays cheap, so the command can answer Ctrl-C while onnx and numpy are still loading.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    # `rewriter.verify` is a callable module: `rewriter.verify(original, rewritten, ...)`
    # checks equivalence; `rewriter.verify.check_equivalence` and friends are its members.
    from rewriter import verify
    from rewriter._api import RewriteResult, library_path, rewrite
    from rewriter._errors import (
        Diagnostic,
        RewriteError,
        RuleCheckError,
        RuleError,
        RuleSyntaxError,
        Span,
    )
    from rewriter._manager import PassManager, RewriteOptions, WhyNot
    from rewriter._trace import SkipEntry, StopReason, Trace, TraceEntry
    from rewriter.dsl import load_rules, parse

# Public name -> the module that defines it.
_EXPORTS = {
    "Diagnostic": "rewriter._errors",
    "PassManager": "rewriter._manager",
    "RewriteError": "rewriter._errors",
    "RewriteOptions": "rewriter._manager",
    "RewriteResult": "rewriter._api",
    "RuleCheckError": "rewriter._errors",
    "RuleError": "rewriter._errors",
    "RuleSyntaxError": "rewriter._errors",
    "SkipEntry": "rewriter._trace",
    "Span": "rewriter._errors",
    "StopReason": "rewriter._trace",
    "Trace": "rewriter._trace",
    "TraceEntry": "rewriter._trace",
    "WhyNot": "rewriter._manager",
    "library_path": "rewriter._api",
    "load_rules": "rewriter.dsl",
    "parse": "rewriter.dsl",
    "rewrite": "rewriter._api",
}


def __getattr__(name: str) -> object:
    """Import a public name on first use (PEP 562)."""
    if name == "verify":
        return importlib.import_module("rewriter.verify")
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'rewriter' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "Diagnostic",
    "PassManager",
    "RewriteError",
    "RewriteOptions",
    "RewriteResult",
    "RuleCheckError",
    "RuleError",
    "RuleSyntaxError",
    "SkipEntry",
    "Span",
    "StopReason",
    "Trace",
    "TraceEntry",
    "WhyNot",
    "library_path",
    "load_rules",
    "parse",
    "rewrite",
    "verify",
]
