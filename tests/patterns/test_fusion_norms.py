"""Rules of patterns/fusion/layer_norm.rw and rms_norm.rw: positive tests on every decomposed
form (axes as attribute or input, Pow or Mul square, Div or Reciprocal, with and without the
affine ops) and near misses (wrong axis, wrong constant, extra use, wrong opset)."""

from __future__ import annotations

import pytest

from tests.patterns.fusion_helpers import FUSION, LIBRARY, build, check_fired, fired, rewrite

LN = FUSION / "layer_norm.rw"
RMS = FUSION / "rms_norm.rw"

LN_FUSE = "fuse_layer_normalization"
LN_RECIPROCAL = "fuse_layer_normalization_reciprocal"
ABSORB_MUL = "absorb_mul_into_layer_normalization"
ABSORB_ADD = "absorb_add_into_layer_normalization"


def _reduce(name: str, source: str, axes: list[int], opset: int, keepdims: int = 1) -> str:
    """A ReduceMean line with axes as attribute (opset < 18) or input (opset >= 18)."""
    if opset >= 18:
        values = ", ".join(map(str, axes))
        return (
            f"{name}_axes = Constant <value = int64[{len(axes)}] {{{values}}}> ()\n"
            f"            {name} = ReduceMean <keepdims = {keepdims}> ({source}, {name}_axes)"
        )
    return f"{name} = ReduceMean <axes = {axes}, keepdims = {keepdims}> ({source})"


def layer_norm_model(
    opset: int = 17,
    axes: tuple[list[int], list[int]] = ([-1], [-1]),
    square: str = "pow",
    divide: str = "div",
    affine: str = "both",
    eps: float = 1e-5,
    exponent: float = 2.0,
    keepdims: int = 1,
    extra_output: str | None = None,
    shape: str = "N, 5, 8",
) -> object:
    """A decomposed LayerNorm over the trailing axes of a [N, 5, 8] input."""
    normalized = [8] if len(axes[0]) == 1 else [5, 8]
    lines = [_reduce("mu", "x", axes[0], opset, keepdims), "d = Sub (x, mu)"]
    if square == "pow":
        lines += [f"two = Constant <value = float {{{exponent}}}> ()", "sq = Pow (d, two)"]
    else:
        lines += ["sq = Mul (d, d)"]
    lines += [
        _reduce("var", "sq", axes[1], opset),
        f"eps = Constant <value = float {{{eps}}}> ()",
        "ve = Add (var, eps)",
        "sd = Sqrt (ve)",
    ]
    if divide == "div":
        lines += ["n = Div (d, sd)"]
    else:
        lines += ["r = Reciprocal (sd)", "n = Mul (d, r)"]
    out = "n"
    if affine in ("both", "gamma"):
        lines += ["s = Mul (gamma, n)"]
        out = "s"
    if affine == "both":
        lines += ["z = Add (s, beta)"]
        out = "z"
    lines += [f"y = Identity ({out})"]
    outputs = f"float[{shape}] y"
    if extra_output:
        lines += [f"extra = Identity ({extra_output})"]
        outputs += f", float[{shape}] extra" if extra_output != "mu" else ", float[N, 5, 1] extra"
    body = "\n            ".join(lines)
    return build(
        f"""<ir_version: 8, opset_import: ["" : {opset}]>
        g (float[{shape}] x) => ({outputs}) {{
            {body}
        }}""",
        gamma=(tuple(normalized), 0.5, 1.5),
        beta=(tuple(normalized), -0.5, 0.5),
    )


def _counts(main: str = LN_FUSE, affine: str = "both") -> dict[str, int]:
    counts = {main: 1}
    if affine in ("both", "gamma"):
        counts[ABSORB_MUL] = 1
    if affine == "both":
        counts[ABSORB_ADD] = 1
    return counts


@pytest.mark.parametrize("opset", [17, 18])
@pytest.mark.parametrize("square", ["pow", "mul"])
@pytest.mark.parametrize("affine", ["both", "gamma", "none"])
def test_fuse_layer_normalization(opset, square, affine):
    model = layer_norm_model(opset, square=square, affine=affine)
    result = rewrite(model, LN)
    check_fired(model, result, _counts(LN_FUSE, affine), ["LayerNormalization", "Identity"])


@pytest.mark.parametrize("opset", [17, 18])
def test_fuse_layer_normalization_reciprocal(opset):
    model = layer_norm_model(opset, divide="reciprocal", square="mul")
    result = rewrite(model, LN)
    check_fired(model, result, _counts(LN_RECIPROCAL), ["LayerNormalization", "Identity"])


