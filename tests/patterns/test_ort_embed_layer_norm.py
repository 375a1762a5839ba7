"""patterns/ort/embed_layer_norm.rw and layer_norm.rw: BERT's and GPT-2's embedding block into
onnxruntime's EmbedLayerNormalization, and LayerNormalization below opset 17 as onnxruntime
registers it. Checked against onnxruntime on ids that Gather reads from the end of a table
(negative), which the contrib kernel itself refuses."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.numpy_helper
import onnxruntime as ort
import pytest

from tests.helpers import op_types
from tests.patterns.fusion_helpers import ORT_RULES, build, fired, rewrite

ELN = ORT_RULES / "embed_layer_norm.rw"
LN17 = ORT_RULES / "layer_norm.rw"
ROWS = {"word": 11, "position": 7, "segment": 3}


def embed_model(
    segment: bool = True,
    keep_sum: bool = False,
    ids_type: str = "int64",
    pos_shape: str = "B, S",
    seg_shape: str = "B, S",
    skip_form: bool = False,
    beta: bool = True,
    position_hidden: int = 8,
) -> onnx.ModelProto:
    """word[ids] + position[pos] (+ segment[seg]) -> LayerNormalization (or the last Add and
    the normalization as SkipLayerNormalization); `keep_sum` also outputs the sum."""
    inputs = [f"{ids_type}[B, S] ids", f"{ids_type}[{pos_shape}] pos"]
    lines = [
        "w = Gather (word, ids)",
        "p = Gather <axis = 0> (position, pos)",
        "s = Add (w, p)",
    ]
    total = "s"
    if segment:
        inputs.append(f"{ids_type}[{seg_shape}] seg")
        lines.append("g = Gather (segment, seg)")
        if not skip_form:
            lines.append("t = Add (s, g)")
            total = "t"
    bias = ", beta" if beta else ""
    if skip_form:
        outs = "y, m, v, t" if keep_sum else "y"
        lines.append(
            f"{outs} = com.microsoft.SkipLayerNormalization <epsilon = 0.001> (s, g, gamma{bias})"
        )
        total = "t"
    else:
        lines.append(f"y = LayerNormalization <epsilon = 0.001> ({total}, gamma{bias})")
    outputs = "float[B, S, 8] y" + (f", float[B, S, 8] {total}" if keep_sum else "")
    body = "\n            ".join(lines)
    arrays = {
        "word": ((ROWS["word"], 8), -1.0, 1.0),
        "position": ((ROWS["position"], position_hidden), -1.0, 1.0),
        "gamma": ((8,), 0.5, 1.5),
    }
    if segment:
        arrays["segment"] = ((ROWS["segment"], 8), -1.0, 1.0)
    if beta:
        arrays["beta"] = ((8,), -0.5, 0.5)
    return build(
        f"""<ir_version: 8, opset_import: ["" : 17, "com.microsoft" : 1]>
        g ({", ".join(inputs)}) => ({outputs}) {{
            {body}
        }}""",
        check=not skip_form,
        **arrays,
    )


def _feeds(model: onnx.ModelProto, low: int, seed: int = 0) -> dict[str, np.ndarray]:
    """Ids from `low` up to each table's last row (negative: counted from the end)."""
    rng = np.random.default_rng(seed)
    tables = {"ids": "word", "pos": "position", "seg": "segment"}
    feeds = {}
    for value in model.graph.input:
        dtype = np.int64 if value.type.tensor_type.elem_type == onnx.TensorProto.INT64 else np.int32
        dims = [
            d.dim_value or (1 if d.dim_param == "1" else 3)
            for d in value.type.tensor_type.shape.dim
        ]
        dims = [2 if i == 0 and d == 3 else d for i, d in enumerate(dims)]  # batch 2, seq 3
        rows = ROWS[tables[value.name]]
        feeds[value.name] = rng.integers(max(low, -rows), rows, dims).astype(dtype)
    return feeds


def _run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    return session.run(None, feeds)


def check_embed_fusion(model: onnx.ModelProto, rule: str) -> onnx.ModelProto:
    """`rule` fired once into one EmbedLayerNormalization, and the result computes what the
    model does on in-range ids, on negative ones, and on both mixed."""
    result = rewrite(model, ELN)
    assert dict(fired(result)) == {rule: 1}, result.trace.skips
    assert op_types(result.proto).count("EmbedLayerNormalization") == 1
    for low in (0, -1, -99):
        for seed in range(3):
            feeds = _feeds(model, low, seed)
            for x, y in zip(_run(model, feeds), _run(result.proto, feeds), strict=True):
                np.testing.assert_allclose(y, x, rtol=1e-4, atol=1e-5)
    return result.proto


@pytest.mark.parametrize(
    ("kwargs", "rule"),
    [
        ({}, "fuse_embed_layer_normalization_segment"),
        ({"keep_sum": True}, "fuse_embed_layer_normalization_segment_keep_sum"),
        ({"segment": False}, "fuse_embed_layer_normalization"),
        ({"segment": False, "keep_sum": True}, "fuse_embed_layer_normalization_keep_sum"),
        ({"skip_form": True}, "fuse_embed_layer_normalization_from_skip"),
        (
            {"skip_form": True, "keep_sum": True},
            "fuse_embed_layer_normalization_from_skip_keep_sum",
        ),
        ({"ids_type": "int32"}, "fuse_embed_layer_normalization_segment"),
        ({"pos_shape": "1, S"}, "fuse_embed_layer_normalization_segment"),
        ({"beta": False}, "fuse_embed_layer_normalization_segment"),
    ],
)
def test_fuse_embed_layer_normalization(kwargs, rule):
    proto = check_embed_fusion(embed_model(**kwargs), rule)
    # every id input is read through Mod(ids, rows): the kernel refuses negative ids
    assert op_types(proto).count("Mod") == (3 if kwargs.get("segment", True) else 2)


