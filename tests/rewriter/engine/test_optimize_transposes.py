"""`pass optimize_transposes`: Transposes sink through layout-agnostic ops until they cancel."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.helper
import pytest

import rewriter
from rewriter.verification import VerifyOptions
from tests.helpers import assert_same_outputs, model_from_text, op_types, run_rules

NHWC_TO_NCHW = "[0, 3, 1, 2]"
NCHW_TO_NHWC = "[0, 2, 3, 1]"


def _rewrite(model: onnx.ModelProto, tmp_path) -> onnx.ModelProto:
    passes = "pass optimize_transposes\npass eliminate_dead_code\n"
    return run_rules(model, passes, tmp_path).proto


def _count(model: onnx.ModelProto, op: str = "Transpose") -> int:
    return op_types(model).count(op)


def _values(array: np.ndarray) -> str:
    """An initializer's values in ONNX text (`{0.1, 0.2, ...}`)."""
    return "{" + ", ".join(f"{v!r}" for v in array.ravel().tolist()) + "}"


def test_a_tf2onnx_conv_chain_loses_its_inner_transposes(tmp_path):
    # NHWC graph converted to NCHW Convs: Transpose after a Conv, bias add and Relu in NHWC,
    # then the inverse Transpose before the next Conv.
    text = f"""<ir_version: 8, opset_import: ["" : 17]>
    g (float[N, 8, 8, 3] x, float[4, 3, 3, 3] w1, float[4, 4, 3, 3] w2) => (float[N, 8, 8, 4] y)
      <float[4] bias = {_values(np.arange(4, dtype=np.float32) / 10)}>
    {{
        a = Transpose <perm = {NHWC_TO_NCHW}> (x)
        c1 = Conv <pads = [1, 1, 1, 1]> (a, w1)
        b = Transpose <perm = {NCHW_TO_NHWC}> (c1)
        biased = Add (b, bias)
        r = Relu (biased)
        d = Transpose <perm = {NHWC_TO_NCHW}> (r)
        c2 = Conv <pads = [1, 1, 1, 1]> (d, w2)
        y = Transpose <perm = {NCHW_TO_NHWC}> (c2)
    }}"""
    model = model_from_text(text)
    rewritten = _rewrite(model, tmp_path)
    assert _count(model) == 4
    assert _count(rewritten) == 2  # the middle pair cancelled
    assert_same_outputs(model, rewritten)


def test_binary_ops_with_two_transposed_operands_merge_them(tmp_path):
    text = f"""<ir_version: 8, opset_import: ["" : 17]>
    g (float[2, 3, 4, 5] x, float[2, 3, 4, 5] z) => (float[2, 3, 4, 5] y) {{
        a = Transpose <perm = {NCHW_TO_NHWC}> (x)
        b = Transpose <perm = {NCHW_TO_NHWC}> (z)
        s = Mul (a, b)
        e = Exp (s)
        y = Transpose <perm = {NHWC_TO_NCHW}> (e)
    }}"""
    model = model_from_text(text)
    rewritten = _rewrite(model, tmp_path)
    assert _count(rewritten) == 0
    assert_same_outputs(model, rewritten)


@pytest.mark.parametrize(
    ("op", "extra"),
    [
        ("Softmax <axis = 3>", ""),
        ("ReduceMean <axes = [1, 2], keepdims = 1>", ""),
        ("ReduceSum <keepdims = 1>", ", axes"),
        ("Concat <axis = -1>", ", k"),
    ],
)
def test_axis_attributes_follow_the_permutation(tmp_path, op, extra):
    k = np.random.default_rng(0).standard_normal((2, 4, 5, 6)).astype(np.float32)
    text = f"""<ir_version: 8, opset_import: ["" : 17]>
    g (float[2, 3, 4, 5] x) => (float[A, B, C, D] y)
      <float[2, 4, 5, 6] k = {_values(k)}, int64[2] axes = {{1, 2}}>
    {{
        a = Transpose <perm = {NCHW_TO_NHWC}> (x)
        m = {op} (a{extra})
        y = Transpose <perm = {NHWC_TO_NCHW}> (m)
    }}"""
    model = model_from_text(text)
    rewritten = _rewrite(model, tmp_path)
    assert _count(rewritten) == 0
    assert_same_outputs(model, rewritten)


