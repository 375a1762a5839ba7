"""Shared helpers for engine tests: build models from ONNX text, run rules, compare with ORT."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnx.parser
import onnxruntime as ort

import ir
import rewriter


def model_from_text(text: str) -> onnx.ModelProto:
    """Parse ONNX text format and check the model."""
    model = onnx.parser.parse_model(text)
    onnx.checker.check_model(model, full_check=True)
    return model


def run_rules(
    model: onnx.ModelProto | ir.Model,
    rules_text: str,
    tmp_path: Path,
    options: rewriter.RewriteOptions | None = None,
) -> rewriter.RewriteResult:
    """Write `rules_text` to a file and rewrite `model` with it alone.

    No built-in pass runs unless the text declares it (or `options` names passes): the
    rules are tested on their own.
    """
    path = tmp_path / "rules.rw"
    path.write_text(rules_text)
    return rewriter.rewrite(model, [path], options or rewriter.RewriteOptions(passes=()))


def session(model: onnx.ModelProto) -> ort.InferenceSession:
    """An ORT session with graph optimizations disabled (so ORT cannot mask a bug)."""
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )


def symbol_sizes(model: onnx.ModelProto, dims: int = 3) -> dict[str, int]:
    """A distinct size for every named symbolic dim of the inputs: `dims`, `dims + 1`, ...

    Distinct, so that a rewrite that confuses two dims (batch with sequence length) computes
    something else, or fails, instead of passing on equal sizes.
    """
    sizes: dict[str, int] = {}
    for vi in model.graph.input:
        for d in vi.type.tensor_type.shape.dim:
            if d.dim_param and d.dim_param not in sizes:
                sizes[d.dim_param] = dims + len(sizes)
    return sizes


def random_feeds(model: onnx.ModelProto, seed: int = 0, dims: int = 3) -> dict[str, np.ndarray]:
    """Random inputs for every graph input.

    Each named symbolic dim gets its own size (`symbol_sizes`); a dim with neither a value
    nor a name gets `dims`.
    """
    rng = np.random.default_rng(seed)
    initializers = {t.name for t in model.graph.initializer}
    sizes = symbol_sizes(model, dims)
    feeds = {}
    for vi in model.graph.input:
        if vi.name in initializers:
            continue
        tt = vi.type.tensor_type
        shape = [
            d.dim_value if d.HasField("dim_value") else sizes.get(d.dim_param, dims)
            for d in tt.shape.dim
        ]
        dtype = onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type)
        if np.issubdtype(dtype, np.floating):
            feeds[vi.name] = rng.standard_normal(shape).astype(dtype)
        elif dtype == np.bool_:
            feeds[vi.name] = np.asarray(rng.random(shape) > 0.5)
        else:
            feeds[vi.name] = rng.integers(0, 3, shape).astype(dtype)
    return feeds


def _holds_runtime_ops(model: onnx.ModelProto) -> bool:
    """Whether the main graph has an op onnxruntime alone runs in the default domain."""
    versions = {entry.domain: entry.version for entry in model.opset_import}
    opset = versions.get("", versions.get("ai.onnx", 1))
    return any(
        node.domain in ("", "ai.onnx")
        and ir.schemas.find_schema(node.op_type, "", opset) is None
        and ir.schemas.find_runtime_op(node.op_type, "", opset) is not None
        for node in model.graph.node
    )


def assert_same_outputs(
    original: onnx.ModelProto,
    rewritten: onnx.ModelProto,
    seeds: int = 3,
    rtol: float = 1e-4,
    atol: float = 1e-5,
) -> None:
    """Both models give the same outputs (names, dtypes, values) on random inputs."""
    if _holds_runtime_ops(rewritten):
        ir.check_proto(rewritten)  # onnx has no schema for them: checked as custom ops
    else:
        onnx.checker.check_model(rewritten, full_check=True)
    a = session(original)
    b = session(rewritten)
    assert [o.name for o in a.get_outputs()] == [o.name for o in b.get_outputs()]
    for seed in range(seeds):
        feeds = random_feeds(original, seed)
        for x, y in zip(a.run(None, feeds), b.run(None, feeds), strict=False):
            assert x.dtype == y.dtype
            assert x.shape == y.shape
            np.testing.assert_allclose(x, y, rtol=rtol, atol=atol)


def op_types(model: onnx.ModelProto | ir.Model) -> list[str]:
    """Op types of the main graph in order."""
    proto = ir.to_onnx(model) if isinstance(model, ir.Model) else model
    return [n.op_type for n in proto.graph.node]


def batched_key_transpose_text(opset: int) -> str:
    """K^T as the dynamo exporter's optimizer writes it: a batched 3-D transpose between
    Reshapes whose targets are computed from K's own shape (allowzero 0)."""
    return f"""<ir_version: 10, opset_import: ["" : {opset}]>
g (float[batch, 4, seq, 16] k) => (float[batch, 4, 16, seq] kt) {{
    minus_one = Constant <value = int64[1] {{-1}}> ()
    shape = Shape (k)
    two = Constant <value = int64[1] {{2}}> ()
    three = Constant <value = int64[1] {{3}}> ()
    four = Constant <value = int64[1] {{4}}> ()
    zero = Constant <value = int64[1] {{0}}> ()
    s = Slice (shape, two, three)
    d = Slice (shape, three, four)
    bh = Slice (shape, zero, two)
    flat = Concat <axis = 0> (minus_one, s, d)
    r = Reshape (k, flat)
    t = Transpose <perm = [0, 2, 1]> (r)
    back = Concat <axis = 0> (bh, d, s)
    kt = Reshape (t, back)
}}"""
