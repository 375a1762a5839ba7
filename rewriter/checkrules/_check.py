"""Checking one rule: find instances with hypothesis, rewrite each with the rule alone, verify.

Instances are searched by a hypothesis run (`st.data()` draws every choice, `@seed` makes
the search reproducible, no example database): an attempt that yields no instance is
rejected, up to a budget of attempts. Each instance is then rewritten by the engine with a
rule set holding only this rule (`max_rewrites=1`, no passes), and the original and the
rewritten model are compared by `rewriter.verification.check_equivalence` on generated inputs.

Tolerances are the verifier's per-dtype defaults, except for float64 outputs: a rule may
treat a constant as its literal when they agree within the matcher's 1e-6 relative tolerance
(0.7978846 for sqrt(2/pi)), and float attributes are float32 (HardSigmoid's alpha,
Attention's scale), so a correct rule can move a float64 result by about 1e-7 of its
magnitude. Float64 outputs are compared with `rtol = atol = DOUBLE_TOLERANCE` (1e-6) rather
than the verifier's (1e-7, 1e-9), which such rules could never meet.

A float16 or bfloat16 instance that disagrees is compared again with its narrow tensors
widened to float32 at the narrow type's tolerance (see `_widen`): it agrees then when the
difference was the original's rounding of intermediate values.

A float32 instance that disagrees on an input where the *original* cannot compute its own
function to float32's tolerance (its result differs from that of the same graph in double:
attention scores of 1e7 whose rounding swamps the mask) is ill-conditioned there and judges
no rewrite: it is skipped, with the reason. The test looks at the original only, so a wrong
rewrite still fails on every well-conditioned instance.

Verdicts: *failed* when an instance disagrees, when a rewrite of an accepted instance is
rolled back (DESIGN: an ill-typed rewrite is the rule's fault), or when the rewritten model
cannot be run; *verified* when at least one instance was checked and all agreed; *not
instantiable* otherwise, with the reason of the furthest attempt.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import ir
from rewriter._errors import RewriteError
from rewriter.checkrules._analysis import NotInstantiableError, RulePlan, analyze
from rewriter.checkrules._attempt import Accepted, Rejection, attempt
from rewriter.checkrules._choices import Choices
from rewriter.checkrules._instance import Instance
from rewriter.checkrules._result import Counterexample, RuleReport, Status
from rewriter.checkrules._widen import narrow_outputs, widen, widen_to_double
from rewriter.dsl import _ast as ast

logger = logging.getLogger(__name__)


DOUBLE_TOLERANCE = 1e-6
_DOUBLE = 11  # onnx.TensorProto.DOUBLE
_FLOAT = 1  # onnx.TensorProto.FLOAT


def _tolerances(proto: Any) -> tuple[float | None, float | None]:
    """(rtol, atol) for comparing an instance: see the module docstring."""
    types = {o.type.tensor_type.elem_type for o in proto.graph.output}
    if types == {_DOUBLE}:
        return DOUBLE_TOLERANCE, DOUBLE_TOLERANCE
    return None, None


@dataclasses.dataclass(frozen=True, slots=True)
class CheckOptions:
    """Budgets of one check (per rule)."""

    instances: int = 4
    examples: int = 10
    seed: int = 0
    attempts: int = 60


@dataclasses.dataclass(slots=True)
class _Search:
    """Accepted instances and the rejections of one rule's search."""

    accepted: list[Instance] = dataclasses.field(default_factory=list)
    attempts: int = 0
    rejections: collections.Counter[tuple[int, str]] = dataclasses.field(
        default_factory=collections.Counter
    )

    def furthest(self) -> str:
        """The most frequent reason among the rejections that got furthest."""
        if not self.rejections:
            return "no attempt was made"
        stage = max(s for s, _ in self.rejections)
        reasons = [(n, r) for (s, r), n in self.rejections.items() if s == stage]
        reasons.sort(key=lambda item: (-item[0], item[1]))
        return reasons[0][1]


class _SearchDoneError(Exception):
    """Raised inside the hypothesis run once the budget is spent or enough were found."""


def _search(plan: RulePlan, options: CheckOptions, ruleset: ast.RuleSet) -> _Search:
    from hypothesis import HealthCheck, Phase, Verbosity, given, reject, settings
    from hypothesis import seed as seed_decorator
    from hypothesis import strategies as st
    from hypothesis.errors import FlakyStrategyDefinition, Unsatisfiable

    state = _Search()
    config = settings(
        settings.get_profile("default"),  # the caller's active profile must not leak in
        max_examples=options.instances,
        deadline=None,
        database=None,
        derandomize=False,
        phases=(Phase.generate,),
        suppress_health_check=list(HealthCheck),
        verbosity=Verbosity.quiet,
        print_blob=False,
    )

    @config
    @seed_decorator(options.seed)
    @given(st.data())
    def search(data: Any) -> None:
        if state.attempts >= options.attempts or len(state.accepted) >= options.instances:
            # Stop the run: rejecting here without drawing would look flaky to hypothesis.
            raise _SearchDoneError
        state.attempts += 1
        outcome = attempt(plan, Choices(data), ruleset)
        if isinstance(outcome, Rejection):
            state.rejections[(outcome.stage, outcome.reason)] += 1
            reject()
        assert isinstance(outcome, Accepted), "attempt returns Accepted or Rejection"
        state.accepted.append(outcome.instance)

    # Hypothesis replays the example that stopped the run and, as that one draws nothing,
    # may call the run flaky; the instances found before are what counts.
    with contextlib.suppress(Unsatisfiable, _SearchDoneError, FlakyStrategyDefinition):
        search()
    return state


