"""Every folding rule: a model where it fires (outputs equal under onnxruntime) and a near miss."""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
import onnx
import onnx.parser
import pytest

import ir
import rewriter
from tests.helpers import assert_same_outputs, model_from_text, op_types, session

FOLDING = rewriter.library_path() / "folding"


@functools.cache
def _library() -> rewriter.rules.RuleSet:
    return rewriter.load_rules(FOLDING)


def _apply_one(rule_name: str, model: onnx.ModelProto) -> rewriter.RewriteResult:
    library = _library()
    rule = library.rule(rule_name)
    assert rule is not None, f"no rule {rule_name}"
    only = dataclasses.replace(library, rules=(rule,), passes=())
    return rewriter.rewrite(model, only, rewriter.RewriteOptions(passes=()))


def _model(
    body: str,
    inputs: str = "float[N, 4] x",
    outputs: str = "float[N, 4] y",
    opset: int = 17,
    inits: str = "",
) -> onnx.ModelProto:
    header = f'<ir_version: 8, opset_import: ["" : {opset}]>'
    init_block = f"<{inits}>" if inits else ""
    return model_from_text(f"{header}\ng ({inputs}) => ({outputs}) {init_block} {{\n{body}\n}}")


def _weights(name: str, shape: tuple[int, ...], seed: int) -> str:
    values = np.random.default_rng(seed).uniform(-0.5, 0.5, shape).astype(np.float32)
    dims = ", ".join(str(d) for d in shape)
    return f"float[{dims}] {name} = {{{', '.join(repr(float(v)) for v in values.ravel())}}}"


# One direction, input size 3, hidden size 4: W, R and B of RNN (1 gate), GRU (3), LSTM (4).
_RNN_WEIGHTS = ", ".join(
    _weights(f"{kind}{gates}", shape, seed)
    for gates in (1, 3, 4)
    for kind, shape, seed in (
        ("w", (1, 4 * gates, 3), gates),
        ("r", (1, 4 * gates, 4), gates + 10),
        ("b", (1, 8 * gates), gates + 20),
    )
)
# A state [1, batch, 4] filled with `fill`, the first of two Split pieces of [2, batch, 4], as
# torch exports a two-layer module's zero state, read by `op`.
_RNN_STATE = (
    "sh = Shape (x)\n i = Constant <value = int64 {{1}}> ()\n b = Gather <axis = 0> (sh, i)\n"
    " z = Constant <value = int64[1] {{0}}> ()\n bb = Unsqueeze (b, z)\n"
    " two = Constant <value = int64[1] {{2}}> ()\n four = Constant <value = int64[1] {{4}}> ()\n"
    " dims = Concat <axis = 0> (two, bb, four)\n"
    " zeros = ConstantOfShape <value = float[1] {{{fill}}}> (dims)\n"
    " ones = Constant <value = int64[2] {{1, 1}}> ()\n h, h2 = Split <axis = 0> (zeros, ones)\n"
    " {outputs} = {op} <hidden_size = 4> ({inputs})"
)

# The state's computation, left in place (the rule alone, without the passes that drop it).
_STATE_OPS = ["Shape", "Constant", "Gather", "Constant", "Unsqueeze", "Constant", "Constant"]
_STATE_OPS += ["Concat", "ConstantOfShape", "Constant", "Split"]


