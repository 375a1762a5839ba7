"""The arguments of `rewrite extract-rule MODEL --inputs a,b --outputs y`.

Declared with argparse alone, so `--help` and usage errors never import onnx or numpy.
"""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the command's arguments."""
    parser.add_argument("model", metavar="MODEL", help="the .onnx model to read")
    parser.add_argument(
        "--inputs",
        default="",
        help="comma-separated names of the values that feed the subgraph (the match's inputs)",
    )
    parser.add_argument(
        "--outputs",
        required=True,
        help="comma-separated names of the values the subgraph computes",
    )
    parser.add_argument("--name", default="extracted", help="the rule's name")