@dataclasses.dataclass(frozen=True, slots=True)
class _Outcome:
    """One instance checked: examples run, and a counterexample or a skip reason."""

    examples: int = 0
    failure: Counterexample | None = None
    skipped: str = ""


def _text(proto: Any) -> str:
    import onnx.printer

    try:
        return str(onnx.printer.to_text(proto))
    except Exception:  # the printer refuses some models; the proto's text form always works
        return str(proto)


def _rewrite_alone(rule: ast.Rule, ruleset: ast.RuleSet, instance: Instance) -> Any:
    """The engine's rewrite of the instance with only `rule` (one rewrite at most)."""
    from rewriter.api import RewriteOptions, rewrite

    single = dataclasses.replace(ruleset, rules=(rule,), passes=())
    return rewrite(
        instance.proto, single, RewriteOptions(max_rewrites=1, target_opset=instance.target)
    )


def _check_instance(
    rule: ast.Rule, ruleset: ast.RuleSet, instance: Instance, examples: int, seed: int
) -> _Outcome:
    from rewriter.verification import VerifyError, check_equivalence

    model_text = _text(instance.proto)
    try:
        result = _rewrite_alone(rule, ruleset, instance)
    except ir.ConversionError as exc:
        return _Outcome(skipped=f"onnx's version converter failed: {exc}")
    except RewriteError as exc:
        return _Outcome(failure=Counterexample(model_text, {}, None, f"the rewrite failed: {exc}"))
    applied = [e for e in result.trace.entries if e.kind == "rule"]
    if not applied:
        rolled = [s.reason for s in result.trace.skips if s.rule == rule.name]
        declined = [r for r in rolled if r.endswith("nothing to do")]
        if declined:
            return _Outcome(skipped=f"the engine declined the rewrite: {declined[0]}")
        if any(reason.startswith("rolled back") for reason in rolled):
            message = f"the rewrite was rolled back: {rolled[0].removeprefix('rolled back: ')}"
            return _Outcome(failure=Counterexample(model_text, {}, None, message))
        return _Outcome(skipped="the engine did not apply the rule: " + "; ".join(rolled))
    rewritten = result.proto
    rtol, atol = _tolerances(instance.proto)
    try:
        verdict = check_equivalence(
            instance.proto,
            rewritten,
            examples=examples,
            seed=seed,
            rtol=rtol,
            atol=atol,
            save_counterexample=False,
        )
    except VerifyError as exc:
        message = str(exc)
        if message.startswith(("original", "the original")):
            return _Outcome(skipped=f"the instance cannot be run: {message}")
        return _Outcome(failure=Counterexample(model_text, {}, None, message, _text(rewritten)))
    if verdict.ok:
        return _Outcome(examples=verdict.examples_run)
    widened = _widened_examples(instance.proto, rewritten, examples, seed)
    if widened:
        return _Outcome(examples=widened)
    ill_conditioned = _ill_conditioned(instance.proto, verdict.counterexample or {})
    if ill_conditioned:
        return _Outcome(skipped=ill_conditioned)
    errors = [o.max_abs_err for o in verdict.outputs if o.max_abs_err is not None]
    inputs = dict(verdict.counterexample or {})
    message = verdict.message or verdict.summary()
    failure = Counterexample(
        model_text, inputs, max(errors, default=None), message, _text(rewritten)
    )
    return _Outcome(examples=verdict.examples_run, failure=failure)


def _widened_examples(original: Any, rewritten: Any, examples: int, seed: int) -> int:
    """Examples that agree once a float16/bfloat16 instance is widened (0: not all agree).

    See `_widen`: the narrow type's tolerance, without the rounding of intermediate values.
    """
    import numpy as np

    from rewriter.verification import VerifyError, check_equivalence, default_tolerance

    if not narrow_outputs(original):
        return 0
    narrow = {o.type.tensor_type.elem_type for o in original.graph.output}
    dtypes = [np.dtype(ir.numpy_dtype(ir.DataType(t))) for t in narrow]
    tolerance = max((default_tolerance(d) for d in dtypes), key=lambda t: (t.rtol, t.atol))
    try:
        verdict = check_equivalence(
            widen(original),
            widen(rewritten),
            examples=examples,
            seed=seed,
            rtol=tolerance.rtol,
            atol=tolerance.atol,
            save_counterexample=False,
        )
    except VerifyError:
        return 0
    return verdict.examples_run if verdict.ok else 0


