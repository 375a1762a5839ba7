"""The arguments of `rewrite lsp` (the language server for `.rw` files).

Declared with argparse alone, so `--help` and usage errors never import onnx or numpy.
"""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `rewrite lsp`."""
    parser.add_argument(
        "--stdio",
        action="store_true",
        help="talk over stdin and stdout (the default and only transport; editors that "
        "pass the flag are accepted)",
    )