# (rule, model, op types after, fires)
CASES = [
    (
        "add_zero",
        _model("z = Constant <value = float {-0.0}> ()\n t = Add (z, x)\n y = Relu (t)"),
        ["Relu"],
        True,
    ),
    (
        # a +0.0 before a normalization with a bias of +0.0 and other values
        "add_zero_before_layer_norm",
        _model(
            "z = Constant <value = float {0}> ()\n t = Add (x, z)\n"
            " s = Constant <value = float[4] {1, 2, -1, 0.5}> ()\n"
            " b = Constant <value = float[4] {0, 0.25, -3, 0}> ()\n"
            " y = LayerNormalization <axis = -1> (t, s, b)",
        ),
        ["Constant", "Constant", "LayerNormalization"],
        True,
    ),
    (
        # a bias element of -0.0 keeps a -0.0 normalized value -0.0: the +0.0 Add may matter
        "add_zero_before_layer_norm",
        _model(
            "z = Constant <value = float {0}> ()\n t = Add (x, z)\n"
            " s = Constant <value = float[4] {1, 2, -1, 0.5}> ()\n"
            " b = Constant <value = float[4] {-0.0, 0.25, -3, 0}> ()\n"
            " y = LayerNormalization <axis = -1> (t, s, b)",
        ),
        None,
        False,
    ),
    (
        # x + (+0.0) turns x = -0.0 into +0.0: removing it is not exact for floats
        "add_zero",
        _model("z = Constant <value = float {0}> ()\n t = Add (z, x)\n y = Relu (t)"),
        None,
        False,
    ),
    (
        "add_zero",
        _model(
            "z = Constant <value = int64 {0}> ()\n t = Add (x, z)\n y = Abs (t)",
            inputs="int64[N, 4] x",
            outputs="int64[N, 4] y",
        ),
        ["Abs"],
        True,
    ),
    (
        "add_zero",
        _model("z = Constant <value = float {1}> ()\n t = Add (z, x)\n y = Relu (t)"),
        None,
        False,
    ),
    (
        "sub_zero",
        _model("z = Constant <value = float {0}> ()\n t = Sub (x, z)\n y = Relu (t)"),
        ["Relu"],
        True,
    ),
    (
        "sub_zero",
        _model("z = Constant <value = float {0}> ()\n t = Sub (z, x)\n y = Relu (t)"),
        None,
        False,
    ),
    (
        "mul_one",
        _model("o = Constant <value = float {1}> ()\n t = Mul (o, x)\n y = Relu (t)"),
        ["Relu"],
        True,
    ),
    (
        "mul_one",
        _model("o = Constant <value = float {2}> ()\n t = Mul (o, x)\n y = Relu (t)"),
        None,
        False,
    ),
    (
        "div_one",
        _model("o = Constant <value = float {1}> ()\n t = Div (x, o)\n y = Relu (t)"),
        ["Relu"],
        True,
    ),
    (
        "div_one",
        _model("o = Constant <value = float {1}> ()\n t = Div (o, x)\n y = Relu (t)"),
        None,
        False,
    ),
    (
        "pow_one",
        _model("o = Constant <value = float {1}> ()\n t = Pow (x, o)\n y = Relu (t)"),
        ["Relu"],
        True,
    ),
    (
        "pow_one",
        _model("o = Constant <value = float {2}> ()\n t = Pow (x, o)\n y = Relu (t)"),
        None,
        False,
    ),
    ("eliminate_identity", _model("t = Identity (x)\n y = Relu (t)"), ["Relu"], True),
    ("eliminate_dropout", _model("t = Dropout (x)\n y = Relu (t)"), ["Relu"], True),
    (
        "eliminate_dropout",
        _model(
            "r = Constant <value = float {0.5}> ()\n t = Dropout (x, r, m)\n y = Relu (t)",
            inputs="float[N, 4] x, bool m",
        ),
        None,
        False,
    ),
    ("eliminate_dropout_with_mask", _model("t, mask = Dropout (x)\n y = Relu (t)"), ["Relu"], True),
    (
        "eliminate_dropout_with_mask",
        _model("t, mask = Dropout (x)\n y = Relu (t)", outputs="float[N, 4] y, bool[N, 4] mask"),
        None,
        False,
    ),
    (
        "eliminate_dropout_zero_ratio",
        _model(
            "r = Constant <value = float {0}> ()\n m = Constant <value = bool {1}> ()\n t = Dropout (x, r, m)\n y = Relu (t)"
        ),
        ["Relu"],
        True,
    ),
    ("eliminate_noop_cast", _model("t = Cast <to = 1> (x)\n y = Relu (t)"), ["Relu"], True),
    (
        "eliminate_noop_cast",
        _model("t = Cast <to = 11> (x)\n u = Cast <to = 1> (t)\n y = Relu (u)"),
        None,
        False,
    ),
    (
        "eliminate_noop_transpose",
        _model("t = Transpose <perm = [0, 1]> (x)\n y = Relu (t)"),
        ["Relu"],
        True,
    ),
    (
        "eliminate_noop_transpose",
        _model("t = Transpose <perm = [1, 0]> (x)\n y = Relu (t)", outputs="float[4, N] y"),
        None,
        False,
    ),
    (
        "eliminate_noop_reshape",
        _model("s = Constant <value = int64[2] {0, 4}> ()\n t = Reshape (x, s)\n y = Relu (t)"),
        ["Relu"],
        True,
    ),
    (
        "eliminate_noop_reshape",
        _model(
            "s = Constant <value = int64[2] {2, -1}> ()\n t = Reshape (x, s)\n y = Relu (t)",
            inputs="float[4, 2] x",
            outputs="float[2, 4] y",
        ),
        None,
        False,
    ),
    (
        # the batch dim is unknown (no symbol): -1 gives it back
        "eliminate_noop_reshape_restating_dims",
        _model(
            "s = Constant <value = int64[2] {-1, 4}> ()\n t = Reshape (x, s)\n y = Softmax (t)",
            inputs="float[?, 4] x",
            outputs="float[?, 4] y",
        ),
        ["Softmax"],
        True,
    ),
    (
        # x has rank 3: the Reshape merges two of its dims
        "eliminate_noop_reshape_restating_dims",
        _model(
            "s = Constant <value = int64[2] {-1, 4}> ()\n t = Reshape (x, s)\n y = Softmax (t)",
            inputs="float[?, 2, 2] x",
            outputs="float[?, 4] y",
        ),
        None,
        False,
    ),
    (
        "eliminate_noop_expand",
        _model("s = Constant <value = int64[1] {4}> ()\n t = Expand (x, s)\n y = Relu (t)"),
        ["Relu"],
        True,
    ),
    (
        "eliminate_noop_expand",
        _model(
            "s = Constant <value = int64[2] {2, 4}> ()\n t = Expand (x, s)\n y = Relu (t)",
            inputs="float[1, 4] x",
            outputs="float[2, 4] y",
        ),
        None,
        False,
    ),
    (
        "eliminate_noop_slice",
        _model(
            "b = Constant <value = int64[1] {0}> ()\n e = Constant <value = int64[1] {4}> ()\n a = Constant <value = int64[1] {1}> ()\n t = Slice (x, b, e, a)\n y = Relu (t)"
        ),
        ["Relu"],
        True,
    ),
    (
        "eliminate_noop_slice",
        _model(
            "b = Constant <value = int64[1] {1}> ()\n e = Constant <value = int64[1] {4}> ()\n a = Constant <value = int64[1] {1}> ()\n t = Slice (x, b, e, a)\n y = Relu (t)",
            outputs="float[N, 3] y",
        ),
        None,
        False,
    ),
    (
        # to INT64_MAX on a symbolic dim (axes left out): every row, whatever N is
        "eliminate_noop_slice",
        _model(
            "b = Constant <value = int64[1] {0}> ()\n e = Constant <value = int64[1] {9223372036854775807}> ()\n t = Slice (x, b, e)\n y = Relu (t)"
        ),
        ["Relu"],
        True,
    ),
    (
        # to 9 on a symbolic dim: N rows only while N <= 9, whatever the output declares
        "eliminate_noop_slice",
        _model(
            "b = Constant <value = int64[1] {0}> ()\n e = Constant <value = int64[1] {9}> ()\n a = Constant <value = int64[1] {0}> ()\n y = Slice (x, b, e, a)"
        ),
        None,
        False,
    ),
    (
        "eliminate_noop_pad",
        _model("p = Constant <value = int64[4] {0, 0, 0, 0}> ()\n t = Pad (x, p)\n y = Relu (t)"),
        ["Relu"],
        True,
    ),
    (
        "eliminate_noop_pad",
        _model(
            "p = Constant <value = int64[4] {0, 1, 0, 0}> ()\n t = Pad (x, p)\n y = Relu (t)",
            outputs="float[N, 5] y",
        ),
        None,
        False,
    ),
    (
        "eliminate_noop_pad_attribute",
        _model("t = Pad <pads = [0, 0, 0, 0]> (x)\n y = Relu (t)", opset=10),
        ["Relu"],
        True,
    ),
    (
        "eliminate_noop_pad_attribute",
        _model(
            "t = Pad <pads = [0, 1, 0, 0]> (x)\n y = Relu (t)", outputs="float[N, 5] y", opset=10
        ),
        None,
        False,
    ),
    (
        "unsqueeze_then_squeeze",
        _model(
            "a = Constant <value = int64[1] {1}> ()\n t = Unsqueeze (x, a)\n u = Squeeze (t, a)\n y = Relu (u)"
        ),
        ["Relu"],
        True,
    ),
    (
        "unsqueeze_then_squeeze",
        _model(
            "a = Constant <value = int64[1] {1}> ()\n b = Constant <value = int64[1] {0}> ()\n t = Unsqueeze (x, a)\n u = Squeeze (t, b)\n y = Relu (u)",
            inputs="float[1, 4] x",
            outputs="float[1, 4] y",
        ),
        None,
        False,
    ),
    (
        "unsqueeze_then_squeeze_attribute",
        _model(
            "t = Unsqueeze <axes = [2]> (x)\n u = Squeeze <axes = [-1]> (t)\n y = Relu (u)",
            opset=11,
        ),
        ["Relu"],
        True,
    ),
    (
        "unsqueeze_then_squeeze_attribute",
        _model(
            "t = Unsqueeze <axes = [0]> (x)\n u = Squeeze <axes = [0]> (t)\n y = Relu (u)",
            inputs="float[1, 4] x",
            outputs="float[1, 4] y",
            opset=11,
        ),
        ["Relu"],
        True,
    ),
    (
        "compose_transposes",
        _model(
            "t = Transpose <perm = [1, 2, 0]> (x)\n y = Transpose <perm = [0, 2, 1]> (t)",
            inputs="float[2, 3, 4] x",
            outputs="float[3, 2, 4] y",
        ),
        ["Transpose"],
        True,
    ),
    (
        "compose_transposes",
        _model("t = Transpose (x)\n y = Transpose <perm = [1, 0]> (t)"),
        None,
        False,
    ),
    (
        # torch's zero state: ConstantOfShape(0) split per layer
        "remove_zero_initial_h_from_gru_rnn",
        _model(
            _RNN_STATE.format(fill=0, op="GRU", outputs="y, yh", inputs="x, w3, r3, b3, , h"),
            inputs="float[2, B, 3] x",
            outputs="float[2, 1, B, 4] y, float[1, B, 4] yh",
            inits=_RNN_WEIGHTS,
        ),
        [*_STATE_OPS, "GRU"],
        True,
    ),
    (
        # a state of 0.5 is not the missing one
        "remove_zero_initial_h_from_gru_rnn",
        _model(
            _RNN_STATE.format(fill=0.5, op="RNN", outputs="y, yh", inputs="x, w1, r1, b1, , h"),
            inputs="float[2, B, 3] x",
            outputs="float[2, 1, B, 4] y, float[1, B, 4] yh",
            inits=_RNN_WEIGHTS,
        ),
        None,
        False,
    ),
    (
        "remove_zero_initial_h_from_lstm",
        _model(
            _RNN_STATE.format(
                fill=0, op="LSTM", outputs="y, yh, yc", inputs="x, w4, r4, b4, , h, h"
            ),
            inputs="float[2, B, 3] x",
            outputs="float[2, 1, B, 4] y, float[1, B, 4] yh, float[1, B, 4] yc",
            inits=_RNN_WEIGHTS,
        ),
        [*_STATE_OPS, "LSTM"],
        True,
    ),
    (
        # a constant state of -0.0: its sign is seen, and kept
        "remove_zero_initial_h_from_lstm",
        _model(
            "h = Constant <value = float[1, 2, 4] {-0.0, -0.0, -0.0, -0.0, -0.0, -0.0, -0.0, -0.0}> ()\n"
            " y, yh, yc = LSTM <hidden_size = 4> (x, w4, r4, b4, , h)",
            inputs="float[2, 2, 3] x",
            outputs="float[2, 1, 2, 4] y, float[1, 2, 4] yh, float[1, 2, 4] yc",
            inits=_RNN_WEIGHTS,
        ),
        None,
        False,
    ),
    (
        "remove_zero_initial_c_from_lstm",
        _model(
            "c = Constant <value = float[1, 2, 4] {0, 0, 0, 0, 0, 0, 0, 0}> ()\n"
            " y, yh, yc = LSTM <hidden_size = 4> (x, w4, r4, b4, , , c)",
            inputs="float[2, 2, 3] x",
            outputs="float[2, 1, 2, 4] y, float[1, 2, 4] yh, float[1, 2, 4] yc",
            inits=_RNN_WEIGHTS,
        ),
        ["LSTM"],
        True,
    ),
    (
        # the first batch row's cell starts at 1
        "remove_zero_initial_c_from_lstm",
        _model(
            "c = Constant <value = float[1, 2, 4] {1, 1, 1, 1, 0, 0, 0, 0}> ()\n"
            " y, yh, yc = LSTM <hidden_size = 4> (x, w4, r4, b4, , , c)",
            inputs="float[2, 2, 3] x",
            outputs="float[2, 1, 2, 4] y, float[1, 2, 4] yh, float[1, 2, 4] yc",
            inits=_RNN_WEIGHTS,
        ),
        None,
        False,
    ),
    (
        "compose_reshapes",
        _model(
            "a = Constant <value = int64[1] {-1}> ()\n s = Constant <value = int64[2] {2, 6}> ()\n t = Reshape (x, a)\n y = Reshape (t, s)",
            inputs="float[3, 4] x",
            outputs="float[2, 6] y",
        ),
        ["Constant", "Reshape"],
        True,
    ),
    (
        "compose_reshapes",
        _model(
            "a = Constant <value = int64[2] {4, 3}> ()\n s = Constant <value = int64[2] {0, 3}> ()\n t = Reshape (x, a)\n y = Reshape (t, s)",
            inputs="float[3, 4] x",
            outputs="float[4, 3] y",
        ),
        None,
        False,
    ),
    (
        # the Transpose moves only the dim of size 1: the data keep their order
        "reshape_of_unit_transpose",
        _model(
            "t = Transpose <perm = [0, 2, 1, 3]> (x)\n s = Constant <value = int64[2] {3, 8}> ()\n y = Reshape (t, s)",
            inputs="float[3, 1, 2, 4] x",
            outputs="float[3, 8] y",
        ),
        ["Constant", "Reshape"],
        True,
    ),
    (
        # dims 2 and 3 swap: the Transpose reorders the data
        "reshape_of_unit_transpose",
        _model(
            "t = Transpose <perm = [0, 1, 3, 2]> (x)\n s = Constant <value = int64[2] {3, 8}> ()\n y = Reshape (t, s)",
            inputs="float[3, 1, 2, 4] x",
            outputs="float[3, 8] y",
        ),
        None,
        False,
    ),
    (
        # a leading unit dim moved behind a symbolic one; the shape's 0 copies the
        # Transpose's first dim, which is x's second
        "reshape_of_unit_transpose_symbolic",
        _model(
            "t = Transpose <perm = [1, 0, 2]> (x)\n s = Constant <value = int64[2] {0, 4}> ()\n y = Reshape (t, s)",
            inputs="float[1, S, 4] x",
            outputs="float[S, 4] y",
        ),
        ["Reshape"],
        True,
    ),
    (
        # x's first dim is 2: the Transpose reorders the data
        "reshape_of_unit_transpose_symbolic",
        _model(
            "t = Transpose <perm = [1, 0, 2]> (x)\n s = Constant <value = int64[2] {0, 8}> ()\n y = Reshape (t, s)",
            inputs="float[2, S, 4] x",
            outputs="float[S, 8] y",
        ),
        None,
        False,
    ),
    (
        "compose_lossless_casts",
        _model("t = Cast <to = 11> (x)\n y = Cast <to = 1> (t)"),
        ["Cast"],
        True,
    ),
    (
        "compose_lossless_casts",
        _model("t = Cast <to = 10> (x)\n y = Cast <to = 1> (t)"),
        None,
        False,
    ),
    (
        "compose_unsqueezes",
        _model(
            "a = Constant <value = int64 {0}> ()\n b = Constant <value = int64 {2}> ()\n t = Unsqueeze (x, a)\n y = Unsqueeze (t, b)",
            outputs="float[1, N, 1, 4] y",
        ),
        ["Unsqueeze"],
        True,
    ),
    (
        # a negative axis, counted in the final rank
        "compose_unsqueezes",
        _model(
            "a = Constant <value = int64 {0}> ()\n b = Constant <value = int64 {-1}> ()\n t = Unsqueeze (x, a)\n y = Unsqueeze (t, b)",
            outputs="float[1, N, 4, 1] y",
        ),
        ["Unsqueeze"],
        True,
    ),
    (
        # lists of axes (dynamo writes [1, 2] then [3]): one Unsqueeze with [1, 2, 3]
        "compose_unsqueezes",
        _model(
            "a = Constant <value = int64[2] {1, 2}> ()\n b = Constant <value = int64[1] {0}> ()\n t = Unsqueeze (x, a)\n y = Unsqueeze (t, b)",
            inputs="float[N] x",
            outputs="float[1, N, 1, 1] y",
        ),
        ["Unsqueeze"],
        True,
    ),
    (
        # the middle value has another reader
        "compose_unsqueezes",
        _model(
            "a = Constant <value = int64 {0}> ()\n b = Constant <value = int64 {-1}> ()\n t = Unsqueeze (x, a)\n y = Unsqueeze (t, b)\n z = Relu (t)",
            outputs="float[1, N, 4, 1] y, float[1, N, 4] z",
        ),
        None,
        False,
    ),
    (
        "flatten_to_reshape",
        _model("y = Flatten <axis = 1> (x)", inputs="float[N, 2, 3] x", outputs="float[N, 6] y"),
        ["Reshape"],
        True,
    ),
    (
        "flatten_to_reshape",
        _model("y = Flatten <axis = 2> (x)", inputs="float[N, 2, 3] x", outputs="float[N, 3] y"),
        None,
        False,
    ),
    (
        # a symbolic trailing dim: [-1, k] cannot be written, and [0, -1] fails at N = 0
        "flatten_to_reshape",
        _model("y = Flatten <axis = 1> (x)", inputs="float[N, M, 3] x", outputs="float[N, ?] y"),
        None,
        False,
    ),
    (
        "flatten_to_reshape_static_batch",
        _model("y = Flatten <axis = 1> (x)", inputs="float[2, M, 3] x", outputs="float[2, ?] y"),
        ["Reshape"],
        True,
    ),
    (
        # a symbolic batch may be 0, where Reshape(x, [0, -1]) is undefined
        "flatten_to_reshape_static_batch",
        _model("y = Flatten <axis = 1> (x)", inputs="float[N, M, 3] x", outputs="float[N, ?] y"),
        None,
        False,
    ),
    (
        "materialize_reshape_shape",
        _model(
            "s = Shape (x)\n y = Reshape (x, s)",
            inputs="float[N, 2, 3] x",
            outputs="float[N, 2, 3] y",
        ),
        ["Shape", "Reshape"],
        True,
    ),
    (
        "materialize_reshape_shape",
        _model(
            "s = Shape (z)\n y = Reshape (x, s)",
            inputs="float[N, M, 6] x, float[N, M, 6] z",
            outputs="float[N, M, 6] y",
        ),
        None,
        False,
    ),
    (
        "cast_constant_of_shape",
        _model(
            "s = Shape (x)\n c = ConstantOfShape <value = float[1] {2.5}> (s)\n y = Cast <to = 11> (c)",
            outputs="double[N, 4] y",
        ),
        ["Shape", "ConstantOfShape"],
        True,
    ),
    (
        "fold_static_shape",
        _model(
            "s = Shape <start = 1> (x)\n y = Cast <to = 1> (s)",
            inputs="float[2, 3, 4] x",
            outputs="float[2] y",
        ),
        ["Cast"],
        True,
    ),
    (
        "fold_static_shape",
        _model(
            "s = Shape (x)\n y = Cast <to = 1> (s)", inputs="float[N, 4] x", outputs="float[2] y"
        ),
        None,
        False,
    ),
    (
        # Shape(x)[1] where dim 1 is static, dim 0 symbolic: the Gather becomes 4
        "fold_static_dims_of_shape",
        _model(
            "s = Shape (x)\n i = Constant <value = int64 {1}> ()\n d = Gather <axis = 0> (s, i)\n y = Cast <to = 1> (d)",
            inputs="float[N, 4] x",
            outputs="float y",
        ),
        ["Cast"],
        True,
    ),
    (
        # dim 0 is symbolic: nothing to fold
        "fold_static_dims_of_shape",
        _model(
            "s = Shape (x)\n i = Constant <value = int64[1] {0}> ()\n d = Gather <axis = 0> (s, i)\n y = Cast <to = 1> (d)",
            inputs="float[N, 4] x",
            outputs="float[1] y",
        ),
        None,
        False,
    ),
    (
        # torch's expand(n, -1): Concat(size of x, -1); Equal/Where replace -1 by 1 -> Abs
        "where_minus_one_to_abs",
        _model(
            "s = Shape (x)\n i = Constant <value = int64 {0}> ()\n d = Gather <axis = 0> (s, i)\n"
            " a = Constant <value = int64[1] {0}> ()\n u = Unsqueeze (d, a)\n m1 = Constant <value = int64[1] {-1}> ()\n"
            " c = Concat <axis = 0> (u, m1)\n m = Constant <value = int64[2] {-1, -1}> ()\n e = Equal (c, m)\n"
            " o = Constant <value = int64[2] {1, 1}> ()\n w = Where (e, o, c)\n y = Expand (x, w)",
            inputs="float[N, 4] x",
            outputs="float[N, 4] y",
        ),
        [
            "Shape",
            "Constant",
            "Gather",
            "Constant",
            "Unsqueeze",
            "Constant",
            "Concat",
            "Abs",
            "Expand",
        ],
        True,
    ),
    (
        # a shape from a graph input may hold -2: the Where stays
        "where_minus_one_to_abs",
        _model(
            "m = Constant <value = int64[2] {-1, -1}> ()\n e = Equal (c, m)\n"
            " o = Constant <value = int64[2] {1, 1}> ()\n y = Where (e, o, c)",
            inputs="int64[2] c",
            outputs="int64[2] y",
        ),
        None,
        False,
    ),
    (
        "fold_static_size",
        _model("s = Size (x)\n y = Cast <to = 1> (s)", inputs="float[2, 3] x", outputs="float y"),
        ["Cast"],
        True,
    ),
    (
        "fold_static_size",
        _model("s = Size (x)\n y = Cast <to = 1> (s)", inputs="float[N, 3] x", outputs="float y"),
        None,
        False,
    ),
    (
        "remove_zero_bias_from_conv",
        _model(
            "y = Conv (x, w, b)",
            inputs="float[1, 2, 4, 4] x",
            outputs="float[1, 3, 4, 4] y",
            inits="float[3, 2, 1, 1] w = {1, 2, 3, 4, 5, 6}, float[3] b = {-0.0, -0.0, -0.0}",
        ),
        ["Conv"],
        True,
    ),
    (
        # a +0.0 bias turns a -0.0 sum into +0.0: dropping it is not exact
        "remove_zero_bias_from_conv",
        _model(
            "y = Conv (x, w, b)",
            inputs="float[1, 2, 4, 4] x",
            outputs="float[1, 3, 4, 4] y",
            inits="float[3, 2, 1, 1] w = {1, 2, 3, 4, 5, 6}, float[3] b = {0, 0, 0}",
        ),
        None,
        False,
    ),
    (
        "remove_zero_bias_from_conv",
        _model(
            "y = Conv (x, w, b)",
            inputs="float[1, 2, 4, 4] x",
            outputs="float[1, 3, 4, 4] y",
            inits="float[3, 2, 1, 1] w = {1, 2, 3, 4, 5, 6}, float[3] b = {0, 1, 0}",
        ),
        None,
        False,
    ),
    (
        "remove_zero_bias_from_gemm",
        _model(
            "y = Gemm (x, w, b)",
            inputs="float[N, 2] x",
            outputs="float[N, 3] y",
            inits="float[2, 3] w = {1, 2, 3, 4, 5, 6}, float[3] b = {-0.0, -0.0, -0.0}",
        ),
        ["Gemm"],
        True,
    ),
    (
        "remove_zero_bias_from_conv_transpose",
        _model(
            "y = ConvTranspose (x, w, b)",
            inputs="float[1, 2, 4, 4] x",
            outputs="float[1, 3, 4, 4] y",
            inits="float[2, 3, 1, 1] w = {1, 2, 3, 4, 5, 6}, float[3] b = {-0.0, -0.0, -0.0}",
        ),
        ["ConvTranspose"],
        True,
    ),
    (
        "fuse_successive_min",
        _model(
            "a = Constant <value = float {2}> ()\n b = Constant <value = float {1}> ()\n t = Min (x, a)\n y = Min (t, b)"
        ),
        ["Min"],
        True,
    ),
    (
        "fuse_successive_max",
        _model(
            "a = Constant <value = float {2}> ()\n b = Constant <value = float {1}> ()\n t = Max (x, a)\n y = Max (t, b)"
        ),
        ["Max"],
        True,
    ),
    (
        "fuse_successive_max",
        _model(
            "b = Constant <value = float {1}> ()\n t = Max (x, z)\n y = Max (t, b)",
            inputs="float[N, 4] x, float[N, 4] z",
        ),
        None,
        False,
    ),
    (
        "fuse_max_min_to_clip",
        _model(
            "lo = Constant <value = float {-1}> ()\n hi = Constant <value = float {1}> ()\n t = Max (x, lo)\n y = Min (t, hi)"
        ),
        ["Clip"],
        True,
    ),
    (
        "fuse_min_max_to_clip",
        _model(
            "lo = Constant <value = float {-1}> ()\n hi = Constant <value = float {1}> ()\n t = Min (x, hi)\n y = Max (t, lo)"
        ),
        ["Clip"],
        True,
    ),
    (
        "fuse_min_max_to_clip",
        _model(
            "lo = Constant <value = float {2}> ()\n hi = Constant <value = float {1}> ()\n t = Min (x, hi)\n y = Max (t, lo)"
        ),
        None,
        False,
    ),
    ("fuse_successive_relu", _model("t = Relu (x)\n y = Relu (t)"), ["Relu"], True),
    (
        "fuse_clip_then_relu",
        _model(
            "lo = Constant <value = float {-1}> ()\n hi = Constant <value = float {1}> ()\n t = Clip (x, lo, hi)\n y = Relu (t)"
        ),
        ["Clip"],
        True,
    ),
    (
        "fuse_relu_then_clip",
        _model(
            "lo = Constant <value = float {-1}> ()\n hi = Constant <value = float {1}> ()\n t = Relu (x)\n y = Clip (t, lo, hi)"
        ),
        ["Constant", "Clip"],
        True,
    ),
    (
        "fuse_relu_then_clip",
        _model(
            "lo = Constant <value = float {-2}> ()\n hi = Constant <value = float {-1}> ()\n t = Relu (x)\n y = Clip (t, lo, hi)"
        ),
        None,
        False,
    ),
    (
        "fuse_successive_clip",
        _model(
            "a = Constant <value = float {-2}> ()\n b = Constant <value = float {1}> ()\n c = Constant <value = float {-1}> ()\n d = Constant <value = float {3}> ()\n t = Clip (x, a, b)\n y = Clip (t, c, d)"
        ),
        ["Clip"],
        True,
    ),
    (
        # absent bounds are open on their side: Clip(Clip(x, , 4), 1, 7) -> Clip(x, 1, 4)
        "fuse_successive_clip",
        _model(
            "t = Clip (x, , hi1)\n y = Clip (t, lo2, hi2)",
            inits="float hi1 = {4}, float lo2 = {1}, float hi2 = {7}",
        ),
        ["Clip"],
        True,
    ),
    (
        "fuse_successive_clip",
        _model(
            "t = Clip (x, , hi1)\n y = Clip (t, lo2, hi2)",
            inputs="int32[N, 4] x",
            outputs="int32[N, 4] y",
            inits="int32 hi1 = {4}, int32 lo2 = {1}, int32 hi2 = {7}",
        ),
        ["Clip"],
        True,
    ),
    (
        # [-2, 1] then [2, 3]: every element becomes 2, which no single clamp to [2, 1] gives
        "fuse_successive_clip",
        _model(
            "t = Clip (x, lo1, hi1)\n y = Clip (t, lo2, hi2)",
            inits="float lo1 = {-2}, float hi1 = {1}, float lo2 = {2}, float hi2 = {3}",
        ),
        None,
        False,
    ),
    (
        "eliminate_unbounded_clip",
        _model("t = Clip (x)\n y = Abs (t)", inputs="int32[N, 4] x", outputs="int32[N, 4] y"),
        ["Abs"],
        True,
    ),
    (
        # a float Clip without bounds still clamps the infinities to the largest finite value
        "eliminate_unbounded_clip",
        _model("t = Clip (x)\n y = Abs (t)"),
        None,
        False,
    ),
    (
        "fuse_clip_then_relu",
        _model("t = Clip (x, , hi)\n y = Relu (t)", inits="float hi = {6}"),
        ["Clip"],
        True,
    ),
    (
        "fuse_clip_then_relu",
        _model(
            "t = Clip (x, lo, hi)\n y = Relu (t)",
            inputs="float[N, 4] x, float lo",
            inits="float hi = {6}",
        ),
        None,
        False,
    ),
    (
        "fuse_relu_then_clip",
        _model("t = Relu (x)\n y = Clip (t, lo)", inits="float lo = {-3}"),
        ["Clip"],
        True,
    ),
    (
        "fuse_successive_min",
        _model(
            "t = Min (x, a, b)\n y = Min (t, c)",
            inits="float[4] a = {2, 5, 8, 0}, float[1] b = {4}, float[4] c = {3, 1, -6, 9}",
        ),
        ["Min"],
        True,
    ),
    (
        "fold_min_constants",
        _model(
            "y = Min (x, a, b)",
            inputs="int32[N, 4] x",
            outputs="int32[N, 4] y",
            inits="int32[4] a = {2, 5, 8, 0}, int32[1] b = {4}",
        ),
        ["Min"],
        True,
    ),
    (
        "fold_min_constants",
        _model(
            "y = Min (x, a, z)",
            inputs="float[N, 4] x, float[4] z",
            inits="float[4] a = {2, 5, 8, 0}",
        ),
        None,
        False,
    ),
    (
        "fold_max_constants",
        _model("y = Max (x, a, b)", inits="float[4] a = {2, 5, 8, 0}, float b = {4}"),
        ["Max"],
        True,
    ),
    (
        "fold_max_constants",
        _model("y = Max (x, a)", inits="float[4] a = {2, 5, 8, 0}"),
        None,
        False,
    ),
    (
        # Min(X, 10) -> Max(., 8) -> Min(., 5): one clamp to [5, 5]
        "fuse_clip_then_min",
        _model(
            "t = Clip (x, lo, hi)\n y = Min (t, c)",
            inits="float lo = {8}, float hi = {10}, float c = {5}",
        ),
        ["Clip"],
        True,
    ),
    (
        "fuse_clip_then_min",
        _model(
            "t = Clip (x, lo, hi)\n y = Min (t, c)",
            inits="float lo = {8}, float hi = {10}, float[4] c = {5, 6, 7, 8}",
        ),
        None,
        False,
    ),
    (
        "fuse_clip_then_max",
        _model("t = Clip (x, , hi)\n y = Max (t, c)", inits="float hi = {10}, float c = {12}"),
        ["Clip"],
        True,
    ),
    (
        "fuse_clip_then_max",
        _model("t = Clip (x, , hi)\n y = Max (t, c)", inits="float hi = {10}, float c = {NaN}"),
        None,
        False,
    ),
    (
        # [3, 6, 9] -> [3, 2, 27] -> 0 copies the 3: [3, 3, 2, 9]
        "compose_reshapes_to_static_shape",
        _model(
            "t = Reshape (x, s1)\n y = Reshape (t, s2)",
            inputs="float[3, 6, 9] x",
            outputs="float[3, 3, 2, 9] y",
            inits="int64[3] s1 = {3, 2, -1}, int64[4] s2 = {0, 3, 2, -1}",
        ),
        ["Reshape"],
        True,
    ),
    (
        # the middle value is also an output: both Reshapes stay
        "compose_reshapes_to_static_shape",
        _model(
            "t = Reshape (x, s1)\n y = Reshape (t, s2)",
            inputs="float[3, 6, 9] x",
            outputs="float[3, 3, 2, 9] y, float[3, 2, 27] t",
            inits="int64[3] s1 = {3, 2, -1}, int64[4] s2 = {0, 3, 2, -1}",
        ),
        None,
        False,
    ),
    (
        # a dynamic batch N copied through both: [N, 6, 9] -> [N, 54] -> [N, 2, 27]
        "compose_reshapes_to_symbolic_shape",
        _model(
            "t = Reshape (x, s1)\n y = Reshape (t, s2)",
            inputs="float[N, 6, 9] x",
            outputs="float[N, 2, 27] y",
            inits="int64[2] s1 = {0, -1}, int64[3] s2 = {0, 2, 27}",
        ),
        ["Reshape"],
        True,
    ),
    (
        # the middle value is also an output: both Reshapes stay
        "compose_reshapes_to_symbolic_shape",
        _model(
            "t = Reshape (x, s1)\n y = Reshape (t, s2)",
            inputs="float[N, 6, 9] x",
            outputs="float[N, 2, 27] y, float[N, 54] t",
            inits="int64[2] s1 = {0, -1}, int64[3] s2 = {0, 2, 27}",
        ),
        None,
        False,
    ),
    (
        "eliminate_expand_before_add",
        _model(
            "e = Expand (x, s)\n y = Add (z, e)",
            inputs="float[3, 4] x, float[4, 3, 4] z",
            outputs="float[4, 3, 4] y",
            inits="int64[3] s = {4, 3, 4}",
        ),
        ["Add"],
        True,
    ),
    (
        # the Expand makes y bigger than x and z together
        "eliminate_expand_before_add",
        _model(
            "e = Expand (x, s)\n y = Add (z, e)",
            inputs="float[3, 4] x, float[3, 4] z",
            outputs="float[2, 3, 4] y",
            inits="int64[3] s = {2, 3, 4}",
        ),
        None,
        False,
    ),
    (
        "eliminate_expand_before_mul",
        _model(
            "e = Expand (x, s)\n y = Mul (e, z)",
            inputs="float[3, 1] x, float[1, 4] z",
            outputs="float[3, 4] y",
            inits="int64[2] s = {3, 4}",
        ),
        ["Mul"],
        True,
    ),
    (
        "eliminate_expand_before_sub_first",
        _model(
            "e = Expand (x, s)\n y = Sub (e, z)",
            inputs="float[3] x, float[4, 1] z",
            outputs="float[4, 3] y",
            inits="int64[2] s = {4, 3}",
        ),
        ["Sub"],
        True,
    ),
    (
        "eliminate_expand_before_sub_second",
        _model(
            "e = Expand (x, s)\n y = Sub (z, e)",
            inputs="float[3] x, float[4, 3] z",
            outputs="float[4, 3] y",
            inits="int64[2] s = {4, 3}",
        ),
        ["Sub"],
        True,
    ),
    (
        "eliminate_expand_before_div_first",
        _model(
            "e = Expand (x, s)\n y = Div (e, z)",
            inputs="float[4, 3] x, float[3] z",
            outputs="float[4, 3] y",
            inits="int64[2] s = {4, 3}",
        ),
        ["Div"],
        True,
    ),
    (
        "eliminate_expand_before_div_second",
        _model(
            "e = Expand (x, s)\n y = Div (z, e)",
            inputs="float[3, 4] x, float[4, 3, 4] z",
            outputs="float[4, 3, 4] y",
            inits="int64[3] s = {4, 3, 4}",
        ),
        ["Div"],
        True,
    ),
    (
        "eliminate_expand_before_pow_first",
        _model(
            "e = Expand (x, s)\n y = Pow (e, z)",
            inputs="float[1, 3] x, float[2, 1] z",
            outputs="float[2, 3] y",
            inits="int64[2] s = {2, 3}",
        ),
        ["Pow"],
        True,
    ),
    (
        "eliminate_expand_before_pow_second",
        _model(
            "e = Expand (x, s)\n y = Pow (z, e)",
            inputs="float[1, 3] x, float[2, 1] z",
            outputs="float[2, 3] y",
            inits="int64[2] s = {2, 3}",
        ),
        ["Pow"],
        True,
    ),
    (
        # x [1, 3] and z [1, 1]: without the Expand the result would be [1, 3], not [2, 3]
        "eliminate_expand_before_pow_second",
        _model(
            "e = Expand (x, s)\n y = Pow (z, e)",
            inputs="float[1, 3] x, float[1, 1] z",
            outputs="float[2, 3] y",
            inits="int64[2] s = {2, 3}",
        ),
        None,
        False,
    ),
    (
        # (the Concat is left unread: the dead-code pass, not run here, removes it)
        "slice_of_concat_first",
        _model(
            "c = Concat <axis = 1> (x, z)\n t = Slice (c, s, e, a)\n y = Relu (t)",
            inputs="float[N, 4] x, float[N, 3] z",
            inits="int64[1] s = {0}, int64[1] e = {4}, int64[1] a = {-1}",
        ),
        ["Relu", "Concat"],
        True,
    ),
    (
        # one element short of x
        "slice_of_concat_first",
        _model(
            "c = Concat <axis = 1> (x, z)\n y = Slice (c, s, e, a)",
            inputs="float[N, 4] x, float[N, 3] z",
            outputs="float[N, 3] y",
            inits="int64[1] s = {0}, int64[1] e = {3}, int64[1] a = {-1}",
        ),
        None,
        False,
    ),
    (
        # the Concat stays for its other reader
        "slice_of_concat_second",
        _model(
            "c = Concat <axis = 0> (z, x)\n t = Slice (c, s, e, a)\n y = Abs (t)\n w = Relu (c)",
            inputs="float[4, 4] x, float[3, 4] z",
            outputs="float[4, 4] y, float[7, 4] w",
            inits="int64[1] s = {3}, int64[1] e = {100}, int64[1] a = {0}",
        ),
        ["Abs", "Concat", "Relu"],
        True,
    ),
    (
        # every other row: no input of the Concat
        "slice_of_concat_second",
        _model(
            "c = Concat <axis = 0> (z, x)\n y = Slice (c, s, e, a, st)",
            inputs="float[4, 4] x, float[3, 4] z",
            outputs="float[2, 4] y",
            inits="int64[1] s = {3}, int64[1] e = {100}, int64[1] a = {0}, int64[1] st = {2}",
        ),
        None,
        False,
    ),
    (
        "slice_before_cos",
        _model(
            "u = Cos (x)\n y = Slice (u, s, e, a)",
            inputs="float[N, 8] x",
            inits="int64[1] s = {0}, int64[1] e = {4}, int64[1] a = {1}",
        ),
        ["Slice", "Cos"],
        True,
    ),
    (
        # the cosine is also an output: slicing before it would compute it twice
        "slice_before_cos",
        _model(
            "u = Cos (x)\n y = Slice (u, s, e, a)",
            inputs="float[N, 8] x",
            outputs="float[N, 4] y, float[N, 8] u",
            inits="int64[1] s = {0}, int64[1] e = {4}, int64[1] a = {1}",
        ),
        None,
        False,
    ),
    (
        "slice_before_sin",
        _model(
            "u = Sin (x)\n y = Slice (u, s, e, a)",
            inputs="float[N, 8] x",
            inits="int64[1] s = {4}, int64[1] e = {8}, int64[1] a = {1}",
        ),
        ["Slice", "Sin"],
        True,
    ),
    (
        "eliminate_full_scatter_nd",
        _model(
            "i = Constant <value = int64[2, 1] {0, 1}> ()\n y = ScatterND (x, i, u)",
            inputs="float[2, 4] x, float[2, 4] u",
            outputs="float[2, 4] y",
        ),
        ["Identity"],
        True,
    ),
    (
        "eliminate_full_scatter_nd",
        _model(
            "i = Constant <value = int64[2, 1] {1, 0}> ()\n y = ScatterND (x, i, u)",
            inputs="float[2, 4] x, float[2, 4] u",
            outputs="float[2, 4] y",
        ),
        None,
        False,
    ),
    (
        "remove_reshapes_around_matmul",
        _model(
            "a = Constant <value = int64[2] {-1, 4}> ()\n b = Constant <value = int64[3] {2, 3, 5}> ()\n f = Reshape (x, a)\n m = MatMul (f, w)\n y = Reshape (m, b)",
            inputs="float[2, 3, 4] x",
            outputs="float[2, 3, 5] y",
            inits="float[4, 5] w = {" + ", ".join(str(i) for i in range(20)) + "}",
        ),
        ["MatMul"],
        True,
    ),
    (
        # bmm over merged batch dims: [2, 3] -> [6] on both sides, restored after
        "remove_reshapes_around_batched_matmul",
        _model(
            "a = Reshape (x, sa)\n b = Reshape (w, sb)\n m = MatMul (a, b)\n y = Reshape (m, sy)",
            inputs="float[2, 3, 4, 5] x, float[2, 3, 5, 7] w",
            outputs="float[2, 3, 4, 7] y",
            inits="int64[3] sa = {6, 4, 5}, int64[3] sb = {6, 5, 7}, int64[4] sy = {2, 3, 4, 7}",
        ),
        ["MatMul"],
        True,
    ),
    (
        # the same with a symbolic batch dim merged through -1
        "remove_reshapes_around_batched_matmul",
        _model(
            "a = Reshape (x, sa)\n b = Reshape (w, sb)\n m = MatMul (a, b)\n y = Reshape (m, sy)",
            inputs="float[N, 3, 4, 5] x, float[N, 3, 5, 7] w",
            outputs="float[N, 3, 4, 7] y",
            inits="int64[3] sa = {-1, 4, 5}, int64[3] sb = {-1, 5, 7}, int64[4] sy = {-1, 3, 4, 7}",
        ),
        ["MatMul"],
        True,
    ),
    (
        # batch dims [2, 3] against [3, 2]: merged to [6] alike, but the pairs differ
        "remove_reshapes_around_batched_matmul",
        _model(
            "a = Reshape (x, sa)\n b = Reshape (w, sb)\n m = MatMul (a, b)\n y = Reshape (m, sy)",
            inputs="float[2, 3, 4, 5] x, float[3, 2, 5, 7] w",
            outputs="float[2, 3, 4, 7] y",
            inits="int64[3] sa = {6, 4, 5}, int64[3] sb = {6, 5, 7}, int64[4] sy = {2, 3, 4, 7}",
        ),
        None,
        False,
    ),
    (
        "squeeze_then_flatten_1d",
        _model(
            "s = Constant <value = int64[1] {-1}> ()\n t = Squeeze (x)\n u = Reshape (t, s)\n y = Relu (u)",
            inputs="float[4] x",
            outputs="float[4] y",
        ),
        ["Relu"],
        True,
    ),
    (
        "squeeze_then_flatten_1d",
        _model(
            "s = Constant <value = int64[1] {-1}> ()\n t = Squeeze (x)\n u = Reshape (t, s)\n y = Relu (u)",
            inputs="float[1, 4] x",
            outputs="float[4] y",
        ),
        None,
        False,
    ),
    (
        # the squeezed scalar is also read by the Cast: the Squeeze stays for it
        "squeeze_then_flatten_1d_shared",
        _model(
            "s = Constant <value = int64[1] {-1}> ()\n t = Squeeze (x)\n u = Reshape (t, s)\n y = Relu (u)\n c = Cast <to = 1> (t)",
            inputs="float[1] x",
            outputs="float[1] y, float c",
        ),
        ["Relu", "Squeeze", "Cast"],
        True,
    ),
    (
        # only one reader: the plain rule's job, not this one's
        "squeeze_then_flatten_1d_shared",
        _model(
            "s = Constant <value = int64[1] {-1}> ()\n t = Squeeze (x)\n u = Reshape (t, s)\n y = Relu (u)",
            inputs="float[1] x",
            outputs="float[1] y",
        ),
        None,
        False,
    ),
    (
        # a chunk size of 2 on a dim of 6: three pieces, read back in order
        "split_to_sequence_three",
        _model(
            "k = Constant <value = int64 {2}> ()\n i0 = Constant <value = int64 {0}> ()\n i1 = Constant <value = int64 {1}> ()\n i2 = Constant <value = int64 {2}> ()\n"
            " s = SplitToSequence <axis = 1> (x, k)\n a = SequenceAt (s, i0)\n b = SequenceAt (s, i1)\n c = SequenceAt (s, i2)\n y = Sub (a, c)\n z = Mul (b, y)",
            inputs="float[N, 6] x",
            outputs="float[N, 2] z",
            opset=18,
        ),
        ["Split", "Sub", "Mul"],
        True,
    ),
    (
        # four pieces, three read back: the sequence is not split into those three
        "split_to_sequence_three",
        _model(
            "k = Constant <value = int64 {2}> ()\n i0 = Constant <value = int64 {0}> ()\n i1 = Constant <value = int64 {1}> ()\n i2 = Constant <value = int64 {2}> ()\n"
            " s = SplitToSequence <axis = 1> (x, k)\n a = SequenceAt (s, i0)\n b = SequenceAt (s, i1)\n c = SequenceAt (s, i2)\n y = Sub (a, c)\n z = Mul (b, y)",
            inputs="float[N, 8] x",
            outputs="float[N, 2] z",
            opset=18,
        ),
        None,
        False,
    ),
    (
        # explicit sizes [1, 3]
        "split_to_sequence_two",
        _model(
            "k = Constant <value = int64[2] {1, 3}> ()\n i0 = Constant <value = int64 {0}> ()\n i1 = Constant <value = int64 {1}> ()\n"
            " s = SplitToSequence <axis = 1> (x, k)\n a = SequenceAt (s, i0)\n b = SequenceAt (s, i1)\n y = Mul (b, a)",
            inputs="float[N, 4] x",
            outputs="float[N, 3] y",
            opset=18,
        ),
        ["Split", "Mul"],
        True,
    ),
    (
        # read back in the other order (a is piece 1): Split's outputs follow the indices
        "split_to_sequence_two",
        _model(
            "k = Constant <value = int64[2] {2, 2}> ()\n i0 = Constant <value = int64 {1}> ()\n i1 = Constant <value = int64 {0}> ()\n"
            " s = SplitToSequence <axis = 1> (x, k)\n a = SequenceAt (s, i0)\n b = SequenceAt (s, i1)\n y = Sub (b, a)",
            inputs="float[N, 4] x",
            outputs="float[N, 2] y",
            opset=18,
        ),
        ["Split", "Sub"],
        True,
    ),
    (
        # three pieces, two read back: no Split of two
        "split_to_sequence_two",
        _model(
            "k = Constant <value = int64[3] {1, 1, 2}> ()\n i0 = Constant <value = int64 {0}> ()\n i1 = Constant <value = int64 {1}> ()\n"
            " s = SplitToSequence <axis = 1> (x, k)\n a = SequenceAt (s, i0)\n b = SequenceAt (s, i1)\n y = Mul (b, a)",
            inputs="float[N, 4] x",
            outputs="float[N, 1] y",
            opset=18,
        ),
        None,
        False,
    ),
    (
        # a generated weight reshaped: one ConstantOfShape of the new shape
        "reshape_constant_of_shape",
        _model(
            "s = Constant <value = int64[4] {1, 1, 3, 4}> ()\n c = ConstantOfShape <value = float[1] {0.5}> (s)\n"
            " t = Constant <value = int64[2] {3, 4}> ()\n w = Reshape (c, t)\n y = MatMul (x, w)",
            inputs="float[N, 3] x",
            outputs="float[N, 4] y",
        ),
        ["ConstantOfShape", "MatMul"],
        True,
    ),
    (
        # the ConstantOfShape has another reader: left as it is
        "reshape_constant_of_shape",
        _model(
            "s = Constant <value = int64[2] {3, 4}> ()\n c = ConstantOfShape <value = float[1] {0.5}> (s)\n"
            " t = Constant <value = int64[2] {4, 3}> ()\n w = Reshape (c, t)\n u = MatMul (c, w)\n y = MatMul (x, u)",
            inputs="float[N, 3] x",
            outputs="float[N, 3] y",
        ),
        None,
        False,
    ),
    (
        "and_true",
        _model(
            "t = Constant <value = bool {1}> ()\n y = And (t, x)",
            inputs="bool[N, 4] x",
            outputs="bool[N, 4] y",
        ),
        ["Identity"],
        True,
    ),
    (
        # And with false is not x
        "and_true",
        _model(
            "t = Constant <value = bool {0}> ()\n a = And (t, x)\n y = Not (a)",
            inputs="bool[N, 4] x",
            outputs="bool[N, 4] y",
        ),
        None,
        False,
    ),
    (
        "or_false",
        _model(
            "f = Constant <value = bool {0}> ()\n o = Or (x, f)\n y = Not (o)",
            inputs="bool[N, 4] x",
            outputs="bool[N, 4] y",
        ),
        ["Not"],
        True,
    ),
    (
        # Or with true is not x
        "or_false",
        _model(
            "f = Constant <value = bool {1}> ()\n o = Or (x, f)\n y = Not (o)",
            inputs="bool[N, 4] x",
            outputs="bool[N, 4] y",
        ),
        None,
        False,
    ),
    (
        "merge_slices_on_two_axes",
        _model(
            "z = Constant <value = int64[1] {0}> ()\n o = Constant <value = int64[1] {1}> ()\n e = Constant <value = int64[1] {9}> ()\n two = Constant <value = int64[1] {2}> ()\n"
            " a0 = Constant <value = int64[1] {0}> ()\n a1 = Constant <value = int64[1] {-1}> ()\n"
            " t = Slice (x, o, e, a0, two)\n y = Slice (t, z, e, a1, two)",
            inputs="float[5, 4] x",
            outputs="float[2, 2] y",
        ),
        ["Slice"],
        True,
    ),
    (
        # one axis twice: the slices compose into other bounds, not by listing the axis twice
        "merge_slices_on_two_axes",
        _model(
            "z = Constant <value = int64[1] {0}> ()\n o = Constant <value = int64[1] {1}> ()\n e = Constant <value = int64[1] {9}> ()\n two = Constant <value = int64[1] {2}> ()\n"
            " a0 = Constant <value = int64[1] {1}> ()\n"
            " t = Slice (x, o, e, a0)\n y = Slice (t, o, e, a0)",
            inputs="float[5, 4] x",
            outputs="float[5, 2] y",
        ),
        None,
        False,
    ),
    (
        "merge_slices_on_two_axes_shared",
        _model(
            "z = Constant <value = int64[1] {0}> ()\n o = Constant <value = int64[1] {1}> ()\n e = Constant <value = int64[1] {9}> ()\n two = Constant <value = int64[1] {2}> ()\n"
            " a0 = Constant <value = int64[1] {2}> ()\n a1 = Constant <value = int64[1] {3}> ()\n"
            " t = Slice (x, z, e, a0, two)\n y = Slice (t, z, e, a1, two)\n w = Slice (t, o, e, a1, two)",
            inputs="float[1, 3, 4, 4] x",
            outputs="float[1, 3, 2, 2] y, float[1, 3, 2, 2] w",
        ),
        # y reads x directly; t stays for w (its last reader: the plain rule's case)
        ["Constant"] * 6 + ["Slice", "Slice", "Slice"],
        True,
    ),
    (
        # the inner Slice has no other reader: the plain rule merges it away instead
        "merge_slices_on_two_axes_shared",
        _model(
            "z = Constant <value = int64[1] {0}> ()\n o = Constant <value = int64[1] {1}> ()\n e = Constant <value = int64[1] {9}> ()\n two = Constant <value = int64[1] {2}> ()\n"
            " a0 = Constant <value = int64[1] {2}> ()\n a1 = Constant <value = int64[1] {3}> ()\n"
            " t = Slice (x, z, e, a0, two)\n y = Slice (t, z, e, a1, two)",
            inputs="float[1, 3, 4, 4] x",
            outputs="float[1, 3, 2, 2] y",
        ),
        None,
        False,
    ),
    (
        "gemm_between_reshapes_to_matmul",
        _model(
            " f = Constant <value = int64[2] {-1, 4}> ()\n a = Reshape (x, f)\n g = Gemm <transB = 1> (a, w, c)\n s = Shape (x)\n i0 = Constant <value = int64[1] {0}> ()\n i1 = Constant <value = int64[1] {1}> ()\n d0 = Gather (s, i0)\n d1 = Gather (s, i1)\n m = Constant <value = int64[1] {-1}> ()\n t = Concat <axis = 0> (d0, d1, m)\n y = Reshape (g, t)",
            inputs="float[T, B, 4] x",
            outputs="float[T, B, 3] y",
            inits="float[3, 4] w = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, float[3] c = {1, 2, 3}",
        ),
        # the shape computation is left to dead-code elimination
        [
            "Shape",
            "Constant",
            "Constant",
            "Gather",
            "Gather",
            "Constant",
            "Concat",
            "MatMul",
            "Add",
        ],
        True,
    ),
    (
        # the leading dims come back swapped: a transposition, not the flattened dims restored
        "gemm_between_reshapes_to_matmul",
        _model(
            " f = Constant <value = int64[2] {-1, 4}> ()\n a = Reshape (x, f)\n g = Gemm <transB = 1> (a, w, c)\n s = Shape (x)\n i0 = Constant <value = int64[1] {1}> ()\n i1 = Constant <value = int64[1] {0}> ()\n d0 = Gather (s, i0)\n d1 = Gather (s, i1)\n m = Constant <value = int64[1] {-1}> ()\n t = Concat <axis = 0> (d0, d1, m)\n y = Reshape (g, t)",
            inputs="float[T, B, 4] x",
            outputs="float[B, T, 3] y",
            inits="float[3, 4] w = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, float[3] c = {1, 2, 3}",
        ),
        None,
        False,
    ),
    (
        "slices_to_split",
        _model(
            "z = Constant <value = int64[1] {0}> ()\n k = Constant <value = int64[1] {1}> ()\n e = Constant <value = int64[1] {9}> ()\n ax = Constant <value = int64[1] {1}> ()\n"
            " a = Slice (x, z, k, ax)\n b = Slice (x, k, e, ax)\n y = Relu (a)\n w = Relu (b)",
            outputs="float[N, 1] y, float[N, 3] w",
        ),
        ["Split", "Relu", "Relu"],
        True,
    ),
    (
        "slices_to_split",
        _model(
            "z = Constant <value = int64[1] {0}> ()\n k = Constant <value = int64[1] {1}> ()\n j = Constant <value = int64[1] {2}> ()\n e = Constant <value = int64[1] {9}> ()\n ax = Constant <value = int64[1] {1}> ()\n"
            " a = Slice (x, z, k, ax)\n b = Slice (x, j, e, ax)\n y = Relu (a)\n w = Relu (b)",
            outputs="float[N, 1] y, float[N, 2] w",
        ),
        None,
        False,
    ),
    (
        "eliminate_full_scatter_nd_dynamic",
        _model(
            "s = Shape <start = 0> (x)\n ax = Constant <value = int64 {0}> ()\n n = Gather <axis = 0> (s, ax)\n"
            " lo = Constant <value = int64 {0}> ()\n one = Constant <value = int64 {1}> ()\n r = Range (lo, n, one)\n"
            ' m = Constant <value = int64[1] {-1}> ()\n i = Unsqueeze (r, m)\n y = ScatterND <reduction = "none"> (x, i, u)',
            inputs="float[N, 4] x, float[N, 4] u",
        ),
        ["Identity"],
        True,
    ),
    (
        "materialize_reshape_shape_symbolic",
        _model(
            "s = Shape (x)\n y = Reshape (x, s)",
            inputs="float[N, M, 3] x",
            outputs="float[N, M, 3] y",
        ),
        ["Shape", "Reshape"],
        True,
    ),
    (
        # opset 13: Reshape has no allowzero yet
        "materialize_reshape_shape_symbolic",
        _model(
            "s = Shape (x)\n y = Reshape (x, s)",
            inputs="float[N, M, 3] x",
            outputs="float[N, M, 3] y",
            opset=13,
        ),
        ["Shape", "Reshape"],
        True,
    ),
    (
        "materialize_reshape_shape_symbolic",
        _model(
            "s = Shape (z)\n y = Reshape (x, s)",
            inputs="float[N, M, 6] x, float[M, N, 6] z",
            outputs="float[M, N, 6] y",
        ),
        None,
        False,
    ),
    (
        # [N, M*6] would be [0, -1]: undefined when N is 0, where the computed shape is not
        "materialize_reshape_shape_symbolic",
        _model(
            "s = Shape (x)\n n = Slice (s, zero, one)\n m = Slice (s, one, two)\n"
            " k = Mul (m, six)\n t = Concat <axis = 0> (n, k)\n y = Reshape (x, t)",
            inputs="float[N, M, 6] x",
            outputs="float[N, ?] y",
            inits="int64[1] zero = {0}, int64[1] one = {1}, int64[1] two = {2}, int64[1] six = {6}",
        ),
        None,
        False,
    ),
    (
        "absorb_transpose_into_gemm_a",
        _model(
            "t = Transpose (a)\n y = Gemm <alpha = 0.5> (t, b)",
            inputs="float[4, 3] a, float[4, 5] b",
            outputs="float[3, 5] y",
        ),
        ["Gemm"],
        True,
    ),
    (
        # the Transpose is read twice: absorbing it into one Gemm leaves it for the other
        "absorb_transpose_into_gemm_a",
        _model(
            "t = Transpose (a)\n y = Gemm (t, b)\n z = Relu (t)",
            inputs="float[4, 3] a, float[4, 5] b",
            outputs="float[3, 5] y, float[3, 4] z",
        ),
        None,
        False,
    ),
    (
        "absorb_transpose_into_gemm_b",
        _model(
            "t = Transpose <perm = [1, 0]> (b)\n y = Gemm <transB = 1> (a, t, c)",
            inputs="float[3, 4] a, float[4, 5] b, float[5] c",
            outputs="float[3, 5] y",
        ),
        ["Gemm"],
        True,
    ),
    # -- the exact rewrites onnxoptimizer makes (benchmarks/peer_tests.py) -----------------
    (
        # axes [0, 2] of x, then axis 1 of the middle tensor (x's axis 3): one Squeeze
        "compose_squeezes",
        _model(
            "a = Constant <value = int64[2] {0, 2}> ()\n b = Constant <value = int64[1] {-2}> ()\n t = Squeeze (x, a)\n y = Squeeze (t, b)",
            inputs="float[1, N, 1, 1, 4] x",
            outputs="float[N, 4] y",
        ),
        ["Squeeze"],
        True,
    ),
    (
        # the second Squeeze has no axes: which dims go depends on the shape
        "compose_squeezes",
        _model(
            "a = Constant <value = int64[1] {0}> ()\n t = Squeeze (x, a)\n y = Squeeze (t)",
            inputs="float[1, 1, 4] x",
            outputs="float[4] y",
        ),
        None,
        False,
    ),
    (
        "compose_squeezes_attribute",
        _model(
            "t = Squeeze <axes = [0, 4]> (x)\n y = Squeeze <axes = [0, -1]> (t)",
            inputs="float[1, 1, 3, 1, 1, 1] x",
            outputs="float[3, 1] y",
            opset=11,
        ),
        ["Squeeze"],
        True,
    ),
    (
        "compose_squeezes_attribute",
        _model(
            "t = Squeeze <axes = [0]> (x)\n y = Squeeze <axes = [0]> (t)\n z = Relu (t)",
            inputs="float[1, 1, 3] x",
            outputs="float[3] y, float[1, 3] z",
            opset=11,
        ),
        None,
        False,
    ),
    (
        # onnxoptimizer's test: [0, 1, 4, -1] then [1, -1, -2] -> [0, 1, 2, 5, 8, 9, 10]
        "compose_unsqueezes_attribute",
        _model(
            "t = Unsqueeze <axes = [0, 1, 4, -1]> (x)\n y = Unsqueeze <axes = [1, -1, -2]> (t)",
            inputs="float[4, 6, 5, 5] x",
            outputs="float[1, 1, 1, 4, 6, 1, 5, 5, 1, 1, 1] y",
            opset=11,
        ),
        ["Unsqueeze"],
        True,
    ),
    (
        "compose_unsqueezes_attribute",
        _model(
            "t = Unsqueeze <axes = [0]> (x)\n y = Unsqueeze <axes = [0]> (t)\n z = Relu (t)",
            outputs="float[1, 1, N, 4] y, float[1, N, 4] z",
            opset=11,
        ),
        None,
        False,
    ),
    (
        # the middle value has another reader: it stays for it, y composes
        "compose_unsqueezes_shared",
        _model(
            "a = Constant <value = int64 {0}> ()\n b = Constant <value = int64 {-1}> ()\n t = Unsqueeze (x, a)\n y = Unsqueeze (t, b)\n z = Relu (t)",
            outputs="float[1, N, 4, 1] y, float[1, N, 4] z",
        ),
        ["Constant", "Unsqueeze", "Relu", "Unsqueeze"],
        True,
    ),
    (
        "compose_unsqueezes_shared",
        _model(
            "a = Constant <value = int64 {0}> ()\n b = Constant <value = int64 {-1}> ()\n t = Unsqueeze (x, a)\n y = Unsqueeze (t, b)",
            outputs="float[1, N, 4, 1] y",
        ),
        None,
        False,
    ),
    (
        "eliminate_single_input_concat",
        _model("t = Concat <axis = 0> (x)\n y = Relu (t)"),
        ["Relu"],
        True,
    ),
    (
        "eliminate_single_input_concat",
        _model("t = Concat <axis = 0> (x, x)\n y = Relu (t)", outputs="float[M, 4] y"),
        None,
        False,
    ),
    (
        "eliminate_single_output_split",
        _model("t = Split <axis = 1> (x)\n y = Relu (t)"),
        ["Relu"],
        True,
    ),
    (
        "eliminate_single_output_split",
        _model(
            "s = Constant <value = int64[1] {4}> ()\n t = Split <axis = 1> (x, s)\n y = Relu (t)"
        ),
        ["Relu"],
        True,
    ),
    (
        "eliminate_single_output_split",
        _model("a, b = Split <axis = 1> (x)\n y = Relu (a)", outputs="float[N, 2] y"),
        None,
        False,
    ),
    (
        "eliminate_noop_flatten",
        _model(
            "t = Flatten <axis = 0> (x)\n y = Relu (t)",
            inputs="float[1, 4] x",
            outputs="float[1, 4] y",
        ),
        ["Relu"],
        True,
    ),
    (
        "eliminate_noop_flatten",
        _model(
            "t = Flatten <axis = 0> (x)\n y = Relu (t)",
            inputs="float[2, 4] x",
            outputs="float[1, 8] y",
        ),
        None,
        False,
    ),
    (
        "eliminate_repeated_idempotent",
        _model("t = Sign (x)\n y = Sign (t)"),
        ["Sign"],
        True,
    ),
    (
        "eliminate_repeated_idempotent",
        _model("t = Round (x)\n y = Round (t)"),
        ["Round"],
        True,
    ),
    (
        # different ops: Abs(Sign(x)) is not Sign(x)
        "eliminate_repeated_idempotent",
        _model("t = Sign (x)\n y = Abs (t)"),
        None,
        False,
    ),
    (
        "where_not_to_swapped_where",
        _model(
            "n = Not (c)\n y = Where (n, x, z)",
            inputs="bool[N, 4] c, float[N, 4] x, float[N, 4] z",
        ),
        ["Where"],
        True,
    ),
    (
        # the negation has another reader
        "where_not_to_swapped_where",
        _model(
            "n = Not (c)\n y = Where (n, x, z)",
            inputs="bool[N, 4] c, float[N, 4] x, float[N, 4] z",
            outputs="float[N, 4] y, bool[N, 4] n",
        ),
        None,
        False,
    ),
    (
        "eliminate_self_and_or",
        _model("t = And (c, c)\n y = Not (t)", inputs="bool[N, 4] c", outputs="bool[N, 4] y"),
        ["Not"],
        True,
    ),
    (
        "eliminate_self_and_or",
        _model(
            "t = Or (c, d)\n y = Not (t)",
            inputs="bool[N, 4] c, bool[N, 4] d",
            outputs="bool[N, 4] y",
        ),
        None,
        False,
    ),
    (
        # axes attribute (opset 13), Unsqueeze axes input
        "fold_unsqueeze_into_reduce_l1",
        _model(
            "a = Constant <value = int64[1] {1}> ()\n t = ReduceL1 <axes = [1], keepdims = 0> (x)\n y = Unsqueeze (t, a)",
            inputs="float[N, 4, 3] x",
            outputs="float[N, 1, 3] y",
            opset=13,
        ),
        ["ReduceL1"],
        True,
    ),
    (
        # the Unsqueeze puts the axis elsewhere: [N, 3, 1] is not the keepdims shape
        "fold_unsqueeze_into_reduce_l1",
        _model(
            "a = Constant <value = int64[1] {2}> ()\n t = ReduceL1 <axes = [1], keepdims = 0> (x)\n y = Unsqueeze (t, a)",
            inputs="float[N, 4, 3] x",
            outputs="float[N, 3, 1] y",
            opset=13,
        ),
        None,
        False,
    ),
    (
        # opset 11: both axes as attributes, negative ones
        "fold_unsqueeze_into_reduce_l2",
        _model(
            "t = ReduceL2 <axes = [-1, 0], keepdims = 0> (x)\n y = Unsqueeze <axes = [2, 0]> (t)",
            inputs="float[2, 4, 3] x",
            outputs="float[1, 4, 1] y",
            opset=11,
        ),
        ["ReduceL2"],
        True,
    ),
    (
        # no axes: every axis reduced to a scalar, then all put back
        "fold_unsqueeze_into_reduce_log_sum",
        _model(
            "a = Constant <value = int64[2] {0, 1}> ()\n t = ReduceLogSum <keepdims = 0> (x)\n y = Unsqueeze (t, a)",
            inputs="float[2, 4] x",
            outputs="float[1, 1] y",
            opset=13,
        ),
        ["ReduceLogSum"],
        True,
    ),
    (
        # opset 18: axes inputs on both
        "fold_unsqueeze_into_reduce_log_sum_exp",
        _model(
            "r = Constant <value = int64[1] {-1}> ()\n a = Constant <value = int64[1] {2}> ()\n t = ReduceLogSumExp <keepdims = 0> (x, r)\n y = Unsqueeze (t, a)",
            inputs="float[N, 4, 3] x",
            outputs="float[N, 4, 1] y",
            opset=18,
        ),
        ["Constant", "ReduceLogSumExp"],
        True,
    ),
    (
        "fold_unsqueeze_into_reduce_max",
        _model(
            "a = Constant <value = int64[1] {0}> ()\n t = ReduceMax <axes = [0], keepdims = 0> (x)\n y = Unsqueeze (t, a)",
            outputs="float[1, 4] y",
            opset=13,
        ),
        ["ReduceMax"],
        True,
    ),
    (
        # keepdims = 1 already: the Unsqueeze adds an axis
        "fold_unsqueeze_into_reduce_max",
        _model(
            "a = Constant <value = int64[1] {0}> ()\n t = ReduceMax <axes = [0], keepdims = 1> (x)\n y = Unsqueeze (t, a)",
            outputs="float[1, 1, 4] y",
            opset=13,
        ),
        None,
        False,
    ),
    (
        "fold_unsqueeze_into_reduce_mean",
        _model(
            "a = Constant <value = int64[1] {1}> ()\n t = ReduceMean <axes = [1], keepdims = 0> (x)\n y = Unsqueeze (t, a)",
            outputs="float[N, 1] y",
            opset=13,
        ),
        ["ReduceMean"],
        True,
    ),
    (
        "fold_unsqueeze_into_reduce_min",
        _model(
            "a = Constant <value = int64[1] {1}> ()\n t = ReduceMin <axes = [1], keepdims = 0> (x)\n y = Unsqueeze (t, a)",
            outputs="float[N, 1] y",
            opset=13,
        ),
        ["ReduceMin"],
        True,
    ),
    (
        "fold_unsqueeze_into_reduce_prod",
        _model(
            "a = Constant <value = int64[1] {1}> ()\n t = ReduceProd <axes = [1], keepdims = 0> (x)\n y = Unsqueeze (t, a)",
            outputs="float[N, 1] y",
            opset=13,
        ),
        ["ReduceProd"],
        True,
    ),
    (
        # ReduceSum takes its axes as an input from opset 13
        "fold_unsqueeze_into_reduce_sum",
        _model(
            "r = Constant <value = int64[1] {1}> ()\n t = ReduceSum <keepdims = 0> (x, r)\n y = Unsqueeze (t, r)",
            outputs="float[N, 1] y",
            opset=13,
        ),
        ["Constant", "ReduceSum"],
        True,
    ),
    (
        # an empty axes input with noop_with_empty_axes = 1 reduces nothing
        "fold_unsqueeze_into_reduce_sum",
        _model(
            "r = Constant <value = int64[0] {}> ()\n a = Constant <value = int64[1] {0}> ()\n t = ReduceSum <keepdims = 0, noop_with_empty_axes = 1> (x, r)\n y = Unsqueeze (t, a)",
            outputs="float[1, N, 4] y",
            opset=13,
        ),
        None,
        False,
    ),
    (
        "div_one_by_to_reciprocal",
        _model("one = Constant <value = float {1.0}> ()\n y = Div (one, x)"),
        ["Reciprocal"],
        True,
    ),
    (
        # an integer division: Reciprocal takes floats only
        "div_one_by_to_reciprocal",
        _model(
            "one = Constant <value = uint8 {1}> ()\n two = Constant <value = uint8 {2}> ()\n d = Add (x, two)\n y = Div (one, d)",
            inputs="uint8[N, 4] x",
            outputs="uint8[N, 4] y",
        ),
        None,
        False,
    ),
    (
        # RMSNorm's x * Reciprocal(Sqrt(mean(x * x) + eps)): d is at least sqrt(1e-5)
        "mul_reciprocal_to_div",
        _model(
            "two = Constant <value = float {2.0}> ()\n sq = Pow (x, two)\n ms = ReduceMean <axes = [1], keepdims = 1> (sq)\n eps = Constant <value = float {1e-5}> ()\n me = Add (ms, eps)\n d = Sqrt (me)\n r = Reciprocal (d)\n y = Mul (x, r)"
        ),
        ["Constant", "Pow", "ReduceMean", "Constant", "Add", "Sqrt", "Div"],
        True,
    ),
    (
        # without the epsilon d may be 0 or subnormal, and 1 / d infinite
        "mul_reciprocal_to_div",
        _model(
            "two = Constant <value = float {2.0}> ()\n sq = Pow (x, two)\n ms = ReduceMean <axes = [1], keepdims = 1> (sq)\n d = Sqrt (ms)\n r = Reciprocal (d)\n y = Mul (x, r)"
        ),
        None,
        False,
    ),
    (
        "fold_unsqueeze_into_reduce_sum_square",
        _model(
            "a = Constant <value = int64[1] {1}> ()\n t = ReduceSumSquare <axes = [1], keepdims = 0> (x)\n y = Unsqueeze (t, a)",
            outputs="float[N, 1] y",
            opset=13,
        ),
        ["ReduceSumSquare"],
        True,
    ),
]


