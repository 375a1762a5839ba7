"""Rules, matching, rewriting and verification for ONNX models.

`rewrite(model, rules)` applies `.rw` rules (default: the shipped library) to a fixed point;
`parse` / `load_rules` read rule files; `verify` checks two models agree on generated inputs.
"""

from __future__ import annotations

# `rewriter.verify` is a callable module: `rewriter.verify(original, rewritten, examples=...)`
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
