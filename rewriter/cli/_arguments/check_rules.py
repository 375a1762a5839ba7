"""The arguments of `rewrite check-rules PATH...`.

Declared with argparse alone, so `--help` and usage errors never import onnx or numpy.
"""

from __future__ import annotations

import argparse
import os

from rewriter.cli._arguments import positive_int, positive_seconds


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the `check-rules` subcommand's arguments."""
    parser.add_argument("paths", nargs="+", metavar="PATH", help=".rw files or folders")
    parser.add_argument(
        "--rule",
        dest="rules",
        metavar="NAME",
        action="append",
        default=[],
        help="check only this rule (repeatable)",
    )
    parser.add_argument(
        "--examples", type=positive_int, default=10, help="inputs per instance (default 10)"
    )
    parser.add_argument(
        "--instances", type=positive_int, default=4, help="instances per rule (default 4)"
    )
    parser.add_argument(
        "--attempts",
        type=positive_int,
        default=60,
        help="attempts at building instances per rule before giving up (default 60)",
    )
    parser.add_argument("--seed", type=int, default=0, help="hypothesis seed (default 0)")
    parser.add_argument(
        "--sample",
        type=positive_int,
        metavar="K",
        help="check K rules drawn from the loaded ones (chosen by --seed)",
    )
    parser.add_argument(
        "--jobs",
        type=positive_int,
        default=min(4, os.cpu_count() or 1),
        help="check rules in this many processes (default: the CPUs, at most 4); the results "
        "do not depend on it",
    )
    parser.add_argument(
        "--strict",
        action="store_true",
        help="also exit 1 when a rule could not be instantiated (nothing about it was checked; "
        "loop rules, rules over sequence values and passes, which their own tests verify, "
        "excepted)",
    )
    parser.add_argument(
        "--passes",
        choices=("default", "none"),
        default="default",
        help="check the default pipeline's passes on the rules' instances too (default), or "
        "only the passes the files declare (none)",
    )
    parser.add_argument(
        "--prove",
        action="store_true",
        help="also prove each rule (as `rewrite prove` does) and show its status beside "
        "check-rules' own",
    )
    parser.add_argument(
        "--prove-timeout",
        type=positive_seconds,
        default=10.0,
        metavar="S",
        help="with --prove: seconds per rule (default 10)",
    )
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    parser.add_argument("--force", action="store_true", help="overwrite an existing --json file")
    parser.add_argument(
        "--allow-python", action="store_true", help="permit `use` declarations in rule files"
    )
