"""Reference kernels: ExtractImagePatches against loops and TensorFlow, and the runtime choice."""

from __future__ import annotations

import json
import math
import os

import numpy as np
import onnx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from rewriter.verification import (
    InputOptions,
    VerifyError,
    VerifyOptions,
    check_equivalence,
    extract_image_patches,
    run_model,
)
from tests.rewriter.verification import _models as models

MODELS = os.path.join(os.path.dirname(__file__), "..", "..", "models")


def brute_force_patches(images, ksizes, strides, rates, padding):
    """TensorFlow's definition, one output element at a time."""
    n, h, w, c = images.shape
    kh, kw = ksizes
    sh, sw = strides
    rh, rw = rates
    eff_h, eff_w = (kh - 1) * rh + 1, (kw - 1) * rw + 1
    if padding == "VALID":
        out_h = max(math.ceil((h - eff_h + 1) / sh), 0)
        out_w = max(math.ceil((w - eff_w + 1) / sw), 0)
        top = left = 0
    else:
        out_h, out_w = math.ceil(h / sh), math.ceil(w / sw)
        top = max((out_h - 1) * sh + eff_h - h, 0) // 2
        left = max((out_w - 1) * sw + eff_w - w, 0) // 2
    out = np.zeros((n, out_h, out_w, kh * kw * c), dtype=images.dtype)
    for b in range(n):
        for oh in range(out_h):
            for ow in range(out_w):
                for i in range(kh):
                    for j in range(kw):
                        row = oh * sh + i * rh - top
                        col = ow * sw + j * rw - left
                        for ch in range(c):
                            inside = 0 <= row < h and 0 <= col < w
                            value = images[b, row, col, ch] if inside else 0
                            out[b, oh, ow, (i * kw + j) * c + ch] = value
    return out


configs = st.fixed_dictionaries(
    {
        "ksizes": st.tuples(st.integers(1, 3), st.integers(1, 3)),
        "strides": st.tuples(st.integers(1, 3), st.integers(1, 3)),
        "rates": st.tuples(st.integers(1, 2), st.integers(1, 2)),
        "padding": st.sampled_from(["VALID", "SAME"]),
        "shape": st.tuples(
            st.integers(1, 2), st.integers(1, 7), st.integers(1, 7), st.integers(1, 3)
        ),
        "dtype": st.sampled_from([np.float32, np.int32, np.bool_, np.float64]),
    }
)


@settings(max_examples=150)
@given(configs, st.data())
def test_extract_image_patches_matches_the_loop_definition(config, data):
    images = data.draw(hnp.arrays(config["dtype"], config["shape"]))
    got = extract_image_patches(
        images,
        [1, *config["ksizes"], 1],
        [1, *config["strides"], 1],
        [1, *config["rates"], 1],
        config["padding"],
    )
    want = brute_force_patches(
        images, config["ksizes"], config["strides"], config["rates"], config["padding"]
    )
    assert got.dtype == images.dtype
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)  # NaN == NaN in the same places


def test_patches_copy_nan_inf_and_negative_zero_bit_for_bit():
    images = np.array([np.nan, np.inf, -np.inf, -0.0], dtype=np.float32).reshape(1, 2, 2, 1)
    out = extract_image_patches(images, [1, 2, 2, 1], [1, 1, 1, 1], [1, 1, 1, 1], "VALID")
    assert out.shape == (1, 1, 1, 4)
    assert out.tobytes() == images.tobytes()


@pytest.mark.parametrize(
    ("size", "k", "stride", "rate", "padding", "out"),
    [
        (8, 2, 2, 1, "VALID", 4),
        (7, 3, 2, 1, "VALID", 3),
        (7, 3, 2, 1, "SAME", 4),
        (9, 3, 1, 2, "VALID", 5),  # effective kernel 5
        (9, 3, 2, 2, "SAME", 5),
        (2, 3, 1, 1, "VALID", 0),  # window larger than the input
    ],
)
def test_output_sizes(size, k, stride, rate, padding, out):
    images = np.zeros((1, size, size, 1), np.float32)
    rates = [1, rate, rate, 1]
    result = extract_image_patches(images, [1, k, k, 1], [1, stride, stride, 1], rates, padding)
    assert result.shape[1:3] == (out, out)


@pytest.mark.parametrize(
    ("ksizes", "padding", "message"),
    [
        ([2, 2, 1, 1], "VALID", "`ksizes` must be 4 positive ints"),
        ([1, 2, 2], "VALID", "`ksizes` must be 4 positive ints"),
        ([1, 2, 2, 1], "FULL", "`padding` must be VALID or SAME"),
    ],
)
def test_bad_attributes_raise(ksizes, padding, message):
    with pytest.raises(VerifyError, match=message):
        extract_image_patches(np.zeros((1, 3, 3, 1)), ksizes, [1, 1, 1, 1], [1, 1, 1, 1], padding)


