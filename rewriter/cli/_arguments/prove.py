"""The arguments of `rewrite prove PATH...`.

Declared with argparse alone, so `--help` and usage errors never import onnx, numpy or z3.
"""

from __future__ import annotations

import argparse

from rewriter.cli._arguments import positive_int, positive_seconds


def rank_bound(text: str) -> int:
    """An argparse type: the largest rank tried, 0 to 6."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a rank from 0 to 6, got {text!r}") from None
    if not 0 <= value <= 6:
        raise argparse.ArgumentTypeError(f"expected a rank from 0 to 6, got {text!r}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the `prove` subcommand's arguments."""
    parser.add_argument("paths", nargs="+", metavar="PATH", help=".rw files or folders")
    parser.add_argument(
        "--rule",
        dest="rules",
        metavar="NAME",
        action="append",
        default=[],
        help="prove only this rule (repeatable)",
    )
    parser.add_argument(
        "--json", metavar="FILE", help="also write the results as JSON (`-`: stdout)"
    )
    parser.add_argument("--force", action="store_true", help="overwrite an existing --json file")
    parser.add_argument(
        "--timeout",
        type=positive_seconds,
        default=30.0,
        metavar="S",
        help="seconds per rule, all its instances together (default 30); a rule the solver "
        "cannot decide in time is unsupported",
    )
    parser.add_argument(
        "--jobs",
        type=positive_int,
        default=1,
        metavar="N",
        help="prove rules in this many processes (default 1); the results do not depend on it",
    )
    parser.add_argument(
        "--max-rank",
        type=rank_bound,
        default=3,
        metavar="R",
        help="the largest rank tried for inputs of any rank (default 3, at most 6)",
    )
    parser.add_argument(
        "--allow-python", action="store_true", help="permit `use` declarations in rule files"
    )
