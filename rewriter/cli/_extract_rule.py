"""`rewrite extract-rule MODEL --inputs a,b --outputs y [--name NAME]`.

Prints a `.rw` rule skeleton whose match block is the subgraph of MODEL between the given
values (see `rewriter.dsl._extract`). The rewrite block is left for the user to write.
"""

from __future__ import annotations

import argparse
import sys

import ir
from rewriter.dsl import extract_rule


def run(args: argparse.Namespace) -> int:
    """Print the skeleton; return the exit code."""
    model = ir.load(args.model)
    text = extract_rule(model, _names(args.inputs), _names(args.outputs), args.name)
    sys.stdout.write(text)
    return 0


def _names(listing: str) -> list[str]:
    return [name.strip() for name in listing.split(",") if name.strip()]
