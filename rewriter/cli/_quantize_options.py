"""The main command's precision options: `--quantize`, the speed check, calibration samples.

Declared in `_arguments.quantize` (parsing them loads nothing); read back here.

`rewrite MODEL --quantize int8|int4|float16 [--calibration DATA] [--accept METRIC>=V]` runs
the default library (or `--rules`) to its fixed point, then the preset's precision rules;
the speed check (on by default under a preset: `--no-speed-check`, `--speed-threads`,
`--speed-level`) keeps float the layers that would run slower.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from rewriter._errors import RewriteError

if TYPE_CHECKING:
    from rewriter.quantize import CalibrationSamples, SpeedCheck


def check_arguments(args: argparse.Namespace) -> None:
    """Refuse speed options that cannot apply.

    Raises:
        RewriteError: a speed option without --quantize, or with --no-speed-check.
    """
    given = [
        option
        for option, value in (
            ("--speed-threads", args.speed_threads),
            ("--speed-level", args.speed_level),
        )
        if value is not None
    ]
    if args.no_speed_check and not args.quantize:
        raise RewriteError("--no-speed-check applies to --quantize")
    if given and not args.quantize:
        raise RewriteError(f"{given[0]} applies to --quantize (the speed check)")
    if given and args.no_speed_check:
        raise RewriteError(f"{given[0]} and --no-speed-check contradict each other")


def speed_check(
    args: argparse.Namespace, progress: Callable[[str], None] | None
) -> SpeedCheck | None:
    """The speed check the command line asks for (None: the preset's default or none)."""
    if not args.quantize:
        return None
    from rewriter.quantize import SpeedCheck  # brings in verification: only for --quantize

    if args.no_speed_check:
        return SpeedCheck(enabled=False)
    return SpeedCheck(
        threads=args.speed_threads or 0,
        level=args.speed_level or "all",
        progress=progress,
    )


def calibration_samples(args: argparse.Namespace, source: Path) -> CalibrationSamples:
    """The `--calibration` samples, to be run on the float model the precision rules see.

    They are checked against the input model's inputs now (the float model has the same).

    Raises:
        RewriteError: no .npz file, or samples that cannot be read or do not fit the model.
    """
    import ir
    from rewriter.cli._verify import load_samples
    from rewriter.quantize import CalibrationSamples
    from rewriter.verification import VerifyError, analyze_inputs, split_samples

    path = args.calibration
    try:
        given_samples = load_samples([path], option="--calibration")
    except VerifyError as exc:
        raise RewriteError(str(exc)) from None  # names the option and the file
    try:
        model = ir.load(source)
        samples = split_samples(given_samples, analyze_inputs(model, model))
    except VerifyError as exc:
        raise RewriteError(f"--calibration {path}: {exc}") from None
    try:
        return CalibrationSamples(
            tuple(samples),
            method=args.calibration_method,
            percentile=args.calibration_percentile,
            bias_correction=args.bias_correction,
        )
    except ValueError as exc:
        raise RewriteError(f"--calibration {path}: {exc}") from None


class ProgressLines:
    """Progress as plain lines on stdout, at most one every `interval` seconds.

    For logs and pipes, where the status line (drawn only on a terminal) shows nothing: a long
    budget or speed check then says how far it is (`12/43 measured, 3.1 s, about 8 s left`).
    """

    def __init__(self, interval: float = 3.0) -> None:
        self.interval = interval
        self.last = -interval

    def __call__(self, text: str) -> None:
        now = time.monotonic()
        if now - self.last < self.interval:
            return
        self.last = now
        print(f"rewrite: {text}", flush=True)


def progress_lines(enabled: bool) -> ProgressLines | None:
    """Progress lines when stdout is not a terminal (and progress is wanted)."""
    if not enabled or sys.stdout.isatty():
        return None
    return ProgressLines()


def both(
    first: Callable[[str], None] | None, second: Callable[[str], None] | None
) -> Callable[[str], None] | None:
    """One callback calling both (either may be None)."""
    if first is None or second is None:
        return first or second

    def call(text: str) -> None:
        first(text)
        second(text)

    return call
