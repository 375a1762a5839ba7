"""The comparison options shared by `rewrite verify` and `rewrite MODEL --verify`.

Criterion, inputs, special values, optimization levels, the counterexample path and
`--accept`: declared once, read back by `rewriter.cli._verify.comparison_arguments`.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

from rewriter.cli._arguments import acceptance, input_shape


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


def _dim(text: str) -> tuple[str, int]:
    """Parse `SYMBOL=N`."""
    name, sep, size = text.rpartition("=")
    if not sep or not name or not size.strip().isdigit() or int(size) < 1:
        raise argparse.ArgumentTypeError(f"expected SYMBOL=N with N >= 1, got {text!r}")
    return name, int(size)


def _finite_at_least(low: float) -> Callable[[str], float]:
    """An argparse type: a finite number of at least `low` (a factor, a tolerance)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not math.isfinite(value) or value < low:
            raise argparse.ArgumentTypeError(f"expected a finite number >= {low:g}, got {text!r}")
        return value

    return parse


_factor = _finite_at_least(1)


_tolerance = _finite_at_least(0)


def add_comparison_options(parser: argparse.ArgumentParser, counterexample_default: str) -> None:
    """Criterion, inputs, special values, levels and the counterexample path (both commands)."""
    parser.add_argument(
        "--compare",
        choices=("accuracy", "direct"),
        default="accuracy",
        help="accuracy (default): float outputs judged against a float64 evaluation of the "
        "original, allowed --factor times the original's error; direct: within --rtol/--atol "
        "of the original's outputs",
    )
    parser.add_argument(
        "--factor",
        type=_factor,
        default=8.0,
        help="how many times the original's error (against float64) the rewritten model may "
        "have (default 8): larger accepts more",
    )
    parser.add_argument(
        "--rtol",
        type=_tolerance,
        help="relative tolerance for outputs compared directly (default per dtype)",
    )
    parser.add_argument(
        "--atol",
        type=_tolerance,
        help="absolute tolerance for outputs compared directly (default per dtype)",
    )
    parser.add_argument(
        "--input",
        dest="input_ranges",
        metavar="NAME=LO:HI",
        action="append",
        type=_input_range,
        default=[],
        help="generate input NAME inside [LO, HI] (repeatable)",
    )
    parser.add_argument(
        "--input-shape",
        dest="input_shapes",
        metavar="NAME=D1xD2...",
        action="append",
        type=input_shape,
        default=[],
        help="fix input NAME's shape (and so its symbolic dims in every input; repeatable); "
        "the main command fixes it in the model before rewriting, and the output keeps it",
    )
    parser.add_argument(
        "--dim",
        dest="dims",
        metavar="SYMBOL=N",
        action="append",
        type=_dim,
        default=[],
        help="give symbolic dim SYMBOL the size N in every input (repeatable)",
    )
    parser.add_argument(
        "--inputs",
        dest="samples",
        metavar="FILE.npz",
        action="append",
        default=[],
        help="real inputs, checked first: one array per graph input, one sample or several "
        "stacked along a new first axis; a folder stands for its .npz files (repeatable)",
    )
    parser.add_argument(
        "--special-values",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="draw NaN, infinities and dtype extremes in some examples (default: on)",
    )
    parser.add_argument(
        "--ort-enable-all",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also run the rewritten model with onnxruntime's graph optimizations "
        "(ORT_ENABLE_ALL) and judge it the same way (default: on)",
    )
    parser.add_argument(
        "--counterexample",
        metavar="PATH",
        help=f"where to save a counterexample ({counterexample_default})",
    )
    parser.add_argument(
        "--accept",
        metavar="METRIC>=VALUE",
        action="append",
        type=acceptance,
        default=[],
        help="judge by an accuracy budget instead of equivalence (repeatable): snr>=DB, "
        "cosine>=C, max_rel<=R, max_abs<=A or top1>=SHARE over all outputs, measured "
        "against the original on plain generated inputs and the --inputs samples",
    )
