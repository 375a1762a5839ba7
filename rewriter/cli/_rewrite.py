"""`rewrite [--rules PATH]... MODEL [-o OUT]`: the main job."""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

import ir
from rewriter import dsl
from rewriter._errors import RewriteError
from rewriter.api import (
    PASSES,
    PhaseClock,
    RewriteOptions,
    RewriteResult,
    as_model,
    inline_files,
    load_rules,
    pass_manager,
    rewrite,
)
from rewriter.cli import _files, _quantize_options, _status
from rewriter.cli._summary import opset_hint, summary_line
from rewriter.cli._verify import (
    counterexample_target,
    input_options,
    load_samples,
    print_result,
    refuse_equivalence_options,
    verify_options,
)
from rewriter.engine import (
    DEFAULT_PIPELINE,
    Calibration,
    ProgressCallback,
    RunOptions,
    SkipEntry,
    TraceEntry,
)
from rewriter.rules import LiteralValue, PassUse, RuleSet

if TYPE_CHECKING:
    from rewriter.api import AccuracyBudget, BudgetResult
    from rewriter.quantize import CalibrationSamples, SpeedCheck
    from rewriter.verification import AccuracyResult, VerifyResult


def _budget(args: argparse.Namespace) -> AccuracyBudget | None:
    """`--accept` and its measuring options as an accuracy budget (None without --accept)."""
    if not args.accept:
        return None
    from rewriter.api import AccuracyBudget  # brings in verification: only when asked

    inputs = input_options(args)
    return AccuracyBudget(
        tuple(args.accept),
        examples=args.examples,
        seed=args.seed,
        samples=tuple(inputs.samples),
        input_ranges=inputs.ranges,
        dims=inputs.dims,
        ort_enable_all=args.ort_enable_all,
        confidence=args.confidence,
        jobs=args.jobs,
        ray_address=args.ray,
    )


def _rewrite_options(
    args: argparse.Namespace,
    *,
    progress: ProgressCallback | None = None,
    record_subgraphs: bool = False,
    budget: AccuracyBudget | None = None,
    calibration_samples: CalibrationSamples | None = None,
    speed_check: SpeedCheck | None = None,
) -> RewriteOptions:
    """The options of the run the command line asks for."""
    return RewriteOptions(
        budget=budget,
        calibration_samples=calibration_samples,
        quantize=args.quantize,
        speed_check=speed_check,
        allow_python=args.allow_python,
        target_opset=args.target_opset,
        add_opsets=_parse_opsets(args.add_opset),
        freeze_initializer_inputs=args.freeze_initializer_inputs,
        exclude_rules=frozenset(args.exclude_rule),
        input_shapes=_input_shapes(args),
        max_rewrites=args.max_rewrites,
        exact=args.exact,
        record_subgraphs=record_subgraphs,
        progress=progress,
        passes=pass_list(args.passes),
        # without --target-opset, the summary says what a newer one would fuse (`opset_hint`)
        match_newer_opset=args.target_opset is None,
    )


def param_values(items: list[str]) -> dict[str, LiteralValue]:
    """`--param NAME=VALUE` values, each VALUE a literal of the rule language.

    Raises:
        RewriteError: an item is not NAME=VALUE.
        RuleSyntaxError: a VALUE is not a literal (located in the option's text).
    """
    values: dict[str, LiteralValue] = {}
    for item in items:
        name, sep, text = item.partition("=")
        if not sep or not name.strip():
            raise RewriteError(f"--param expects NAME=VALUE (e.g. per_channel=false), got {item!r}")
        values[name.strip()] = dsl.parse_param_value(text.strip(), f"--param {name.strip()}")
    return values


def pass_list(text: str) -> tuple[PassUse, ...]:
    """`--passes`: `default`, `none`, or pass names separated by commas (in that order).

    A named pass of the default pipeline keeps the pipeline's options; another takes its own
    defaults.

    Raises:
        RewriteError: a name is not a built-in pass.
    """
    if text == "default":
        return DEFAULT_PIPELINE
    if text == "none":
        return ()
    known = {use.name: use for use in DEFAULT_PIPELINE}
    chosen = []
    for name in (part.strip() for part in text.split(",")):
        if name not in PASSES:
            raise RewriteError(
                f"--passes: no built-in pass `{name}` (available: {', '.join(sorted(PASSES))};"
                " or `default`, `none`)"
            )
        chosen.append(known.get(name, PassUse(name)))
    return tuple(chosen)