def _ill_conditioned(original: Any, inputs: Mapping[str, Any]) -> str:
    """Why `original` cannot judge a rewrite on `inputs` ("" when it can; see the docstring).

    The float32 outputs of the original are compared with those of its double widening,
    at float32's tolerance.
    """
    import numpy as np

    from rewriter.verification import VerifyError, default_tolerance, run_model
    from rewriter.verification._compare import compare_arrays

    types = {o.type.tensor_type.elem_type for o in original.graph.output}
    if not inputs or types != {_FLOAT}:
        return ""
    wide_inputs = {
        name: np.asarray(array).astype(np.float64)
        if np.asarray(array).dtype == np.float32
        else array
        for name, array in inputs.items()
    }
    try:
        narrow = run_model(original, inputs)
        wide = run_model(widen_to_double(original), wide_inputs)
    except VerifyError:
        return ""
    tolerance = default_tolerance(np.dtype(np.float32))
    for name, value in narrow.items():
        exact = np.asarray(wide[name]).astype(np.float32)
        comparison = compare_arrays(exact, value, tolerance)
        if not comparison.ok:
            return (
                f"ill-conditioned instance: on the counterexample the original's float32 `{name}`"
                f" differs from its double result ({comparison.reason})"
            )
    return ""


@contextlib.contextmanager
def without_local_constants() -> Iterator[None]:
    """Hypothesis without the literals it collects from the imported local modules.

    Hypothesis draws, now and then, a constant found in the source of any imported module
    outside site-packages, so which project and test modules happen to be imported would
    change the instances and examples of a seed: a rule checked in a worker process
    (`--jobs`) or under pytest would get other instances than in the command's process.
    (Hypothesis offers no setting for this; without the internal hook, nothing changes.)
    """
    from hypothesis.internal.conjecture import providers
    from hypothesis.internal.constants_ast import Constants

    original = getattr(providers, "_get_local_constants", None)
    cache = getattr(providers, "CONSTANTS_CACHE", None)
    if original is None or cache is None:
        yield
        return
    empty = Constants()
    setattr(providers, "_get_local_constants", lambda: empty)  # noqa: B010
    cache.cache.clear()
    try:
        yield
    finally:
        setattr(providers, "_get_local_constants", original)  # noqa: B010
        cache.cache.clear()


def check_rule(
    compiled_rule: Any,
    ruleset: ast.RuleSet,
    options: CheckOptions,
) -> RuleReport:
    """Check one compiled rule (see the module docstring)."""
    with without_local_constants():
        return _check_rule(compiled_rule, ruleset, options)


def _check_rule(
    compiled_rule: Any,
    ruleset: ast.RuleSet,
    options: CheckOptions,
) -> RuleReport:
    start = time.perf_counter()
    rule: ast.Rule = compiled_rule.rule
    location = f"{rule.span.path}:{rule.span.line}"
    report = _reporter(rule.name, location, start)
    try:
        plan = analyze(compiled_rule)
    except NotInstantiableError as exc:
        return report(Status.NOT_INSTANTIABLE, detail=str(exc), by_tests=exc.by_tests)
    search = _search(plan, options, ruleset)
    if not search.accepted:
        detail = f"{search.furthest()} ({search.attempts} attempts)"
        return report(Status.NOT_INSTANTIABLE, detail=detail)
    examples = 0
    checked = 0
    skips: list[str] = []
    for index, instance in enumerate(search.accepted):
        outcome = _check_instance(rule, ruleset, instance, options.examples, options.seed + index)
        examples += outcome.examples
        if outcome.failure is not None:
            return report(
                Status.FAILED,
                instances=index + 1,
                examples=examples,
                detail=outcome.failure.message,
                counterexample=outcome.failure,
            )
        if outcome.skipped:
            skips.append(outcome.skipped)
            continue
        checked += 1
    if checked == 0:
        return report(Status.NOT_INSTANTIABLE, detail=skips[0] if skips else "no instance ran")
    opsets = sorted(
        {(i.opsets.get("", 0), i.target or 0): _opset_label(i) for i in search.accepted}.items()
    )
    detail = f"opset {', '.join(label for _, label in opsets)}"
    return report(
        Status.VERIFIED,
        instances=checked,
        examples=examples,
        detail=detail,
        sample=search.accepted[0].proto,
    )


def _opset_label(instance: Instance) -> str:
    version = str(instance.opsets.get("", 0))
    return version if instance.target is None else f"{version}->{instance.target}"


def _reporter(name: str, location: str, start: float) -> Callable[..., RuleReport]:
    """A RuleReport constructor with the rule's name, location and timer filled in."""

    def make(status: Status, **fields: Any) -> RuleReport:
        return RuleReport(name, location, status, seconds=time.perf_counter() - start, **fields)

    return make
