"""The arguments of `rewrite stats MODEL`.

Declared with argparse alone, so `--help` and usage errors never import onnx or numpy.
"""

from __future__ import annotations

import argparse

from rewriter.cli._arguments import add_input_shape_option, positive_int


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `rewrite stats`."""
    parser.add_argument("model", help="the ONNX model")
    parser.add_argument("--json", metavar="FILE", help="also write the statistics as JSON")
    parser.add_argument(
        "--top", type=positive_int, default=10, help="how many of the largest tensors to list"
    )
    parser.add_argument(
        "--report", metavar="FILE", help="also write the statistics as a self-contained HTML page"
    )
    parser.add_argument(
        "--force", action="store_true", help="overwrite existing --json / --report files"
    )
    add_input_shape_option(
        parser, "for the FLOPs and bytes estimates (else symbolic dims count as 1)"
    )
