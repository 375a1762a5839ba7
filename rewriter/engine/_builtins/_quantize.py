"""Built-ins that quantize weights and read calibration statistics (patterns/quantize/).

They compute what ONNX's QuantizeLinear would (round half to even, saturate), so a weight a
rule quantizes with `quantize(w, scale, "int8", axis = 1)` and dequantizes with a
DequantizeLinear node of the same scale and axis is the weight onnxruntime would see. Scales
are float32, as QuantizeLinear's `y_scale` of a float32 model. The calibration built-ins read
`RunOptions.calibration` (`--calibration`) and give `unknown` without it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import ir
from rewriter.engine._builtins._registry import builtin
from rewriter.engine._calibration import METHODS, ValueStatistics
from rewriter.engine._runtime import int8_sums_saturate as _probe_int8_sums
from rewriter.engine._values import UNKNOWN, EvalContext, EvalError, numeric

# Integer dtypes a weight may be quantized to, with the range QuantizeLinear saturates to.
_RANGES = {
    "int8": (-128, 127),
    "uint8": (0, 255),
    "int4": (-8, 7),
    "uint4": (0, 15),
    "int16": (-32768, 32767),
    "uint16": (0, 65535),
}
# numpy dtypes (ml_dtypes) of the low-bit integers ONNX has.
_LOW_BIT = ("int4", "uint4")
# AWQ's scale search: exponents of the activation magnitude tried (0 is round to nearest).
_AWQ_EXPONENTS = tuple(i / 20 for i in range(20))


def _dtype_name(dtype: Any) -> str:
    if isinstance(dtype, int | np.integer) and not isinstance(dtype, bool):
        dtype = ir.DataType(int(dtype)).onnx_name
    if not isinstance(dtype, str) or dtype not in _RANGES:
        known = ", ".join(f'"{name}"' for name in _RANGES)
        raise EvalError(f"a quantized dtype is one of {known}, got {dtype!r}")
    return dtype


def _float_array(x: Any, what: str) -> Any:
    found = numeric(x)
    if found is UNKNOWN:
        return UNKNOWN
    array = np.asarray(found)
    if array.dtype.kind not in "fiu":
        raise EvalError(f"`{what}` takes numbers, got {array.dtype}")
    return array.astype(np.float64)


def _axis(axis: Any, rank: int) -> int:
    value = int(axis)
    if not -rank <= value < rank:
        raise EvalError(f"axis {value} is out of range for rank {rank}")
    return value % rank


def _blocks(array: np.ndarray, axis: int, block_size: int) -> np.ndarray:
    """`array` with `axis` split into (blocks, block_size), the last block zero-padded."""
    size = array.shape[axis]
    count = -(-size // block_size)
    pad = [(0, 0)] * array.ndim
    pad[axis] = (0, count * block_size - size)
    padded = np.pad(array, pad)
    shape = (*array.shape[:axis], count, block_size, *array.shape[axis + 1 :])
    return padded.reshape(shape)


def _expand(params: np.ndarray, shape: tuple[int, ...], axis: int | None, block_size: int) -> Any:
    """Scales or zero points broadcast to a tensor of `shape` as QuantizeLinear does."""
    if axis is None:
        return params
    if block_size > 0:
        return np.repeat(params, block_size, axis=axis)[
            tuple(slice(0, d) if i == axis else slice(None) for i, d in enumerate(shape))
        ]
    view = [1] * len(shape)
    view[axis] = -1
    return params.reshape(view)


@builtin(
    "int8_sums_saturate",
    "whether onnxruntime's uint8 x int8 matrix products lose sums on this machine (x86 "
    "without VNNI adds two products in 16 bits; int8 weights in 7 bits then fit)",
)
def int8_sums_saturate(ctx: EvalContext) -> Any:
    """Whether onnxruntime's uint8 x int8 kernels saturate here (asked once per process)."""
    return _probe_int8_sums()


