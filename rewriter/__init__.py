"""Rules, matching, rewriting and verification for ONNX models.

`rewrite(model, rules)` applies `.rw` rules (default: the shipped library) to a fixed point;
`parse` / `load_rules` read rule files; `verify` checks two models agree on generated inputs.

The package is layered, each layer importing only the ones before it:
`rewriter.dsl` (the rule language) -> `rewriter.engine` (matching, building, the pass
manager) -> `rewriter.loops`, `rewriter.verification` (clients of the engine) ->
`rewriter.quantize` (calibration, presets, budgets, speed checks) -> `rewriter.api` ->
`rewriter.checkrules`, `rewriter.report` -> `rewriter.cli`.

The names below are imported when first used (PEP 562): `import rewriter.cli` (the `rewrite`
command) stays cheap, so the command can answer Ctrl-C while onnx and numpy are still loading.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rewriter._errors import (
        Diagnostic,
        RewriteError,
        RuleCheckError,
        RuleError,
        RuleSyntaxError,
        Span,
    )
    from rewriter.api import (
        AccuracyBudget,
        RewriteOptions,
        RewriteResult,
        library_path,
        load_rules,
        rewrite,
    )
    from rewriter.dsl import parse
    from rewriter.engine import (
        PassManager,
        SkipEntry,
        StopReason,
        Trace,
        TraceEntry,
        WhyNot,
    )
    from rewriter.verification import InputOptions, VerifyOptions, verify

# Public name -> the module that defines it.
_EXPORTS = {
    "AccuracyBudget": "rewriter.api",
    "Diagnostic": "rewriter._errors",
    "InputOptions": "rewriter.verification",
    "PassManager": "rewriter.engine",
    "RewriteError": "rewriter._errors",
    "RewriteOptions": "rewriter.api",
    "RewriteResult": "rewriter.api",
    "RuleCheckError": "rewriter._errors",
    "RuleError": "rewriter._errors",
    "RuleSyntaxError": "rewriter._errors",
    "SkipEntry": "rewriter.engine",
    "Span": "rewriter._errors",
    "StopReason": "rewriter.engine",
    "Trace": "rewriter.engine",
    "TraceEntry": "rewriter.engine",
    "VerifyOptions": "rewriter.verification",
    "WhyNot": "rewriter.engine",
    "library_path": "rewriter.api",
    "load_rules": "rewriter.api",
    "parse": "rewriter.dsl",
    "rewrite": "rewriter.api",
    "verify": "rewriter.verification",
}


def __getattr__(name: str) -> object:
    """Import a public name on first use (PEP 562)."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'rewriter' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "AccuracyBudget",
    "Diagnostic",
    "InputOptions",
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
    "VerifyOptions",
    "WhyNot",
    "library_path",
    "load_rules",
    "parse",
    "rewrite",
    "verify",
]