@pytest.mark.parametrize(
    ("rule", "model", "expected", "fires"),
    CASES,
    ids=[f"{c[0]}-{'fires' if c[3] else 'near-miss'}-{i}" for i, c in enumerate(CASES)],
)
def test_folding_rule(
    rule: str, model: onnx.ModelProto, expected: list[str] | None, fires: bool
) -> None:
    result = _apply_one(rule, model)
    applied = [e for e in result.trace.entries if e.kind == "rule"]
    rolled_back = [s for s in result.trace.skips if s.reason.startswith("rolled back")]
    assert not rolled_back, rolled_back
    if fires:
        assert applied
        assert all(e.rule == rule for e in applied)
        assert op_types(result.proto) == expected
    else:
        assert not applied
        assert op_types(result.proto) == op_types(model)
    ir.verify(result.model)
    if "Dropout" in op_types(result.proto):
        return  # a Dropout that may train is random: compare structure only
    assert_same_outputs(model, result.proto)


def test_every_folding_rule_has_a_case() -> None:
    covered = {case[0] for case in CASES}
    missing = {r.name for r in _library().rules} - covered - {"remove_zero_bias_from_qlinear_conv"}
    assert not missing, f"folding rules without a test: {sorted(missing)}"


@pytest.mark.parametrize("size", [1, 4])
def test_expand_of_a_symbolic_dim_is_covered_by_the_other_operand(size: int) -> None:
    # x [N] expands to [3, 4], so N is 1 or 4; z has the result's shape, which covers either
    model = _model(
        "e = Expand (x, s)\n y = Mul (e, z)",
        inputs="float[N] x, float[3, 4] z",
        outputs="float[3, 4] y",
        inits="int64[2] s = {3, 4}",
    )
    result = _apply_one("eliminate_expand_before_mul", model)
    assert op_types(result.proto) == ["Mul"]
    ir.verify(result.model)
    rng = np.random.default_rng(0)
    feeds = {
        "x": rng.standard_normal(size).astype(np.float32),
        "z": rng.standard_normal((3, 4)).astype(np.float32),
    }
    expected = session(model).run(None, feeds)
    actual = session(result.proto).run(None, feeds)
    np.testing.assert_array_equal(actual[0], expected[0])


