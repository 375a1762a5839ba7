"""Small models for the verification tests, written in ONNX text (`onnx.parser`)."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.helper
import onnx.numpy_helper
import onnx.parser


def parse(signature: str, body: str, *, opset: int = 17, check: bool = True) -> onnx.ModelProto:
    """A model from a graph signature `(inputs) => (outputs)` and its node lines."""
    text = f"""
    <ir_version: 8, opset_import: ["" : {opset}]>
    g {signature} {{
        {body}
    }}
    """
    model = onnx.parser.parse_model(text)
    if check:
        onnx.checker.check_model(model)
    return model


def with_initializers(model: onnx.ModelProto, **arrays: np.ndarray) -> onnx.ModelProto:
    """`model` with these arrays added as initializers (names as given)."""
    for name, array in arrays.items():
        model.graph.initializer.append(onnx.numpy_helper.from_array(array, name))
    onnx.checker.check_model(model)
    return model


def unary(op: str, dtype: str = "float", shape: str = "N, 4") -> onnx.ModelProto:
    return parse(f"({dtype}[{shape}] x) => ({dtype}[{shape}] y)", f"y = {op}(x)")


def add_zero() -> onnx.ModelProto:
    return parse(
        "(float[N, 4] x) => (float[N, 4] y)",
        "zero = Constant<value = float {0.0}>()\n y = Add(x, zero)",
    )


def times(factor: float) -> onnx.ModelProto:
    return parse(
        "(float[N, 4] x) => (float[N, 4] y)",
        f"c = Constant<value = float {{{factor}}}>()\n y = Mul(x, c)",
    )


def _weights(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "W": rng.standard_normal((8, 5)).astype(np.float32),
        "B": rng.standard_normal(5).astype(np.float32),
    }


def matmul_add(bias: bool = True) -> onnx.ModelProto:
    body = "y = Add(h, B)" if bias else "y = Identity(h)"
    model = parse("(float[N, 8] x) => (float[N, 5] y)", f"h = MatMul(x, W)\n {body}", check=False)
    return with_initializers(model, **_weights())


def gemm() -> onnx.ModelProto:
    model = parse("(float[N, 8] x) => (float[N, 5] y)", "y = Gemm(x, W, B)", check=False)
    return with_initializers(model, **_weights())


def layernorm_decomposed(epsilon: float = 1e-5, width: int = 6) -> onnx.ModelProto:
    """LayerNorm over the last axis, written out as torch's TorchScript exporter does."""
    model = parse(
        f"(float[N, T, {width}] x) => (float[N, T, {width}] y)",
        f"""
        mean = ReduceMean<axes = [-1]>(x)
        d = Sub(x, mean)
        two = Constant<value = float {{2.0}}>()
        sq = Pow(d, two)
        var = ReduceMean<axes = [-1]>(sq)
        eps = Constant<value = float {{{epsilon}}}>()
        ve = Add(var, eps)
        sd = Sqrt(ve)
        n = Div(d, sd)
        scaled = Mul(n, gamma)
        y = Add(scaled, beta)
        """,
        check=False,
    )
    return with_initializers(model, **_norm_weights(width))


def layernorm_fused(epsilon: float = 1e-5, width: int = 6) -> onnx.ModelProto:
    model = parse(
        f"(float[N, T, {width}] x) => (float[N, T, {width}] y)",
        f"y = LayerNormalization<axis = -1, epsilon = {epsilon}>(x, gamma, beta)",
        check=False,
    )
    return with_initializers(model, **_norm_weights(width))


def _norm_weights(width: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1)
    return {
        "gamma": (1.0 + 0.1 * rng.standard_normal(width)).astype(np.float32),
        "beta": (0.1 * rng.standard_normal(width)).astype(np.float32),
    }


def transpose(perm: str) -> onnx.ModelProto:
    return parse("(float[2, 3, 4] x) => (float[A, B, C] y)", f"y = Transpose<perm = [{perm}]>(x)")


def softmax(axis: int) -> onnx.ModelProto:
    return parse("(float[N, M] x) => (float[N, M] y)", f"y = Softmax<axis = {axis}>(x)")


def embedding(offset: int = 0, vocab: int = 7) -> onnx.ModelProto:
    """`ids -> Unsqueeze -> Cast -> Add(offset) -> Gather(table)`, plus a mask -> Cast -> Mul."""
    model = parse(
        "(int64[B, S] ids, int64[B, S] attention) => (float[B, S, 3] y)",
        f"""
        shift = Constant<value = int64 {{{offset}}}>()
        moved = Add(ids, shift)
        as32 = Cast<to = 6>(moved)
        rows = Gather<axis = 0>(table, as32)
        m = Cast<to = 1>(attention)
        m3 = Unsqueeze(m, last)
        y = Mul(rows, m3)
        """,
        check=False,
    )
    table = np.arange(vocab * 3, dtype=np.float32).reshape(vocab, 3)
    return with_initializers(model, table=table, last=np.array([-1], dtype=np.int64))


