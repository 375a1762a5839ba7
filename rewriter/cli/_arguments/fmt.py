"""The arguments of `rewrite fmt PATH... [--check]`.

Declared with argparse alone, so `--help` and usage errors never import onnx or numpy.
"""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the command's arguments."""
    parser.add_argument("paths", nargs="+", metavar="PATH", help=".rw files or folders of them")
    parser.add_argument(
        "--check",
        action="store_true",
        help="write nothing; list the files that would change and exit 1 if any",
    )
