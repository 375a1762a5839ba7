"""Recipes for custom-domain ops that onnx cannot infer: the recipe also gives output types.

* `ai.onnx.converters.tensorflow.ExtractImagePatches` (tf2onnx's custom op): NHWC input,
  `ksizes`/`strides`/`rates` of the form [1, a, b, 1], padding VALID or SAME;
* onnxruntime's contrib ops the shipped rules match: Gelu, FastGelu, BiasGelu,
  SkipLayerNormalization (float or float16, as onnxruntime's CPU kernels need).
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
