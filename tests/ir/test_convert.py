"""Opset conversion: onnx's version converter behind a one-line error."""

from __future__ import annotations

import onnx.parser
import pytest

import ir


def _reshape(opset: int) -> ir.Model:
    text = f"""
    <ir_version: 8, opset_import: ["" : {opset}]>
    g (float[2, 3] x, int64[2] s) => (float[3, 2] y) {{
        y = Reshape (x, s)
    }}
    """
    return ir.from_onnx(onnx.parser.parse_model(text))


def test_a_missing_adapter_is_one_line_naming_the_op_and_versions():
    with pytest.raises(ir.ConversionError) as caught:
        ir.convert_version(_reshape(14), 13)
    message = str(caught.value)
    assert message == (
        "cannot convert from opset 14 to 13: onnx's version converter has no adapter for "
        "`Reshape` from opset 14"
    )
    assert "\n" not in message
    assert "Assertion" not in message


def test_a_conversion_with_adapters_works():
    converted = ir.convert_version(_reshape(13), 14)
    assert converted.opset_imports[""] == 14