def _input_shapes(args: argparse.Namespace) -> dict[str, tuple[int, ...]]:
    """`--input-shape` values: the model's input shapes fixed before rewriting."""
    return dict(args.input_shapes)


def _parse_opsets(items: list[str]) -> dict[str, int]:
    opsets = {}
    for item in items:
        domain, sep, version = item.partition("=")
        if not sep or not domain or not version.isdigit():
            raise RewriteError(
                f"--add-opset expects DOMAIN=VERSION (e.g. com.microsoft=1), got {item!r}"
            )
        opsets[domain] = int(version)
    return opsets


def _output_path(args: argparse.Namespace) -> Path:
    source = Path(args.model)
    if args.in_place:
        if args.output:
            raise RewriteError("--in-place and -o/--output cannot be combined")
        return source
    if args.output:
        return Path(args.output)
    return source.with_name(source.stem + ".rewritten.onnx")


def run(args: argparse.Namespace) -> int:
    """Run the main job; returns the exit code."""
    source = _files.input_model_path(args.model)
    out_path = _output_path(args)
    out = _files.human_stream(args.json)  # `--json -` takes stdout: people read stderr
    if not args.why_not:
        _files.check_output_folder("output model", out_path)
    if not args.in_place and out_path.exists() and not args.force and not args.why_not:
        raise RewriteError(f"{out_path} exists; pass --force to overwrite it")
    if not args.in_place and out_path.exists() and os.path.samefile(out_path, source):
        raise RewriteError("the output would overwrite the input; use --in-place to allow that")
    if out_path.exists() and not args.why_not:
        for read, role in _sample_files(args).items():
            if read.exists() and os.path.samefile(out_path, read):
                raise RewriteError(f"the output {out_path} would overwrite {role}")
    _quantize_options.check_arguments(args)
    clock = PhaseClock()
    with clock.phase("load_rules"):
        inline = inline_files(args.inline_rules)
        ruleset = load_rules(
            _rule_paths(args),
            allow_python=args.allow_python,
            inline=inline,
            params=param_values(args.param),
        )
    if args.rules or inline:
        # The shipped library is kept warning-free by its tests; show warnings for user rules.
        _status.print_warnings(ruleset.warnings)
    unknown = [name for name in args.exclude_rule if ruleset.rule(name) is None]
    if unknown:
        raise RewriteError(f"--exclude-rule: no rule named `{unknown[0]}` is loaded")
    if args.why_not:
        calibration = None
        if args.calibration:
            with clock.phase("calibrate"):
                calibration = _calibrate(source, args)
        model = _as_rules_see_it(as_model(source), args.target_opset)
        why_not_options = RunOptions(target_opset=args.target_opset, calibration=calibration)
        report = pass_manager(ruleset, why_not_options).why_not(model, args.why_not)
        print(report.render(), file=out)
        return 0
    _refuse_unsafe_side_files(args, source, out_path, ruleset)
    counterexample = _counterexample_target(args, source, out_path, ruleset)
    budget = _budget(args)
    samples = _quantize_options.calibration_samples(args, source) if args.calibration else None
    lines = _quantize_options.progress_lines(not args.no_progress)
    with _status.rewrite_and_budget_progress(not args.no_progress) as (on_progress, on_budget):
        measuring = _quantize_options.both(on_budget, lines)
        if budget is not None:
            budget = dataclasses.replace(budget, progress=measuring)
        options = _rewrite_options(
            args,
            progress=on_progress,
            record_subgraphs=bool(args.report),
            budget=budget,
            calibration_samples=samples,
            speed_check=_quantize_options.speed_check(args, measuring),
        )
        result = rewrite(source, ruleset, options)
    for warning in (*result.trace.warnings, *_rolled_back(result)):
        print(f"rewrite: warning: {warning}", file=sys.stderr)
    for note in result.notes:
        print(f"rewrite: note: {note}", file=out)
    if result.speed is not None:
        print(result.speed.summary(), file=out)
    if args.explain:
        print(result.trace.explain(), file=out)
    exit_code = 0
    verification: VerifyResult | AccuracyResult | None = None
    if result.budget is not None:
        verification = _show_budget(result.budget, out)
        if not result.budget.ok:
            exit_code = 1
    elif args.verify:
        with clock.phase("verify"):
            verification = _verify_and_bisect(source, result, ruleset, args, counterexample, out)
        if not verification.ok:
            exit_code = 1
    if exit_code == 0:
        with clock.phase("save"):
            ir.save(result.model, out_path)
        # Without --target-opset, say what a newer opset would fuse (the opset is the user's).
        hint = opset_hint(result, ruleset) if args.target_opset is None else ""
        print(summary_line(result, str(out_path), hint), file=out)
    else:
        why = "is not equivalent" if result.budget is None else "misses the accuracy budget"
        print(f"rewrite: not writing {out_path}: the rewritten model {why}", file=sys.stderr)
    # Side files come last so that their timings cover every phase before them.
    if args.report:
        with clock.phase("report"):
            _write_report(args.report, source, result, verification, _phases(clock, result), out)
    if args.json:
        payload = result.to_json()
        times = _phases(clock, result)
        payload["timings_seconds"] = {phase: round(t, 6) for phase, t in times.items()}
        if verification is not None:
            payload["verification"] = verification.to_json()
        _files.write_json(args.json, payload)
    return exit_code


