"""Reference kernels, in numpy, for ops that onnxruntime cannot run.

Each kernel is a plain function of numpy arrays and attribute values, registered in `KERNELS`
under its `(domain, op_type)`. The runner turns them into `onnx.reference` operator classes
(`rewriter.verification._reference`) only when a model needs them, so importing this module stays
cheap. Kernels are exact wherever the op is a pure data movement: no arithmetic touches the
elements, so integers, NaN, infinities and negative zeros come out bit for bit.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from rewriter.verification._errors import VerifyError

TF_DOMAIN = "ai.onnx.converters.tensorflow"

Array = npt.NDArray[np.generic]


def _window(size: int, kernel: int, stride: int, rate: int, padding: str) -> tuple[int, int, int]:
    """Output size and the (before, after) zero padding of one spatial axis, as TensorFlow."""
    effective = (kernel - 1) * rate + 1
    if padding == "VALID":
        out = max(math.ceil((size - effective + 1) / stride), 0)
        return out, 0, 0
    out = math.ceil(size / stride)
    total = max((out - 1) * stride + effective - size, 0)
    before = total // 2
    return out, before, total - before


def _four_ints(name: str, values: Sequence[int] | None, default: int | None) -> tuple[int, ...]:
    if values is None:
        if default is None:
            raise VerifyError(f"ExtractImagePatches: attribute `{name}` is missing")
        return (default,) * 4
    ints = tuple(int(v) for v in values)
    if len(ints) != 4 or ints[0] != 1 or ints[3] != 1 or min(ints) < 1:
        raise VerifyError(
            f"ExtractImagePatches: `{name}` must be 4 positive ints [1, h, w, 1], got {list(ints)}"
        )
    return ints


def extract_image_patches(
    images: Array,
    ksizes: Sequence[int],
    strides: Sequence[int],
    rates: Sequence[int] | None = None,
    padding: str | bytes = "VALID",
) -> Array:
    """TensorFlow's `tf.image.extract_patches` on an NHWC array.

    The output is `[N, out_h, out_w, kh * kw * C]`; channel `(i * kw + j) * C + c` holds
    input channel `c` of patch position `(i, j)` (row-major), as TensorFlow lays it out.
    `SAME` pads with zeros, `pad_before = total // 2`, where
    `total = max((ceil(in / stride) - 1) * stride + (k - 1) * rate + 1 - in, 0)`;
    `VALID` gives `ceil((in - (k - 1) * rate) / stride)` positions (0 if the window is larger
    than the input). The result is a pure gather: no element is computed.

    Raises:
        VerifyError: malformed attributes or an input that is not rank 4.
    """
    pad_mode = padding.decode() if isinstance(padding, bytes) else str(padding)
    pad_mode = pad_mode.upper()
    if pad_mode not in ("VALID", "SAME"):
        raise VerifyError(f"ExtractImagePatches: `padding` must be VALID or SAME, got {pad_mode!r}")
    array = np.asarray(images)
    if array.ndim != 4:
        raise VerifyError(f"ExtractImagePatches: input must be NHWC (rank 4), got {array.shape}")
    _, kh, kw, _ = _four_ints("ksizes", ksizes, None)
    _, sh, sw, _ = _four_ints("strides", strides, None)
    _, rh, rw, _ = _four_ints("rates", rates, 1)
    batch, height, width, channels = array.shape
    out_h, top, bottom = _window(height, kh, sh, rh, pad_mode)
    out_w, left, right = _window(width, kw, sw, rw, pad_mode)
    if top or bottom or left or right:
        array = np.pad(array, ((0, 0), (top, bottom), (left, right), (0, 0)))
    rows = np.arange(out_h)[:, None] * sh + np.arange(kh)[None, :] * rh  # [out_h, kh]
    cols = np.arange(out_w)[:, None] * sw + np.arange(kw)[None, :] * rw  # [out_w, kw]
    # Advanced indices broadcast to [out_h, out_w, kh, kw]; the result is
    # [N, out_h, out_w, kh, kw, C], whose last three axes flatten in TensorFlow's order.
    patches = array[:, rows[:, None, :, None], cols[None, :, None, :], :]
    return patches.reshape(batch, out_h, out_w, kh * kw * channels)


@dataclasses.dataclass(frozen=True, slots=True)
class Kernel:
    """A numpy implementation of one custom op: `function(*inputs, **attributes) -> outputs`."""

    domain: str
    op_type: str
    function: Callable[..., tuple[Array, ...]]
    attributes: tuple[str, ...]


def _extract_image_patches_kernel(
    images: Array,
    ksizes: Sequence[int] | None = None,
    strides: Sequence[int] | None = None,
    rates: Sequence[int] | None = None,
    padding: str | bytes | None = None,
) -> tuple[Array, ...]:
    if ksizes is None or strides is None:
        raise VerifyError("ExtractImagePatches: attributes `ksizes` and `strides` are required")
    return (extract_image_patches(images, ksizes, strides, rates, padding or "VALID"),)


KERNELS: Mapping[tuple[str, str], Kernel] = {
    (TF_DOMAIN, "ExtractImagePatches"): Kernel(
        domain=TF_DOMAIN,
        op_type="ExtractImagePatches",
        function=_extract_image_patches_kernel,
        attributes=("ksizes", "strides", "rates", "padding"),
    ),
}
"""Every custom op the verifier can evaluate, by `(domain, op_type)`."""
