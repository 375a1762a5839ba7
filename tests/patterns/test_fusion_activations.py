"""Rules of patterns/fusion/gelu.rw and hard_activations.rw: every operand order exporters
write fuses; near misses (wrong constant, extra use, old opset) do not."""

from __future__ import annotations

import pytest

from tests.patterns.fusion_helpers import FUSION, build, check_fired, fired, rewrite

GELU = FUSION / "gelu.rw"
HARD = FUSION / "hard_activations.rw"

# -- Gelu -----------------------------------------------------------------------------------------

# The three places of the 0.5 factor: (x * h) * 0.5, (x * 0.5) * h, x * (0.5 * h).
PLACEMENTS = {
    "mul_last": ["t = Mul (x, h)", "y = Mul (t, half)"],
    "half_x": ["t = Mul (x, half)", "y = Mul (t, h)"],
    "half_h": ["t = Mul (half, h)", "y = Mul (x, t)"],
}


def gelu_erf_model(
    placement: str,
    scaling: str = "div",
    constant: float | None = None,
    opset: int = 20,
    extra_output: str | None = None,
) -> object:
    if scaling == "div":
        c = 1.4142135 if constant is None else constant
        arg = [f"c = Constant <value = float {{{c!r}}}> ()", "u = Div (x, c)"]
    else:
        c = 0.70710678 if constant is None else constant
        arg = [f"c = Constant <value = float {{{c!r}}}> ()", "u = Mul (c, x)"]
    lines = [
        *arg,
        "e = Erf (u)",
        "one = Constant <value = float {1.0}> ()",
        "h = Add (one, e)",
        "half = Constant <value = float {0.5}> ()",
        *PLACEMENTS[placement],
    ]
    outputs = "float[N, 7] y"
    if extra_output:
        lines.append(f"extra = Identity ({extra_output})")
        outputs += ", float[N, 7] extra"
    body = "\n            ".join(lines)
    return build(
        f"""<ir_version: 8, opset_import: ["" : {opset}]>
        g (float[N, 7] x) => ({outputs}) {{
            {body}
        }}"""
    )


def gelu_tanh_model(
    placement: str, cube: str = "pow", opset: int = 20, c3: float = 0.044715
) -> object:
    if cube == "pow":
        x3 = ["three = Constant <value = float {3.0}> ()", "x3 = Pow (x, three)"]
    else:
        x3 = ["x2 = Mul (x, x)", "x3 = Mul (x2, x)"]
    lines = [
        *x3,
        f"k = Constant <value = float {{{c3!r}}}> ()",
        "s = Mul (k, x3)",
        "a = Add (x, s)",
        "c = Constant <value = float {0.7978846}> ()",
        "v = Mul (a, c)",
        "th = Tanh (v)",
        "one = Constant <value = float {1.0}> ()",
        "h = Add (th, one)",
        "half = Constant <value = float {0.5}> ()",
        *PLACEMENTS[placement],
    ]
    body = "\n            ".join(lines)
    return build(
        f"""<ir_version: 8, opset_import: ["" : {opset}]>
        g (float[N, 7] x) => (float[N, 7] y) {{
            {body}
        }}"""
    )


@pytest.mark.parametrize("placement", list(PLACEMENTS))
@pytest.mark.parametrize("scaling", ["div", "mul"])
def test_fuse_gelu_erf(placement, scaling):
    model = gelu_erf_model(placement, scaling)
    check_fired(model, rewrite(model, GELU), {f"fuse_gelu_erf_{placement}": 1}, ["Gelu"])


@pytest.mark.parametrize("placement", list(PLACEMENTS))
@pytest.mark.parametrize("cube", ["pow", "mul"])
def test_fuse_gelu_tanh(placement, cube):
    model = gelu_tanh_model(placement, cube)
    rule = f"fuse_gelu_tanh_{'cube_' if cube == 'mul' else ''}{placement}"
    result = rewrite(model, GELU)
    check_fired(model, result, {rule: 1}, ["Gelu"])
    (node,) = result.proto.graph.node
    assert [a.s for a in node.attribute] == [b"tanh"]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"constant": 1.5},  # not sqrt(2)
        {"scaling": "mul", "constant": 1.4142135},  # multiplies by sqrt(2) instead of dividing
        {"opset": 19},  # Gelu does not exist yet
        {"extra_output": "e"},  # the Erf result is used elsewhere
        {"extra_output": "t"},
    ],
)
def test_fuse_gelu_erf_near_misses(kwargs):
    assert not fired(rewrite(gelu_erf_model("mul_last", **kwargs), GELU))


@pytest.mark.parametrize("kwargs", [{"c3": 0.05}, {"opset": 19}, {"cube": "mul", "c3": 0.04}])
def test_fuse_gelu_tanh_near_misses(kwargs):
    assert not fired(rewrite(gelu_tanh_model("half_x", **kwargs), GELU))


