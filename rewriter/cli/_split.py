"""`rewrite split MODEL --stages N [--balance params|flops] -o DIR`: pipeline stages.

Writes `DIR/stage_0.onnx` ... and `DIR/pipeline.json` (see `rewriter.surgery.split`);
`rewrite verify MODEL DIR/pipeline.json` runs the chain against the original.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rewriter._errors import RewriteError
from rewriter.cli import _files
from rewriter.surgery import split, write_pipeline


def run(args: argparse.Namespace) -> int:
    """Split and write; returns the exit code."""
    source = _files.input_model_path(args.model)
    folder = Path(args.output)
    if folder.exists() and not folder.is_dir():
        raise RewriteError(f"-o {folder}: exists and is not a folder")
    if (folder / "pipeline.json").exists() and not args.force:
        raise RewriteError(f"{folder} already holds a pipeline; pass --force to replace it")
    if folder.resolve() == source.parent.resolve():
        raise RewriteError(f"-o {folder}: choose a folder other than the model's own")
    shapes = dict(args.input_shape)
    stages = split(source, args.stages, balance=args.balance, input_shapes=shapes)
    folder.mkdir(parents=True, exist_ok=True)
    import ir

    outputs = [value.name for value in ir.load(source).graph.outputs]
    manifest = write_pipeline(stages, folder, outputs)
    total = sum(stage.cost for stage in stages) or 1
    unit = "bytes of weights" if args.balance == "params" else "FLOPs"
    for index, stage in enumerate(stages):
        share = 100 * stage.cost / total
        print(
            f"stage {index}: {stage.nodes} nodes, {stage.cost:,} {unit} ({share:.0f}%), "
            f"{len(stage.inputs)} inputs, {len(stage.outputs)} outputs"
        )
    print(f"wrote {manifest}")
    return 0
