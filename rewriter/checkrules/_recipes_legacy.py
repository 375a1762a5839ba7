"""Recipes for onnxruntime's old experimental ops in the default domain (below opset 10).

onnx dropped `Affine`, `Scale`, `ScaledTanh`, `ParametricSoftplus` and `ImageScaler` (among
others) at opset 10 and keeps no schema for them; onnxruntime still runs them, float only
(`ir.schemas.find_runtime_op`). Their output is like their input, so the recipe gives the
output type that onnx's inference cannot. ImageScaler reads NCHW with one bias per channel.
"""

from __future__ import annotations

from collections.abc import Hashable

import ir
from rewriter.checkrules._line import LineBuild, RecipeError, TensorSpec
from rewriter.checkrules._recipes import recipe

# Factors with an exact float32 form and ones without (0.1), negative, and zero.
_FACTORS = (2.0, 0.5, -1.5, 0.1, 0.0, 1.0)


def _factor(lb: LineBuild, name: str, *, optional: bool) -> None:
    """Draw float attribute `name`; `optional`: sometimes left out (the kernel's default)."""

    def draw(key: Hashable) -> float | None:
        if optional and lb.choices.chance((key, "omit"), 25):
            return None
        return float(lb.choices.pick(key, _FACTORS))

    lb.attr(name, draw, omit_percent=0)


@recipe("Affine", "Scale", "ScaledTanh", "ParametricSoftplus", "ImageScaler")
def legacy_elementwise(lb: LineBuild) -> None:
    """X float of rank 1 to 4 (ImageScaler: 4, NCHW); Y like X."""
    if ir.schemas.find_runtime_op(lb.op_type, lb.domain, lb.opset) is None:
        raise RecipeError(f"onnxruntime runs {lb.op_type} only below opset 10")
    x = lb.slots[0]
    image = lb.op_type == "ImageScaler"
    if x.shape is None:
        low, high = (4, 4) if image else (1, 4)
        lb.set(x, ir.DataType.FLOAT, lb.draw_shape(x, low, high))
    shape = x.shape
    assert shape is not None, "x was just decided"
    if image and len(shape) != 4:
        raise RecipeError("ImageScaler reads NCHW")
    if lb.op_type in ("Affine", "ScaledTanh", "ParametricSoftplus"):
        required = lb.op_type != "Affine"
        _factor(lb, "alpha", optional=not required)
        _factor(lb, "beta", optional=not required)
    else:
        _factor(lb, "scale", optional=True)
    if image:
        channels = shape[1]
        lb.attr(
            "bias",
            lambda key: [float(lb.choices.pick((key, c), _FACTORS)) for c in range(channels)],
            omit_percent=0,
        )
    resolved = x.resolved
    dtype = resolved.dtype if resolved is not None else ir.DataType.FLOAT
    lb.output_specs = [TensorSpec(dtype, tuple(shape))]
