"""`rewrite [--rules PATH]... MODEL [-o OUT]`: the main job."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import ir
from rewriter._errors import RewriteError
from rewriter.api import (
    PhaseClock,
    RewriteOptions,
    RewriteResult,
    as_model,
    inline_files,
    load_ruleset,
    pass_manager,
    rewrite,
)
from rewriter.cli import _files, _quantize_options, _status
from rewriter.cli._arguments import non_negative_int, opset_version, positive_int
from rewriter.cli._summary import summary_line
from rewriter.cli._verify import (
    accuracy_arguments,
    add_comparison_options,
    comparison_arguments,
    counterexample_target,
    load_samples,
    print_result,
    refuse_equivalence_options,
)
from rewriter.dsl import _ast as ast
from rewriter.engine import Calibration, ProgressCallback, RunOptions, SkipEntry

if TYPE_CHECKING:
    from rewriter.api import AccuracyBudget, BudgetResult
    from rewriter.quantize import CalibrationSamples, SpeedCheck
    from rewriter.verification import AccuracyResult, VerifyResult


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of the main command."""
    parser.add_argument("model", help="the ONNX model to rewrite")
    parser.add_argument(
        "--rules",
        action="append",
        metavar="PATH",
        help="a .rw file or a folder of them (repeatable; default: the shipped library)",
    )
    parser.add_argument(
        "-e",
        "--expression",
        dest="inline_rules",
        action="append",
        default=[],
        metavar="RULE",
        help="a rule given as text, e.g. 'rule r: y = Relu (x) => y = LeakyRelu (x)' "
        "(repeatable; like sed -e, the given rules are all the rules: add --rules patterns/ "
        "for the shipped library too)",
    )
    parser.add_argument(
        "-o",
        "--output",
        metavar="OUT",
        help="output file (default: MODEL.rewritten.onnx beside it)",
    )
    parser.add_argument("--in-place", action="store_true", help="overwrite the input model")
    parser.add_argument("--force", action="store_true", help="overwrite an existing output file")
    parser.add_argument("--explain", action="store_true", help="print what fired, grouped by rule")
    parser.add_argument("--json", metavar="FILE", help="write trace, op counts and timings as JSON")
    parser.add_argument(
        "--why-not", metavar="RULE", help="explain why RULE does not fire, then exit"
    )
    parser.add_argument(
        "--verify",
        action="store_true",
        help="check the result against the input on generated inputs",
    )
    parser.add_argument(
        "--examples",
        type=non_negative_int,
        default=20,
        help="examples for --verify (default 20; 0 with --inputs: the samples only)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed for --verify")
    add_comparison_options(
        parser, "with --verify; default: <OUT>.counterexample.npz beside the output"
    )
    parser.add_argument(
        "--jobs",
        type=positive_int,
        metavar="N",
        help="with --accept: measure on N processes (default 1: in this process, one "
        "onnxruntime session)",
    )
    parser.add_argument(
        "--confidence",
        type=_confidence,
        default=0.9,
        metavar="P",
        help="with --accept: while tuning, a model meets the budget when the pessimistic "
        "bootstrap bound of its metrics over the inputs does, at confidence P (default 0.9; "
        "0.5 judges by about the measured value)",
    )
    parser.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="with --accept: measure them on the Ray cluster at ADDRESS (auto, HOST:PORT or "
        "ray://HOST:PORT; needs `pip install ray`)",
    )
    parser.add_argument(
        "--exclude-rule", action="append", default=[], metavar="RULE", help="do not apply RULE"
    )
    parser.add_argument(
        "--max-rewrites",
        type=non_negative_int,
        help="rewrite budget (default grows with the graph)",
    )
    parser.add_argument(
        "--allow-python", action="store_true", help="permit `use` of Python helpers"
    )
    parser.add_argument(
        "--add-opset",
        action="append",
        default=[],
        metavar="DOMAIN=VERSION",
        help="import an opset domain before rewriting, e.g. com.microsoft=1 for "
        "--rules patterns/ort (dropped again if nothing uses it)",
    )
    parser.add_argument(
        "--target-opset",
        type=opset_version,
        metavar="N",
        help="convert the default-domain opset to N (up: fusions into newer ops can fire; "
        "down: decompositions for older runtimes)",
    )
    parser.add_argument(
        "--freeze-initializer-inputs",
        action="store_true",
        help="graph inputs that an initializer also defines become constants that rules "
        "and folding can use (they can no longer be fed); always so before IR version 4",
    )
    parser.add_argument(
        "--calibration",
        metavar="PATH",
        help="calibration samples for the quantization rules (patterns/quantize): an .npz "
        "file or a folder of them, one array per graph input as --inputs takes them; the "
        "input model is run on them and each value's range is what rules read",
    )
    parser.add_argument(
        "--calibration-method",
        choices=("minmax", "percentile", "entropy"),
        default="minmax",
        help="how activation ranges come from the calibration samples when a rule names no "
        "method: smallest and largest value, the --calibration-percentile of the values, or "
        "the clipping threshold of least information loss (entropy; default: minmax)",
    )
    parser.add_argument(
        "--calibration-percentile",
        type=float,
        default=99.999,
        metavar="P",
        help="the percentile of --calibration-method percentile (default 99.999)",
    )
    parser.add_argument(
        "--exact",
        action="store_true",
        help="apply only rewrites exact on every input: no rule that assumes finite inputs, "
        "and rules that assume non-empty tensors (a fused Attention) only on known shapes",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress display")
    parser.add_argument(
        "--report",
        metavar="FILE",
        help="write a self-contained HTML report: rules that fired with before/after "
        "pictures, op counts, timings, verification",
    )
    _quantize_options.add_arguments(parser)


def _confidence(text: str) -> float:
    """An argparse type: a probability strictly between 0 and 1."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a number between 0 and 1, got {text!r}"
        ) from None
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"expected a number between 0 and 1, got {text!r}")
    return value


def _budget(args: argparse.Namespace) -> AccuracyBudget | None:
    """`--accept` and its measuring options as an accuracy budget (None without --accept)."""
    from rewriter.api import AccuracyBudget

    if not args.accept:
        return None
    inputs = accuracy_arguments(args)
    return AccuracyBudget(
        tuple(args.accept),
        examples=args.examples,
        seed=args.seed,
        samples=tuple(inputs["samples"]),  # type: ignore[arg-type]
        input_ranges=inputs["input_ranges"],  # type: ignore[arg-type]
        dims=inputs["dims"],  # type: ignore[arg-type]
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
    calibration: Calibration | CalibrationSamples | None = None,
    speed_check: SpeedCheck | None = None,
) -> RewriteOptions:
    """The options of the run the command line asks for."""
    return RewriteOptions(
        budget=budget,
        calibration=calibration,
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
    )


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
    if not args.why_not:
        _files.check_output_folder("output model", out_path)
    if not args.in_place and out_path.exists() and not args.force and not args.why_not:
        raise RewriteError(f"{out_path} exists; pass --force to overwrite it")
    if not args.in_place and out_path.exists() and os.path.samefile(out_path, source):
        raise RewriteError("the output would overwrite the input; use --in-place to allow that")
    _quantize_options.check_arguments(args)
    clock = PhaseClock()
    with clock.phase("load_rules"):
        inline = inline_files(args.inline_rules)
        rules = _rule_paths(args)
        ruleset = load_ruleset(rules, allow_python=args.allow_python, inline=inline)
    if args.rules or inline:
        # The shipped library is kept warning-free by its tests; show warnings for user rules.
        _status.print_warnings(ruleset.warnings)
    unknown = [name for name in args.exclude_rule if ruleset.rule(name) is None]
    if unknown:
        raise RewriteError(f"--exclude-rule: no rule named `{unknown[0]}` is loaded")
    calibration: Calibration | CalibrationSamples | None = None
    if args.calibration and args.why_not:
        with clock.phase("calibrate"):
            calibration = _calibrate(source, args)
    elif args.calibration:
        calibration = _quantize_options.calibration_samples(args, source)
    if args.why_not:
        assert calibration is None or isinstance(calibration, Calibration)
        model = _as_rules_see_it(as_model(source), args.target_opset)
        why_not_options = RunOptions(target_opset=args.target_opset, calibration=calibration)
        report = pass_manager(ruleset, why_not_options).why_not(model, args.why_not)
        print(report.render())
        return 0
    _refuse_unsafe_side_files(args, source, out_path, ruleset)
    counterexample = _counterexample_target(args, source, out_path, ruleset)
    budget = _budget(args)
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
            calibration=calibration,
            speed_check=_quantize_options.speed_check(args, measuring),
        )
        result = rewrite(source, ruleset, options)
    for warning in (*result.trace.warnings, *_rolled_back(result)):
        print(f"rewrite: warning: {warning}", file=sys.stderr)
    for note in result.notes:
        print(f"rewrite: note: {note}")
    if result.speed is not None:
        print(result.speed.summary())
    if args.explain:
        print(result.trace.explain())
    exit_code = 0
    verification: VerifyResult | AccuracyResult | None = None
    if result.budget is not None:
        verification = _show_budget(result.budget)
        if not result.budget.ok:
            exit_code = 1
    elif args.verify:
        with clock.phase("verify"):
            verification = _verify_and_bisect(source, result, ruleset, args, counterexample)
        if not verification.ok:
            exit_code = 1
    if exit_code == 0:
        with clock.phase("save"):
            ir.save(result.model, out_path)
        print(summary_line(result, str(out_path)))
    else:
        why = "is not equivalent" if result.budget is None else "misses the accuracy budget"
        print(f"rewrite: not writing {out_path}: the rewritten model {why}", file=sys.stderr)
    # Side files come last so that their timings cover every phase before them.
    if args.report:
        with clock.phase("report"):
            _write_report(args.report, source, result, verification, _phases(clock, result))
    if args.json:
        payload = result.to_json()
        times = _phases(clock, result)
        payload["timings_seconds"] = {phase: round(t, 6) for phase, t in times.items()}
        if verification is not None:
            payload["verification"] = verification.to_json()
        _files.write_text_atomically(args.json, json.dumps(payload, indent=2) + "\n")
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
    from rewriter.quantize import collect_calibration
    from rewriter.verification import VerifyError

    given = Path(path)
    files = sorted(given.glob("*.npz")) if given.is_dir() else [given]
    if not files:
        raise RewriteError(f"--calibration {path}: the folder holds no .npz file")
    try:
        samples = load_samples([str(f) for f in files], option="--calibration")
        return collect_calibration(
            source,
            samples,
            method=args.calibration_method,
            percentile=args.calibration_percentile,
        )
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


def _refuse_unsafe_side_files(
    args: argparse.Namespace, source: Path, out: Path, ruleset: ast.RuleSet
) -> None:
    """`--json` and `--report` never replace the models, the input's data or the rules in use."""
    protected = {out: "the output model"}
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
    args: argparse.Namespace, source: Path, out: Path, ruleset: ast.RuleSet
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
    protected = {out: "the output model", source: "the input model"}
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


def _show_budget(budget: BudgetResult) -> AccuracyResult:
    """Print the per-site table, the final check and the one-line summary; the final check."""
    if budget.sites:
        if sys.stdout.isatty():
            from rich.console import Console

            console = Console(file=sys.stdout, highlight=False)
            console.print(budget.rich_table())
            for line in budget.notes:
                console.print(line, markup=False)
        else:
            lines = [budget.render_table().rsplit("\n", 1)[0]]
            sys.stdout.write("\n".join(lines) + "\n")
    elif budget.notes:
        sys.stdout.write("\n".join(budget.notes) + "\n")
    print_result(budget.final)
    print(budget.summary())
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
) -> None:
    """`--report FILE`: the HTML report (written even when verification failed)."""
    from rewriter.report import write_rewrite_report

    write_rewrite_report(path, result, source=source, verification=verification, timings=timings)
    print(f"wrote report {path}")


