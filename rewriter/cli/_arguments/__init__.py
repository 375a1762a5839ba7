"""Parsers of command-line values, and each command's arguments (one module per command).

Value parsers give one-line errors (counts, opset versions, shapes, budgets). Nothing here
imports onnx, numpy or onnxruntime at module level: `rewrite --help`, `--version` and usage
errors are answered from these modules alone; a value that needs onnx to be judged (an opset
version's range, an accuracy metric) imports it when such a value is given.
"""

from __future__ import annotations

import argparse


def positive_int(text: str) -> int:
    """An argparse type: an int of at least 1 (counts of examples, instances, jobs)."""
    return _int_at_least(text, 1, "a positive integer")


def positive_seconds(text: str) -> float:
    """An argparse type: a positive number of seconds."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


def non_negative_int(text: str) -> int:
    """An argparse type: an int of at least 0 (a budget)."""
    return _int_at_least(text, 0, "a non-negative integer")


def _int_at_least(text: str, low: int, what: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
    if value < low:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
    return value


def opset_version(text: str) -> int:
    """An argparse type: a default-domain opset version that onnx defines."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an opset version, got {text!r}") from None
    import ir  # the range is onnx's: known once onnx is loaded

    newest = ir.schemas.latest_opset("")
    if not 1 <= value <= newest:
        raise argparse.ArgumentTypeError(
            f"onnx {_onnx_version()} defines opsets 1 to {newest}, not {value}"
        )
    return value


def _onnx_version() -> str:
    import onnx

    return str(onnx.__version__)


def input_shape(text: str) -> tuple[str, tuple[int, ...]]:
    """An argparse type: `NAME=D1xD2x...` (a graph input's shape; `NAME=` for a scalar)."""
    name, equals, dims = text.rpartition("=")
    usage = f"expected NAME=D1xD2x... (e.g. x=1x128x768), got {text!r}"
    if not equals or not name:
        raise argparse.ArgumentTypeError(usage)
    try:
        shape = tuple(int(d) for d in dims.lower().split("x")) if dims else ()
    except ValueError:
        raise argparse.ArgumentTypeError(usage) from None
    if any(d < 0 for d in shape):
        raise argparse.ArgumentTypeError(f"{text!r}: dims must be sizes (0 or more)")
    return name, shape


def add_input_shape_option(parser: argparse.ArgumentParser, purpose: str) -> None:
    """`--input-shape NAME=D1xD2x...` (repeatable, into `args.input_shape`), for `purpose`."""
    parser.add_argument(
        "--input-shape",
        type=input_shape,
        action="append",
        default=[],
        metavar="NAME=D1xD2x...",
        help=f"fix a graph input's shape {purpose} (repeatable; its symbolic dims take those "
        "sizes everywhere)",
    )


def acceptance(text: str) -> object:
    """An argparse type: `METRIC>=VALUE` (`snr>=35`, `cosine>=0.999`, `max_rel<=0.01`)."""
    from rewriter.verification import METRICS, parse_acceptance

    if text.strip() in METRICS:
        raise argparse.ArgumentTypeError(
            f"expected METRIC>=VALUE, got only {text!r}: quote the budget, or the shell takes "
            f"`>` for a redirection (--accept '{text.strip()}>=VALUE')"
        )
    try:
        return parse_acceptance(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