def test_fuse_layer_normalization_over_two_trailing_axes():
    model = layer_norm_model(18, axes=([-2, -1], [1, 2]))
    result = rewrite(model, LN)
    check_fired(model, result, _counts(), ["LayerNormalization", "Identity"])
    (node,) = [n for n in result.proto.graph.node if n.op_type == "LayerNormalization"]
    assert [a.i for a in node.attribute if a.name == "axis"] == [1]


def test_layer_normalization_keeps_epsilon():
    model = layer_norm_model(17, eps=1e-12)
    result = rewrite(model, LN)
    (node,) = [n for n in result.proto.graph.node if n.op_type == "LayerNormalization"]
    assert [a.f for a in node.attribute if a.name == "epsilon"] == [pytest.approx(1e-12)]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"opset": 16},  # LayerNormalization does not exist yet
        {"axes": ([1], [1])},  # normalizes the middle axis, not the last
        {"axes": ([-1], [-2])},  # the two reductions disagree
        {"axes": ([-2, -1], [-2, -1]), "opset": 18, "shape": "N, S, 8"},  # symbolic normalized dim
        {"exponent": 3.0},  # not a square
        {"keepdims": 0, "shape": "N, 8, 8"},  # the mean broadcasts along the wrong axis
        {"extra_output": "d"},  # x - mean is used outside the pattern
        {"extra_output": "mu"},
    ],
)
def test_fuse_layer_normalization_near_misses(kwargs):
    result = rewrite(layer_norm_model(**kwargs), LN)
    assert not fired(result)


def test_absorb_near_misses_keep_the_affine_ops():
    # gamma as a graph input: the normalization fuses, the Mul and Add stay
    model = build(
        """<ir_version: 8, opset_import: ["" : 17]>
        g (float[N, 8] x, float[8] gamma) => (float[N, 8] y) {
            mu = ReduceMean <axes = [-1]> (x)
            d = Sub (x, mu)
            sq = Mul (d, d)
            var = ReduceMean <axes = [-1]> (sq)
            eps = Constant <value = float {0.00001}> ()
            ve = Add (var, eps)
            sd = Sqrt (ve)
            n = Div (d, sd)
            s = Mul (n, gamma)
            y = Add (s, beta)
        }""",
        beta=((8,), -0.5, 0.5),
    )
    result = rewrite(model, LN)
    check_fired(model, result, {LN_FUSE: 1}, ["LayerNormalization", "Mul", "Add"])
    # a bias that broadcasts the result to a bigger shape is not absorbed
    model = build(
        """<ir_version: 8, opset_import: ["" : 17]>
        g (float[3, 8] x) => (float[2, 3, 8] y) {
            s = Constant <value = float[8] {1, 1, 1, 1, 1, 1, 1, 1}> ()
            n = LayerNormalization (x, s)
            y = Add (n, beta)
        }""",
        beta=((2, 3, 8), -0.5, 0.5),
    )
    assert not fired(rewrite(model, LN))


def test_decomposed_layer_norm_at_opset_23_is_not_taken_for_rms_norm():
    model = layer_norm_model(18)
    model.opset_import[0].version = 23
    result = rewrite(model, LN, RMS)
    check_fired(model, result, _counts(), ["LayerNormalization", "Identity"])


# -- RMSNormalization --------------------------------------------------------------------------


def rms_norm_model(
    opset: int = 23,
    square: str = "pow",
    divide: str = "div",
    gamma: bool = True,
    axes: list[int] | None = None,
    eps_shape: str = "",
) -> object:
    axes = axes or [-1]
    lines = []
    if square == "pow":
        lines += ["two = Constant <value = float {2.0}> ()", "sq = Pow (x, two)"]
    else:
        lines += ["sq = Mul (x, x)"]
    eps = "{0.000001}" if not eps_shape else "{0.000001, 0.000001}"
    lines += [
        _reduce("ms", "sq", axes, opset),
        f"eps = Constant <value = float{eps_shape} {eps}> ()",
        "me = Add (ms, eps)",
        "rt = Sqrt (me)",
    ]
    lines += ["n = Div (x, rt)"] if divide == "div" else ["r = Reciprocal (rt)", "n = Mul (x, r)"]
    lines += ["y = Mul (n, gamma)"] if gamma else ["y = Identity (n)"]
    body = "\n            ".join(lines)
    out = "float[N, 5, 2]" if eps_shape else "float[N, 5, 8]"
    return build(
        f"""<ir_version: 10, opset_import: ["" : {opset}]>
        g (float[N, 5, {2 if eps_shape else 8}] x) => ({out} y) {{
            {body}
        }}""",
        gamma=(((2,) if eps_shape else (8,)), 0.5, 1.5),
    )