__all__ = ["RewriteResult", "add_arguments", "run"]


def _verify_and_bisect(
    source: Path,
    result: RewriteResult,
    ruleset: ast.RuleSet,
    args: argparse.Namespace,
    counterexample: Path | None = None,
) -> VerifyResult:
    """Check the result against the source; on a mismatch, name the first guilty rewrite.

    The counterexample is saved to `counterexample` (kept in memory when None) and its path
    printed.
    """
    from rewriter.verification import check_equivalence, find_first_bad

    options = comparison_arguments(args)
    with _status.verify_progress(not args.no_progress, args.examples) as on_progress:
        verdict = check_equivalence(
            source,
            result.model,
            examples=args.examples,
            seed=args.seed,
            counterexample_path=counterexample,
            save_counterexample=counterexample is not None,
            progress=on_progress,
            **options,  # type: ignore[arg-type]
        )
    print(verdict.render_table())
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
        print(f"counterexample saved to {verdict.counterexample_path}")
    rule_entries = [e for e in result.trace.entries if e.kind == "rule"]
    if verdict.counterexample is None or not rule_entries:
        return verdict

    def prefix(k: int) -> ir.Model:
        options = dataclasses.replace(_rewrite_options(args), replay_limit=k)
        return rewrite(source, ruleset, options).model

    level = verdict.failing_level or "ORT_DISABLE_ALL"
    bad = find_first_bad(
        len(rule_entries),
        prefix,
        source,
        verdict.counterexample,
        compare=args.compare,
        factor=args.factor,
        rtol=args.rtol,
        atol=args.atol,
        level=level,
    )
    if bad is not None and 1 <= bad <= len(rule_entries):
        entry = rule_entries[bad - 1]
        what = "first non-equivalent rewrite"
        if level == "ORT_ENABLE_ALL":
            what = "first rewrite after which onnxruntime's ORT_ENABLE_ALL disagrees"
        print(
            f"{what}: #{bad} rule `{entry.rule}` ({entry.location}) on {', '.join(entry.matched)}",
            file=sys.stderr,
        )
    elif bad == 0:
        print(
            "the untouched model already disagrees on the counterexample: no rewrite is to "
            "blame (the criterion may be too tight for this model: see --factor)",
            file=sys.stderr,
        )
    return verdict
