"""patterns/decompose/extract_image_patches.rw: TensorFlow's ExtractImagePatches as ONNX ops.

Checked against TensorFlow's own saved outputs on the twelve tf2onnx exports (static and,
with the input's H and W made symbolic, dynamic spatial sizes) and against the reference
kernel `rewriter.verification.extract_image_patches` on single-node models. Every comparison is
bit for bit: the decompositions only move data, so NaN, infinities and -0.0 must survive.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnx.helper
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rewriter
from rewriter.cli import main
from tests.patterns.decompose_helpers import (
    EIP_RULES,
    LIBRARY,
    MODELS,
    assert_bitwise_equal,
    checked,
    eip_model,
    expected_patches,
    fired,
    loaded_rules,
    manifest_entry,
    op_types,
    run_ort,
    special_floats,
)

# The form each tf2onnx export gets (see the rule file's table).
EXPECTED_RULE = {
    "eip_k1x1_s1x1_r1x1_valid.onnx": "eip_identity",
    "eip_k1x1_s2x2_r1x1_same.onnx": "eip_subsample",
    "eip_k2x2_s1x1_r1x1_same.onnx": "eip_gather_padded",
    "eip_k2x2_s2x2_r1x1_valid.onnx": "eip_blocks",
    "eip_k2x2_s3x3_r1x1_valid.onnx": "eip_gather",
    "eip_k2x3_s1x2_r1x1_valid.onnx": "eip_gather",
    "eip_k2x3_s2x1_r1x1_same.onnx": "eip_gather_padded",
    "eip_k3x2_s1x1_r2x1_same.onnx": "eip_gather_padded",
    "eip_k3x3_s1x1_r1x1_same.onnx": "eip_gather_padded",
    "eip_k3x3_s1x1_r2x2_valid.onnx": "eip_gather",
    "eip_k3x3_s2x2_r1x1_same.onnx": "eip_gather_padded",
    "eip_k3x3_s2x2_r2x2_same.onnx": "eip_gather_padded",
}
EIP_FILES = sorted(p.name for p in MODELS.glob("eip_*.onnx"))


def test_every_export_has_an_expected_form():
    assert sorted(EXPECTED_RULE) == EIP_FILES


def _eip_rules(result: rewriter.RewriteResult) -> list[str]:
    """The decomposition rules applied (the whole library may simplify the result further)."""
    return [name for name in fired(result) if name.startswith("eip_")]


def _check_against_tensorflow(filename: str, proto: onnx.ModelProto) -> int:
    """Run every saved sample; returns how many were compared."""
    samples = np.load(MODELS / filename.replace(".onnx", ".npz"))
    entry = manifest_entry(filename)
    for sample in entry["samples"]:
        images = samples[sample["inputs"]["images"]]
        expected = samples[sample["outputs"]["output_0"]]
        assert_bitwise_equal(run_ort(proto, images), expected)
    return len(entry["samples"])


@pytest.mark.parametrize("filename", EIP_FILES)
def test_tf2onnx_export_matches_tensorflow_bit_for_bit(filename):
    result = rewriter.rewrite(MODELS / filename, loaded_rules(LIBRARY))
    proto = checked(result)
    assert "ExtractImagePatches" not in op_types(proto)
    assert _eip_rules(result) == [EXPECTED_RULE[filename]]
    assert _check_against_tensorflow(filename, proto) == 3


def _with_symbolic_hw(filename: str) -> onnx.ModelProto:
    model = onnx.load(MODELS / filename)
    dims = model.graph.input[0].type.tensor_type.shape.dim
    dims[1].dim_param = "height"
    dims[2].dim_param = "width"
    out_dims = model.graph.output[0].type.tensor_type.shape.dim
    out_dims[1].dim_param = "out_height"
    out_dims[2].dim_param = "out_width"
    return model


@pytest.mark.parametrize("filename", EIP_FILES)
def test_export_with_symbolic_height_and_width_matches_tensorflow(filename):
    result = rewriter.rewrite(_with_symbolic_hw(filename), loaded_rules(LIBRARY))
    proto = checked(result)
    assert "ExtractImagePatches" not in op_types(proto)
    rule = EXPECTED_RULE[filename]
    if rule not in ("eip_identity", "eip_subsample"):
        padding = manifest_entry(filename)["config"]["padding"].lower()
        rule = f"eip_gather_dynamic_{padding}"
    assert _eip_rules(result) == [rule]
    _check_against_tensorflow(filename, proto)


def test_cli_decomposes_an_export(tmp_path, capsys):
    out = tmp_path / "out.onnx"
    source = MODELS / "eip_k3x3_s2x2_r2x2_same.onnx"
    assert main(["--rules", str(LIBRARY), str(source), "-o", str(out), "--explain"]) == 0
    assert "eip_gather_padded" in capsys.readouterr().out
    _check_against_tensorflow(source.name, onnx.load(out))


# -- each rule: where it fires, and a near miss where it must not -------------------------------


def _decompose(model: onnx.ModelProto) -> rewriter.RewriteResult:
    """The decomposition rules alone (no built-in pass folds what they build)."""
    alone = rewriter.RewriteOptions(passes=())
    return rewriter.rewrite(model, loaded_rules(EIP_RULES), alone)


def _assert_exact(model: onnx.ModelProto, proto: onnx.ModelProto, shapes, dtype=np.float32):
    for seed, shape in enumerate(shapes):
        if np.issubdtype(dtype, np.floating):
            images = special_floats(shape, dtype, seed)
        else:
            images = np.random.default_rng(seed).integers(-100, 100, shape).astype(dtype)
        assert_bitwise_equal(run_ort(proto, images), expected_patches(model, images))


# (name, model, expected ops, input shapes to compare on)
POSITIVE = [
    (
        "eip_identity",
        eip_model([1, 1], [1, 1], [3, 3], "SAME", 5, 4, 2),
        ["Identity"],
        [(2, 5, 4, 2)],
    ),
    (
        "eip_subsample",
        eip_model([1, 1], [2, 3], None, "VALID", "H", "W", "C"),
        ["Slice"],
        [(2, 5, 7, 3), (1, 6, 6, 1), (0, 4, 4, 2)],
    ),
    (
        "eip_blocks",
        eip_model([2, 3], [2, 3], [1, 1], "SAME", 6, 9, 2),
        ["Reshape", "Transpose", "Reshape"],
        [(2, 6, 9, 2), (0, 6, 9, 2)],
    ),
    (
        "eip_blocks_cropped",
        eip_model([2, 2], [2, 2], [1, 1], "VALID", 7, 9, 3),
        ["Slice", "Reshape", "Transpose", "Reshape"],
        [(2, 7, 9, 3)],
    ),
    (
        "eip_gather",
        eip_model([3, 2], [2, 1], [1, 2], "VALID", 9, 8, 2),
        ["Reshape", "Add", "Gather", "Reshape"],
        [(2, 9, 8, 2), (0, 9, 8, 2)],
    ),
    (
        "eip_gather_padded",
        eip_model([3, 3], [2, 2], [2, 1], "SAME", 10, 7, 2),
        ["Pad", "Reshape", "Add", "Gather", "Reshape"],
        [(2, 10, 7, 2)],
    ),
    (
        "eip_gather_dynamic_valid",
        eip_model([2, 3], [1, 2], [2, 1], "VALID", "H", "W", 2),
        None,
        [(2, 5, 7, 2), (1, 9, 4, 2), (2, 2, 2, 2), (0, 6, 6, 2)],
    ),
    (
        "eip_gather_dynamic_same",
        eip_model([3, 2], [2, 3], [2, 2], "SAME", "H", "W", 2),
        None,
        [(2, 5, 7, 2), (1, 8, 9, 2), (1, 1, 1, 2), (0, 6, 6, 2)],
    ),
]


@pytest.mark.parametrize(("rule", "model", "ops", "shapes"), POSITIVE, ids=[p[0] for p in POSITIVE])
def test_rule_fires_and_is_exact(rule, model, ops, shapes):
    result = _decompose(model)
    proto = checked(result)
    assert fired(result) == [rule]
    assert "ExtractImagePatches" not in op_types(proto)
    if ops is not None:
        assert op_types(proto) == ops
    _assert_exact(model, proto, shapes)


def _malformed_ksizes() -> onnx.ModelProto:
    """TF requires 1 in the batch and channel slots of ksizes; this node has [2, 2, 2, 1]."""
    model = eip_model([2, 2], [1, 1], None, "VALID", 6, 6, 2)
    (attr,) = [a for a in model.graph.node[0].attribute if a.name == "ksizes"]
    attr.CopyFrom(onnx.helper.make_attribute("ksizes", [2, 2, 2, 1]))
    return model


# (rule that must not fire, model, rule that fires instead or None)
NEAR_MISSES = [
    ("eip_identity", eip_model([1, 1], [1, 2], None, "SAME", 5, 4, 2), "eip_subsample"),
    ("eip_subsample", eip_model([1, 2], [2, 2], None, "VALID", 6, 6, 2), "eip_gather"),
    # kernel == stride but dilated: the taps are not a block
    ("eip_blocks", eip_model([2, 2], [2, 2], [2, 1], "VALID", 8, 8, 2), "eip_gather"),
    # SAME on sizes the blocks do not tile needs padding, not cropping
    ("eip_blocks_cropped", eip_model([2, 2], [2, 2], None, "SAME", 7, 7, 2), "eip_gather_padded"),
    ("eip_gather", eip_model([2, 2], [1, 1], None, "SAME", 6, 6, 2), "eip_gather_padded"),
    (
        "eip_gather_padded",
        eip_model([2, 2], [1, 1], None, "SAME", "H", 6, 2),
        "eip_gather_dynamic_same",
    ),
    # a symbolic channel count: the output's last dim kh*kw*C cannot be written
    ("eip_gather_dynamic_valid", eip_model([2, 2], [1, 1], None, "VALID", "H", "W", "C"), None),
    ("eip_gather_dynamic_same", eip_model([2, 2], [1, 1], None, "SAME", "H", "W", "C"), None),
    ("eip_gather", _malformed_ksizes(), None),
    ("eip_subsample", eip_model([1, 1], [2, 2], None, "EXPLICIT", 6, 6, 2), None),
]


def _sample_shape(model: onnx.ModelProto) -> tuple[int, ...]:
    """The input shape with batch 2 and 7, 8, ... for the other symbolic dims (one each)."""
    dims = model.graph.input[0].type.tensor_type.shape.dim
    sizes: dict[str, int] = {}
    for d in dims:
        if d.dim_param:
            sizes.setdefault(d.dim_param, 7 + len(sizes))
    shape = [d.dim_value if not d.dim_param else sizes[d.dim_param] for d in dims]
    shape[0] = 2
    return tuple(shape)


@pytest.mark.parametrize(
    ("rule", "model", "instead"),
    NEAR_MISSES,
    ids=[f"{n[0]}-{i}" for i, n in enumerate(NEAR_MISSES)],
)
def test_rule_does_not_fire_on_a_near_miss(rule, model, instead):
    result = _decompose(model)
    applied = fired(result)
    assert rule not in applied
    assert applied == ([instead] if instead else [])
    proto = checked(result)
    if instead is None:
        assert op_types(proto) == ["ExtractImagePatches"]
    else:
        _assert_exact(model, proto, [_sample_shape(model)])


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8, np.float16, np.float64])
@pytest.mark.parametrize("dynamic", [False, True])
def test_integer_and_other_float_inputs_are_exact(dtype, dynamic):
    elem = onnx.helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    size = "H" if dynamic else 7
    model = eip_model([3, 2], [2, 1], [1, 2], "SAME", size, 6, 3, elem_type=elem)
    result = _decompose(model)
    proto = checked(result)
    assert fired(result) == ["eip_gather_dynamic_same" if dynamic else "eip_gather_padded"]
    _assert_exact(model, proto, [(2, 7, 6, 3)], dtype)


def test_space_to_depth_channel_order_is_tensorflows():
    # The brief's SpaceToDepth form: NHWC -> NCHW, SpaceToDepth (DCR), back to NHWC equals
    # ExtractImagePatches with kernel == stride. eip_blocks does the same in NHWC directly.
    text = """<ir_version: 8, opset_import: ["" : 15]>
    g (float[N, 6, 4, 3] x) => (float[N, 3, 2, 12] y) {
        t = Transpose <perm = [0, 3, 1, 2]> (x)
        d = SpaceToDepth <blocksize = 2> (t)
        y = Transpose <perm = [0, 2, 3, 1]> (d)
    }"""
    model = onnx.parser.parse_model(text)
    images = special_floats((2, 6, 4, 3), np.float32, 0)
    expected = expected_patches(eip_model([2, 2], [2, 2], None, "VALID", 6, 4, 3), images)
    assert_bitwise_equal(run_ort(model, images), expected)


def test_decomposition_is_deterministic():
    model = eip_model([3, 2], [2, 3], [2, 2], "SAME", "H", "W", 2)
    first = _decompose(model).proto.SerializeToString()
    assert _decompose(model).proto.SerializeToString() == first


# -- random configurations ---------------------------------------------------------------------

DTYPES = [np.float32, np.float16, np.float64, np.int32, np.int64, np.uint8]


@st.composite
def configs(draw):
    kernel = [draw(st.integers(1, 4)), draw(st.integers(1, 4))]
    strides = [draw(st.integers(1, 4)), draw(st.integers(1, 4))]
    rates = draw(st.one_of(st.none(), st.tuples(st.integers(1, 3), st.integers(1, 3))))
    padding = draw(st.sampled_from(["VALID", "SAME"]))
    height = draw(st.integers(1, 11))
    width = draw(st.integers(1, 11))
    channels = draw(st.integers(1, 3))
    batch = draw(st.integers(0, 2))
    dtype = draw(st.sampled_from(DTYPES))
    symbolic = draw(st.sampled_from(["none", "height", "width", "both"]))
    return kernel, strides, rates, padding, height, width, channels, batch, dtype, symbolic


def _check_config(config) -> None:
    kernel, strides, rates, padding, height, width, channels, batch, dtype, symbolic = config
    h_dim = "H" if symbolic in ("height", "both") else height
    w_dim = "W" if symbolic in ("width", "both") else width
    elem = onnx.helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    model = eip_model(kernel, strides, rates and list(rates), padding, h_dim, w_dim, channels, elem)
    result = _decompose(model)
    proto = checked(result)
    assert "ExtractImagePatches" not in op_types(proto), result.trace.skips
    shape = (batch, height, width, channels)
    if np.issubdtype(dtype, np.floating):
        images = special_floats(shape, dtype, height * 100 + width)
    else:
        info = np.iinfo(dtype)
        rng = np.random.default_rng(height * 100 + width)
        images = rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
    expected = expected_patches(model, images)
    if expected.size == 0 and 0 in expected.shape[1:3]:
        return  # TF rejects a window larger than the input; nothing to compare
    assert_bitwise_equal(run_ort(proto, images), expected)


@given(configs())
def test_random_configurations_are_exact(config):
    _check_config(config)


@pytest.mark.slow
@settings(max_examples=1000)
@given(configs())
def test_many_random_configurations_are_exact(config):
    _check_config(config)


def test_model_path_is_not_modified():
    path = Path(MODELS / "eip_k2x2_s2x2_r1x1_valid.onnx")
    before = path.read_bytes()
    rewriter.rewrite(path, [EIP_RULES])
    assert path.read_bytes() == before