def test_a_slice_declared_to_keep_a_symbolic_dim_is_kept() -> None:
    # The output declares [L, 4] like its input, but x[0:9] keeps 9 rows of 10: onnxruntime
    # runs the model (the declared symbol is not checked), so the Slice is no no-op.
    model = _model(
        "y = Slice (x, b, e, a)",
        inputs="float[L, 4] x",
        outputs="float[L, 4] y",
        inits="int64[1] b = {0}, int64[1] e = {9}, int64[1] a = {0}",
    )
    result = rewriter.rewrite(model)
    assert op_types(result.proto) == ["Slice"]
    feeds = {"x": np.arange(40, dtype=np.float32).reshape(10, 4)}
    expected = session(model).run(None, feeds)
    actual = session(result.proto).run(None, feeds)
    assert expected[0].shape == (9, 4)
    np.testing.assert_array_equal(actual[0], expected[0])


def test_a_reshape_chain_into_an_output_of_a_stale_rank_keeps_the_computed_shape() -> None:
    # The output declares a scalar; onnxruntime computes [2, 3, 2, 8] and only warns. The
    # merged Reshape must give that shape, not the declared one (an empty shape fails to run).
    model = onnx.parser.parse_model("""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[3, 4, 8] x) => (float y) <int64[4] a = {2, 0, 3, -1}, int64[4] b = {0, 3, 2, 8}> {
        t = Reshape (x, a)
        y = Reshape (t, b)
    }
    """)  # not checked: onnx's strict inference refuses the stale rank onnxruntime runs
    result = rewriter.rewrite(model)
    assert op_types(result.proto) == ["Reshape"]
    feeds = {"x": np.arange(96, dtype=np.float32).reshape(3, 4, 8)}
    expected = session(model).run(None, feeds)
    actual = session(result.proto).run(None, feeds)
    assert expected[0].shape == (2, 3, 2, 8)
    np.testing.assert_array_equal(actual[0], expected[0])


