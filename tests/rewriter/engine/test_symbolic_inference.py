"""When onnxruntime's symbolic shape engine runs, and when onnx's own inference is enough.

The engine is pure Python and imports sympy (half a second); it is worth it only where onnx's
inference has to invent symbols (`unk__N`) that the engine could relate.
"""

from __future__ import annotations

import onnx
import onnx.parser
import pytest

import ir
from rewriter.engine import _symbolic

# Every dim is a number or a symbol the model declares (as dynamo exports do).
NAMED = """<ir_version: 8, opset_import: ["" : 17]>
g (float[batch, seq, 8] x) => (float[batch, seq, 8] y) {
    r = Relu (x)
    y = Neg (r)
}"""

# A Reshape whose last dim is computed with Div, which onnx's data propagation does not
# follow: onnx's inference invents a symbol for it, the engine computes 4.
INVENTED = """<ir_version: 8, opset_import: ["" : 17]>
g (float[batch, seq, 8] x) => (float[batch, seq, 2, 4] y) {
    s = Shape (x)
    head = Slice (s, start, end)
    last = Slice (s, end, stop)
    half = Div (last, two)
    shape = Concat <axis = 0> (head, two, half)
    r = Reshape (x, shape)
    y = Relu (r)
}"""


def _lowered(text: str) -> onnx.ModelProto:
    model = onnx.parser.parse_model(text)
    if "start" in text:
        for name, values in (("start", [0]), ("end", [2]), ("stop", [3]), ("two", [2])):
            model.graph.initializer.append(
                onnx.helper.make_tensor(name, onnx.TensorProto.INT64, [len(values)], values)
            )
    return ir.to_onnx(ir.from_onnx(model), weights=False)


def _engine_must_not_run(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse() -> None:
        raise AssertionError("the symbolic engine ran")

    monkeypatch.setattr(_symbolic, "_engine_class", refuse)


def test_declared_symbols_need_no_symbolic_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    _engine_must_not_run(monkeypatch)
    inferred = _symbolic.ort_symbolic_inference(_lowered(NAMED))
    types = {info.name: info.type.tensor_type for info in inferred.graph.value_info}
    dims = [d.dim_param or d.dim_value for d in types["r"].shape.dim]
    assert dims == ["batch", "seq", 8]


def test_invented_symbols_are_left_to_the_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    proto = _lowered(INVENTED)
    plain = ir.onnx_inference(proto)
    r = next(info for info in plain.graph.value_info if info.name == "r")
    assert r.type.tensor_type.shape.dim[3].dim_param.startswith("unk__")
    ran = []
    real = _symbolic._engine_class
    monkeypatch.setattr(_symbolic, "_engine_class", lambda: ran.append(1) or real())
    inferred = _symbolic.ort_symbolic_inference(proto)
    assert ran
    types = {info.name: info.type.tensor_type for info in inferred.graph.value_info}
    dims = [d.dim_param or d.dim_value for d in types["r"].shape.dim]
    assert dims == ["batch", "seq", 2, 4]
