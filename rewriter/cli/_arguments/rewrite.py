"""The arguments of the main command, `rewrite [--rules PATH]... MODEL [-o OUT]`.

Declared with argparse alone, so `--help` and usage errors never import onnx or numpy.
"""

from __future__ import annotations

import argparse

from rewriter.cli._arguments import non_negative_int, opset_version, positive_int, quantize
from rewriter.cli._arguments.comparison import add_comparison_options


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of the main command."""
    parser.add_argument("model", help="the ONNX model to rewrite")
    parser.add_argument(
        "--rules",
        action="append",
        metavar="PATH",
        help="a .rw file or a folder of them (repeatable; default: the shipped library)",
    )
    parser.add_argument(
        "-e",
        "--expression",
        dest="inline_rules",
        action="append",
        default=[],
        metavar="RULE",
        help="a rule given as text, e.g. 'rule r: y = Relu (x) => y = LeakyRelu (x)' "
        "(repeatable; like sed -e, the given rules are all the rules: add --rules patterns/ "
        "for the shipped library too)",
    )
    parser.add_argument(
        "-o",
        "--output",
        metavar="OUT",
        help="output file (default: MODEL.rewritten.onnx beside it)",
    )
    parser.add_argument("--in-place", action="store_true", help="overwrite the input model")
    parser.add_argument("--force", action="store_true", help="overwrite an existing output file")
    parser.add_argument("--explain", action="store_true", help="print what fired, grouped by rule")
    parser.add_argument("--json", metavar="FILE", help="write trace, op counts and timings as JSON")
    parser.add_argument(
        "--why-not", metavar="RULE", help="explain why RULE does not fire, then exit"
    )
    parser.add_argument(
        "--verify",
        action="store_true",
        help="check the result against the input on generated inputs",
    )
    parser.add_argument(
        "--examples",
        type=non_negative_int,
        default=20,
        help="examples for --verify (default 20; 0 with --inputs: the samples only)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed for --verify")
    add_comparison_options(
        parser, "with --verify; default: <OUT>.counterexample.npz beside the output"
    )
    parser.add_argument(
        "--jobs",
        type=positive_int,
        metavar="N",
        help="with --accept: measure on N processes (default 1: in this process, one "
        "onnxruntime session)",
    )
    parser.add_argument(
        "--confidence",
        type=_confidence,
        default=0.9,
        metavar="P",
        help="with --accept: while tuning, a model meets the budget when the pessimistic "
        "bootstrap bound of its metrics over the inputs does, at confidence P (default 0.9; "
        "0.5 judges by about the measured value)",
    )
    parser.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="with --accept: measure them on the Ray cluster at ADDRESS (auto, HOST:PORT or "
        "ray://HOST:PORT; needs `pip install ray`)",
    )
    parser.add_argument(
        "--exclude-rule", action="append", default=[], metavar="RULE", help="do not apply RULE"
    )
    parser.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="set a rule parameter the rule files declare (`param NAME = ...`), VALUE written "
        'as in a rule file: true, 0.5, "SAME", [0, 1]',
    )
    parser.add_argument(
        "--passes",
        metavar="LIST",
        default="default",
        help="built-in passes between rounds of rules: `default` (the default pipeline: "
        "fold_constants, eliminate_dead_code, eliminate_common_subexpressions, "
        "optimize_transposes, inline_constant_ifs, flatten_concats), `none`, or names "
        "separated by commas; rule files add the passes they declare",
    )
    parser.add_argument(
        "--max-rewrites",
        type=non_negative_int,
        help="rewrite budget (default grows with the graph)",
    )
    parser.add_argument(
        "--allow-python", action="store_true", help="permit `use` of Python helpers"
    )
    parser.add_argument(
        "--add-opset",
        action="append",
        default=[],
        metavar="DOMAIN=VERSION",
        help="import an opset domain before rewriting, e.g. com.microsoft=1 for "
        "--rules patterns/ort (dropped again if nothing uses it)",
    )
    parser.add_argument(
        "--target-opset",
        type=opset_version,
        metavar="N",
        help="convert the default-domain opset to N (up: fusions into newer ops can fire; "
        "down: decompositions for older runtimes)",
    )
    parser.add_argument(
        "--freeze-initializer-inputs",
        action="store_true",
        help="graph inputs that an initializer also defines become constants that rules "
        "and folding can use (they can no longer be fed); always so before IR version 4",
    )
    parser.add_argument(
        "--calibration",
        metavar="PATH",
        help="calibration samples for the quantization rules (patterns/quantize): an .npz "
        "file or a folder of them, one array per graph input as --inputs takes them; the "
        "input model is run on them and each value's range is what rules read",
    )
    parser.add_argument(
        "--calibration-method",
        choices=("minmax", "percentile", "entropy"),
        default=None,
        help="how activation ranges come from the calibration samples when a rule names no "
        "method: smallest and largest value, the --calibration-percentile of the values, or "
        "the clipping threshold of least information loss (entropy; default: percentile "
        "99.99 with --quantize int8, minmax otherwise)",
    )
    parser.add_argument(
        "--calibration-percentile",
        type=_percentile,
        default=None,
        metavar="P",
        help="the percentile of the percentile method (default 99.99 when --quantize int8 "
        "chooses the method, else 99.999)",
    )
    parser.add_argument(
        "--no-bias-correction",
        dest="bias_correction",
        action="store_false",
        help="with --quantize int8 --calibration: leave the quantized Convs' biases as they are "
        "(by default each is corrected so that its mean output per channel on the samples is "
        "the float model's)",
    )
    parser.add_argument(
        "--exact",
        action="store_true",
        help="apply only rewrites exact on every input: no rule that assumes finite inputs, "
        "and rules that assume non-empty tensors (a fused Attention) only on known shapes",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress display")
    parser.add_argument(
        "--report",
        metavar="FILE",
        help="write a self-contained HTML report: rules that fired with before/after "
        "pictures, op counts, timings, verification",
    )
    quantize.add_arguments(parser)


def _confidence(text: str) -> float:
    """An argparse type: a probability strictly between 0 and 1."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a number between 0 and 1, got {text!r}"
        ) from None
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"expected a number between 0 and 1, got {text!r}")
    return value


def _percentile(text: str) -> float:
    """An argparse type: a percentile in (0, 100]."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0.0 < value <= 100.0:  # NaN fails too
        raise argparse.ArgumentTypeError(f"expected a percentile in (0, 100], got {text!r}")
    return value
