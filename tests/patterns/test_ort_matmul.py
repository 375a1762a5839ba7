"""patterns/ort/matmul.rw: Transposes and scalar scalings into com.microsoft.FusedMatMul, each
checked against onnxruntime's own kernel (outputs equal with its optimizations off), and the
near misses where FusedMatMul cannot say the same."""

from __future__ import annotations

import numpy as np
import pytest

from tests.patterns.fusion_helpers import ORT_RULES, build, check_fired, fired, rewrite

MATMUL = ORT_RULES / "matmul.rw"
HEADER = '<ir_version: 8, opset_import: ["" : 17, "com.microsoft" : 1]>'


def _model(body: str, inputs: str, output: str, **arrays: object) -> object:
    """A model of `inputs` ("float[2, 3] a, ...") with one output y of type `output`."""
    return build(f"{HEADER}\ng ({inputs}) => ({output} y) {{\n{body}\n}}", **arrays)


def _flags(result: object) -> set[str]:
    """The FusedMatMul's integer attributes that are set."""
    node = result.proto.graph.node[0]
    return {a.name for a in node.attribute if a.name != "alpha" and a.i}


@pytest.mark.parametrize(
    ("perm", "a_shape", "b_shape", "out", "flags"),
    [
        ("<perm = [1, 0]>", "[4, 3]", "[4, 5]", "[3, 5]", {"transA"}),
        ("", "[4, 3]", "[4, 5]", "[3, 5]", {"transA"}),  # no perm: reversed axes, the swap
        ("<perm = [0, 2, 1]>", "[2, 4, 3]", "[2, 4, 5]", "[2, 3, 5]", {"transA"}),
        # the first dim moved before the last, and moved last
        ("<perm = [1, 0, 2]>", "[3, 2, 4]", "[2, 4, 5]", "[2, 3, 5]", {"transBatchA"}),
        ("<perm = [1, 2, 0]>", "[4, 2, 3]", "[2, 4, 5]", "[2, 3, 5]", {"transA", "transBatchA"}),
    ],
)
def test_transpose_into_matmul_a(perm, a_shape, b_shape, out, flags):
    model = _model(
        f"t = Transpose {perm} (a)\n y = MatMul (t, b)",
        f"float{a_shape} a, float{b_shape} b",
        f"float{out}",
    )
    result = rewrite(model, MATMUL)
    check_fired(model, result, {"fuse_transpose_into_matmul_a": 1}, ["FusedMatMul"])
    assert _flags(result) == flags


@pytest.mark.parametrize(
    ("perm", "a_shape", "b_shape", "out", "flags"),
    [
        ("[1, 0]", "[3, 4]", "[5, 4]", "[3, 5]", {"transB"}),
        ("[0, 2, 1]", "[2, 3, 4]", "[2, 5, 4]", "[2, 3, 5]", {"transB"}),
        ("[1, 0, 2]", "[2, 3, 4]", "[4, 2, 5]", "[2, 3, 5]", {"transBatchB"}),
    ],
)
def test_transpose_into_matmul_b(perm, a_shape, b_shape, out, flags):
    model = _model(
        f"t = Transpose <perm = {perm}> (b)\n y = MatMul (a, t)",
        f"float{a_shape} a, float{b_shape} b",
        f"float{out}",
    )
    result = rewrite(model, MATMUL)
    check_fired(model, result, {"fuse_transpose_into_matmul_b": 1}, ["FusedMatMul"])
    assert _flags(result) == flags


def test_both_transposes_and_a_scale_go_into_one_fused_matmul():
    # (A^T B^T) / 8: the first Transpose makes a FusedMatMul, the others go into it
    model = _model(
        "ta = Transpose <perm = [0, 2, 1]> (a)\n tb = Transpose <perm = [0, 2, 1]> (b)\n"
        "m = MatMul (ta, tb)\n y = Div (m, c)",
        "float[2, 4, 3] a, float[2, 5, 4] b",
        "float[2, 3, 5]",
        c=np.float32(8.0),
    )
    result = rewrite(model, MATMUL)
    counts = fired(result)
    assert sum(counts.values()) == 3, counts
    check_fired(model, result, dict(counts), ["FusedMatMul"])
    assert _flags(result) == {"transA", "transB"}
    alpha = next(a.f for a in result.proto.graph.node[0].attribute if a.name == "alpha")
    assert alpha == 0.125