def test_an_expand_declared_to_keep_its_input_shape_is_kept() -> None:
    # The output declares [N, M] like its input, but Expand(x, [3, 1]) of an x of one row
    # broadcasts it to 3: onnxruntime runs the model (the declared symbols are not checked),
    # so the Expand is no no-op (only x's dims and the target's elements prove one).
    model = _model(
        "y = Expand (x, s)",
        inputs="float[N, M] x, int64[2] s",
        outputs="float[N, M] y",
    )
    result = rewriter.rewrite(model)
    assert op_types(result.proto) == ["Expand"]
    feeds = {"x": np.arange(4, dtype=np.float32).reshape(1, 4), "s": np.array([3, 1])}
    expected = session(model).run(None, feeds)
    actual = session(result.proto).run(None, feeds)
    assert expected[0].shape == (3, 4)
    np.testing.assert_array_equal(actual[0], expected[0])


def test_an_expand_to_its_input_shape_read_back_is_removed() -> None:
    model = _model(
        "s = Shape (x)\n t = Expand (x, s)\n y = Relu (t)",
        inputs="float[N, M] x",
        outputs="float[N, M] y",
    )
    result = rewriter.rewrite(model)
    assert op_types(result.proto) == ["Relu"]


@pytest.mark.parametrize(
    "body",
    [
        # the absent lo of the first Clip clamps -inf to the lowest float, the -inf one does not
        "t = Clip (x, , hi)\n y = Clip (t, ninf, top)",
        "t = Clip (x, ninf, top)\n y = Clip (t, , hi)",
        # the absent hi clamps inf to the largest float, which the Min by inf keeps
        "t = Clip (x, lo)\n y = Min (t, inf)",
        # Max by -inf keeps the absent lo's lowest float; Max by inf is inf, not the largest float
        "t = Clip (x, , hi)\n y = Max (t, ninf)",
        "t = Clip (x, lo)\n y = Max (t, inf)",
    ],
)
def test_clips_with_an_absent_bound_keep_clamping_infinities(body: str) -> None:
    model = _model(
        body,
        inputs="float[6] x",
        outputs="float[6] y",
        inits="float lo = {-2}, float hi = {4}, float top = {7}, float inf = {inf}, "
        "float ninf = {-inf}",
    )
    result = rewriter.rewrite(model)
    feeds = {"x": np.array([-np.inf, -3, 0, 5, np.inf, np.nan], np.float32)}
    expected = session(model).run(None, feeds)
    actual = session(result.proto).run(None, feeds)
    np.testing.assert_array_equal(actual[0], expected[0])
