"""The arguments of `rewrite find MODEL -e TEXT | --rules PATH`.

Declared with argparse alone, so `--help` and usage errors never import onnx or numpy.
"""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `rewrite find`."""
    parser.add_argument("model", help="the ONNX model (read, never changed)")
    parser.add_argument(
        "-e",
        "--expression",
        dest="queries",
        action="append",
        default=[],
        metavar="TEXT",
        help="match lines (one per line, then optional `where EXPR` lines), or a whole rule; "
        "repeatable",
    )
    parser.add_argument(
        "--rules",
        action="append",
        default=[],
        metavar="PATH",
        help="rule files or folders whose rules' matches to list (their rewrites are not "
        "applied); repeatable",
    )
    parser.add_argument("--count", action="store_true", help="print only the number of matches")
    parser.add_argument(
        "--json", metavar="FILE", help="also write the matches as JSON (`-`: to stdout only)"
    )
    parser.add_argument("--force", action="store_true", help="overwrite an existing --json file")
    parser.add_argument(
        "--allow-python", action="store_true", help="permit `use` declarations in rule files"
    )
