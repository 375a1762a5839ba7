"""`rewrite graft A.onnx B.onnx --connect A_OUT=B_IN[:ADAPTER]... -o AB.onnx`.

B fed by A's values (see `rewriter.api.graft`): AB's outputs are B's, plus `--keep-outputs`
of A's; names of B that A already uses get the prefix `b/`; identical initializers are
stored once.
"""

from __future__ import annotations

import argparse

import ir
from rewriter.api import graft
from rewriter.cli import _files
from rewriter.cli._extract import output_target


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


def run(args: argparse.Namespace) -> int:
    """Graft and write; returns the exit code."""
    first = _files.input_model_path(args.first)
    second = _files.input_model_path(args.second)
    target = output_target(args.output, [first, second], force=args.force)
    keep = [name.strip() for name in args.keep_outputs.split(",") if name.strip()]
    result = graft(first, second, args.connect, keep_outputs=keep)
    for note in result.notes:
        print(f"rewrite: note: {note}")
    ir.save(result.model, target)
    graph = result.model.graph
    print(
        f"{sum(1 for _ in graph)} nodes, {len(graph.initializers)} initializers, "
        f"{len(graph.inputs)} inputs, {len(graph.outputs)} outputs: wrote {target}"
    )
    return 0
