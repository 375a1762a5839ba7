"""Proving rules: every instance of a rule up to the bounds, one status per rule.

`prove_rule` enumerates the rule's instances (`_instance`: ranks up to `max_rank`, the dtypes
the schemas allow, integer attributes and axes, optional inputs present and absent) and asks
`equivalent` about each. The rule is

* `proved` when every instance is (the result says which ranks, dtypes and opsets that
  covered);
* `refuted` when some instance has a counterexample that onnxruntime confirms: the match and
  the rewrite, built as models with the counterexample's values, give different outputs (or
  onnxruntime refuses the rewrite);
* `unsupported` otherwise, with the reason: an op, a built-in or a form the prover does not
  model, a solver that could not decide within the time, a counterexample that rests on an
  op the prover treats as an unknown function and does not replay, or one that does not
  replay at all (a prover bug, said so).
"""

from __future__ import annotations

import dataclasses
import enum
import logging
import multiprocessing
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any

import numpy as np

import ir
from rewriter import rules
from rewriter.prove._choices import Choice, Chooser
from rewriter.prove._instance import (
    ImpossibleInstanceError,
    Instance,
    Settings,
    build_instance,
)
from rewriter.prove._plan import RulePlan, UnsupportedRuleError, plan
from rewriter.prove._query import Counterexample, Proved, Unknown, equivalent
from rewriter.prove._replay import Replay, replay

logger = logging.getLogger(__name__)

ROUNDING_ULPS = 4
"""How far apart, in units in the last place, two results may be and still be one rounded
differently from the other (a rewrite that rounds once where the match rounds twice): in
units of the results themselves, or of their rounding scale (a reassociation where terms
cancel; `rewriter.prove._query.rounding_scale`). An infinity facing a
same-signed value of at least half the largest is rounding at the edge of the range, as
verification judges it (a fused Gelu where the written-out one overflows)."""


class ProofStatus(enum.Enum):
    """What the prover says of a rule."""

    PROVED = "proved"
    REFUTED = "refuted"
    UNSUPPORTED = "unsupported"


@dataclasses.dataclass(frozen=True, slots=True)
class ProveOptions:
    """How hard to try.

    `timeout` bounds each rule (seconds, all its instances together), `max_rank` the ranks
    of inputs that admit any rank, `max_instances` the instances tried per rule;
    `signed_zeros` makes +0 and -0 different results (by default they are equal, as
    verification compares); `replay` runs counterexamples on onnxruntime.
    """

    timeout: float = 60.0
    max_rank: int = 3
    max_instances: int = 2000
    signed_zeros: bool = False
    replay: bool = True

    def __post_init__(self) -> None:
        if self.timeout <= 0:
            raise ValueError(f"timeout must be positive, got {self.timeout}")
        if not 0 <= self.max_rank <= 6:
            raise ValueError(f"max_rank must be between 0 and 6, got {self.max_rank}")
        if self.max_instances < 1:
            raise ValueError(f"max_instances must be at least 1, got {self.max_instances}")


@dataclasses.dataclass(frozen=True, slots=True)
class RuleCounterexample:
    """A replayed counterexample: the instance, the values, and what differs.

    `inputs` are the graph inputs' values, `constants` the model's constants (matched
    constants, literals, constants the rewrite computes), `attributes` the open attributes'
    values, all as nested lists; `original` and `rewritten` the outputs onnxruntime gave at
    `index` of `output`; `shapes` the shapes of the inputs and constants (an empty array's
    list does not say it).
    """

    instance: str
    output: str
    index: tuple[int, ...]
    original: object
    rewritten: object
    inputs: Mapping[str, object]
    constants: Mapping[str, object]
    attributes: Mapping[str, object]
    dtypes: Mapping[str, str]
    shapes: Mapping[str, tuple[int, ...]]
    detail: str

    def as_json(self) -> dict[str, object]:
        """A JSON-ready dict (NaN and infinities as strings)."""
        return {
            "instance": self.instance,
            "output": self.output,
            "index": list(self.index),
            "original": _json_number(self.original),
            "rewritten": _json_number(self.rewritten),
            "inputs": {k: _json_number(v) for k, v in self.inputs.items()},
            "constants": {k: _json_number(v) for k, v in self.constants.items()},
            "attributes": {k: _json_number(v) for k, v in self.attributes.items()},
            "dtypes": dict(self.dtypes),
            "shapes": {k: list(v) for k, v in self.shapes.items()},
            "detail": self.detail,
        }