@pytest.mark.parametrize(("axis", "cancels"), [(-1, True), (2, True), (1, False)])
def test_layer_normalization_of_axes_the_transpose_keeps(tmp_path, axis, cancels):
    # [seq, batch, hidden] <-> [batch, seq, hidden] around a LayerNormalization of the
    # trailing axes: the pair cancels; normalizing axis 1 on would mix the swapped axes
    scale = _values(np.linspace(0.5, 1.5, 6, dtype=np.float32))
    text = f"""<ir_version: 8, opset_import: ["" : 17]>
    g (float[4, 3, 6] x) => (float[4, 3, 6] y)
      <float[{"6" if axis != 1 else "4, 6"}] s = {scale if axis != 1 else _values(np.ones(24, np.float32))}>
    {{
        a = Transpose <perm = [1, 0, 2]> (x)
        n = LayerNormalization <axis = {axis}> (a, s)
        y = Transpose <perm = [1, 0, 2]> (n)
    }}"""
    model = model_from_text(text)
    rewritten = _rewrite(model, tmp_path)
    assert _count(rewritten) == (0 if cancels else 2)
    assert_same_outputs(model, rewritten)


@pytest.mark.parametrize(("constant", "cancels"), [(True, True), (False, False)])
def test_a_dense_layer_on_a_channels_last_map_becomes_a_1x1_conv(tmp_path, constant, cancels):
    # tf2onnx's Keras Dense on an NHWC map between two Convs: MatMul(NHWC, B) is a 1x1 Conv
    # of the NCHW value, so both Transposes go; with B an input it cannot be a kernel
    weights = _values(np.linspace(-1, 1, 12, dtype=np.float32))
    b_decl = "" if constant else ", float[4, 3] b"
    init = f"<float[4, 3] b = {weights}>" if constant else ""
    text = f"""<ir_version: 8, opset_import: ["" : 17]>
    g (float[N, 4, 5, 5] x{b_decl}) => (float[N, 3, 5, 5] y) {init}
    {{
        a = Transpose <perm = {NCHW_TO_NHWC}> (x)
        m = MatMul (a, b)
        r = Relu (m)
        y = Transpose <perm = {NHWC_TO_NCHW}> (r)
    }}"""
    model = model_from_text(text)
    rewritten = _rewrite(model, tmp_path)
    if cancels:
        assert op_types(rewritten) == ["Conv", "Relu"]
    else:
        assert _count(rewritten) == 2
    assert_same_outputs(model, rewritten)


def _dense_on_channels_last(dtype: str) -> onnx.ModelProto:
    weights = _values(np.linspace(-1, 1, 12))
    return model_from_text(f"""<ir_version: 8, opset_import: ["" : 17]>
    g ({dtype}[N, 4, 5, 5] x) => ({dtype}[N, 3, 5, 5] y) <{dtype}[4, 3] b = {weights}>
    {{
        a = Transpose <perm = {NCHW_TO_NHWC}> (x)
        m = MatMul (a, b)
        y = Transpose <perm = {NHWC_TO_NCHW}> (m)
    }}""")


def test_a_float64_dense_layer_stays_a_matmul(tmp_path):
    # onnxruntime's CPU provider has no float64 Conv: the MatMul it runs stays (issue 28)
    model = _dense_on_channels_last("double")
    result = run_rules(model, "pass optimize_transposes\n", tmp_path)
    assert op_types(result.proto) == ["Transpose", "MatMul", "Transpose"]
    assert not result.trace.entries
    assert_same_outputs(model, result.proto)


