"""The arguments of `rewrite extract MODEL --inputs ... --outputs ... -o SUB`.

Declared with argparse alone, so `--help` and usage errors never import onnx or numpy.
"""

from __future__ import annotations

import argparse

from rewriter.cli._arguments import add_input_shape_option, non_negative_int, positive_int


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `rewrite extract`."""
    parser.add_argument("model", metavar="MODEL", help="the ONNX model (read, never changed)")
    parser.add_argument(
        "--inputs",
        default="",
        help="comma-separated names of the values that become the inputs (none: the subgraph "
        "computes from constants only)",
    )
    parser.add_argument(
        "--outputs", required=True, help="comma-separated names of the values to compute"
    )
    parser.add_argument("-o", "--output", required=True, metavar="SUB", help="the model to write")
    parser.add_argument("--force", action="store_true", help="overwrite an existing output file")
    add_input_shape_option(parser, "before cutting")
    parser.add_argument(
        "--verify",
        action="store_true",
        help="check SUB against the original's values on generated inputs before writing it",
    )
    parser.add_argument(
        "--examples", type=positive_int, default=20, help="examples for --verify (default 20)"
    )
    parser.add_argument(
        "--seed", type=non_negative_int, default=0, help="seed for --verify (default 0)"
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress display")
