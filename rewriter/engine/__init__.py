"""The rewrite engine: compiled rules, the matcher, the builder, the pass manager, the trace.

Data flows through it in this order: `compile_rule` turns a rule's AST into a matching plan;
the `Matcher` finds the plan at an anchor node and evaluates the `where` lines with the
expression evaluator; the `Builder` builds the `rewrite` block, checks it, and applies it;
the `PassManager` drives rules and built-in passes to a fixed point and records a `Trace`.
"""

from __future__ import annotations

from rewriter.engine._builder import (
    RULE_TAG,
    SOURCE_TAG,
    Builder,
    RewriteDeclinedError,
    RewriteRejectedError,
)
from rewriter.engine._builtins import BUILTINS, Builtin, signatures
from rewriter.engine._compile import CompiledRule, compile_rule
from rewriter.engine._evaluate import evaluate
from rewriter.engine._manager import (
    BlockRules,
    PassManager,
    ProgressCallback,
    RewriteOptions,
    WhyNot,
    applicability,
)
from rewriter.engine._matcher import Match, Matcher, MatchFailure
from rewriter.engine._pass import (
    PassChange,
    PassDefinition,
    PassResult,
    check_options,
    option,
    pass_table,
)
from rewriter.engine._passes import BUILTIN_PASSES
from rewriter.engine._trace import (
    SkipEntry,
    SnapshotNode,
    StopReason,
    Trace,
    TraceEntry,
    op_histogram,
)
from rewriter.engine._values import (
    UNKNOWN,
    EvalContext,
    EvalError,
    NodeRef,
    attr_to_python,
    equal,
    truth,
)

__all__ = [
    "BUILTINS",
    "BUILTIN_PASSES",
    "RULE_TAG",
    "SOURCE_TAG",
    "UNKNOWN",
    "BlockRules",
    "Builder",
    "Builtin",
    "CompiledRule",
    "EvalContext",
    "EvalError",
    "Match",
    "MatchFailure",
    "Matcher",
    "NodeRef",
    "PassChange",
    "PassDefinition",
    "PassManager",
    "PassResult",
    "ProgressCallback",
    "RewriteDeclinedError",
    "RewriteOptions",
    "RewriteRejectedError",
    "SkipEntry",
    "SnapshotNode",
    "StopReason",
    "Trace",
    "TraceEntry",
    "WhyNot",
    "applicability",
    "attr_to_python",
    "check_options",
    "compile_rule",
    "equal",
    "evaluate",
    "op_histogram",
    "option",
    "pass_table",
    "signatures",
    "truth",
]
