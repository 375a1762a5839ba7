"""`rewrite graft A.onnx B.onnx --connect A_OUT=B_IN[:ADAPTER]... -o AB.onnx`.

B fed by A's values (see `rewriter.surgery.graft`): AB's outputs are B's, plus `--keep-outputs`
of A's; names of B that A already uses get the prefix `b/`; identical initializers are
stored once.
"""

from __future__ import annotations

import argparse

import ir
from rewriter.cli import _files, _status
from rewriter.cli._extract import output_target
from rewriter.surgery import graft, verify_grafted


def run(args: argparse.Namespace) -> int:
    """Graft and write; returns the exit code."""
    first = _files.input_model_path(args.first)
    second = _files.input_model_path(args.second)
    target = output_target(args.output, [first, second], force=args.force)
    keep = [name.strip() for name in args.keep_outputs.split(",") if name.strip()]
    result = graft(first, second, args.connect, keep_outputs=keep)
    for note in result.notes:
        print(f"rewrite: note: {note}")
    if args.verify:
        with _status.verify_progress(not args.no_progress, args.examples) as on_progress:
            check = verify_grafted(
                first, second, result, examples=args.examples, seed=args.seed, progress=on_progress
            )
        for label, verdict in check.parts:
            print(f"{label}:")
            print(verdict.render_table())
        if not check.ok:
            print(f"rewrite: not writing {target}: the grafted model disagrees with A or B")
            return 1
    ir.save(result.model, target)
    graph = result.model.graph
    print(
        f"{sum(1 for _ in graph)} nodes, {len(graph.initializers)} initializers, "
        f"{len(graph.inputs)} inputs, {len(graph.outputs)} outputs: wrote {target}"
    )
    return 0
