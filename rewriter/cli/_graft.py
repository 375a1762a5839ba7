"""`rewrite graft A.onnx B.onnx --connect A_OUT=B_IN[:ADAPTER]... -o AB.onnx`.

B fed by A's values (see `rewriter.surgery.graft`): AB's outputs are B's, plus `--keep-outputs`
of A's; names of B that A already uses get the prefix `b/`; identical initializers are
stored once.
"""

from __future__ import annotations

import argparse

import ir
from rewriter.cli import _files
from rewriter.cli._extract import output_target
from rewriter.surgery import graft


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