def _rule_paths(args: argparse.Namespace) -> list[str] | None:
    """`--rules`, and with `--quantize` the preset's rule files after them (or the library)."""
    if not args.quantize:
        given: list[str] | None = args.rules
        return given
    from rewriter.api import preset_rule_paths

    return [
        str(path)
        for path in preset_rule_paths(
            args.rules,
            args.quantize,
            calibrated=bool(args.calibration),
            speed_check=not args.no_speed_check,
            runtime_ops=any(item.startswith("com.microsoft=") for item in args.add_opset),
        )
    ]


def _calibrate(source: Path, args: argparse.Namespace) -> Calibration:
    """Statistics of the input model's values on the `--calibration` samples (`--why-not`)."""
    path = args.calibration
    from rewriter.quantize import calibration_method, collect_calibration
    from rewriter.verification import VerifyError

    try:
        samples = load_samples([path], option="--calibration")
    except VerifyError as exc:
        raise RewriteError(str(exc)) from None  # names the option and the file
    try:
        method, percentile = calibration_method(
            args.calibration_method, args.calibration_percentile, args.quantize
        )
        return collect_calibration(source, samples, method=method, percentile=percentile)
    except VerifyError as exc:
        raise RewriteError(f"--calibration {path}: {exc}") from None


def _as_rules_see_it(model: ir.Model, target_opset: int | None) -> ir.Model:
    """The model as a run's rules first see it: converted up when `--target-opset` is newer.

    (A run converts up before the rules, so that fusions into newer ops can fire; converting
    down happens after them, and `requires` is then judged at the target.)
    """
    current = model.opset_imports.get("", model.opset_imports.get("ai.onnx"))
    if target_opset is None or current is None or target_opset <= current:
        return model
    return ir.convert_version(model, target_opset)


def _phases(clock: PhaseClock, result: RewriteResult) -> dict[str, float]:
    """Seconds per phase of the command, in the order they ran (rules load before the model)."""
    return {"load_rules": clock.seconds["load_rules"], **result.timings, **clock.seconds}


def _sample_files(args: argparse.Namespace) -> dict[Path, str]:
    """The `--calibration` and `--inputs` files the command reads -> what they are."""
    read: dict[Path, str] = {}
    for option, paths in (("--calibration", [args.calibration]), ("--inputs", args.samples)):
        for path in paths:
            given = Path(path) if path else None
            if given is None:
                continue
            files = sorted(given.glob("*.npz")) if given.is_dir() else [given]
            read.update({file: f"the {option} file {file}" for file in files})
    return read


def _refuse_unsafe_side_files(
    args: argparse.Namespace, source: Path, out: Path, ruleset: RuleSet
) -> None:
    """`--json` and `--report` never replace what the command reads or writes.

    The models, the input's external data, the rules in use and the sample files.
    """
    protected = {out: "the output model", **_sample_files(args)}
    protected.update({Path(path): f"the rules file {path}" for path in ruleset.sources})
    protected[source] = "the input model"
    _files.refuse_unsafe_targets(
        {"--json": args.json, "--report": args.report},
        protected=protected,
        models=[source],
        force=args.force,
    )


