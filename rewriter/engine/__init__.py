"""The rewrite engine: compiled rules, the matcher, the builder, the pass manager, the trace.

Data flows through it in this order: `compile_rule` turns a rule's AST into a matching plan;
the `Matcher` finds the plan at an anchor node and evaluates the `where` lines with the
expression evaluator; the `Builder` builds the `rewrite` block, checks it, and applies it;
the `PassManager` drives rules and built-in passes to a fixed point and records a `Trace`.
"""

from __future__ import annotations

from rewriter.engine._applicability import applicability
from rewriter.engine._builder import Builder, Runnable
from rewriter.engine._builtins import BUILTINS, Builtin, signatures
from rewriter.engine._calibration import (
    CALIBRATION_METHODS,
    HISTOGRAM_BINS,
    KEPT_ROWS,
    Calibration,
    ValueStatistics,
)
from rewriter.engine._compile import CompiledRule, compile_rule
from rewriter.engine._evaluate import evaluate
from rewriter.engine._facts import (
    const_array,
    constant_tensor_of,
    dtype_of,
    is_const,
    shape_of,
)
from rewriter.engine._find import Binding, Found, find_matches
from rewriter.engine._kinds import (
    CLEANUP,
    DECOMPOSITION,
    FOLDING,
    FUSION,
    KINDS,
    QUANTIZATION,
    REWRITE,
    rewrite_kind,
)
from rewriter.engine._manager import BlockRules, PassManager, pipeline
from rewriter.engine._matcher import Match, Matcher, MatchFailure
from rewriter.engine._options import ProgressCallback, RunOptions
from rewriter.engine._pass import (
    NO_CONTEXT,
    PassChange,
    PassContext,
    PassDefinition,
    PassResult,
    check_options,
    option,
    pass_table,
    run_checked,
)
from rewriter.engine._passes import BUILTIN_PASSES
from rewriter.engine._pending import (
    RULE_TAG,
    SOURCE_TAG,
    Applied,
    RewriteDeclinedError,
    RewriteRejectedError,
)
from rewriter.engine._pipeline import DEFAULT_PIPELINE
from rewriter.engine._runtime import KernelAvailability, int8_sums_saturate
from rewriter.engine._trace import (
    SkipEntry,
    SnapshotNode,
    StopReason,
    Trace,
    TraceEntry,
    distinct_label,
    graph_label,
    labels,
    node_label,
    one_line,
    op_histogram,
    op_types,
    snapshot,
    value_label,
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
from rewriter.engine._why_not import WhyNot

__all__ = [
    "BUILTINS",
    "BUILTIN_PASSES",
    "CALIBRATION_METHODS",
    "CLEANUP",
    "DECOMPOSITION",
    "DEFAULT_PIPELINE",
    "FOLDING",
    "FUSION",
    "HISTOGRAM_BINS",
    "KEPT_ROWS",
    "KINDS",
    "NO_CONTEXT",
    "QUANTIZATION",
    "REWRITE",
    "RULE_TAG",
    "SOURCE_TAG",
    "UNKNOWN",
    "Applied",
    "Binding",
    "BlockRules",
    "Builder",
    "Builtin",
    "Calibration",
    "CompiledRule",
    "EvalContext",
    "EvalError",
    "Found",
    "KernelAvailability",
    "Match",
    "MatchFailure",
    "Matcher",
    "NodeRef",
    "PassChange",
    "PassContext",
    "PassDefinition",
    "PassManager",
    "PassResult",
    "ProgressCallback",
    "RewriteDeclinedError",
    "RewriteRejectedError",
    "RunOptions",
    "Runnable",
    "SkipEntry",
    "SnapshotNode",
    "StopReason",
    "Trace",
    "TraceEntry",
    "ValueStatistics",
    "WhyNot",
    "applicability",
    "attr_to_python",
    "check_options",
    "compile_rule",
    "const_array",
    "constant_tensor_of",
    "distinct_label",
    "dtype_of",
    "equal",
    "evaluate",
    "find_matches",
    "graph_label",
    "int8_sums_saturate",
    "is_const",
    "labels",
    "node_label",
    "one_line",
    "op_histogram",
    "op_types",
    "option",
    "pass_table",
    "pipeline",
    "rewrite_kind",
    "run_checked",
    "shape_of",
    "signatures",
    "snapshot",
    "truth",
    "value_label",
]
