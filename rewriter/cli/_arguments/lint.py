"""The arguments of `rewrite lint PATH...`.

Declared with argparse alone, so `--help` and usage errors never import onnx or numpy.
"""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the command's arguments."""
    parser.add_argument("paths", nargs="+", metavar="PATH", help=".rw files or folders of them")
    parser.add_argument(
        "--allow-python",
        action="store_true",
        help='permit `use "module"` declarations (imports those Python modules)',
    )
    parser.add_argument(
        "--werror", action="store_true", help="treat warnings as errors (exit code 2)"
    )