def _json_number(value: object) -> object:
    if isinstance(value, list | tuple):
        return [_json_number(v) for v in value]
    if isinstance(value, float) and not np.isfinite(value):
        return "nan" if np.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, np.generic):
        return _json_number(value.item())
    return value


@dataclasses.dataclass(frozen=True, slots=True)
class RuleProof:
    """One rule's status, where it is written, why, and what the proof covered.

    A proof is `complete` when every instance up to the bounds was proved (not only the
    first ones before the time or instance limit), and `exact` when bit for bit (not only
    up to rounding).
    """

    name: str
    file: str
    line: int
    status: ProofStatus
    reason: str = ""
    coverage: str = ""
    counterexample: RuleCounterexample | None = None
    instances: int = 0
    seconds: float = 0.0
    exact: bool = True
    complete: bool = True

    def as_json(self) -> dict[str, object]:
        """`{"name", "file", "line", "status", "counterexample", "reason", ...}`."""
        return {
            "name": self.name,
            "file": self.file,
            "line": self.line,
            "status": self.status.value,
            "counterexample": None
            if self.counterexample is None
            else self.counterexample.as_json(),
            "reason": self.reason,
            "coverage": self.coverage,
            "exact": self.exact,
            "complete": self.complete,
            "instances": self.instances,
            "seconds": round(self.seconds, 3),
        }


def prove_rule(rule: rules.Rule, options: ProveOptions | None = None) -> RuleProof:
    """Prove one rule (see the module docstring)."""
    options = options or ProveOptions()
    start = time.perf_counter()

    def result(status: ProofStatus, **fields: Any) -> RuleProof:
        return RuleProof(
            rule.name,
            rule.span.path,
            rule.span.line,
            status,
            seconds=time.perf_counter() - start,
            **fields,
        )

    try:
        rule_plan = plan(rule)
    except UnsupportedRuleError as exc:
        return result(ProofStatus.UNSUPPORTED, reason=str(exc))
    try:
        return _Prover(rule_plan, options, start).run(result)
    except Exception as exc:
        # One rule's prover bug must not end the others: the translation of an unforeseen
        # rule form failed, so that rule is unproved and says why; the traceback goes to
        # the debug log for the report.
        logger.debug("proving %s failed", rule.name, exc_info=True)
        return result(
            ProofStatus.UNSUPPORTED,
            reason=f"prover error ({type(exc).__name__}: {exc}); please report it with -vv output",
        )


