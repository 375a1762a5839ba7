"""Convert small channels-last (NHWC) TensorFlow models to ONNX with tf2onnx (native ops).

Run with the TensorFlow environment of benchmarks/corpus/README.md (tensorflow-cpu 2.21,
tf2onnx 1.17, onnx, onnxruntime; never the project's own), from the repository root:

    <tf-python> tests/models/make_tf_nhwc_models.py                      # all models
    <tf-python> tests/models/make_tf_nhwc_models.py --only tf_keras_cnn

tf2onnx writes ONNX's NCHW Conv/Pool/BatchNormalization for TensorFlow's NHWC ops, with a
Transpose into NCHW before and one back after, and then runs its own optimizer over them (on
by default; what is left is what a user gets). These are the models the layout pass
(`pass optimize_transposes`) is measured on (`benchmarks/transposes.py`, and
tests/rewriter/engine/test_transposes_tf2onnx.py):

* `tf_patches_native`: `tf.image.extract_patches` converted natively (no `--custom-ops`):
  tf2onnx writes an identity-kernel Conv over channels folded into the batch, with
  Transposes and Reshapes around it (static batch: with a dynamic batch the native
  conversion fails for C > 1, see make_tf_models.py), followed by a Dense layer on the
  patch vectors.
* `tf_keras_cnn`: a small Keras CNN: Conv2D+ReLU, BatchNormalization, MaxPool, Conv2D, a
  channel Concatenate of two branches, a Dense layer on the 4-D map (tf2onnx writes
  TensorFlow's Tensordot: a Reshape whose size is computed from Shape with Gather, Cast and
  ReduceProd), GlobalAveragePooling, Dense, Softmax.
* `tf_separable_block`: a MobileNet-style depthwise-separable block: DepthwiseConv2D, BN,
  ReLU6, 1x1 Conv2D, BN, a residual Add, then SeparableConv2D and a channel split via
  Reshape before a mean over the spatial axes.

Weights are random (seeded); BatchNormalization statistics are set to non-trivial values.
Each model's TensorFlow outputs on three inputs are saved as `<name>.npz` (layout in
manifest.json), and onnxruntime must agree with TensorFlow on them before a model is kept.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import onnx
import onnxruntime as ort
import tensorflow as tf
import tf2onnx

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks" / "corpus"))
import corpus_common as cc

SEED = 2718
OPSET = 15
OUT = Path(__file__).resolve().parent


def _set_batchnorm_statistics(model: tf.keras.Model, rng: np.random.Generator) -> None:
    for layer in model.layers:
        if isinstance(layer, tf.keras.layers.BatchNormalization):
            gamma, beta, mean, var = layer.get_weights()
            layer.set_weights(
                [
                    rng.uniform(0.5, 1.5, gamma.shape).astype(np.float32),
                    rng.normal(0, 0.1, beta.shape).astype(np.float32),
                    rng.normal(0, 0.2, mean.shape).astype(np.float32),
                    rng.uniform(0.5, 2.0, var.shape).astype(np.float32),
                ]
            )


def keras_cnn() -> tf.keras.Model:
    """Conv, BN, pool, two branches concatenated over channels, a Dense on the 4-D map,
    a strided Conv, global pool, dense, softmax."""
    layers = tf.keras.layers
    x = layers.Input((16, 16, 3), name="image")
    h = layers.Conv2D(8, 3, padding="same", activation="relu")(x)
    h = layers.BatchNormalization()(h)
    h = layers.MaxPool2D(2)(h)
    a = layers.Conv2D(8, 3, padding="same", activation="relu")(h)
    b = layers.Conv2D(4, 1, activation="relu")(h)
    h = layers.Concatenate(axis=-1)([a, b])
    h = layers.Dense(12, activation="relu")(h)  # on the 4-D map: TensorFlow's Tensordot
    h = layers.Conv2D(16, 3, strides=2, padding="valid")(h)
    h = layers.GlobalAveragePooling2D()(h)
    y = layers.Dense(10, activation="softmax")(h)
    return tf.keras.Model(x, y)


def separable_block() -> tf.keras.Model:
    """Depthwise 3x3, BN, ReLU6, pointwise 1x1, BN, residual; separable conv; split; mean."""
    layers = tf.keras.layers
    x = layers.Input((12, 12, 8), name="features")
    h = layers.DepthwiseConv2D(3, padding="same", use_bias=False)(x)
    h = layers.BatchNormalization()(h)
    h = layers.ReLU(6.0)(h)
    h = layers.Conv2D(8, 1, use_bias=False)(h)
    h = layers.BatchNormalization()(h)
    h = layers.Add()([x, h])
    h = layers.SeparableConv2D(16, 3, padding="same", activation="relu")(h)
    h = layers.Reshape((12, 12, 4, 4))(h)  # split the 16 channels into 4 groups of 4
    y = layers.Lambda(lambda t: tf.reduce_mean(t, axis=[1, 2]))(h)
    return tf.keras.Model(x, y)


def patches_native() -> Callable[[tf.Tensor], tf.Tensor]:
    """extract_patches 3x3 stride 2 VALID on a static-batch NHWC input, then a Dense layer."""
    rng = np.random.default_rng(SEED)
    weights = rng.normal(0, 0.2, (27, 6)).astype(np.float32)

    def fn(images: tf.Tensor) -> tf.Tensor:
        w = tf.constant(weights)  # made inside: a captured tensor would become an input
        p = tf.image.extract_patches(
            images, sizes=[1, 3, 3, 1], strides=[1, 2, 2, 1], rates=[1, 1, 1, 1], padding="VALID"
        )
        return tf.nn.relu(tf.tensordot(p, w, axes=[[3], [0]]))

    return fn


# name -> (builder, input shape with None for a dynamic batch, what it is)
MODELS: dict[str, tuple[Callable[[], Any], tuple[int | None, ...], str]] = {
    "tf_patches_native": (
        patches_native,
        (2, 9, 9, 3),
        "tf.image.extract_patches 3x3 stride 2 VALID (native conversion, static batch) + Dense",
    ),
    "tf_keras_cnn": (
        keras_cnn,
        (None, 16, 16, 3),
        "Keras CNN: Conv2D, BatchNorm, MaxPool, channel Concatenate, Dense on the 4-D map, "
        "GlobalAvgPool, Dense",
    ),
    "tf_separable_block": (
        separable_block,
        (None, 12, 12, 8),
        "Keras depthwise-separable block: DepthwiseConv2D, BN, ReLU6, 1x1 Conv, residual, "
        "SeparableConv2D, channel-splitting Reshape, spatial mean",
    ),
}


def convert(name: str, rng: np.random.Generator, out: Path) -> dict[str, Any]:
    """Build, convert, check against TensorFlow; the manifest entry."""
    build, shape, what = MODELS[name]
    made = build()
    if isinstance(made, tf.keras.Model):
        _set_batchnorm_statistics(made, rng)

        def call(t: tf.Tensor) -> tf.Tensor:
            return made(t, training=False)

    else:
        call = made
    spec = tf.TensorSpec(shape, tf.float32, name="input")
    function = tf.function(call, input_signature=[spec])
    path = out / f"{name}.onnx"
    with tempfile.TemporaryDirectory() as tmp:
        proto, _ = tf2onnx.convert.from_function(
            function, input_signature=[spec], opset=OPSET, output_path=str(Path(tmp) / "m.onnx")
        )
    proto.doc_string = ""
    proto.graph.doc_string = ""
    onnx.save(proto, str(path))
    proto = cc.check_and_infer(path)
    desc = cc.describe(path, proto)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    in_name, out_name = session.get_inputs()[0].name, session.get_outputs()[0].name
    fixed = tuple(d if d is not None else 2 for d in shape)
    inputs = [
        (rng.standard_normal(fixed).astype(np.float32), "standard normal"),
        (rng.uniform(-4, 4, fixed).astype(np.float32), "uniform(-4, 4)"),
    ]
    if shape[0] is None:
        other = (3, *shape[1:])
        inputs.append((rng.standard_normal(other).astype(np.float32), "batch 3"))
    samples, worst = [], 0.0
    for x, note in inputs:
        want = function(tf.constant(x)).numpy()
        got = session.run([out_name], {in_name: x})[0]
        worst = max(worst, cc.max_abs_err([got], [want]))
        cc.assert_close([got], [want], atol=1e-4, rtol=1e-3, what=name)
        samples.append({"inputs": {in_name: x}, "outputs": {out_name: want}, "note": note})
    layout = cc.save_samples(out / f"{name}.npz", samples)
    print(f"{name}: {desc['node_count']} nodes {desc['op_histogram']}, err {worst:.1e}")
    return {
        **desc,
        "what": what,
        "source": "tf",
        "family": "tf2onnx_nhwc",
        "exporter": f"tf2onnx.convert.from_function(opset={OPSET}) (its optimizer on)",
        "exporter_short": "tf2onnx from_function",
        "generator": f"tensorflow {tf.__version__}, tf2onnx {tf2onnx.__version__}, "
        f"onnx {onnx.__version__}",
        "script": "tests/models/make_tf_nhwc_models.py",
        "layers": 1,
        "config": {"input_shape": list(shape)},
        "expected": {},
        "npz": f"{name}.npz",
        "samples": layout,
        "max_abs_err": worst,
        "tolerance": {"atol": 1e-4, "rtol": 1e-3},
    }


def main(argv: list[str] | None = None) -> int:
    """Convert the models named (all by default) into tests/models."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated model names")
    parser.add_argument("--out", type=Path, default=OUT, help="folder (default: tests/models)")
    args = parser.parse_args(argv)
    names = [n for n in args.only.split(",") if n] or list(MODELS)
    unknown = set(names) - set(MODELS)
    if unknown:
        parser.error(f"unknown models {sorted(unknown)}; known: {', '.join(MODELS)}")
    tf.random.set_seed(SEED)
    tf.keras.utils.set_random_seed(SEED)
    args.out.mkdir(parents=True, exist_ok=True)
    entries = [convert(n, np.random.default_rng(SEED + i), args.out) for i, n in enumerate(names)]
    cc.update_manifest(args.out, entries)
    return 0


if __name__ == "__main__":
    sys.exit(main())