_VERIFY_ONLY = {
    "rtol": "--rtol",
    "atol": "--atol",
    "input_ranges": "--input",
    "dims": "--dim",
    "samples": "--inputs",
    "counterexample": "--counterexample",
}
# Options whose value differs from their default only when given.
_VERIFY_DEFAULTS = {
    "compare": ("--compare", "accuracy"),
    "factor": ("--factor", 8.0),
    "special_values": ("--special-values/--no-special-values", True),
    "ort_enable_all": ("--ort-enable-all/--no-ort-enable-all", True),
}


def _counterexample_target(
    args: argparse.Namespace, source: Path, out: Path, ruleset: RuleSet
) -> Path | None:
    """Where `--verify` saves a counterexample (None without --verify), checked up front.

    Raises:
        RewriteError: a comparison option without --verify, or a refused path.
    """
    given: list[tuple[str, object]] = [("--jobs", args.jobs), ("--ray", args.ray)]
    if args.confidence != 0.9:
        given.append(("--confidence", args.confidence))
    for option, value in given:
        if value is not None and not args.accept:
            raise RewriteError(f"{option} applies to --accept (the accuracy budget)")
    if args.jobs is not None and args.ray is not None:
        raise RewriteError("--jobs counts local processes; with --ray the cluster's CPUs are used")
    if args.accept:
        refuse_equivalence_options(args)
        if args.examples == 0 and not args.samples:
            raise RewriteError("--examples 0 measures nothing without --inputs")
        return None
    if not args.verify:
        for attribute, option in _VERIFY_ONLY.items():
            if getattr(args, attribute):
                raise RewriteError(f"{option} applies to --verify (or --accept); add --verify")
        for attribute, (option, default) in _VERIFY_DEFAULTS.items():
            if getattr(args, attribute) != default:
                raise RewriteError(f"{option} applies to --verify (or --accept); add --verify")
        return None
    if args.examples == 0 and not args.samples:
        # Refused before the rewrite runs, not after.
        raise RewriteError("--examples 0 checks nothing without --inputs")
    protected = {out: "the output model", source: "the input model", **_sample_files(args)}
    protected.update({Path(path): f"the rules file {path}" for path in ruleset.sources})
    for option in ("json", "report"):
        if getattr(args, option):
            protected[Path(getattr(args, option))] = f"the --{option} file"
    return counterexample_target(
        args.counterexample,
        out.with_name(out.stem + ".counterexample.npz"),
        force=args.force,
        protected=protected,
        models=[source],
    )


def _show_budget(budget: BudgetResult, out: TextIO) -> AccuracyResult:
    """Print the per-site table, the final check and the one-line summary; the final check."""
    if budget.sites:
        if out.isatty():
            from rich.console import Console

            console = Console(file=out, highlight=False)
            console.print(budget.rich_table())
            for line in budget.notes:
                console.print(line, markup=False)
        else:
            lines = [budget.render_table().rsplit("\n", 1)[0]]
            out.write("\n".join(lines) + "\n")
    elif budget.notes:
        out.write("\n".join(budget.notes) + "\n")
    print_result(budget.final, out)
    print(budget.summary(), file=out)
    return budget.final


def _rolled_back(result: RewriteResult) -> list[str]:
    """One line per rule whose rewrites were rolled back (they would have broken the model)."""
    by_rule: dict[tuple[str, str], list[SkipEntry]] = {}
    for skip in result.trace.skips:
        if skip.reason.startswith("rolled back"):
            by_rule.setdefault((skip.rule, skip.location), []).append(skip)
    lines = []
    for (rule, location), skips in by_rule.items():
        first = skips[0]
        where = f" at {first.node}" if first.node else ""
        count = f"{len(skips)} rewrite{'s' if len(skips) > 1 else ''}"
        detail = first.reason.removeprefix("rolled back").lstrip(": ")
        lines.append(f"rule `{rule}` ({location}): {count} rolled back{where}: {detail}")
    return lines


def _write_report(
    path: str,
    source: Path,
    result: RewriteResult,
    verification: VerifyResult | AccuracyResult | None,
    timings: dict[str, float],
    out: TextIO,
) -> None:
    """`--report FILE`: the HTML report (written even when verification failed)."""
    from rewriter.report import INSTALL_HINT, graphviz_missing, write_rewrite_report

    write_rewrite_report(path, result, source=source, verification=verification, timings=timings)
    print(f"wrote report {path}", file=out)
    missing = graphviz_missing() if result.trace.entries else None
    if missing is not None:
        print(
            f"rewrite: note: the report lists each rewrite's subgraphs as text, without "
            f"pictures: {missing}; for pictures, {INSTALL_HINT}",
            file=sys.stderr,
        )


