"""Recipes for custom-domain ops that onnx cannot infer: the recipe also gives output types.

* `ai.onnx.converters.tensorflow.ExtractImagePatches` (tf2onnx's custom op): NHWC input,
  `ksizes`/`strides`/`rates` of the form [1, a, b, 1], padding VALID or SAME.
"""

from __future__ import annotations

from collections.abc import Hashable

from rewriter.checkrules._line import LineBuild, RecipeError, TensorSpec
from rewriter.checkrules._recipes import recipe

TF_DOMAIN = "ai.onnx.converters.tensorflow"


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
