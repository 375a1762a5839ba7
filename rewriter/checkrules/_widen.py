"""Widening an instance: its float16 and bfloat16 tensors become float32, or float32 double.

An instance in float16 rounds every intermediate value of the *original* graph to 11 bits; a
correct rewrite that computes the same function in another order (a fused Attention that adds
the mask to unrounded scores) can then disagree with it by more than float16's tolerance,
although it is the more accurate of the two. When a float16 or bfloat16 instance disagrees,
both models are widened and compared again at the narrow type's tolerance (see `_check`):
graph inputs, outputs and value types, initializers, tensor attributes and `to`/`dtype`
attributes of the narrow types become float32. Constants keep their rounded values, so a
rewrite that folded them wrongly (or into an overflow) still disagrees; only the rounding of
intermediate values goes away.

`widen_to_double` does the same from float32 to double, for telling whether an instance is
ill-conditioned (see `_check`): whether the original's own float32 result is its exact one.
"""

from __future__ import annotations

from typing import Any

import numpy as np

_FLOAT = 1
_DOUBLE = 11
_NARROW = (10, 16)  # onnx.TensorProto.FLOAT16, BFLOAT16
_TYPE_ATTRIBUTES = ("to", "dtype", "output_dtype")


def narrow_outputs(proto: Any) -> bool:
    """True when every graph output of `proto` is float16 or bfloat16."""
    types = {output.type.tensor_type.elem_type for output in proto.graph.output}
    return bool(types) and types <= set(_NARROW)


def widen(proto: Any) -> Any:
    """A copy of `proto` with float16 and bfloat16 tensors widened to float32."""
    return _widened(proto, _NARROW, _FLOAT)


def widen_to_double(proto: Any) -> Any:
    """A copy of `proto` with float32 (and float16, bfloat16) tensors widened to double."""
    return _widened(proto, (*_NARROW, _FLOAT), _DOUBLE)


def _widened(proto: Any, narrow: tuple[int, ...], wide: int) -> Any:
    import onnx

    model = onnx.ModelProto()
    model.CopyFrom(proto)
    graph = model.graph
    for value in (*graph.input, *graph.output, *graph.value_info):
        tensor = value.type.tensor_type
        if tensor.elem_type in narrow:
            tensor.elem_type = wide
    for index, initializer in enumerate(graph.initializer):
        if initializer.data_type in narrow:
            graph.initializer[index].CopyFrom(_widened_tensor(initializer, wide))
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.TENSOR and attr.t.data_type in narrow:
                attr.t.CopyFrom(_widened_tensor(attr.t, wide))
            elif _is_type_attribute(attr, onnx.AttributeProto.INT, narrow):
                attr.i = wide
    return model


def _is_type_attribute(attr: Any, int_type: int, narrow: tuple[int, ...]) -> bool:
    """A `to`/`dtype` attribute naming one of the `narrow` types."""
    return attr.name in _TYPE_ATTRIBUTES and attr.type == int_type and attr.i in narrow


def _widened_tensor(tensor: Any, wide: int) -> Any:
    import onnx.numpy_helper

    dtype = np.float64 if wide == _DOUBLE else np.float32
    array = np.asarray(onnx.numpy_helper.to_array(tensor)).astype(dtype)
    return onnx.numpy_helper.from_array(array, tensor.name)