class _Prover:
    """The enumeration of one rule's instances and the verdict over them."""

    def __init__(self, rule_plan: RulePlan, options: ProveOptions, start: float) -> None:
        self.plan = rule_plan
        self.options = options
        self.start = start
        self.settings = Settings(max_rank=options.max_rank)
        self.proved: list[tuple[Choice, ...]] = []
        self.unknown: list[tuple[str, tuple[Choice, ...]]] = []
        self.artefacts: list[str] = []
        self.rounding: list[str] = []  # instances proved only up to ROUNDING_ULPS
        self.impossible = 0
        self.runs = 0

    def remaining(self) -> float:
        return self.options.timeout - (time.perf_counter() - self.start)

    def run(self, result: Callable[..., RuleProof]) -> RuleProof:
        script: list[int] | None = []
        complete = True
        while script is not None:
            if self.runs >= self.options.max_instances or self.remaining() <= 0:
                complete = False
                break
            chooser = Chooser(script)
            self.runs += 1
            try:
                instance = build_instance(self.plan, chooser, self.settings)
            except ImpossibleInstanceError:
                self.impossible += 1
                script = chooser.next_script()
                continue
            except UnsupportedRuleError as exc:
                return result(ProofStatus.UNSUPPORTED, reason=str(exc), instances=len(self.proved))
            choices = tuple(chooser.made)
            refuted = self._check(instance, choices)
            if self.artefacts:
                break
            if refuted is not None:
                return result(
                    ProofStatus.REFUTED,
                    reason=refuted.detail,
                    counterexample=refuted,
                    instances=len(self.proved),
                    coverage=_describe(choices),
                )
            script = chooser.next_script()
        return self._verdict(result, complete)

    def _check(self, instance: Instance, choices: tuple[Choice, ...]) -> RuleCounterexample | None:
        verdict = self._query(instance, ulps=0)
        if isinstance(verdict, Proved):
            self.proved.append(choices)
            return None
        if isinstance(verdict, Unknown):
            self._undecided(verdict, choices)
            return None
        if not self.options.replay:
            return _counterexample(instance, verdict, choices, None)
        replayed = replay(instance, verdict, signed_zeros=self.options.signed_zeros)
        if not replayed.confirmed:
            self._artefact(instance, verdict, replayed, choices)
            return None
        dtype = instance.lhs[verdict.output].dtype
        numpy_dtype = ir.numpy_dtype(dtype)
        apart = _ulps_apart(replayed.original, replayed.rewritten, numpy_dtype)
        edge = _at_range_edge(replayed.original, replayed.rewritten, numpy_dtype)
        close = apart is not None and apart <= ROUNDING_ULPS
        if not edge and not close and not _within_rounding_scale(replayed, verdict, numpy_dtype):
            return _counterexample(instance, verdict, choices, replayed)
        # Both sides ran and differ in the last places only, of the result or of the
        # rounding scale: the rewrite rounds differently (once instead of
        # twice, or after terms cancel). Ask again allowing that much, and no more.
        relaxed = self._query(instance, ulps=ROUNDING_ULPS)
        if isinstance(relaxed, Proved):
            self.proved.append(choices)
            if edge:
                how = "at the edge of the range"
            elif close:
                how = f"{apart} ulp{'s' if apart != 1 else ''} apart"
            else:
                how = (
                    f"{apart} ulps apart, within {ROUNDING_ULPS} ulps of the two sides' "
                    f"rounding scale {verdict.rounding_scale!r}"
                )
            self.rounding.append(
                f"at {_describe(choices)} the match gives {replayed.original!r}, the rewrite "
                f"{replayed.rewritten!r} ({how})"
            )
            return None
        if isinstance(relaxed, Unknown):
            self._undecided(
                Unknown(
                    f"the sides differ by rounding ({replayed.original!r} against "
                    f"{replayed.rewritten!r}) and whether always within {ROUNDING_ULPS} ulps "
                    f"is undecided: {relaxed.reason}"
                ),
                choices,
            )
            return None
        again = replay(instance, relaxed, signed_zeros=self.options.signed_zeros)
        if not again.confirmed:
            self._artefact(instance, relaxed, again, choices)
            return None
        return _counterexample(instance, relaxed, choices, again)

    def _query(self, instance: Instance, *, ulps: int) -> Counterexample | Proved | Unknown:
        timeout = max(min(self.remaining(), self.options.timeout), 0.5)
        return equivalent(
            list(instance.lhs),
            list(instance.rhs),
            inputs=instance.inputs,
            assumptions=list(instance.assumptions),
            timeout=timeout,
            signed_zeros=self.options.signed_zeros,
            ulps=ulps,
            finite_only=self.plan.rule.assumes_finite,
        )

    def _undecided(self, verdict: Unknown, choices: tuple[Choice, ...]) -> None:
        # A query cut short because the rule's time ran out leaves the enumeration incomplete
        # (said in the coverage); only one the solver gave up on within its time is undecided.
        if self.remaining() > 0:
            self.unknown.append((verdict.reason, choices))

    def _artefact(
        self,
        instance: Instance,
        verdict: Counterexample,
        replayed: Replay,
        choices: tuple[Choice, ...],
    ) -> None:
        if not replayed.ran:
            self.artefacts.append(
                f"a counterexample at {_describe(choices)} cannot be replayed on onnxruntime "
                f"({replayed.detail}; the solver said: {verdict.reason})"
            )
        elif instance.opaque:
            ops = ", ".join(f"`{op}`" for op in instance.opaque)
            self.artefacts.append(
                f"the proof needs what {ops} compute{'s' if len(instance.opaque) == 1 else ''} "
                f"(an unknown function here): a counterexample at {_describe(choices)} does "
                f"not replay ({replayed.detail})"
            )
        else:
            self.artefacts.append(
                f"prover bug: a counterexample at {_describe(choices)} does not replay on "
                f"onnxruntime ({replayed.detail}; the solver said: {verdict.reason})"
            )
            logger.warning("rule `%s`: %s", self.plan.rule.name, self.artefacts[-1])

    def _verdict(self, result: Callable[..., RuleProof], complete: bool) -> RuleProof:
        instances = len(self.proved)
        if self.artefacts:
            return result(ProofStatus.UNSUPPORTED, reason=self.artefacts[0], instances=instances)
        if self.unknown:
            reason, choices = self.unknown[0]
            return result(
                ProofStatus.UNSUPPORTED,
                reason=f"the solver could not decide {len(self.unknown)} instance(s) "
                f"({reason}; first at {_describe(choices)})",
                instances=instances,
            )
        if not self.proved:
            if complete:
                reason = (
                    f"no instance to prove up to rank {self.settings.max_rank}: no combination "
                    "satisfies its conditions"
                )
            elif self.remaining() > 0:
                reason = (
                    f"none of the first {self.runs} combinations the prover tried is an "
                    f"instance ({self.impossible} fail its conditions)"
                )
            else:
                failed = (
                    f"; {self.impossible} of the {self.runs} combinations tried fail its conditions"
                    if self.impossible
                    else ""
                )
                reason = (
                    f"the solver decided no instance within the time "
                    f"({self.options.timeout:g} s{failed})"
                )
            return result(ProofStatus.UNSUPPORTED, reason=reason)
        coverage = _coverage(self.proved, self.settings.max_rank)
        if self.rounding:
            coverage = (
                f"up to rounding (within {ROUNDING_ULPS} ulps of the result or of its rounding "
                f"scale, not bit for bit: "
                f"{self.rounding[0]}); {coverage}"
            )
        if not complete:
            limit = "time limit" if self.remaining() <= 0 else "instance limit"
            coverage = f"{coverage}; only the first {instances} instances ({limit})"
        return result(
            ProofStatus.PROVED,
            coverage=coverage,
            instances=instances,
            exact=not self.rounding,
            complete=complete,
        )


