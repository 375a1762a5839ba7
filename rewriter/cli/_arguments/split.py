"""The arguments of `rewrite split MODEL --stages N -o DIR`.

Declared with argparse alone, so `--help` and usage errors never import onnx or numpy.
"""

from __future__ import annotations

import argparse

from rewriter.cli._arguments import add_input_shape_option, positive_int


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `rewrite split`."""
    parser.add_argument("model", metavar="MODEL", help="the ONNX model (read, never changed)")
    parser.add_argument("--stages", type=positive_int, required=True, help="how many stages")
    parser.add_argument(
        "--balance",
        choices=("params", "flops"),
        default="params",
        help="what to balance between stages: weight bytes (default) or estimated FLOPs",
    )
    parser.add_argument(
        "-o", "--output", required=True, metavar="DIR", help="the folder to write the stages to"
    )
    parser.add_argument(
        "--force", action="store_true", help="write into a folder that already holds a pipeline"
    )
    add_input_shape_option(parser, "before splitting")
