"""The arguments of `rewrite graft A B --connect A_OUT=B_IN[:ADAPTER]... -o AB`.

Declared with argparse alone, so `--help` and usage errors never import onnx or numpy.
"""

from __future__ import annotations

import argparse

from rewriter.cli._arguments import non_negative_int, positive_int


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `rewrite graft`."""
    parser.add_argument("first", metavar="A", help="the model whose values feed B")
    parser.add_argument("second", metavar="B", help="the model fed by A")
    parser.add_argument(
        "--connect",
        action="append",
        required=True,
        metavar="A_OUT=B_IN[:ADAPTER]",
        help="feed B's input B_IN with A's value A_OUT, through ADAPTER if given: an op with "
        "optional attributes, e.g. Flatten, Reshape (to B_IN's declared shape), "
        "'Transpose <perm = [0, 2, 3, 1]>' (repeatable)",
    )
    parser.add_argument(
        "--keep-outputs",
        default="",
        metavar="NAMES",
        help="comma-separated values of A that stay outputs (after B's)",
    )
    parser.add_argument("-o", "--output", required=True, metavar="AB", help="the model to write")
    parser.add_argument("--force", action="store_true", help="overwrite an existing output file")
    parser.add_argument(
        "--verify",
        action="store_true",
        help="before writing AB, check on generated inputs that its A part computes what A "
        "does and its B part what B does (nothing is written on a mismatch)",
    )
    parser.add_argument(
        "--examples", type=positive_int, default=20, help="examples for --verify (default 20)"
    )
    parser.add_argument(
        "--seed", type=non_negative_int, default=0, help="seed for --verify (default 0)"
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress display")