def mlp_block(width: int = 16) -> onnx.ModelProto:
    """MatMul+Add -> LayerNorm (decomposed) -> GELU (Erf) -> MatMul+Add: fusion material."""
    model = parse(
        f"(float[N, T, {width}] x) => (float[N, T, {width}] y)",
        """
        h = MatMul(x, W1)
        hb = Add(h, B1)
        mean = ReduceMean<axes = [-1]>(hb)
        d = Sub(hb, mean)
        two = Constant<value = float {2.0}>()
        sq = Pow(d, two)
        var = ReduceMean<axes = [-1]>(sq)
        eps = Constant<value = float {1e-5}>()
        ve = Add(var, eps)
        sd = Sqrt(ve)
        n = Div(d, sd)
        g = Mul(n, gamma)
        ln = Add(g, beta)
        rt2 = Constant<value = float {1.4142135}>()
        e0 = Div(ln, rt2)
        e1 = Erf(e0)
        one = Constant<value = float {1.0}>()
        e2 = Add(e1, one)
        e3 = Mul(ln, e2)
        half = Constant<value = float {0.5}>()
        gelu = Mul(e3, half)
        o = MatMul(gelu, W2)
        y = Add(o, B2)
        """,
        check=False,
    )
    rng = np.random.default_rng(2)
    return with_initializers(
        model,
        W1=(rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32),
        B1=(0.1 * rng.standard_normal(width)).astype(np.float32),
        gamma=(1.0 + 0.1 * rng.standard_normal(width)).astype(np.float32),
        beta=(0.1 * rng.standard_normal(width)).astype(np.float32),
        W2=(rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32),
        B2=(0.1 * rng.standard_normal(width)).astype(np.float32),
    )


def ort_optimized(model: onnx.ModelProto, tmp_path) -> onnx.ModelProto:
    """`model` after onnxruntime's own extended graph optimizations (fusions, contrib ops)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    target = tmp_path / "ort_optimized.onnx"
    options.optimized_model_filepath = str(target)
    ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return onnx.load(str(target))


def extract_image_patches(
    ksizes: tuple[int, int],
    strides: tuple[int, int],
    rates: tuple[int, int],
    padding: str,
    *,
    opset_import: bool = True,
    shape: tuple = ("N", 5, 6, 2),
) -> onnx.ModelProto:
    """One ExtractImagePatches node as tf2onnx writes it with `--custom-ops`."""
    domain = "ai.onnx.converters.tensorflow"
    node = onnx.helper.make_node(
        "ExtractImagePatches",
        ["x"],
        ["y"],
        domain=domain,
        ksizes=[1, *ksizes, 1],
        strides=[1, *strides, 1],
        rates=[1, *rates, 1],
        padding=padding,
    )
    graph = onnx.helper.make_graph(
        [node],
        "eip",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, list(shape))],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
    )
    opsets = [onnx.helper.make_opsetid("", 13)]
    if opset_import:
        opsets.append(onnx.helper.make_opsetid(domain, 1))
    return onnx.helper.make_model(graph, opset_imports=opsets, ir_version=8)


def attention_scale(*, relu_pair: bool = False, depth: int = 8) -> onnx.ModelProto:
    """Attention scores with the scale split over both operands, computed from a shape.

    As PyTorch exports scaled dot-product attention (kokoro's ALBERT encoder): the head
    dim's size read through Shape -> Gather -> Slice, then `sqrt(1 / sqrt(d))` multiplied
    into the query and the key before their MatMul. The sequence length `n` is symbolic, so
    onnxruntime's constant folding cannot fold the chain; `fold_constants` can (the head dim
    is fixed), after which onnxruntime's MatMulScaleFusion fuses both Muls into a
    `com.microsoft.FusedMatMul` whose alpha is the scale squared: exact by ONNX semantics
    before, rounding differently after. `relu_pair` adds `Relu(Relu(scores))` for a rule to
    rewrite before the pass runs; `depth` is the head dim (16: the scale is 0.5, a power of
    two, and the fusion exact).
    """
    scores = "scores" if relu_pair else "y"
    tail = "r1 = Relu(scores)\n y = Relu(r1)" if relu_pair else ""
    return with_initializers(
        parse(
            f"(float[1, 2, n, {depth}] q, float[1, 2, {depth}, n] k) => (float[1, 2, n, n] y)",
            f"""
            shape = Shape(q)
            permuted = Gather<axis = 0>(shape, perm)
            depth = Slice(permuted, start, end)
            depth_f = Cast<to = 1>(depth)
            root = Sqrt(depth_f)
            scale = Div(one, root)
            half = Sqrt(scale)
            qs = Mul(q, half)
            ks = Mul(k, half)
            {scores} = MatMul(qs, ks)
            {tail}
            """,
            check=False,
        ),
        perm=np.array([0, 2, 1, 3], np.int64),
        start=np.array([-1], np.int64),
        end=np.array([np.iinfo(np.int64).max], np.int64),
        one=np.array([1.0], np.float32),
    )