@builtin(
    "symmetric_scale",
    "float32 scales mapping max |w| to the dtype's largest value: per tensor, per channel "
    "along axis, or per block of block_size along axis; full_range = true maps the element "
    "of largest magnitude to the smallest value instead (-8 for int4: all 16 levels used)",
    keywords=("axis", "block_size", "full_range"),
)
def symmetric_scale(
    ctx: EvalContext,
    w: Any,
    dtype: Any,
    axis: Any = None,
    block_size: Any = 0,
    full_range: Any = False,
) -> Any:
    """Scales for symmetric quantization: max |w| / qmax over the reduced elements.

    With `full_range`, the signed element of largest magnitude divided by qmin (a negative
    scale where that element is positive), as onnxruntime's 4-bit symmetric quantizer does:
    that element becomes qmin exactly, and the others use the levels on both sides.
    """
    array = _float_array(w, "symmetric_scale")
    if array is UNKNOWN:
        return UNKNOWN
    qmin, qmax = _RANGES[_dtype_name(dtype)]
    if full_range:
        if qmin >= 0:
            raise EvalError("full_range needs a signed dtype")
        return _extreme_scale(array, qmin, axis, int(block_size))
    magnitude = np.abs(array)
    block = int(block_size)
    if block < 0:
        raise EvalError(f"block_size must be at least 0, got {block}")
    if axis is None:
        if block:
            raise EvalError("block_size needs an axis (the axis the blocks run along)")
        largest = np.max(magnitude, initial=0.0)
    else:
        index = _axis(axis, array.ndim)
        if block:
            largest = np.max(_blocks(magnitude, index, block), axis=index + 1)
        else:
            others = tuple(i for i in range(array.ndim) if i != index)
            largest = np.max(magnitude, axis=others, initial=0.0)
    # An all-zero channel quantizes to zeros with any scale; 1 keeps the division defined.
    scale = np.where(largest > 0, largest / qmax, 1.0)
    return np.asarray(scale, dtype=np.float32)


def _extreme_scale(array: np.ndarray, qmin: int, axis: Any, block: int) -> Any:
    """The signed element of largest magnitude over each group, divided by qmin."""
    if axis is None:
        flat = array.reshape(-1)
        extreme = flat[np.argmax(np.abs(flat))] if flat.size else 0.0
    else:
        index = _axis(axis, array.ndim)
        if block:
            grouped = _blocks(array, index, block)
            reduce_axis = index + 1
        else:
            grouped = np.moveaxis(array, index, 0).reshape(array.shape[index], -1)
            reduce_axis = 1
        position = np.expand_dims(np.argmax(np.abs(grouped), axis=reduce_axis), reduce_axis)
        extreme = np.take_along_axis(grouped, position, axis=reduce_axis).squeeze(reduce_axis)
    scale = np.where(extreme != 0, np.asarray(extreme) / qmin, 1.0)
    return np.asarray(scale, dtype=np.float32)


@builtin(
    "quantize",
    "QuantizeLinear of a constant: round(w / scale) + zero_point, saturated, in dtype",
    keywords=("zero_point", "axis", "block_size"),
)
def quantize(
    ctx: EvalContext,
    w: Any,
    scale: Any,
    dtype: Any,
    zero_point: Any = None,
    axis: Any = None,
    block_size: Any = 0,
) -> Any:
    """ONNX QuantizeLinear on constants (per tensor, per axis or blocked along axis)."""
    array = _float_array(w, "quantize")
    scales = _float_array(scale, "quantize")
    if array is UNKNOWN or scales is UNKNOWN:
        return UNKNOWN
    name = _dtype_name(dtype)
    low, high = _RANGES[name]
    index = None if axis is None else _axis(axis, array.ndim)
    block = int(block_size)
    if index is None and scales.size != 1:
        raise EvalError(f"{scales.size} scales need an axis to run along")
    # In float32, as QuantizeLinear divides a float32 tensor by a float32 scale.
    quotient = array.astype(np.float32) / _expand(
        scales.astype(np.float32), array.shape, index, block
    )
    rounded = np.rint(quotient).astype(np.float64)
    if zero_point is not None:
        offsets = _float_array(zero_point, "quantize")
        if offsets is UNKNOWN:
            return UNKNOWN
        rounded = rounded + _expand(offsets, array.shape, index, block)
    target = ir.numpy_dtype(ir.DataType.from_name(name))
    return np.clip(rounded, low, high).astype(np.int64).astype(target)


