"""Checking `pass` declarations on the instances generated for the rules.

A pass is not a local pattern, so it has no instances of its own; instead each declared
pass runs alone (no rules) on the instance models the rule checks built, and wherever it
changes something the result is compared with the instance like a rule's rewrite.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from typing import Any

from rewriter import rules
from rewriter._errors import RewriteError
from rewriter.checkrules._result import Counterexample, RuleReport, Status


def _text(proto: Any) -> str:
    import onnx.printer

    try:
        return str(onnx.printer.to_text(proto))
    except Exception:  # the printer refuses some models; the proto's text form always works
        return str(proto)


def check_pass(
    decl: rules.PassUse,
    ruleset: rules.RuleSet,
    models: Sequence[Any],
    examples: int,
    seed: int,
) -> RuleReport:
    """Run the pass alone on each model; verify the models it changed."""
    from rewriter.api import RewriteOptions, rewrite
    from rewriter.verification import (
        InputOptions,
        RuntimeOptions,
        VerifyError,
        VerifyOptions,
        check_equivalence,
    )

    start = time.perf_counter()
    location = pass_location(decl)
    single = dataclasses.replace(ruleset, rules=(), passes=(decl,))
    alone = RewriteOptions(passes=())
    changed = 0
    ran = 0
    for index, proto in enumerate(models):
        try:
            result = rewrite(proto, single, alone)
        except RewriteError as exc:
            failure = Counterexample(_text(proto), {}, None, f"the pass failed: {exc}")
            return _report(decl, location, start, Status.FAILED, changed, ran, failure)
        if not result.trace.entries:
            continue
        changed += 1
        try:
            options = VerifyOptions(
                InputOptions(examples, seed + index, float_extremes=True),
                runtime=RuntimeOptions(ort_enable_all=False),
                save_counterexample=False,
            )
            verdict = check_equivalence(proto, result.proto, options)
        except VerifyError:
            continue
        ran += verdict.examples_run
        if not verdict.ok:
            errors = [o.max_abs_err for o in verdict.outputs if o.max_abs_err is not None]
            failure = Counterexample(
                _text(proto),
                dict(verdict.counterexample or {}),
                max(errors, default=None),
                verdict.message,
                _text(result.proto),
            )
            return _report(decl, location, start, Status.FAILED, changed, ran, failure)
    if not changed:
        detail = f"changed none of the {len(models)} rule instances (verified by its own tests)"
        return _report(decl, location, start, Status.NOT_INSTANTIABLE, 0, 0, None, detail)
    detail = f"changed {changed} of {len(models)} rule instances"
    return _report(decl, location, start, Status.VERIFIED, changed, ran, None, detail)


def pass_location(use: rules.PassUse) -> str:
    """Where a pass is declared: `file:line`, or the default pipeline."""
    return f"{use.span.path}:{use.span.line}" if use.span.line else "default pipeline"


def _report(
    decl: rules.PassUse,
    location: str,
    start: float,
    status: Status,
    instances: int,
    examples: int,
    failure: Counterexample | None,
    detail: str = "",
) -> RuleReport:
    return RuleReport(
        decl.name,
        location,
        status,
        instances=instances,
        examples=examples,
        detail=detail or (failure.message if failure is not None else ""),
        counterexample=failure,
        seconds=time.perf_counter() - start,
        kind="pass",
    )