@pytest.mark.parametrize(
    ("square", "divide", "rule"),
    [
        ("pow", "div", "fuse_rms_normalization"),
        ("mul", "div", "fuse_rms_normalization"),
        ("pow", "reciprocal", "fuse_rms_normalization_reciprocal"),
        ("mul", "reciprocal", "fuse_rms_normalization_reciprocal"),
    ],
)
def test_fuse_rms_normalization(square, divide, rule):
    model = rms_norm_model(square=square, divide=divide)
    result = rewrite(model, RMS)
    check_fired(
        model, result, {rule: 1, "absorb_mul_into_rms_normalization": 1}, ["RMSNormalization"]
    )


def test_fuse_rms_normalization_without_scale():
    model = rms_norm_model(gamma=False)
    result = rewrite(model, RMS)
    check_fired(model, result, {"fuse_rms_normalization": 1}, ["RMSNormalization", "Identity"])


@pytest.mark.parametrize(
    "kwargs",
    [
        {"opset": 22},  # RMSNormalization does not exist yet
        {"axes": [1]},  # not the trailing axis
        {"eps_shape": "[2]"},  # epsilon is not a scalar
    ],
)
def test_fuse_rms_normalization_near_misses(kwargs):
    assert not fired(rewrite(rms_norm_model(**kwargs), RMS))


def _rms_with(x_type: str, body_in: str, body_out: str, scale: str) -> object:
    """x -> [body_in] -> RMS core over the last axis -> [body_out] -> * scale (a graph input)."""
    return build(
        f"""<ir_version: 10, opset_import: ["" : 23]>
        g ({x_type}[2, 4, 16] x, {x_type}[16] g) => ({x_type}[2, 4, 16] y) {{
            {body_in}
            two = Constant <value = float {{2.0}}> ()
            sq = Pow (xf, two)
            ax = Constant <value = int64[1] {{-1}}> ()
            ms = ReduceMean (sq, ax)
            eps = Constant <value = float {{1e-6}}> ()
            me = Add (ms, eps)
            rt = Sqrt (me)
            inv = Reciprocal (rt)
            n = Mul (xf, inv)
            {body_out}
            y = {scale}
        }}"""
    )


@pytest.mark.parametrize("scale", ["Mul (r, g)", "Mul (g, r)"])
def test_rms_norm_with_a_scale_input(scale):
    # the scale is a graph input, in either operand order: it becomes the op's scale input
    model = _rms_with("float", "xf = Identity (x)", "r = Identity (n)", scale)
    result = rewrite(model, LIBRARY / "folding", RMS)
    assert fired(result)["absorb_scale_input_into_rms_normalization"] == 1
    check_fired(model, result, dict(fired(result)), ["RMSNormalization"])


def test_rms_norm_computed_in_float_between_casts():
    # LLaMA's hidden.to(float32): one RMSNormalization of the float16 input, stash_type float
    model = _rms_with("float16", "xf = Cast <to = 1> (x)", "r = Cast <to = 10> (n)", "Mul (r, g)")
    result = rewrite(model, LIBRARY / "folding", RMS)
    counts = fired(result)
    assert counts["fuse_rms_normalization_in_float"] == 1
    check_fired(model, result, dict(counts), ["RMSNormalization"], rtol=1e-3, atol=1e-3)
    stash = next(a.i for a in result.proto.graph.node[0].attribute if a.name == "stash_type")
    assert stash == 1


def test_rms_norm_between_casts_to_another_type_near_miss():
    # the result is cast to float16 from a float32 input: no cast back to the input's type
    model = build(
        """<ir_version: 10, opset_import: ["" : 23]>
        g (float[2, 4, 16] x) => (float16[2, 4, 16] y) {
            s = Constant <value = float[16] {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}> ()
            xf = Cast <to = 1> (x)
            n = RMSNormalization <axis = -1> (xf, s)
            y = Cast <to = 10> (n)
        }"""
    )
    assert "fuse_rms_normalization_in_float" not in fired(rewrite(model, RMS))