def test_without_the_kernel_check_the_float64_conv_is_written_and_verification_fails(tmp_path):
    from rewriter.verification import check_equivalence

    model = _dense_on_channels_last("double")
    options = rewriter.RewriteOptions(keep_runnable=False)
    rewritten = run_rules(model, "pass optimize_transposes\n", tmp_path, options).proto
    assert op_types(rewritten) == ["Conv"]
    result = check_equivalence(model, rewritten, VerifyOptions(save_counterexample=False))
    assert not result.ok
    assert "onnxruntime cannot load it, although it runs the original" in result.message
    assert "Conv" in result.message


def test_a_chain_that_meets_no_inverse_is_left_alone(tmp_path):
    text = f"""<ir_version: 8, opset_import: ["" : 17]>
    g (float[2, 3, 4, 5] x, float[2, 4, 5, 3] z) => (float[2, 4, 5, 3] y) {{
        a = Transpose <perm = {NCHW_TO_NHWC}> (x)
        r = Relu (a)
        y = Add (r, z)
    }}"""
    model = model_from_text(text)
    rewritten = _rewrite(model, tmp_path)
    assert op_types(rewritten) == op_types(model)  # nothing to gain: no change


def test_shared_transposes_and_graph_outputs_keep_their_values(tmp_path):
    # `a` is read twice and `r` is an output: sinking must not duplicate work or lose `r`.
    text = f"""<ir_version: 8, opset_import: ["" : 17]>
    g (float[2, 3, 4, 5] x) => (float[2, 3, 4, 5] y, float[2, 4, 5, 3] r) {{
        a = Transpose <perm = {NCHW_TO_NHWC}> (x)
        r = Relu (a)
        y = Transpose <perm = {NHWC_TO_NCHW}> (r)
    }}"""
    model = model_from_text(text)
    rewritten = _rewrite(model, tmp_path)
    assert [o.name for o in rewritten.graph.output] == ["y", "r"]
    assert _count(rewritten) <= _count(model)
    assert_same_outputs(model, rewritten)


def test_the_default_library_runs_the_pass(tmp_path):
    text = f"""<ir_version: 8, opset_import: ["" : 17]>
    g (float[2, 3, 4, 5] x) => (float[2, 3, 4, 5] y) {{
        a = Transpose <perm = {NCHW_TO_NHWC}> (x)
        r = Sigmoid (a)
        y = Transpose <perm = {NHWC_TO_NCHW}> (r)
    }}"""
    model = model_from_text(text)
    rewritten = rewriter.rewrite(model, ["patterns/"]).proto
    assert op_types(rewritten) == ["Sigmoid"]
    assert_same_outputs(model, rewritten)


@pytest.mark.parametrize(
    ("perm", "shape", "target", "second"),
    [
        # NCHW [2, 4, 5, 6] to NHWC [2, 5, 6, 4]; split the channels into 2 x 2; then back
        # to channels-first.
        ("[0, 2, 3, 1]", "[2, 4, 5, 6]", "[2, 5, 6, 2, 2]", "[0, 3, 4, 1, 2]"),
        # Merge H and W (adjacent in both layouts), then the inverse.
        ("[0, 2, 3, 1]", "[2, 4, 5, 6]", "[2, 30, 4]", "[0, 2, 1]"),
        # Split the middle dim.
        ("[0, 2, 1]", "[3, 4, 6]", "[3, 2, 3, 4]", "[0, 3, 1, 2]"),
    ],
)
def test_transposes_pass_reshapes_that_split_or_merge(tmp_path, perm, shape, target, second):
    dims = [int(d) for d in shape.strip("[]").split(",")]
    transposed = [dims[int(p)] for p in perm.strip("[]").split(",")]
    text = f"""<ir_version: 8, opset_import: ["" : 17]>
    g (float{shape} x) => (float[A, B, C, D, E] y)
      <int64[{target.count(",") + 1}] s = {{{target.strip("[]")}}}>
    {{
        a = Transpose <perm = {perm}> (x)
        r = Reshape (a, s)
        y = Transpose <perm = {second}> (r)
    }}"""
    outputs = target.count(",") + 1
    text = text.replace("float[A, B, C, D, E] y", f"float[{', '.join('ABCDE'[:outputs])}] y")
    model = model_from_text(text)
    assert transposed  # the shape after the first Transpose, for the reader
    rewritten = _rewrite(model, tmp_path)
    assert _count(rewritten) < _count(model)
    assert_same_outputs(model, rewritten)


