"""Recipes for custom-domain ops that onnx cannot infer: the recipe also gives output types.

* `ai.onnx.converters.tensorflow.ExtractImagePatches` (tf2onnx's custom op): NHWC input,
  `ksizes`/`strides`/`rates` of the form [1, a, b, 1], padding VALID or SAME;
* onnxruntime's contrib ops the shipped rules match: Gelu, FastGelu, BiasGelu,
  SkipLayerNormalization (float or float16, as onnxruntime's CPU kernels need), FusedMatMul.
"""

from __future__ import annotations

from collections.abc import Hashable

import ir
from rewriter.checkrules._line import LineBuild, RecipeError, Shape, TensorSpec
from rewriter.checkrules._recipes import recipe

TF_DOMAIN = "ai.onnx.converters.tensorflow"
MS_DOMAIN = "com.microsoft"


def _window(lb: LineBuild, key: Hashable, high: int) -> list[int]:
    return [1, lb.choices.integer((key, 1), 1, high), lb.choices.integer((key, 2), 1, high), 1]


@recipe("ExtractImagePatches", domain=TF_DOMAIN)
def extract_image_patches(lb: LineBuild) -> None:
    """X [N, H, W, C] -> [N, OH, OW, kh * kw * C]."""
    ksizes = lb.attr("ksizes", lambda key: _window(lb, key, 3), omit_percent=0)
    square = lb.choices.chance(lb.key("blocks"), 30)
    strides = lb.attr(
        "strides", lambda key: list(ksizes) if square else _window(lb, key, 3), omit_percent=0
    )
    rates = lb.attr(
        "rates", lambda key: [1, 1, 1, 1] if square else _window(lb, key, 2), omit_percent=30
    )
    padding = lb.attr(
        "padding", lambda key: lb.choices.pick(key, ("VALID", "SAME")), omit_percent=0
    )
    rates = list(rates or [1, 1, 1, 1])
    if any(len(v) != 4 for v in (ksizes, strides, rates)):
        raise RecipeError("ExtractImagePatches windows have 4 entries")
    x = lb.slots[0]
    if x.shape is None:
        dims = []
        for axis in (1, 2):
            span = (ksizes[axis] - 1) * rates[axis] + 1
            base = (
                span
                if not square
                else ksizes[axis] * lb.choices.integer(lb.key("tiles", axis), 1, 2)
            )
            dims.append(base + lb.choices.integer(lb.key("extra", axis), 0, 2))
        batch = lb.choices.integer(lb.key("batch"), 1, 2)
        channels = lb.choices.integer(lb.key("channels"), 1, 3)
        lb.set(x, lb.dtype_for(0), (batch, dims[0], dims[1], channels))
    shape = x.shape
    assert shape is not None, "x was just decided"
    if len(shape) != 4:
        raise RecipeError("ExtractImagePatches needs a 4-D input")
    out = [shape[0]]
    for axis in (1, 2):
        size, k, s, r = shape[axis], ksizes[axis], strides[axis], rates[axis]
        if padding == "SAME":
            out.append(-(-size // s))
        else:
            out.append(max(-(-(size - (k - 1) * r) // s), 0))
    out.append(ksizes[1] * ksizes[2] * shape[3])
    if min(out) < 1:
        raise RecipeError("ExtractImagePatches output would be empty")
    dtype = x.resolved.dtype if x.resolved is not None else lb.base_dtype
    lb.output_specs = [TensorSpec(dtype, tuple(out))]


def _float_input(lb: LineBuild, min_rank: int, max_rank: int) -> Shape:
    x = lb.slots[0]
    if x.shape is None:
        lb.set(x, _float_dtype(lb), lb.draw_shape(x, min_rank, max_rank))
    assert x.shape is not None, "x was just decided"
    return x.shape


def _float_dtype(lb: LineBuild) -> ir.DataType:
    # onnxruntime's contrib kernels run float (and float16 on some providers) only.
    return lb.base_dtype if lb.base_dtype in _ORT_FLOATS else ir.DataType.FLOAT


_ORT_FLOATS = (ir.DataType.FLOAT, ir.DataType.FLOAT16)


@recipe("Gelu", "FastGelu", "BiasGelu", "QuickGelu", domain=MS_DOMAIN)
def ms_gelu(lb: LineBuild) -> None:
    """X of rank >= 1; FastGelu's optional bias and BiasGelu's bias are 1-D [x.shape[-1]]."""
    shape = _float_input(lb, 1, 3)
    dtype = lb.slots[0].resolved.dtype if lb.slots[0].resolved is not None else _float_dtype(lb)
    for slot in lb.slots[1:]:
        if slot.present:
            lb.set(slot, dtype, (shape[-1],))
    lb.output_specs = [TensorSpec(dtype, shape)]


@recipe("SkipLayerNormalization", "SkipSimplifiedLayerNormalization", domain=MS_DOMAIN)
def ms_skip_layer_normalization(lb: LineBuild) -> None:
    """Input and skip [batch, seq, hidden]; gamma, beta, bias [hidden]."""
    shape = _float_input(lb, 3, 3)
    if len(shape) != 3:
        raise RecipeError("SkipLayerNormalization needs a 3-D input")
    dtype = lb.slots[0].resolved.dtype if lb.slots[0].resolved is not None else _float_dtype(lb)
    skip = lb.slots[1]
    lb.set(skip, dtype, shape)
    for slot in lb.slots[2:]:
        if slot.present:
            lb.set(slot, dtype, (shape[-1],))
    lb.attr("epsilon", lambda key: float(lb.choices.pick(key, (1e-5, 1e-12, 1e-3))))
    stats = (shape[0], shape[1], 1)
    specs = [TensorSpec(dtype, shape), TensorSpec(ir.DataType.FLOAT, stats)]
    specs += [TensorSpec(ir.DataType.FLOAT, stats), TensorSpec(dtype, shape)]
    lb.output_specs = specs[: max(lb.output_count, 1)]


def _fused_matmul_perm(rank: int, batch: int, trans: int) -> list[int]:
    """The permutation FusedMatMul applies to an operand (its schema's transBatch / trans)."""
    if batch:
        return [*range(1, rank), 0] if trans else [*range(1, rank - 1), 0, rank - 1]
    return [*range(rank - 2), rank - 1, rank - 2] if trans else list(range(rank))


def _unpermute(shape: Shape, perm: list[int]) -> Shape:
    """The shape whose Transpose by `perm` is `shape`."""
    out = [0] * len(shape)
    for i, p in enumerate(perm):
        out[p] = shape[i]
    return tuple(out)


def _flag(lb: LineBuild, name: str, allowed: bool) -> int:
    value = lb.attr(name, lambda key: lb.choices.integer(key, 0, 1) if allowed else 0)
    return int(value or 0)


@recipe("FusedMatMul", domain=MS_DOMAIN)
def ms_fused_matmul(lb: LineBuild) -> None:
    """FusedMatMul: alpha * op(A) @ op(B), op the permutation of each operand's flags.

    A and B have rank 2 to 4, one rank when a batch flag is set (onnxruntime's kernel
    requires it).
    """
    a, b = lb.slots[0], lb.slots[1]
    known = a.resolved or b.resolved
    dtype = known.dtype if known is not None else _float_dtype(lb)
    if a.shape is None and b.shape is None:
        lb.set(a, dtype, lb.draw_shape(a, 2, 4))
    anchor = a if a.shape is not None else b
    assert anchor.shape is not None, "one operand was just decided"
    rank = len(anchor.shape)
    if rank < 2:
        raise RecipeError("FusedMatMul needs operands of rank 2 or more")
    ta, tb = _flag(lb, "transA", True), _flag(lb, "transB", True)
    other = b if anchor is a else a
    same_rank = other.shape is None or len(other.shape) == rank
    tba = _flag(lb, "transBatchA", rank >= 3 and same_rank)
    tbb = _flag(lb, "transBatchB", rank >= 3 and same_rank)
    lb.attr("alpha", lambda key: float(lb.choices.pick(key, (1.0, 0.5, -2.0, 0.125))))
    if (tba or tbb) and not (rank >= 3 and same_rank):
        raise RecipeError("FusedMatMul's batch flags need operands of one rank, 3 or more")
    flags = {id(a): (tba, ta), id(b): (tbb, tb)}
    effective = _permute(anchor.shape, _fused_matmul_perm(rank, *flags[id(anchor)]))
    if other.shape is None:
        size = lb.choices.integer(lb.key("free_dim"), 1, 4)
        if anchor is a:  # A' [..., M, K]: B' [..., K, N]
            wanted = (*effective[:-2], effective[-1], size)
        else:  # B' [..., K, N]: A' [..., M, K]
            wanted = (*effective[:-2], size, effective[-2])
        lb.set(other, dtype, _unpermute(wanted, _fused_matmul_perm(rank, *flags[id(other)])))
    assert a.shape is not None, "A is decided"
    assert b.shape is not None, "B is decided"
    a_eff = _permute(a.shape, _fused_matmul_perm(len(a.shape), tba, ta))
    b_eff = _permute(b.shape, _fused_matmul_perm(len(b.shape), tbb, tb))
    if a_eff[-1] != b_eff[-2]:
        raise RecipeError("FusedMatMul operands do not multiply")
    batch = _broadcast(a_eff[:-2], b_eff[:-2])
    lb.output_specs = [TensorSpec(dtype, (*batch, a_eff[-2], b_eff[-1]))]


def _permute(shape: Shape, perm: list[int]) -> Shape:
    return tuple(shape[p] for p in perm)


def _broadcast(left: Shape, right: Shape) -> Shape:
    width = max(len(left), len(right))
    padded_left = (1,) * (width - len(left)) + tuple(left)
    padded_right = (1,) * (width - len(right)) + tuple(right)
    out = []
    for x, y in zip(padded_left, padded_right, strict=True):
        if x != y and 1 not in (x, y):
            raise RecipeError("FusedMatMul batch dims do not broadcast")
        out.append(y if x == 1 else x)
    return tuple(out)


@recipe("MultiHeadAttention", domain=MS_DOMAIN)
def ms_multi_head_attention(lb: LineBuild) -> None:
    """MultiHeadAttention on separate 3-D query, key and value, with an optional packed bias.

    Query [B, S, hidden], key [B, L, hidden], value [B, L, v_hidden] (num_heads dividing
    both), bias [2 * hidden + v_hidden], and optionally a past key [B, heads, P, head_size]
    and past value [B, heads, P, v_head_size]; the present key and value (outputs 1 and 2)
    are the past ones with the new key and value appended, [B, heads, P + L, ...]. The masks
    (inputs 4 and 5) are not built; query, key and value decided by earlier lines must agree
    on the batch, key and value on the length.
    """
    query, key, value = lb.slots[0], lb.present(1), lb.present(2)
    if key is None or value is None:
        raise RecipeError("MultiHeadAttention is built with a separate key and value")
    if any(lb.present(i) is not None for i in (4, 5, *range(8, len(lb.slots)))):
        raise RecipeError("MultiHeadAttention is built without masks")
    past_key, past_value = lb.present(6), lb.present(7)
    if (past_key is None) != (past_value is None):
        raise RecipeError("MultiHeadAttention is built with both past key and value or neither")
    known = query.resolved or key.resolved or value.resolved
    dtype = known.dtype if known is not None else ir.DataType.FLOAT
    widths = [s.shape[2] for s in (query, key, value) if s.shape is not None and len(s.shape) == 3]
    heads = int(lb.attr("num_heads", lambda k: _heads(lb, k, widths), omit_percent=0))
    if heads < 1:
        raise RecipeError("MultiHeadAttention needs num_heads >= 1")
    size = lb.choices.integer(lb.key("head_size"), 1, 3)
    batch = lb.choices.integer(lb.key("batch"), 1, 2)
    seq = lb.choices.integer(lb.key("seq"), 1, 3)
    kv_seq = lb.choices.integer(lb.key("kv_seq"), 1, 3)
    shapes = {
        id(query): (batch, seq, heads * size),
        id(key): (batch, kv_seq, heads * size),
        id(value): (batch, kv_seq, heads * size),
    }
    for slot in (query, key, value):
        if slot.shape is None:
            lb.set(slot, dtype, shapes[id(slot)])
    assert query.shape is not None, "query is decided"
    assert key.shape is not None, "key is decided"
    assert value.shape is not None, "value is decided"
    if len(query.shape) != 3 or len(key.shape) != 3 or len(value.shape) != 3:
        raise RecipeError("MultiHeadAttention is built on 3-D query, key and value")
    if len({query.shape[0], key.shape[0], value.shape[0]}) != 1 or key.shape[1] != value.shape[1]:
        # (onnxruntime refuses such inputs: an instance it cannot run checks nothing)
        raise RecipeError("MultiHeadAttention's query, key and value disagree on batch or length")
    hidden, v_hidden = query.shape[2], value.shape[2]
    if hidden % heads or v_hidden % heads or key.shape[2] != hidden:
        raise RecipeError("MultiHeadAttention's hidden sizes do not split into num_heads")
    lb.attr("scale", lambda k: float(lb.choices.pick(k, (0.0, 0.5, 0.125, 2.0))))
    bias = lb.present(3)
    if bias is not None:
        lb.set(bias, dtype, (2 * hidden + v_hidden,))
    past = _past_length(lb, query.shape[0], heads, (hidden // heads, v_hidden // heads))
    total = past + key.shape[1]
    specs = [
        TensorSpec(dtype, (query.shape[0], query.shape[1], v_hidden)),
        TensorSpec(dtype, (query.shape[0], heads, total, hidden // heads)),
        TensorSpec(dtype, (query.shape[0], heads, total, v_hidden // heads)),
    ]
    lb.output_specs = specs[: max(lb.output_count, 1)]


def _heads(lb: LineBuild, key: Hashable, widths: list[int]) -> int:
    """num_heads: 1 or 2, but 1 where earlier lines decided a width 2 does not divide."""
    heads = lb.choices.integer(key, 1, 2)
    return heads if all(width % heads == 0 for width in widths) else 1


def _past_length(lb: LineBuild, batch: int, heads: int, sizes: tuple[int, int]) -> int:
    """Decide MultiHeadAttention's past key and value [batch, heads, P, size]; P (0 if none)."""
    past_key, past_value = lb.present(6), lb.present(7)
    if past_key is None or past_value is None:
        return 0
    length = lb.choices.integer(lb.key("past_seq"), 1, 3)
    dtype = lb.slots[0].resolved.dtype if lb.slots[0].resolved is not None else _float_dtype(lb)
    for slot, size in ((past_key, sizes[0]), (past_value, sizes[1])):
        if slot.shape is None:
            lb.set(slot, dtype, (batch, heads, length, size))
    assert past_key.shape is not None, "the past key is decided"
    assert past_value.shape is not None, "the past value is decided"
    # A past decided by earlier lines (a Squeeze of a cache slice) may not fit yet: the
    # instance is still built, so that the rule's `where` lines, which must require the fit,
    # fail on it and their hints force the cache's shape (an instance is only accepted with
    # every `where` line true).
    return past_key.shape[2] if len(past_key.shape) == 4 else 0
