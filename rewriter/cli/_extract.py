"""`rewrite extract MODEL --inputs A[,B...] --outputs Y[,Z...] -o SUB.onnx [--verify]`.

Writes the subgraph between those values as a runnable model (see `rewriter.surgery.extract`);
with `--verify`, checks it against the original's own values on generated inputs.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from pathlib import Path

import ir
from rewriter._errors import RewriteError
from rewriter.cli import _files, _status
from rewriter.surgery import extract, verify_extracted


def run(args: argparse.Namespace) -> int:
    """Cut, optionally verify, write; returns the exit code."""
    source = _files.input_model_path(args.model)
    target = output_target(args.output, [source], force=args.force)
    shapes = dict(args.input_shape)
    sub = extract(source, _names(args.inputs), _names(args.outputs), input_shapes=shapes)
    if args.verify:
        with _status.verify_progress(not args.no_progress, args.examples) as on_progress:
            verdict = verify_extracted(
                source,
                sub,
                examples=args.examples,
                seed=args.seed,
                progress=on_progress,
                input_shapes=shapes,
            )
        print(verdict.render_table())
        if not verdict.ok:
            print(f"rewrite: not writing {target}: the extracted model disagrees with the original")
            return 1
    ir.save(sub, target)
    print(
        f"{sum(1 for _ in sub.graph)} nodes, {len(sub.graph.initializers)} initializers, "
        f"{len(sub.graph.inputs)} inputs, {len(sub.graph.outputs)} outputs: wrote {target}"
    )
    return 0


def output_target(path: str, models: Sequence[Path], *, force: bool) -> str:
    """The output path, refused where writing it would replace a model or its data."""
    target = Path(path)
    _files.check_output_folder("-o", target)
    if target.exists():
        for model in models:
            if os.path.samefile(target, model):
                raise RewriteError(f"-o {target} would overwrite the model {model}")
            if os.path.realpath(target) in _files.external_data_files(model):
                raise RewriteError(f"-o {target} would overwrite external data of {model}")
        if not force:
            raise RewriteError(f"{target} exists; pass --force to overwrite it")
    return str(target)


def _names(listing: str) -> list[str]:
    return [name.strip() for name in listing.split(",") if name.strip()]