def test_a_reshape_that_regroups_dims_stops_the_transpose(tmp_path):
    # [2, 3, 4] -> transposed [4, 3, 2] -> reshape to [6, 4]: crosses dim boundaries.
    text = """<ir_version: 8, opset_import: ["" : 17]>
    g (float[2, 3, 4] x) => (float[A, B] y) <int64[2] s = {6, 4}> {
        a = Transpose <perm = [2, 1, 0]> (x)
        r = Reshape (a, s)
        y = Transpose <perm = [1, 0]> (r)
    }"""
    model = model_from_text(text)
    rewritten = _rewrite(model, tmp_path)
    assert op_types(rewritten) == op_types(model)


@pytest.mark.parametrize(
    ("middle", "constants"),
    [
        ("m = Unsqueeze (a, axes)", "int64[1] axes = {2}"),
        ("m = Slice (a, starts, ends, axes)", "int64[2] starts = {1, 0}, int64[2] ends = {3, 2}, "
         "int64[2] axes = {1, -1}"),
        ("m = Pad (a, pads)", "int64[8] pads = {0, 1, 0, 2, 0, 0, 3, 1}"),
    ],
)  # fmt: skip
def test_transposes_pass_unsqueeze_slice_and_pad(tmp_path, middle, constants):
    second = "[0, 4, 1, 2, 3]" if "Unsqueeze" in middle else NHWC_TO_NCHW
    text = f"""<ir_version: 8, opset_import: ["" : 17]>
    g (float[2, 3, 4, 5] x) => (float[{"A, B, C, D, E" if "Unsqueeze" in middle else "A, B, C, D"}] y)
      <{constants}>
    {{
        a = Transpose <perm = {NCHW_TO_NHWC}> (x)
        {middle}
        y = Transpose <perm = {second}> (m)
    }}"""
    model = model_from_text(text)
    rewritten = _rewrite(model, tmp_path)
    assert _count(rewritten) == 0
    assert_same_outputs(model, rewritten)


def test_a_transpose_read_twice_cancels_its_inverse_on_one_branch(tmp_path):
    # `a` feeds an output and a chain ending in the inverse Transpose: `a` stays for the
    # output, the chain reads `x` directly and the inverse goes (the hoisting case).
    text = f"""<ir_version: 8, opset_import: ["" : 17]>
    g (float[2, 3, 4, 5] x) => (float[2, 4, 5, 3] a, float[2, 3, 4, 5] y) {{
        a = Transpose <perm = {NCHW_TO_NHWC}> (x)
        r = Relu (a)
        n = Neg (r)
        y = Transpose <perm = {NHWC_TO_NCHW}> (n)
    }}"""
    model = model_from_text(text)
    rewritten = _rewrite(model, tmp_path)
    assert _count(rewritten) == 1
    assert [o.name for o in rewritten.graph.output] == ["a", "y"]
    assert_same_outputs(model, rewritten)