def gelu_tanh_factored_model(
    opset: int = 20, c3: float = 0.044715, inner: str = "ax_x", ms: bool = False
) -> object:
    """HF's FastGELUActivation as exported: (x * 0.5) * (1 + tanh(x * c * (1 + a * x * x)))."""
    square = {
        "ax_x": ["ax = Mul (a, x)", "sq = Mul (ax, x)"],  # (a * x) * x, as Python evaluates it
        "x_ax": ["ax = Mul (x, a)", "sq = Mul (x, ax)"],
        "xx_a": ["xx = Mul (x, x)", "sq = Mul (xx, a)"],  # another association: not matched
    }[inner]
    lines = [
        f"a = Constant <value = float {{{c3!r}}}> ()",
        *square,
        "one = Constant <value = float {1.0}> ()",
        "f = Add (sq, one)",
        "c = Constant <value = float {0.7978845608}> ()",
        "cx = Mul (x, c)",
        "v = Mul (cx, f)",
        "th = Tanh (v)",
        "h = Add (th, one)",
        "half = Constant <value = float {0.5}> ()",
        "t = Mul (half, x)",
        "y = Mul (t, h)",
    ]
    body = "\n            ".join(lines)
    domains = f'"" : {opset}' + (', "com.microsoft" : 1' if ms else "")
    return build(
        f"""<ir_version: 8, opset_import: [{domains}]>
        g (float[N, 7] x) => (float[N, 7] y) {{
            {body}
        }}"""
    )


@pytest.mark.parametrize("inner", ["ax_x", "x_ax"])
def test_fuse_gelu_tanh_factored(inner):
    model = gelu_tanh_factored_model(inner=inner)
    result = rewrite(model, GELU)
    check_fired(model, result, {"fuse_gelu_tanh_factored_half_x": 1}, ["Gelu"])
    (node,) = result.proto.graph.node
    assert [a.s for a in node.attribute] == [b"tanh"]


@pytest.mark.parametrize("kwargs", [{"c3": 0.05}, {"opset": 19}, {"inner": "xx_a"}])
def test_fuse_gelu_tanh_factored_near_misses(kwargs):
    assert not fired(rewrite(gelu_tanh_factored_model(**kwargs), GELU))


# -- HardSigmoid / HardSwish ----------------------------------------------------------------------


def _model(body: str, opset: int = 14, shape: str = "N, 7") -> object:
    return build(
        f"""<ir_version: 8, opset_import: ["" : {opset}]>
        g (float[{shape}] x) => (float[{shape}] y) {{
            {body}
        }}"""
    )


def _clip(source: str, lo: float, hi: float, opset: int) -> str:
    if opset >= 11:
        return (
            f"lo = Constant <value = float {{{lo}}}> ()\n"
            f"            hi = Constant <value = float {{{hi}}}> ()\n"
            f"            r = Clip ({source}, lo, hi)"
        )
    return f"r = Clip <min = {lo}, max = {hi}> ({source})"


def hard_sigmoid_clip(
    opset: int = 14, scaling: str = "Mul", a: float = 0.2, b: float = 0.5, hi: float = 1.0
) -> object:
    return _model(
        f"""a = Constant <value = float {{{a}}}> ()
            u = {scaling} (x, a)
            b = Constant <value = float {{{b}}}> ()
            t = Add (b, u)
            {_clip("t", 0.0, hi, opset)}
            y = Identity (r)""",
        opset,
    )


@pytest.mark.parametrize(
    ("opset", "scaling", "a"), [(14, "Mul", 0.2), (9, "Mul", 0.25), (14, "Div", 6.0)]
)
def test_fuse_hard_sigmoid_from_clip(opset, scaling, a):
    model = hard_sigmoid_clip(opset, scaling, a)
    result = rewrite(model, HARD)
    check_fired(model, result, {"fuse_hard_sigmoid_from_clip": 1}, ["HardSigmoid", "Identity"])


@pytest.mark.parametrize("order", ["min_max", "max_min"])
def test_fuse_hard_sigmoid_from_min_max(order):
    outer, inner = ("Min", "Max") if order == "min_max" else ("Max", "Min")
    first, second = ("zero", "one") if order == "min_max" else ("one", "zero")
    model = _model(
        f"""a = Constant <value = float {{0.16666667}}> ()
            u = Mul (x, a)
            b = Constant <value = float {{0.5}}> ()
            t = Add (u, b)
            zero = Constant <value = float {{0.0}}> ()
            one = Constant <value = float {{1.0}}> ()
            m = {inner} ({first}, t)
            y = {outer} (m, {second})"""
    )
    check_fired(
        model, rewrite(model, HARD), {f"fuse_hard_sigmoid_from_{order}": 1}, ["HardSigmoid"]
    )


