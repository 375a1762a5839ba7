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

from typing import TYPE_CHECKING

from rewriter._lazy import LazyNames

if TYPE_CHECKING:
    from rewriter._errors import (
        AdvisedError,
        Diagnostic,
        OptionError,
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
    "AdvisedError": "rewriter._errors",
    "Diagnostic": "rewriter._errors",
    "InputOptions": "rewriter.verification",
    "OptionError": "rewriter._errors",
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


_NAMES = LazyNames(__name__, _EXPORTS, globals())


def __getattr__(name: str) -> object:
    return _NAMES.get(name)


__all__ = [
    "AccuracyBudget",
    "AdvisedError",
    "Diagnostic",
    "InputOptions",
    "OptionError",
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
