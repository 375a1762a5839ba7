"""The arguments of `rewrite graft A B --connect A_OUT=B_IN[:ADAPTER]... -o AB`.

Declared with argparse alone, so `--help` and usage errors never import onnx or numpy.
"""

from __future__ import annotations

import argparse


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