@pytest.mark.parametrize(
    ("opset", "scaling", "k"), [(14, "Div", 6.0), (14, "Mul", 1 / 6), (9, "Div", 6.0)]
)
def test_fuse_hard_sigmoid_from_relu6(opset, scaling, k):
    model = _model(
        f"""three = Constant <value = float {{3.0}}> ()
            t = Add (x, three)
            {_clip("t", 0.0, 6.0, opset)}
            k = Constant <value = float {{{k!r}}}> ()
            y = {scaling} (r, k)""",
        opset,
    )
    check_fired(model, rewrite(model, HARD), {"fuse_hard_sigmoid_from_relu6": 1}, ["HardSigmoid"])


@pytest.mark.parametrize(
    "kwargs",
    [{"hi": 2.0}, {"a": [0.2, 0.3]}],  # clips at 2; a per-element slope
)
def test_fuse_hard_sigmoid_near_misses(kwargs):
    if isinstance(kwargs.get("a"), list):
        model = _model(
            """a = Constant <value = float[2] {0.2, 0.3}> ()
            u = Mul (x, a)
            b = Constant <value = float {0.5}> ()
            t = Add (u, b)
            lo = Constant <value = float {0.0}> ()
            hi = Constant <value = float {1.0}> ()
            y = Clip (t, lo, hi)""",
            shape="N, 2",
        )
    else:
        model = hard_sigmoid_clip(**kwargs)
    assert not fired(rewrite(model, HARD))


def test_fuse_hard_sigmoid_from_relu6_near_miss_wrong_divisor():
    model = _model(
        f"""three = Constant <value = float {{3.0}}> ()
            t = Add (x, three)
            {_clip("t", 0.0, 6.0, 14)}
            k = Constant <value = float {{5.0}}> ()
            y = Div (r, k)"""
    )
    assert not fired(rewrite(model, HARD))


@pytest.mark.parametrize("opset", [14, 22])
def test_fuse_hard_swish(opset):
    model = _model(
        """h = HardSigmoid <alpha = 0.16666667, beta = 0.5> (x)
            y = Mul (h, x)""",
        opset,
    )
    check_fired(model, rewrite(model, HARD), {"fuse_hard_swish": 1}, ["HardSwish"])


def test_fuse_hard_swish_from_relu6_chain():
    # x * (Relu6(x + 3) / 6): HardSigmoid first, then HardSwish
    model = _model(
        f"""three = Constant <value = float {{3.0}}> ()
            t = Add (x, three)
            {_clip("t", 0.0, 6.0, 14)}
            k = Constant <value = float {{6.0}}> ()
            s = Div (r, k)
            y = Mul (x, s)"""
    )
    result = rewrite(model, HARD)
    check_fired(
        model, result, {"fuse_hard_sigmoid_from_relu6": 1, "fuse_hard_swish": 1}, ["HardSwish"]
    )


@pytest.mark.parametrize(("scaling", "k"), [("Div", 6.0), ("Mul", 1 / 6)])
def test_fuse_hard_swish_from_relu6(scaling, k):
    model = _model(
        f"""three = Constant <value = float {{3.0}}> ()
            t = Add (x, three)
            {_clip("t", 0.0, 6.0, 14)}
            p = Mul (r, x)
            k = Constant <value = float {{{k!r}}}> ()
            y = {scaling} (p, k)"""
    )
    check_fired(model, rewrite(model, HARD), {"fuse_hard_swish_from_relu6": 1}, ["HardSwish"])


def test_fuse_hard_swish_alpha_one_float_step_from_a_sixth():
    # 0.16666666 is 1/6 printed with 8 digits (onnxscript's tests write it so)
    model = _model(
        "h = HardSigmoid <alpha = 0.16666666, beta = 0.5> (x)\n            y = Mul (h, x)"
    )
    check_fired(model, rewrite(model, HARD), {"fuse_hard_swish": 1}, ["HardSwish"])


def test_fuse_hard_swish_near_miss_alpha_further_from_a_sixth():
    # 0.1666666 is four float32 steps below 1/6: another function
    model = _model(
        "h = HardSigmoid <alpha = 0.1666666, beta = 0.5> (x)\n            y = Mul (h, x)"
    )
    assert not fired(rewrite(model, HARD))


def test_fuse_hard_swish_near_misses():
    # the default alpha (0.2) is not HardSwish's 1/6
    model = _model("h = HardSigmoid (x)\n            y = Mul (h, x)")
    assert not fired(rewrite(model, HARD))
    # HardSwish does not exist before opset 14
    model = _model(
        "h = HardSigmoid <alpha = 0.16666667, beta = 0.5> (x)\n            y = Mul (h, x)", 13
    )
    assert not fired(rewrite(model, HARD))
    # x * Relu6(x + 3) / 5
    model = _model(
        f"""three = Constant <value = float {{3.0}}> ()
            t = Add (x, three)
            {_clip("t", 0.0, 6.0, 14)}
            p = Mul (r, x)
            k = Constant <value = float {{5.0}}> ()
            y = Div (p, k)"""
    )
    assert not fired(rewrite(model, HARD))
