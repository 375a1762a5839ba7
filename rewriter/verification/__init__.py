"""Verification: does a rewritten model compute what the original computes?

`check_equivalence(original, rewritten)` runs both models (onnxruntime with graph
optimizations disabled, or `onnx.reference` with the project's kernels for ops onnxruntime
does not know, when the original needs them too; the rewritten one also with all of
onnxruntime's optimizations) on inputs that hypothesis generates from the graph's input types
(or on the caller's samples), then at the sizes the models mention, judges every
float output by its accuracy against a float64 evaluation of the original (`_oracle`,
`_compare`; integers, booleans and strings exactly) and, on a disagreement, shrinks the inputs
to a small counterexample and saves it as an `.npz`. `find_first_bad` bisects a replayed
rewrite trace to the first step (a rule's rewrite or a pass's change) that breaks agreement
on such a counterexample. Where the models agree with onnxruntime's optimizations off and
disagree with them on, `optimizer_difference` says what onnxruntime's optimizer does to the
rewritten model that it does not do to the original (a fusion the rewritten form lets fire).

`check_accuracy(original, rewritten, ["snr>=35"])` measures instead of judging equivalence:
metrics per output and over all outputs (`_accuracy`, `_metrics`), the verdict against the
budget. `verify` is `check_equivalence`, or `check_accuracy` when given `accept=`; the
`rewriter` package re-exports it as `rewriter.verify(original, rewritten, options,
accept=...)`. What a check is told comes in small frozen values (`_options`): `InputOptions`
(which inputs), `RuntimeOptions` (how models run), `Criterion` (how outputs are judged),
gathered in `VerifyOptions`.

onnxruntime, hypothesis and `onnx.reference` are imported only when a check runs.

Wiring `rewrite MODEL --verify` (the engine replays its trace; names here are the caller's):

    result = check_equivalence(input_path, rewritten_model, VerifyOptions(InputOptions(20, 0)))
    if not result.ok:
        k = find_first_bad(trace.steps, replay_first, input_path, result.counterexample)
        # k is None (final model agrees: flaky criterion?), 0 (the untouched model already
        # disagrees) or the 1-based number of the step that broke it: trace.step_entries(k).
        # check_on_inputs(input_path, replay_first(k), result.counterexample) gives its table.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import overload

from rewriter.verification._accuracy import (
    AccuracyData,
    acceptances,
    accuracy_data,
    check_accuracy,
    metric_with_bound,
    pessimistic_bound,
    score,
)
from rewriter.verification._accuracy_result import (
    ALL_OUTPUTS,
    AccuracyResult,
    MetricRow,
    format_metric,
)
from rewriter.verification._approximation import (
    ApproximationResult,
    NewSpecials,
    find_new_specials,
    measure_approximation,
    plain_samples,
)
from rewriter.verification._bisect import find_first_bad, load_failure
from rewriter.verification._check import check_equivalence, check_on_inputs, run_model
from rewriter.verification._compare import (
    DEFAULT_FACTOR,
    FLOOR_ULPS,
    Criterion,
    Tolerance,
    accuracy_floor,
    default_tolerance,
)
from rewriter.verification._counterexample import (
    default_counterexample_path,
    load_counterexample,
    save_counterexample,
)
from rewriter.verification._errors import VerifyError
from rewriter.verification._inputs import analyze_inputs, split_samples
from rewriter.verification._kernels import KERNELS, extract_image_patches
from rewriter.verification._metrics import METRICS, Acceptance, measure, parse_acceptance
from rewriter.verification._optimizer_diff import (
    describe_optimizer_difference,
    optimizer_difference,
)
from rewriter.verification._options import (
    InputOptions,
    RuntimeOptions,
    VerifyOptions,
    VerifyProgress,
)
from rewriter.verification._oracle import OracleModel, oracle_model
from rewriter.verification._result import OutputStats, VerifyResult
from rewriter.verification._runner import RunError, Session, open_optimized, open_session
from rewriter.verification._source import LoadedModel, ModelSource, load_model


@overload
def verify(
    original: ModelSource,
    rewritten: ModelSource,
    options: VerifyOptions | None = None,
    *,
    accept: None = None,
) -> VerifyResult: ...


@overload
def verify(
    original: ModelSource,
    rewritten: ModelSource,
    options: VerifyOptions | None = None,
    *,
    accept: Sequence[str | Acceptance],
) -> AccuracyResult: ...


def verify(
    original: ModelSource,
    rewritten: ModelSource,
    options: VerifyOptions | None = None,
    *,
    accept: Sequence[str | Acceptance] | None = None,
) -> VerifyResult | AccuracyResult:
    """`check_equivalence(original, rewritten, options)`, or `check_accuracy` with `accept`.

    `accept` is a budget such as `["snr>=35"]`: the result is then an `AccuracyResult`,
    measured on `options.inputs` and run as `options.runtime` says.

    Raises:
        ValueError: `accept` with a criterion or a counterexample path in `options` (they
            belong to the equivalence check).
    """
    options = options or VerifyOptions()
    if accept is None:
        return check_equivalence(original, rewritten, options)
    if options.criterion != Criterion() or options.counterexample_path is not None:
        raise ValueError(
            "a criterion or counterexample path applies to the equivalence check; with "
            "accept the models are measured against the budget instead"
        )
    return check_accuracy(original, rewritten, accept, options.inputs, options.runtime)


__all__ = [
    "ALL_OUTPUTS",
    "DEFAULT_FACTOR",
    "FLOOR_ULPS",
    "KERNELS",
    "METRICS",
    "Acceptance",
    "AccuracyData",
    "AccuracyResult",
    "ApproximationResult",
    "Criterion",
    "InputOptions",
    "LoadedModel",
    "MetricRow",
    "ModelSource",
    "NewSpecials",
    "OracleModel",
    "OutputStats",
    "RunError",
    "RuntimeOptions",
    "Session",
    "Tolerance",
    "VerifyError",
    "VerifyOptions",
    "VerifyProgress",
    "VerifyResult",
    "acceptances",
    "accuracy_data",
    "accuracy_floor",
    "analyze_inputs",
    "check_accuracy",
    "check_equivalence",
    "check_on_inputs",
    "default_counterexample_path",
    "default_tolerance",
    "describe_optimizer_difference",
    "extract_image_patches",
    "find_first_bad",
    "find_new_specials",
    "format_metric",
    "load_counterexample",
    "load_failure",
    "load_model",
    "measure",
    "measure_approximation",
    "metric_with_bound",
    "open_optimized",
    "open_session",
    "optimizer_difference",
    "oracle_model",
    "parse_acceptance",
    "pessimistic_bound",
    "plain_samples",
    "run_model",
    "save_counterexample",
    "score",
    "split_samples",
    "verify",
]