def _nhwc_blocks(blocks: int) -> onnx.ModelProto:
    """A tf2onnx-style NHWC network: each Conv wrapped in Transposes, bias and Relu in NHWC,
    every second block fanning out into a scaled copy and a Concat over channels."""
    rng = np.random.default_rng(0)
    nodes, initializers = [], []
    channels, current = 4, "x"

    def weight(name: str, shape: tuple[int, ...]) -> str:
        array = (rng.standard_normal(shape) * 0.1).astype(np.float32)
        initializers.append(onnx.numpy_helper.from_array(array, name))
        return name

    for i in range(blocks):
        conv = (f"t{i}", weight(f"w{i}", (channels, channels, 3, 3)))
        nodes += [
            onnx.helper.make_node("Transpose", [current], [f"t{i}"], perm=[0, 3, 1, 2]),
            onnx.helper.make_node("Conv", list(conv), [f"c{i}"], pads=[1, 1, 1, 1]),
            onnx.helper.make_node("Transpose", [f"c{i}"], [f"u{i}"], perm=[0, 2, 3, 1]),
            onnx.helper.make_node("Add", [f"u{i}", weight(f"b{i}", (channels,))], [f"a{i}"]),
            onnx.helper.make_node("Relu", [f"a{i}"], [f"r{i}"]),
        ]
        current = f"r{i}"
        if i % 2:
            scale = weight(f"s{i}", (1, 1, 1, channels))
            squeeze = weight(f"q{i}", (channels, 2 * channels, 1, 1))
            nodes += [
                onnx.helper.make_node("Mul", [current, scale], [f"m{i}"]),
                onnx.helper.make_node("Concat", [current, f"m{i}"], [f"k{i}"], axis=3),
                onnx.helper.make_node("Transpose", [f"k{i}"], [f"tk{i}"], perm=[0, 3, 1, 2]),
                onnx.helper.make_node("Conv", [f"tk{i}", squeeze], [f"pk{i}"]),
                onnx.helper.make_node("Transpose", [f"pk{i}"], [f"uk{i}"], perm=[0, 2, 3, 1]),
            ]
            current = f"uk{i}"
    nodes.append(onnx.helper.make_node("Identity", [current], ["y"]))
    shape = [1, 8, 8, channels]
    graph = onnx.helper.make_graph(
        nodes,
        "nhwc",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, shape)],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, shape)],
        initializers,
    )
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def test_no_more_transposes_than_onnxruntimes_own_optimizer_leaves(tmp_path):
    import onnxruntime as ort

    model = _nhwc_blocks(4)
    path = tmp_path / "nhwc.onnx"
    onnx.save(model, path)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.optimized_model_filepath = str(tmp_path / "ort.onnx")
    ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    peer = _count(onnx.load(tmp_path / "ort.onnx"))
    rewritten = rewriter.rewrite(model, ["patterns/"]).proto
    assert _count(model) == 12
    assert _count(rewritten) <= peer
    assert_same_outputs(model, rewritten)


@pytest.mark.parametrize(
    ("gemm", "first", "second", "a_shape", "b_shape"),
    [
        ("Gemm <alpha = 0.5> (ta, b, c)", "ta = Transpose (a)", "", "[4, 3]", "[4, 5]"),
        ("Gemm <transA = 1> (ta, b, c)", "ta = Transpose <perm = [1, 0]> (a)", "", "[3, 4]", "[4, 5]"),
        ("Gemm <transB = 1> (a, tb, c)", "tb = Transpose (b)", "", "[3, 4]", "[4, 5]"),
        ("Gemm (ta, tb)", "ta = Transpose (a)", "tb = Transpose (b)", "[4, 3]", "[5, 4]"),
    ],
)  # fmt: skip
def test_transposes_of_gemm_operands_become_its_flags(
    tmp_path, gemm, first, second, a_shape, b_shape
):
    text = f"""<ir_version: 8, opset_import: ["" : 17]>
    g (float{a_shape} a, float{b_shape} b, float[5] c) => (float[A, B] y) {{
        {first}
        {second}
        y = {gemm}
    }}"""
    model = model_from_text(text)
    rewritten = rewriter.rewrite(model, ["patterns/"]).proto
    assert _count(rewritten) == 0
    assert_same_outputs(model, rewritten)