def test_onnxruntime_refuses_the_negative_ids_that_gather_reads():
    """Why the ids go through Mod: the kernel given the ids as they are fails where the
    model computes."""
    model = embed_model(segment=False, ids_type="int32")
    kernel_alone = build(
        """<ir_version: 8, opset_import: ["" : 17, "com.microsoft" : 1]>
        g (int32[B, S] ids, int32[B, S] pos) => (float[B, S, 8] y) {
            y, m = com.microsoft.EmbedLayerNormalization <epsilon = 0.001> (
                ids, , word, position, , gamma, beta, , pos)
        }""",
        check=False,
        **{t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer},
    )
    feeds = _feeds(model, -1, seed=1)
    assert (feeds["ids"] < 0).any()
    _run(model, feeds)  # Gather reads them
    with pytest.raises(Exception, match="input index out of range"):
        _run(kernel_alone, feeds)


def test_the_mod_goes_away_where_the_ids_are_provably_in_range():
    """Positions sliced from a constant arange (BERT's buffer) need no Mod."""
    model = build(
        """<ir_version: 8, opset_import: ["" : 17, "com.microsoft" : 1]>
        g (int64[B, 4] ids) => (float[B, 4, 8] y) {
            start = Constant <value = int64[1] {0}> ()
            end = Constant <value = int64[1] {4}> ()
            axis = Constant <value = int64[1] {1}> ()
            pos = Slice (buffer, start, end, axis)
            w = Gather (word, ids)
            p = Gather (position, pos)
            s = Add (w, p)
            y = LayerNormalization <epsilon = 0.001> (s, gamma, beta)
        }""",
        buffer=np.arange(7, dtype=np.int64).reshape(1, 7),
        word=((11, 8), -1.0, 1.0),
        position=((7, 8), -1.0, 1.0),
        gamma=((8,), 0.5, 1.5),
        beta=((8,), -0.5, 0.5),
    )
    result = rewrite(model, ELN)
    assert fired(result)["drop_mod_of_indices_in_range"] == 1
    assert op_types(result.proto).count("Mod") == 1  # the word ids' only
    feeds = {"ids": np.array([[0, -1, 10, -11], [3, 4, 5, 6]], np.int64)}
    for x, y in zip(_run(model, feeds), _run(result.proto, feeds), strict=True):
        np.testing.assert_allclose(y, x, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"pos_shape": "B, 1"},  # not the ids' sequence length: the kernel wants it
        {"seg_shape": "1, S"},  # the kernel reads segment ids of the ids' shape
        {"position_hidden": 1},  # a broadcast table
    ],
)
def test_fuse_embed_layer_normalization_near_misses(kwargs):
    assert not fired(rewrite(embed_model(**kwargs), ELN))


def test_embed_layer_normalization_needs_the_com_microsoft_import():
    model = embed_model()
    del model.opset_import[1]
    assert not fired(rewrite(model, ELN))


def test_layer_normalization_below_opset_17_as_onnxruntime_runs_it():
    """The decomposed LayerNorm of an opset-12 export becomes onnxruntime's default-domain
    LayerNormalization, which the embedding fusion then reads."""
    model = build(
        """<ir_version: 7, opset_import: ["" : 12, "com.microsoft" : 1]>
        g (float[B, S, 8] x) => (float[B, S, 8] y) {
            mu = ReduceMean <axes = [-1]> (x)
            d = Sub (x, mu)
            two = Constant <value = float {2.0}> ()
            sq = Pow (d, two)
            var = ReduceMean <axes = [-1]> (sq)
            eps = Constant <value = float {1e-5}> ()
            ve = Add (var, eps)
            sd = Sqrt (ve)
            y = Div (d, sd)
        }"""
    )
    result = rewrite(model, LN17)
    assert dict(fired(result)) == {"fuse_layer_normalization_below_opset_17": 1}
    assert op_types(result.proto) == ["LayerNormalization"]
    feeds = {"x": np.random.default_rng(0).standard_normal((2, 3, 8)).astype(np.float32) * 5}
    for x, y in zip(_run(model, feeds), _run(result.proto, feeds), strict=True):
        np.testing.assert_allclose(y, x, rtol=1e-5, atol=1e-5)
    del model.opset_import[1]  # only rules for onnxruntime write its default-domain ops
    assert not fired(rewrite(model, LN17))


def test_a_skip_layer_normalization_with_a_bias_is_no_embedding_sum():
    """SkipLayerNormalization's fifth input adds a bias EmbedLayerNormalization has no room for."""
    model = build(
        """<ir_version: 8, opset_import: ["" : 17, "com.microsoft" : 1]>
        g (int64[B, S] ids, int64[B, S] pos, int64[B, S] seg) => (float[B, S, 8] y) {
            w = Gather (word, ids)
            p = Gather (position, pos)
            s = Add (w, p)
            g = Gather (segment, seg)
            y = com.microsoft.SkipLayerNormalization <epsilon = 0.001> (s, g, gamma, beta, bias)
        }""",
        check=False,
        word=((11, 8), -1.0, 1.0),
        position=((7, 8), -1.0, 1.0),
        segment=((3, 8), -1.0, 1.0),
        gamma=((8,), 0.5, 1.5),
        beta=((8,), -0.5, 0.5),
        bias=((8,), -0.5, 0.5),
    )
    assert not fired(rewrite(model, ELN))