def test_a_transpose_composes_with_the_flags_of_a_fused_matmul():
    # FusedMatMul(transA) of Transpose([1, 0, 2]): the swap after [1, 0, 2] is [1, 2, 0],
    # both flags
    model = _model(
        "t = Transpose <perm = [1, 0, 2]> (a)\ny = com.microsoft.FusedMatMul <transA = 1> (t, b)",
        "float[2, 3, 4] a, float[3, 2, 5] b",
        "float[3, 4, 5]",
    )
    result = rewrite(model, MATMUL)
    check_fired(model, result, {"fuse_transpose_into_fused_matmul_a": 1}, ["FusedMatMul"])
    assert _flags(result) == {"transA", "transBatchA"}


@pytest.mark.parametrize(("op", "c", "alpha"), [("Mul", 0.5, 0.5), ("Div", 4.0, 0.25)])
def test_scale_into_matmul(op, c, alpha):
    model = _model(
        f"m = MatMul (a, b)\n y = {op} (m, c)",
        "float[N, 3, 4] a, float[4, 5] b",
        "float[N, 3, 5]",
        c=np.float32(c),
    )
    result = rewrite(model, MATMUL)
    check_fired(model, result, {"fuse_scale_into_matmul": 1}, ["FusedMatMul"])
    assert result.proto.graph.node[0].attribute[0].f == alpha


def test_matmul_then_transpose():
    # (A B)^T = B^T A^T
    model = _model(
        "m = MatMul (a, b)\n y = Transpose <perm = [0, 2, 1]> (m)",
        "float[2, 3, 4] a, float[2, 4, 5] b",
        "float[2, 5, 3]",
    )
    check_fired(model, rewrite(model, MATMUL), {"fuse_matmul_then_transpose": 1}, ["FusedMatMul"])


def test_fused_matmul_then_transpose():
    # (0.5 A B)^T = 0.5 B^T A^T, alpha kept
    model = _model(
        "m = com.microsoft.FusedMatMul <alpha = 0.5> (a, b)\n y = Transpose <perm = [1, 0]> (m)",
        "float[3, 4] a, float[4, 5] b",
        "float[5, 3]",
    )
    result = rewrite(model, MATMUL)
    check_fired(model, result, {"fuse_fused_matmul_then_transpose": 1}, ["FusedMatMul"])
    assert _flags(result) == {"transA", "transB"}


@pytest.mark.parametrize(
    ("body", "inputs", "output"),
    [
        pytest.param(
            "t = Transpose <perm = [2, 0, 1]> (a)\n y = MatMul (t, b)",
            "float[3, 2, 4] a, float[4, 2, 5] b",
            "float[4, 3, 5]",
            id="a permutation none of the four flags spells",
        ),
        pytest.param(
            "t = Transpose <perm = [1, 0, 2]> (a)\n y = MatMul (t, b)",
            "float[3, 2, 4] a, float[4, 5] b",
            "float[2, 3, 5]",
            id="a batch flag with operands of two ranks (onnxruntime refuses it)",
        ),
        pytest.param(
            "t = Transpose <perm = [1, 0]> (a)\n y = MatMul (t, b)",
            "int32[4, 3] a, int32[4, 5] b",
            "int32[3, 5]",
            id="int32 (no FusedMatMul kernel)",
        ),
        pytest.param(
            "m = com.microsoft.FusedMatMul <transBatchA = 1> (a, b)\n"
            "y = Transpose <perm = [0, 2, 1]> (m)",
            "float[3, 2, 4] a, float[2, 4, 5] b",
            "float[2, 5, 3]",
            id="a transposed product with a batch flag",
        ),
        pytest.param(
            "m = MatMul (a, b)\n y = Mul (m, c)",
            "float[3, 4] a, float[4, 5] b, float c",
            "float[3, 5]",
            id="a scale that is no constant",
        ),
        pytest.param(
            "c = Constant <value = float {3.0}> ()\n"
            "m = com.microsoft.FusedMatMul <alpha = 0.5> (a, b)\n y = Mul (m, c)",
            "float[3, 4] a, float[4, 5] b",
            "float[3, 5]",
            id="a fused alpha other than 1 (alpha * c rounds once more)",
        ),
    ],
)
def test_fused_matmul_near_misses(body, inputs, output):
    assert not fired(rewrite(_model(body, inputs, output), MATMUL))
