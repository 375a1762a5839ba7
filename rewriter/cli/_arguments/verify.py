"""The arguments of `rewrite verify ORIGINAL REWRITTEN`.

Declared with argparse alone, so `--help` and usage errors never import onnx or numpy.
"""

from __future__ import annotations

import argparse

from rewriter.cli._arguments import non_negative_int
from rewriter.cli._arguments.comparison import add_comparison_options


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the `verify` subcommand's arguments."""
    parser.add_argument("original", help="the reference model (.onnx)")
    parser.add_argument(
        "rewritten",
        help="the model to check against it (.onnx), or the pipeline.json of `rewrite split`",
    )
    parser.add_argument(
        "--examples",
        type=non_negative_int,
        default=20,
        help="generated examples (default 20; 0 with --inputs: the samples only)",
    )
    parser.add_argument("--seed", type=int, default=0, help="hypothesis seed (default 0)")
    add_comparison_options(
        parser, "default: <rewritten>.counterexample.npz beside it, replacing an earlier one"
    )
    parser.add_argument(
        "--force", action="store_true", help="let --counterexample replace an existing file"
    )