def test_custom_op_model_runs_on_the_reference_evaluator():
    model = models.extract_image_patches((2, 2), (1, 1), (1, 1), "SAME")
    images = np.arange(2 * 5 * 6 * 2, dtype=np.float32).reshape(2, 5, 6, 2)
    out = run_model(model, {"x": images})["y"]
    want = extract_image_patches(images, [1, 2, 2, 1], [1, 1, 1, 1], [1, 1, 1, 1], "SAME")
    np.testing.assert_array_equal(out, want)


def test_custom_op_without_its_opset_import_still_runs():
    model = models.extract_image_patches((2, 2), (2, 2), (1, 1), "VALID", opset_import=False)
    images = np.ones((1, 5, 6, 2), dtype=np.float32)
    assert run_model(model, {"x": images})["y"].shape == (1, 2, 3, 8)


def test_verify_reports_which_runtime_ran_each_model():
    model = models.extract_image_patches((2, 2), (1, 1), (1, 1), "SAME")
    result = check_equivalence(model, model, VerifyOptions(inputs=InputOptions(examples=5)))
    assert result.ok
    assert result.original_runtime == "onnx.reference"
    assert result.rewritten_runtime == "onnx.reference"
    assert "original on onnx.reference" in result.summary()


def _patchify(channel_order: str) -> onnx.ModelProto:
    """ExtractImagePatches 2x2 / stride 2 / VALID on [N, 4, 6, C=2] written in standard ONNX.

    `channel_order="tf"` gives TensorFlow's (i, j, c) order; "cij" a plausible wrong one.
    """
    perm = "0, 1, 3, 2, 4, 5" if channel_order == "tf" else "0, 1, 3, 5, 2, 4"
    return models.parse(
        "(float[N, 4, 6, 2] x) => (float[N, P, Q, R] y)",
        f"""
        s1 = Constant<value = int64[6] {{0, 2, 2, 3, 2, 2}}>()
        r1 = Reshape(x, s1)
        t = Transpose<perm = [{perm}]>(r1)
        s2 = Constant<value = int64[4] {{0, 2, 3, 8}}>()
        y = Reshape(t, s2)
        """,
    )


def test_a_correct_decomposition_of_the_custom_op_verifies():
    original = models.extract_image_patches((2, 2), (2, 2), (1, 1), "VALID", shape=("N", 4, 6, 2))
    result = check_equivalence(
        original, _patchify("tf"), VerifyOptions(inputs=InputOptions(special_values=True))
    )
    assert result.ok, result.render_table()
    assert result.original_runtime == "onnx.reference"
    assert result.rewritten_runtime == "onnxruntime"


def test_a_wrong_channel_order_in_a_decomposition_is_caught():
    original = models.extract_image_patches((2, 2), (2, 2), (1, 1), "VALID", shape=("N", 4, 6, 2))
    result = check_equivalence(original, _patchify("cij"), VerifyOptions(save_counterexample=False))
    assert not result.ok
    assert result.mismatched_outputs == ("y",)


def test_unknown_custom_op_is_named_in_the_error():
    node = onnx.helper.make_node("Frobnicate", ["x"], ["y"], domain="com.example")
    graph = onnx.helper.make_graph(
        [node],
        "g",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2])],
    )
    model = onnx.helper.make_model(
        graph,
        opset_imports=[
            onnx.helper.make_opsetid("", 17),
            onnx.helper.make_opsetid("com.example", 1),
        ],
    )
    with pytest.raises(VerifyError, match=r"op `Frobnicate` \(domain `com\.example`\)"):
        check_equivalence(model, model)


def test_an_ill_typed_model_is_not_handed_to_the_lenient_evaluator():
    model = models.parse("(float[N] x) => (float[N] y)", "y = Relu(x)")
    broken = onnx.ModelProto()
    broken.CopyFrom(model)
    broken.graph.node[0].op_type = "Not"  # Not takes bool: onnxruntime rejects the graph
    # as the original: the models cannot be compared
    with pytest.raises(VerifyError, match="onnxruntime cannot load the model"):
        check_equivalence(broken, model)
    # as the rewritten model of an original onnxruntime runs: a failure
    result = check_equivalence(model, broken, VerifyOptions(save_counterexample=False))
    assert not result.ok
    assert "onnxruntime cannot load it, although it runs the original" in result.message


def _tf_samples():
    manifest_path = os.path.join(MODELS, "manifest.json")
    if not os.path.exists(manifest_path):
        return []
    with open(manifest_path) as f:
        manifest = json.load(f)
    return [
        entry
        for entry in manifest["models"]
        if entry.get("family") == "extract_image_patches"
        and os.path.exists(os.path.join(MODELS, entry["file"]))
        and os.path.exists(os.path.join(MODELS, entry["npz"]))
    ]


TF_MODELS = _tf_samples()


