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

from ir._core import Node
from ir._shape_facts import attr_int, attr_ints, attr_str, input_at

_DEFAULT_DOMAINS = ("", "ai.onnx")
_SAME = ("SAME_UPPER", "SAME_LOWER")


# The only ops `has_disputed_dims` can say yes for (looked up first: it is asked of every node).
_DISPUTABLE_OPS = frozenset(
    {"MaxPool", "AveragePool", "LpPool", "ConvTranspose", "Upsample", "Resize"}
)


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
    return False


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