def _counterexample(
    instance: Instance,
    found: Counterexample,
    choices: tuple[Choice, ...],
    replayed: Replay | None,
) -> RuleCounterexample:
    leaves = replayed.leaves if replayed is not None else dict(found.inputs)
    kinds = {leaf.name: leaf.kind for leaf in instance.leaves}
    inputs = {n: np.asarray(v).tolist() for n, v in leaves.items() if kinds.get(n) == "input"}
    constants = {
        n: np.asarray(v).tolist() for n, v in leaves.items() if kinds.get(n, "input") != "input"
    }
    dtypes = {leaf.name: leaf.tensor.dtype.onnx_name for leaf in instance.leaves}
    shapes = {n: tuple(int(d) for d in np.shape(v)) for n, v in leaves.items()}
    output = instance.outputs[found.output]
    detail = found.reason if replayed is None else f"{found.reason}; {replayed.detail}"
    return RuleCounterexample(
        instance=_describe(choices),
        output=output,
        index=tuple(found.index),
        original=_plain(replayed.original if replayed is not None else found.original),
        rewritten=_plain(replayed.rewritten if replayed is not None else found.rewritten),
        inputs=inputs,
        constants=constants,
        attributes=dict(replayed.attributes) if replayed is not None else {},
        dtypes=dtypes,
        shapes=shapes,
        detail=detail,
    )


def _ulps_apart(a: object, b: object, dtype: np.dtype[Any]) -> int | None:
    """How many floats of `dtype` lie between two finite values (None: not finite floats)."""
    if dtype.kind != "f" or not isinstance(a, float | np.floating):
        return None
    if not isinstance(b, float | np.floating):
        return None
    pair = np.array([a, b], dtype=dtype)
    if not np.all(np.isfinite(pair)):
        return None
    bits = pair.view(f"u{dtype.itemsize}").astype(np.int64)
    sign = np.int64(1) << np.int64(8 * dtype.itemsize - 1)
    # positions in the ordered set of floats: the magnitude, negated below zero
    positions = np.where(bits & sign, -(bits & (sign - 1)), bits)
    return abs(int(positions[0]) - int(positions[1]))