@pytest.mark.skipif(not TF_MODELS, reason="no tf2onnx ExtractImagePatches models in tests/models")
@pytest.mark.parametrize("entry", TF_MODELS, ids=[e["file"] for e in TF_MODELS])
def test_reference_kernel_matches_tensorflow(entry):
    path = os.path.join(MODELS, entry["file"])
    with np.load(os.path.join(MODELS, entry["npz"])) as data:
        for sample in entry["samples"]:
            feeds = {name: data[key] for name, key in sample["inputs"].items()}
            outputs = run_model(path, feeds)
            for name, key in sample["outputs"].items():
                expected = data[key]
                np.testing.assert_allclose(outputs[name], expected, rtol=0, atol=1e-6)


def test_a_rewrite_that_leaves_onnxruntime_behind_fails():
    """The original runs on onnxruntime, the rewritten model needs the reference: a failure.

    The reference evaluator judges only models whose original needs it too (issue 28).
    """
    original = _patchify("tf")
    custom = models.extract_image_patches((2, 2), (2, 2), (1, 1), "VALID", shape=("N", 4, 6, 2))
    result = check_equivalence(
        original, custom, VerifyOptions(inputs=InputOptions(examples=5), save_counterexample=False)
    )
    assert not result.ok
    assert result.original_runtime == "onnxruntime"
    assert result.rewritten_runtime == "nothing (onnxruntime cannot load it)"
    assert "onnxruntime cannot load it, although it runs the original" in result.message
    assert "ExtractImagePatches" in result.message


def _conv_transpose_model(
    cin: int, cout: int, group: int, pads: list[int], elem_type: int, seed: int
):
    rng = np.random.default_rng(seed)
    dtype = onnx.helper.tensor_dtype_to_np_dtype(elem_type)
    weight = rng.standard_normal((cin, cout // group, 2, 3)).astype(dtype)
    bias = rng.standard_normal(cout).astype(dtype)
    node = onnx.helper.make_node(
        "ConvTranspose", ["x", "w", "b"], ["z"], group=group, pads=pads, strides=[2, 1]
    )
    graph = onnx.helper.make_graph(
        [node],
        "g",
        [onnx.helper.make_tensor_value_info("x", elem_type, [2, cin, 2, 3])],
        [onnx.helper.make_tensor_value_info("z", elem_type, None)],
        [onnx.numpy_helper.from_array(weight, "w"), onnx.numpy_helper.from_array(bias, "b")],
    )
    return onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 14)])


@pytest.mark.parametrize(
    ("cin", "cout", "group", "pads"),
    [
        (2, 2, 1, [0, 0, 0, 0]),
        (2, 2, 2, [0, 1, 1, 0]),
        (4, 6, 2, [0, 0, 0, 0]),
        (3, 3, 3, [1, 0, 0, 1]),
    ],
)
def test_grouped_conv_transpose_reference_matches_onnxruntime(cin, cout, group, pads) -> None:
    # onnx 1.23's reference ConvTranspose mixes up groups; onnxruntime has no double kernel, so
    # double models run on the reference: its float32 result must be onnxruntime's.
    from rewriter.verification._reference import ReferenceSession

    model = _conv_transpose_model(cin, cout, group, pads, onnx.TensorProto.FLOAT, seed=group)
    x = np.random.default_rng(7).standard_normal((2, cin, 2, 3)).astype(np.float32)
    expected = run_model(model, {"x": x})["z"]
    (actual,) = ReferenceSession(model).run({"x": x})
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("opset", "attributes"),
    [
        (7, {"momentum": 0.9}),
        (9, {"momentum": 0.0}),
        (9, {}),
        (14, {"momentum": 0.9}),
        (15, {"epsilon": 1e-3}),
    ],
)
def test_batchnorm_reference_is_inference_mode_like_onnxruntime(opset, attributes) -> None:
    # onnx 1.23's reference BatchNormalization-9 mixes in batch statistics whenever a
    # momentum is given; a one-output node is an inference node.
    from rewriter.verification._reference import ReferenceSession

    rng = np.random.default_rng(opset)
    x = rng.standard_normal((2, 3, 4, 4)).astype(np.float32)
    stats = [
        onnx.numpy_helper.from_array((rng.random(3) + 0.5).astype(np.float32), name)
        for name in ("scale", "shift", "mean", "var")
    ]
    node = onnx.helper.make_node(
        "BatchNormalization", ["x", "scale", "shift", "mean", "var"], ["z"], **attributes
    )
    graph = onnx.helper.make_graph(
        [node],
        "g",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 3, 4, 4])],
        [onnx.helper.make_tensor_value_info("z", onnx.TensorProto.FLOAT, None)],
        stats,
    )
    model = onnx.helper.make_model(
        graph, opset_imports=[onnx.helper.make_opsetid("", opset)], ir_version=7
    )
    expected = run_model(model, {"x": x})["z"]
    (actual,) = ReferenceSession(model).run({"x": x})
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5)
