"""Pad folded into AveragePool (patterns/fusion/pool.rw): where it fires, outputs equal."""

from __future__ import annotations

import pytest

from tests.patterns.fusion_helpers import FUSION, build, check_fired, fired, rewrite

POOL = FUSION / "pool.rw"

_PADS_INPUT = "<value = int64[8] {0, 0, 1, 2, 0, 0, 2, 1}>"


def _pad_then_pool(pool_attrs: str, pad_value: str = "", opset: int = 13) -> object:
    value = f"\n            v = Constant <value = float {{{pad_value}}}> ()" if pad_value else ""
    pad_inputs = "x, pads, v" if pad_value else "x, pads"
    return build(
        f"""<ir_version: 8, opset_import: ["" : {opset}]>
        g (float[N, 3, 8, 8] x) => (float[N, 3, ?, ?] y) {{
            pads = Constant {_PADS_INPUT} (){value}
            p = Pad <mode = "constant"> ({pad_inputs})
            y = AveragePool <{pool_attrs}> (p)
        }}"""
    )


@pytest.mark.parametrize(
    "pool_attrs",
    [
        # the pool pads too and counts its padding: all padding is counted zeros
        "kernel_shape = [3, 3], pads = [1, 0, 0, 1], count_include_pad = 1",
        # the pool pads nothing: the Pad's zeros are counted, so the result counts its padding
        "kernel_shape = [3, 3], strides = [2, 1]",
        "kernel_shape = [3, 3], count_include_pad = 0",
    ],
)
def test_fold_pad_into_average_pool(pool_attrs):
    model = _pad_then_pool(pool_attrs)
    result = rewrite(model, POOL)
    check_fired(model, result, {"fold_pad_into_average_pool": 1}, ["AveragePool"])
    pool = result.proto.graph.node[0]
    attrs = {a.name: a for a in pool.attribute}
    assert attrs["count_include_pad"].i == 1


def test_fold_zero_valued_pad_into_average_pool():
    model = _pad_then_pool("kernel_shape = [3, 3]", pad_value="0")
    check_fired(model, rewrite(model, POOL), {"fold_pad_into_average_pool": 1}, ["AveragePool"])


def test_fold_pad_attribute_into_average_pool():
    model = build(
        """<ir_version: 8, opset_import: ["" : 10]>
        g (float[N, 3, 8, 8] x) => (float[N, 3, ?, ?] y) {
            p = Pad <mode = "constant", pads = [0, 0, 1, 1, 0, 0, 1, 1], value = 0.0> (x)
            y = AveragePool <kernel_shape = [3, 3], pads = [1, 1, 1, 1], count_include_pad = 1> (p)
        }"""
    )
    result = rewrite(model, POOL)
    check_fired(model, result, {"fold_pad_attribute_into_average_pool": 1}, ["AveragePool"])
    pads = next(a for a in result.proto.graph.node[0].attribute if a.name == "pads")
    assert list(pads.ints) == [2, 2, 2, 2]


@pytest.mark.parametrize(
    ("pool_attrs", "pad_value"),
    [
        # the pool's own padding is left out of its divisor, the Pad's zeros are not
        ("kernel_shape = [3, 3], pads = [1, 1, 1, 1], count_include_pad = 0", ""),
        # a window starting beyond the input: runtimes count it differently
        ("kernel_shape = [3, 3], strides = [2, 2], ceil_mode = 1, count_include_pad = 1", ""),
        ('kernel_shape = [3, 3], auto_pad = "SAME_UPPER", count_include_pad = 1', ""),
        # padding with 1, not 0
        ("kernel_shape = [3, 3], count_include_pad = 1", "1"),
        # 2 + 1 pads on a side of a kernel of 3: onnxruntime refuses pads >= the kernel
        ("kernel_shape = [3, 3], pads = [1, 1, 1, 1], count_include_pad = 1", ""),
    ],
)
def test_fold_pad_into_average_pool_near_misses(pool_attrs, pad_value):
    model = _pad_then_pool(pool_attrs, pad_value=pad_value)
    assert not fired(rewrite(model, POOL))


def test_pad_of_channels_or_max_pool_is_not_folded():
    # a Pad of the channel axis changes what the pool sees; MaxPool pads with -inf, not 0
    model = build(
        """<ir_version: 8, opset_import: ["" : 13]>
        g (float[N, 3, 8, 8] x) => (float[N, 4, 8, 8] y, float[N, 3, 8, 8] z) {
            cp = Constant <value = int64[8] {0, 1, 0, 0, 0, 0, 0, 0}> ()
            sp = Constant <value = int64[8] {0, 0, 1, 1, 0, 0, 1, 1}> ()
            a = Pad (x, cp)
            y = AveragePool <kernel_shape = [1, 1]> (a)
            b = Pad (x, sp)
            z = MaxPool <kernel_shape = [3, 3]> (b)
        }"""
    )
    assert not fired(rewrite(model, POOL))