def _within_rounding_scale(replayed: Replay, found: Counterexample, dtype: np.dtype[Any]) -> bool:
    """Both sides finite and at most `ROUNDING_ULPS` ulps of their rounding scale apart."""
    if dtype.kind != "f" or found.rounding_scale is None or not np.isfinite(found.rounding_scale):
        return False
    try:
        pair = np.array([replayed.original, replayed.rewritten], dtype=np.float64)
    except (TypeError, ValueError):
        return False
    if not np.all(np.isfinite(pair)):
        return False
    bound = ROUNDING_ULPS * float(np.finfo(dtype).eps) * found.rounding_scale
    return bool(abs(pair[0] - pair[1]) <= bound)


def _at_range_edge(a: object, b: object, dtype: np.dtype[Any]) -> bool:
    """One infinite, the other finite of the same sign and at least half the largest value."""
    if dtype.kind != "f" or not isinstance(a, float | np.floating):
        return False
    if not isinstance(b, float | np.floating):
        return False
    pair = np.array([a, b], dtype=np.float64)
    if np.isnan(pair).any() or np.isinf(pair).sum() != 1 or np.sign(pair[0]) != np.sign(pair[1]):
        return False
    return bool(np.abs(pair[np.isfinite(pair)][0]) >= float(np.finfo(dtype).max) / 2)


def _plain(value: object) -> object:
    if isinstance(value, np.generic):
        return value.item()
    return value


def _describe(choices: Sequence[Choice]) -> str:
    """The choices of one instance, as text."""
    if not choices:
        return "the only instance"
    return ", ".join(f"{c.label} = {c.answer}" for c in choices)


def _coverage(proved: Sequence[tuple[Choice, ...]], max_rank: int) -> str:
    """What the proved instances covered: ranks, dtypes, opsets, and how many."""
    ranks: set[int] = set()
    dtypes: dict[str, None] = {}
    opsets: set[str] = set()
    for choices in proved:
        for choice in choices:
            if choice.label.startswith("rank of"):
                ranks.add(int(choice.answer))
            elif choice.label.startswith("dtype of"):
                dtypes[choice.answer] = None
            elif choice.label == "opset":
                opsets.add(choice.answer)
    parts = []
    if ranks:
        parts.append(f"ranks {min(ranks)}-{max(ranks)}" if len(ranks) > 1 else f"rank {min(ranks)}")
    if dtypes:
        parts.append("dtypes " + ", ".join(dtypes))
    if opsets:
        parts.append("opsets " + ", ".join(sorted(opsets, key=int)))
    parts.append(f"{len(proved)} instance{'s' if len(proved) != 1 else ''}")
    return "; ".join(parts)


# ---------------------------------------------------------------------------------------------
# Many rules


def prove_rules(
    ruleset: rules.RuleSet | Sequence[rules.Rule],
    options: ProveOptions | None = None,
    *,
    names: Sequence[str] = (),
    jobs: int = 1,
    progress: Callable[[RuleProof], None] | None = None,
) -> list[RuleProof]:
    """Prove every rule (or those called `names`), in load order, in `jobs` processes.

    The results do not depend on `jobs`: each rule is proved on its own (`progress` hears of
    each as it is decided, in the order they finish).

    Raises:
        ValueError: a name no rule has, or `jobs` below 1.
    """
    options = options or ProveOptions()
    all_rules = list(ruleset.rules if isinstance(ruleset, rules.RuleSet) else ruleset)
    known = {rule.name for rule in all_rules}
    unknown = [name for name in names if name not in known]
    if unknown:
        raise ValueError(f"no rule named {', '.join(unknown)}")
    if jobs < 1:
        raise ValueError(f"jobs must be at least 1, got {jobs}")
    selected = [rule for rule in all_rules if not names or rule.name in names]
    results: list[RuleProof] = []
    if jobs == 1 or len(selected) <= 1:
        for rule in selected:
            results.append(prove_rule(rule, options))
            if progress is not None:
                progress(results[-1])
        return results
    # Spawned, never forked: a parent that ran onnxruntime holds thread pools whose locks a
    # forked child can deadlock on.
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
        futures = {pool.submit(prove_rule, rule, options): k for k, rule in enumerate(selected)}
        done: dict[int, RuleProof] = {}
        for future in as_completed(futures):  # progress as rules finish; results in order
            done[futures[future]] = future.result()
            if progress is not None:
                progress(done[futures[future]])
    return [done[k] for k in range(len(selected))]