@builtin(
    "pack_nbits",
    "signed low-bit levels of a [K, N] weight packed as onnxruntime's MatMulNBits takes them: "
    "[N, K / block_size, block_size * bits / 8] uint8, offset by 2^(bits - 1), low bits first",
)
def pack_nbits(ctx: EvalContext, levels: Any, bits: Any, block_size: Any) -> Any:
    """`pack_nbits(quantize(w, s, "int4", axis = 0, block_size = 32), 4, 32)`.

    The weight's columns become rows, K is padded to whole blocks with the zero point (the
    padding dequantizes to 0), each level is stored unsigned (plus 2^(bits-1),
    MatMulNBits' default zero point) and two 4-bit levels share a byte, the first in the low
    half.
    """
    found = numeric(levels)
    if found is UNKNOWN:
        return UNKNOWN
    array = np.asarray(found)
    width, block = int(bits), int(block_size)
    if width != 4:
        raise EvalError(f"`pack_nbits` packs 4-bit levels, got bits = {width}")
    if array.ndim != 2 or (array.dtype.kind not in "iu" and array.dtype.name not in _LOW_BIT):
        raise EvalError(f"`pack_nbits` takes a 2-D integer weight, got {array.dtype} {array.shape}")
    if block < 16 or block & (block - 1):
        raise EvalError(f"block_size must be a power of 2 of at least 16, got {block}")
    offset = 1 << (width - 1)
    unsigned = (array.astype(np.int64) + offset).T  # [N, K]
    if unsigned.min(initial=0) < 0 or unsigned.max(initial=0) >= 1 << width:
        raise EvalError(f"`pack_nbits` levels must be signed {width}-bit values")
    count = -(-unsigned.shape[1] // block)
    padding = count * block - unsigned.shape[1]
    padded = np.pad(unsigned, [(0, 0), (0, padding)], constant_values=offset)
    pairs = padded.reshape(unsigned.shape[0], count, block // 2, 2)
    return (pairs[..., 0] | (pairs[..., 1] << 4)).astype(np.uint8)


@builtin(
    "round_to",
    "a constant converted to a narrower float dtype as Cast does: rounded to nearest even, "
    "small values to subnormals or zero",
)
def round_to(ctx: EvalContext, x: Any, dtype: Any) -> Any:
    """`round_to(w, "float16")`: Cast of a constant (where `cast` refuses to lose bits)."""
    found = numeric(x)
    if found is UNKNOWN:
        return UNKNOWN
    array = np.asarray(found)
    target = _float_dtype(dtype)
    if array.dtype.kind != "f" and array.dtype.name not in ("bfloat16", "float16"):
        raise EvalError(f"`round_to` takes a float tensor, got {array.dtype}")
    with np.errstate(over="ignore", under="ignore"):
        return array.astype(target)


def _float_dtype(dtype: Any) -> np.dtype[Any]:
    if isinstance(dtype, ir.DataType):
        dtype = dtype.onnx_name
    if isinstance(dtype, int | np.integer) and not isinstance(dtype, bool):
        dtype = ir.DataType(int(dtype)).onnx_name
    if dtype not in ("float16", "bfloat16", "float", "double"):
        raise EvalError(
            f'`round_to` converts to "float16", "bfloat16", "float" or "double", not {dtype!r}'
        )
    return ir.numpy_dtype(ir.DataType.from_name(str(dtype)))


@builtin(
    "range_scale",
    "float32 scale of an asymmetric quantization of [low, high] (widened to hold 0)",
)
def range_scale(ctx: EvalContext, bounds: Any, dtype: Any) -> Any:
    """(high - low) / (qmax - qmin) with low <= 0 <= high."""
    found = _bounds(bounds)
    if found is UNKNOWN:
        return UNKNOWN
    low, high = found
    qmin, qmax = _RANGES[_dtype_name(dtype)]
    width = high - low
    return np.float32(width / (qmax - qmin) if width > 0 else 1.0)


@builtin(
    "constant_range",
    "the [low, high] range of a constant's values, widened to hold 0 (a quantized range must)",
)
def constant_range(ctx: EvalContext, x: Any) -> Any:
    """[min(x, 0), max(x, 0)] of a constant, as floats."""
    array = _float_array(x, "constant_range")
    if array is UNKNOWN:
        return UNKNOWN
    finite = array[np.isfinite(array)]
    low = min(float(np.min(finite, initial=0.0)), 0.0)
    high = max(float(np.max(finite, initial=0.0)), 0.0)
    return [low, high]


@builtin(
    "range_zero_point",
    "the zero point, in dtype, of an asymmetric quantization of [low, high]",
)
def range_zero_point(ctx: EvalContext, bounds: Any, dtype: Any) -> Any:
    """round(qmin - low / scale), saturated, as a scalar of the quantized dtype."""
    found = _bounds(bounds)
    if found is UNKNOWN:
        return UNKNOWN
    name = _dtype_name(dtype)
    qmin, qmax = _RANGES[name]
    scale = float(range_scale.implementation(ctx, bounds, dtype))
    point = np.clip(np.rint(qmin - found[0] / scale), qmin, qmax)
    return np.asarray(int(point)).astype(ir.numpy_dtype(ir.DataType.from_name(name)))


def _bounds(bounds: Any) -> Any:
    found = numeric(bounds)
    if found is UNKNOWN:
        return UNKNOWN
    values = np.asarray(found, dtype=np.float64).reshape(-1)
    if values.size != 2 or not np.isfinite(values).all() or values[0] > values[1]:
        raise EvalError(f"a range is [low, high] with low <= high, got {values.tolist()}")
    return min(float(values[0]), 0.0), max(float(values[1]), 0.0)


def _statistics(ctx: EvalContext, x: Any, fn: str) -> ValueStatistics | None:
    if not isinstance(x, ir.Value):
        raise EvalError(f"`{fn}` expects a value bound by the match, got {type(x).__name__}")
    if ctx.calibration is None or not x.name:
        return None
    return ctx.calibration.lookup(x.name)


@builtin(
    "calibrated_range",
    'the [low, high] range of a value on the calibration samples, by method "minmax", '
    '"percentile" or "entropy" (default: --calibration-method); unknown without --calibration',
    keywords=("method", "percentile"),
)
def calibrated_range(ctx: EvalContext, x: Any, method: Any = None, percentile: Any = None) -> Any:
    """[low, high] of `x` from the calibration statistics."""
    if method is not None and method not in METHODS:
        raise EvalError(f"unknown calibration method {method!r} (known: {', '.join(METHODS)})")
    statistics = _statistics(ctx, x, "calibrated_range")
    if statistics is None or ctx.calibration is None:
        return UNKNOWN
    chosen = ctx.calibration.method if method is None else str(method)
    share = ctx.calibration.percentile if percentile is None else float(percentile)
    try:
        low, high = statistics.range(chosen, share)
    except ValueError as exc:
        raise EvalError(str(exc)) from None
    return [float(low), float(high)]


@builtin(
    "is_calibrated",
    "the calibration samples gave statistics for this value (--calibration was given and the "
    "value is the original's or an exact rewrite's)",
)
def is_calibrated(ctx: EvalContext, x: Any) -> bool:
    """True when `calibrated_range(x)` and `awq_scale(x, ...)` have data to work from."""
    return _statistics(ctx, x, "is_calibrated") is not None


@builtin(
    "awq_scale",
    "activation-aware per-input-channel scales s for x @ w (w of shape [K, N]): the "
    "exponent of x's mean magnitude that minimizes the error of x/s @ quantized(s*w) on the "
    "calibration rows; unknown without --calibration",
    keywords=("block_size",),
)
def awq_scale(ctx: EvalContext, x: Any, w: Any, dtype: Any, block_size: Any = 32) -> Any:
    """AWQ's search: s = mean|x|^a over a in [0, 1), best output error; float32 [K]."""
    statistics = _statistics(ctx, x, "awq_scale")
    weights = _float_array(w, "awq_scale")
    if statistics is None or weights is UNKNOWN:
        return UNKNOWN
    magnitude, rows = statistics.channel_mean_abs, statistics.rows
    if magnitude is None or rows is None or weights.ndim != 2:
        return UNKNOWN
    if magnitude.shape[0] != weights.shape[0]:
        return UNKNOWN
    name = _dtype_name(dtype)
    block = int(block_size)
    rows64 = rows.astype(np.float64)
    reference = rows64 @ weights
    best, best_error = np.ones(weights.shape[0]), np.inf
    base = np.maximum(magnitude.astype(np.float64), 1e-8)
    for exponent in _AWQ_EXPONENTS:
        scales = base**exponent
        scales = scales / np.sqrt(scales.max() * scales.min())
        approx = (rows64 / scales) @ _round_trip(ctx, weights * scales[:, None], name, block)
        error = float(np.mean((approx - reference) ** 2))
        if error < best_error:
            best, best_error = scales, error
    return best.astype(np.float32)


def _round_trip(ctx: EvalContext, w: np.ndarray, dtype: str, block: int) -> np.ndarray:
    """W quantized symmetrically in blocks along axis 0 and dequantized (float64)."""
    scale = symmetric_scale.implementation(ctx, w, dtype, 0, block, _RANGES[dtype][0] < 0)
    q = quantize.implementation(ctx, w, scale, dtype, None, 0, block).astype(np.float64)
    result: np.ndarray = q * _expand(scale.astype(np.float64), w.shape, 0, block)
    return result
