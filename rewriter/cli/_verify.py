"""`rewrite verify ORIGINAL REWRITTEN`: compare two models on generated inputs.

Prints the per-output table (with `rich` on a terminal, plain text otherwise) and the
verdict. `--counterexample` may not name either model or their external data files. Exit
codes: 0 the models agree, 1 they disagree (the shrunk counterexample is saved and its path
printed), 2 bad usage or a model that cannot be loaded or compared (one line on stderr, from
the CLI's error handler). An existing `--counterexample` file is replaced only with `--force`;
the default `<rewritten>.counterexample.npz` replaces only an earlier counterexample.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import ir
from rewriter.cli import _files, _status
from rewriter.cli._arguments import positive_int

if TYPE_CHECKING:
    from rewriter.verification import VerifyResult

EXIT_OK = 0
EXIT_MISMATCH = 1


def _input_range(text: str) -> tuple[str, tuple[float, float]]:
    """Parse `NAME=LO:HI` (closed range; integers use the integers inside it)."""
    name, sep, bounds = text.rpartition("=")
    lo_text, colon, hi_text = bounds.partition(":")
    if not sep or not name or not colon:
        raise argparse.ArgumentTypeError(f"expected NAME=LO:HI, got {text!r}")
    try:
        lo, hi = float(lo_text), float(hi_text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"LO and HI must be numbers in {text!r}") from None
    if not (math.isfinite(lo) and math.isfinite(hi)) or lo > hi:
        raise argparse.ArgumentTypeError(f"need finite LO <= HI in {text!r}")
    return name, (lo, hi)


def _tolerance(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"expected a finite number >= 0, got {text!r}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the `verify` subcommand's arguments."""
    parser.add_argument("original", help="the reference model (.onnx)")
    parser.add_argument(
        "rewritten",
        help="the model to check against it (.onnx), or the pipeline.json of `rewrite split`",
    )
    parser.add_argument(
        "--examples", type=positive_int, default=20, help="generated examples (default 20)"
    )
    parser.add_argument("--seed", type=int, default=0, help="hypothesis seed (default 0)")
    add_comparison_options(
        parser, "default: <rewritten>.counterexample.npz beside it, replacing an earlier one"
    )
    parser.add_argument(
        "--force", action="store_true", help="let --counterexample replace an existing file"
    )


def add_comparison_options(parser: argparse.ArgumentParser, counterexample_default: str) -> None:
    """Tolerances, input ranges, special values and the counterexample path (both commands)."""
    parser.add_argument(
        "--rtol", type=_tolerance, help="relative tolerance for float outputs (default per dtype)"
    )
    parser.add_argument(
        "--atol", type=_tolerance, help="absolute tolerance for float outputs (default per dtype)"
    )
    parser.add_argument(
        "--input",
        dest="inputs",
        metavar="NAME=LO:HI",
        action="append",
        type=_input_range,
        default=[],
        help="generate input NAME inside [LO, HI] (repeatable)",
    )
    parser.add_argument(
        "--special-values", action="store_true", help="also generate NaN and +-inf elements"
    )
    parser.add_argument(
        "--counterexample",
        metavar="PATH",
        help=f"where to save a counterexample ({counterexample_default})",
    )


def input_ranges(args: argparse.Namespace) -> dict[str, tuple[float, float]]:
    """The `--input NAME=LO:HI` ranges by input name.

    Raises:
        VerifyError: an input is given twice.
    """
    from rewriter.verification import VerifyError

    ranges: dict[str, tuple[float, float]] = {}
    for name, bounds in args.inputs:
        if name in ranges:
            raise VerifyError(f"--input {name} given twice")
        ranges[name] = bounds
    return ranges


def counterexample_target(
    explicit: str | None,
    default: Path,
    *,
    force: bool,
    protected: dict[Path, str],
    models: list[Path],
) -> Path:
    """Where a counterexample goes: `explicit` (checked like every side file) or `default`.

    An explicit path never replaces a model, its data or an existing file without `force`,
    and its folder must exist. The default, named after the model, replaces only an earlier
    counterexample (an `.npz` archive).

    Raises:
        RewriteError: the path is refused, naming the option and the reason.
    """
    import zipfile

    from rewriter._errors import RewriteError

    if explicit is not None:
        path = Path(explicit)
        _files.refuse_unsafe_targets(
            {"--counterexample": explicit}, protected=protected, models=models, force=force
        )
        return path
    if default.exists() and not (default.is_file() and zipfile.is_zipfile(default)):
        raise RewriteError(
            f"{default} exists and is not an earlier counterexample; name another file with "
            "--counterexample"
        )
    return default


def _print_table(result: VerifyResult) -> None:
    if sys.stdout.isatty():
        from rich.console import Console

        console = Console(file=sys.stdout, highlight=False)
        console.print(result.rich_table())
        for line in (*result.notes(), result.summary()):
            console.print(line, markup=False)
    else:
        sys.stdout.write(result.render_table() + "\n")


def run(args: argparse.Namespace) -> int:
    """Compare the models; 0 when they agree, 1 when they do not."""
    from rewriter.verification import check_equivalence
    from rewriter.verification._counterexample import default_counterexample_path

    original, rewritten = Path(args.original), Path(args.rewritten)
    target = counterexample_target(
        args.counterexample,
        Path(default_counterexample_path(args.rewritten)),
        force=args.force,
        protected={original: "the original model", rewritten: "the rewritten model"},
        models=[original, rewritten],
    )
    ranges = input_ranges(args)
    candidate: str | ir.Model = args.rewritten
    if rewritten.suffix == ".json":
        from rewriter.api import load_pipeline

        candidate = load_pipeline(rewritten)  # the stages chained into one model
    with _status.verify_progress(True, args.examples) as on_progress:
        result = check_equivalence(
            args.original,
            candidate,
            examples=args.examples,
            seed=args.seed,
            rtol=args.rtol,
            atol=args.atol,
            input_ranges=ranges,
            special_values=args.special_values,
            counterexample_path=target,
            progress=on_progress,
        )
    _print_table(result)
    if result.ok:
        return EXIT_OK
    if result.counterexample_path is not None:
        sys.stdout.write(f"counterexample saved to {result.counterexample_path}\n")
    return EXIT_MISMATCH
