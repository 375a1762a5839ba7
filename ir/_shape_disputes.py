"""Nodes whose output dims onnx's shape inference and onnxruntime compute differently.

The reference for a model is what onnxruntime computes, and onnx's inference does not always
agree with it on output sizes (found by `tests/ir/test_shape_facts_grid.py`, which compares
the facts with the shapes onnxruntime produces over grids of ops and attributes):

* pooling with `ceil_mode=1` and a stride above 1: onnxruntime drops a last window that would
  start in the end padding or past the input (L=5, k=2, s=2, pads 1: onnx says 4, onnxruntime
  computes 3);
* pooling with `auto_pad` SAME_UPPER / SAME_LOWER and a dilation above 1: onnxruntime pads
  for the undilated kernel and then applies the dilated one;
* ConvTranspose with `auto_pad` SAME_UPPER / SAME_LOWER (with strides or `output_padding`);
* Slice with a negative step and an end of INT32_MAX or INT64_MAX: onnxruntime reads that end
  as "to the end" (x[-1:INT64_MAX:-1] of 3 rows is all 3 reversed), onnx clamps it to the last
  index (no rows);
* Resize and Upsample sized by `scales` (onnxruntime multiplies in float32, onnx in double:
  10 x 2.3 is 23 there and 22 here) or by `sizes` with a `keep_aspect_ratio_policy` other
  than "stretch" (a rounded float product again).

For such a node onnx's dims are no facts: the whole-model inference runs with the node hidden
(`_shape_inference`), per-node inference results lose their dims (`_infer`), and only this
package's own rules (`_shape_ops_nn`), which state a dim only where both computations agree,
give its output dims. Declared dims (value_info) of values computed from such a node are no
facts either: exporters fill value_info with onnx's inference.
"""

from __future__ import annotations

from ir._core import Node, Value
from ir._shape_facts import attr_int, attr_ints, attr_str, attr_tensor, input_at

_DEFAULT_DOMAINS = ("", "ai.onnx")
_SAME = ("SAME_UPPER", "SAME_LOWER")


# The only ops `has_disputed_dims` can say yes for (looked up first: it is asked of every node).
_DISPUTABLE_OPS = frozenset(
    {"MaxPool", "AveragePool", "LpPool", "ConvTranspose", "Upsample", "Resize", "Slice"}
)
# Ends onnxruntime's Slice reads as "to the end" whatever the step's sign.
_END_OF_AXIS = (2**31 - 1, 2**63 - 1)


def has_disputed_dims(node: Node) -> bool:
    """True when onnx's inference may give `node` output dims onnxruntime does not compute."""
    if node.op_type not in _DISPUTABLE_OPS or node.domain not in _DEFAULT_DOMAINS:
        return False
    if node.op_type in ("MaxPool", "AveragePool", "LpPool"):
        return _pool_disputed(node)
    if node.op_type == "ConvTranspose":
        return attr_str(node, "auto_pad", "NOTSET") in _SAME
    if node.op_type == "Upsample":
        return True
    if node.op_type == "Resize":
        return _resize_disputed(node)
    if node.op_type == "Slice":
        return _slice_disputed(node)
    return False


def _slice_disputed(node: Node) -> bool:
    """A step that is or may be negative where its end is or may be INT32_MAX or INT64_MAX."""
    steps = input_at(node, 4)
    if steps is None or not steps.name:
        return False  # before opset 10, or steps of 1
    step_values = _constant_ints(steps)
    end_values = _constant_ints(input_at(node, 2))
    if step_values is None:
        return end_values is None or any(e in _END_OF_AXIS for e in end_values)
    if end_values is None:
        return any(s < 0 for s in step_values)
    return any(s < 0 and e in _END_OF_AXIS for s, e in zip(step_values, end_values, strict=False))


def _constant_ints(value: Value | None) -> list[int] | None:
    """The elements of an initializer or a Constant node's output (None for anything else)."""
    if value is None or value.is_graph_input():
        return None
    tensor = value.const_value
    producer = value.producer()
    if tensor is None and producer is not None and producer.op_type == "Constant":
        tensor = attr_tensor(producer, "value")
        if tensor is None:
            return list(attr_ints(producer, "value_ints") or ()) or None
    if tensor is None:
        return None
    return [int(v) for v in tensor.numpy().reshape(-1).tolist()]


def _pool_disputed(node: Node) -> bool:
    strides = attr_ints(node, "strides") or ()
    dilations = attr_ints(node, "dilations") or ()
    if attr_int(node, "ceil_mode", 0) and any(s != 1 for s in strides):
        return True
    return attr_str(node, "auto_pad", "NOTSET") in _SAME and any(d != 1 for d in dilations)


def _resize_disputed(node: Node) -> bool:
    """Resize is sized by its `scales`, or by `sizes` under an aspect-ratio policy."""
    sizes = input_at(node, 3)
    if sizes is None or not sizes.name:
        return True
    given = sizes.const_value
    if given is not None and given.size == 0:
        return True  # an empty `sizes`: the scales decide
    return attr_str(node, "keep_aspect_ratio_policy", "stretch") != "stretch"