__all__ = ["RewriteResult", "run"]


def _verify_and_bisect(
    source: Path,
    result: RewriteResult,
    ruleset: RuleSet,
    args: argparse.Namespace,
    counterexample: Path | None = None,
    out: TextIO = sys.stdout,
) -> VerifyResult:
    """Check the result against the source; on a mismatch, name the first guilty rewrite.

    The counterexample is saved to `counterexample` (kept in memory when None) and its path
    printed.
    """
    from rewriter.verification import check_equivalence, find_first_bad

    with _status.verify_progress(not args.no_progress, args.examples) as on_progress:
        options = verify_options(args, counterexample=counterexample, progress=on_progress)
        verdict = check_equivalence(source, result.model, options)
    print(verdict.render_table(), file=out)
    if verdict.ok:
        return verdict
    approximate = sum(1 for e in result.trace.entries if e.approximate)
    if approximate:
        print(
            f"{approximate} rewrite{'s' * (approximate != 1)} by `approximate` rules change "
            "numerics on purpose: judge them with --accept METRIC>=VALUE (e.g. --accept "
            "'snr>=35') instead of equivalence",
            file=sys.stderr,
        )
    if verdict.counterexample_path is not None:
        print(f"counterexample saved to {verdict.counterexample_path}", file=out)
    steps = result.trace.steps
    if verdict.counterexample is None or not steps:
        return verdict

    def prefix(k: int) -> ir.Model:
        options = dataclasses.replace(_rewrite_options(args), replay_steps=k)
        return rewrite(source, ruleset, options).model

    level = verdict.failing_level or "ORT_DISABLE_ALL"
    bad = find_first_bad(
        steps,
        prefix,
        source,
        verdict.counterexample,
        compare=args.compare,
        factor=args.factor,
        rtol=args.rtol,
        atol=args.atol,
        level=level,
    )
    if bad is not None and 1 <= bad <= steps:
        what = "first non-equivalent step"
        if level == "ORT_ENABLE_ALL":
            what = "first step after which onnxruntime's ORT_ENABLE_ALL disagrees"
        print(f"{what}: #{bad} {_describe_step(result.trace.step_entries(bad))}", file=sys.stderr)
    elif bad == 0:
        print(_untouched_disagrees(args, prefix(0), level), file=sys.stderr)
    return verdict


def _describe_step(entries: Sequence[TraceEntry]) -> str:
    """A step of the run as the bisection names it: the rule and where, or the pass.

    A pass's step names what it changed, one entry per graph.
    """
    first = entries[0]
    if first.kind != "pass":
        return f"rule `{first.rule}` ({first.location}) on {', '.join(first.matched)}"
    return "pass " + "; ".join(e.describe() for e in entries)


def _untouched_disagrees(args: argparse.Namespace, untouched: ir.Model, level: str) -> str:
    """Why the model with no rewrite applied already fails the check, and what would help.

    With `--target-opset` it is the converted model: when onnxruntime cannot load that, the
    conversion is at fault, not the criterion. `level` is the optimization level that failed.
    """
    from rewriter.verification import load_failure

    failure = load_failure(untouched, level=level)
    if failure is None:
        return (
            "the untouched model already disagrees on the counterexample: no rewrite is to "
            "blame (the criterion may be too tight for this model: see --factor)"
        )
    optimized = level == "ORT_ENABLE_ALL"
    runtime = (
        "onnxruntime with its graph optimizations (ORT_ENABLE_ALL)"
        if optimized
        else ("onnxruntime")
    )
    what = (
        "the untouched model"
        if args.target_opset is None
        else f"the model converted to opset {args.target_opset} before any rewrite"
    )
    helps = []
    if args.target_opset is not None:
        helps.append("rewrite without --target-opset (the model runs at its own opset)")
        helps.append("with a lower --target-opset that onnxruntime loads")
    if optimized and load_failure(untouched, level="ORT_DISABLE_ALL") is None:
        helps.append(
            "verify without that check (--no-ort-enable-all) if you run the model with "
            "onnxruntime's optimizations off, where it loads"
        )
    advice = f": {'; or '.join(helps)}" if helps else ""
    return (
        f"{runtime} cannot load {what}: {failure}. No rewrite is to blame, and no comparison "
        f"criterion would accept it{advice}"
    )
