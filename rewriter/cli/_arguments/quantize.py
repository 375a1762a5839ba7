"""`--quantize` and the speed check's options of the main command (see `_quantize_options`)."""

from __future__ import annotations

import argparse

from rewriter.cli._arguments import non_negative_int

PRESETS = ("int8", "int4", "float16")
LEVELS = ("all", "extended", "basic", "disabled")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """`--quantize` and the speed check's options."""
    parser.add_argument(
        "--quantize",
        choices=PRESETS,
        help="lower precision with the preset's rules after the default library (or --rules) "
        "reached its fixed point, each layer in the form onnxruntime runs fastest: int8 "
        "(MatMul/Gemm dynamic, Conv static from --calibration), int4 (4-bit MatMul weights), "
        "float16; layers that run slower than float stay float (see --no-speed-check)",
    )
    parser.add_argument(
        "--no-speed-check",
        action="store_true",
        help="with --quantize: keep every quantized layer without timing it",
    )
    parser.add_argument(
        "--speed-threads",
        type=non_negative_int,
        metavar="N",
        help="the speed check's onnxruntime intra-op threads (default 0: every core)",
    )
    parser.add_argument(
        "--speed-level",
        choices=LEVELS,
        help="the speed check's onnxruntime graph optimization level (default: all)",
    )
