"""`rewrite extract-rule MODEL --inputs a,b --outputs y [--name NAME]`.

Prints a `.rw` rule skeleton whose match block is the subgraph of MODEL between the given
values (see `rewriter.dsl._extract`). The rewrite block is left for the user to write.
"""

from __future__ import annotations

import argparse
import sys

import ir
from rewriter.dsl import extract_rule


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


def run(args: argparse.Namespace) -> int:
    """Print the skeleton; return the exit code."""
    model = ir.load(args.model)
    text = extract_rule(model, _names(args.inputs), _names(args.outputs), args.name)
    sys.stdout.write(text)
    return 0


def _names(listing: str) -> list[str]:
    return [name.strip() for name in listing.split(",") if name.strip()]
