"""A rewrite does not make a model onnxruntime runs into one it cannot run."""

from __future__ import annotations

import numpy as np
import pytest

import ir
import rewriter
from rewriter.dsl import CacheFolder
from rewriter.engine import KernelAvailability
from tests.helpers import model_from_text, op_types, session

HARD_SWISH = """<ir_version: 8, opset_import: ["" : 17]>
g ({dtype}[2, 5] x) => ({dtype}[2, 5] y) {{
    three = Constant <value = {dtype} {{3.0}}> ()
    zero = Constant <value = {dtype} {{0.0}}> ()
    six = Constant <value = {dtype} {{6.0}}> ()
    t = Add (x, three)
    r = Clip (t, zero, six)
    p = Mul (x, r)
    y = Div (p, six)
}}"""


def test_a_fusion_into_an_op_without_a_double_kernel_is_declined():
    model = model_from_text(HARD_SWISH.format(dtype="double"))
    result = rewriter.rewrite(model)
    assert "HardSwish" not in op_types(result.proto)
    declined = [s for s in result.trace.skips if s.rule == "fuse_hard_swish_from_relu6"]
    assert declined
    assert "onnxruntime has no kernel for HardSwish(double)" in declined[0].reason
    x = np.linspace(-5, 5, 10).reshape(2, 5)
    np.testing.assert_allclose(
        session(result.proto).run(None, {"x": x})[0], session(model).run(None, {"x": x})[0]
    )


def test_the_same_fusion_in_float_applies():
    result = rewriter.rewrite(model_from_text(HARD_SWISH.format(dtype="float")))
    assert op_types(result.proto) == ["HardSwish"]


def test_without_the_check_the_double_fusion_applies():
    options = rewriter.RewriteOptions(keep_runnable=False)
    result = rewriter.rewrite(model_from_text(HARD_SWISH.format(dtype="double")), None, options)
    assert op_types(result.proto) == ["HardSwish"]
    with pytest.raises(Exception, match=r"NOT_IMPLEMENTED|Could not find an implementation"):
        session(result.proto)


HARD_SWISH_NODE = """<ir_version: 8, opset_import: ["" : 17]>
g ({dtype}[2, 5] x) => ({dtype}[2, 5] y) {{
    y = HardSwish (x)
}}"""


def _hard_swish(dtype: str) -> tuple[ir.Node, dict[str, int]]:
    model = ir.from_onnx(model_from_text(HARD_SWISH_NODE.format(dtype=dtype)))
    return next(iter(model.graph)), dict(model.opset_imports)


def test_kernel_answers_are_kept_in_the_store_for_later_processes(tmp_path):
    store = CacheFolder(tmp_path)
    node, opsets = _hard_swish("double")
    assert KernelAvailability(store)(node, opsets) is False
    (entry,) = tmp_path.glob("kernels-*.json")
    # A later checker reads the kept answer instead of asking onnxruntime: an answer
    # written over it (true) is what it says.
    entry.write_text(entry.read_text().replace("false", "true"))
    assert KernelAvailability(store)(node, opsets) is True
    float_node, _ = _hard_swish("float")
    assert KernelAvailability(store)(float_node, opsets) is True


def test_an_unusable_kernel_entry_is_asked_again(tmp_path):
    store = CacheFolder(tmp_path)
    node, opsets = _hard_swish("double")
    KernelAvailability(store)(node, opsets)
    (entry,) = tmp_path.glob("kernels-*.json")
    entry.write_text("[[1, 2")
    assert KernelAvailability(store)(node, opsets) is False
    assert KernelAvailability(None)(node, opsets) is False
