"""Running a model with `onnx.reference`, extended with the project's reference kernels.

Used for models onnxruntime cannot load because they contain custom ops (a converter's
`ExtractImagePatches`) or ops it has no kernel for at their dtype (a double ConvTranspose).
Each `Kernel` of `rewriter.verification._kernels` becomes an `OpRun` subclass named after its op
type, as `ReferenceEvaluator(new_ops=...)` requires. Importing
this module imports `onnx.reference`, so only the runner imports it, and only when needed.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from onnx.reference import ReferenceEvaluator
from onnx.reference.op_run import OpRun
from onnx.reference.ops.op_batch_normalization import (
    _batchnorm_test_mode,
    _batchnorm_training_mode,
)
from onnx.reference.ops.op_conv_transpose import ConvTranspose as _OnnxConvTranspose

from rewriter.verification._kernels import KERNELS, Array, Kernel


def _make_op_class(kernel: Kernel) -> type[OpRun]:
    """An `OpRun` subclass that evaluates `kernel`; its class name is the op type."""

    def _run(self: OpRun, *inputs: Array, **attributes: Any) -> tuple[Array, ...]:
        del self
        unknown = sorted(set(attributes) - set(kernel.attributes))
        if unknown:
            raise ValueError(f"{kernel.op_type}: unexpected attributes {unknown}")
        return kernel.function(*inputs, **attributes)

    namespace = {"op_domain": kernel.domain, "_run": _run, "__module__": __name__}
    return type(kernel.op_type, (OpRun,), namespace)


class ConvTranspose(_OnnxConvTranspose):
    """onnx's ConvTranspose with groups computed right.

    onnx 1.23's kernel slices a grouped weight along the wrong axis, gives every group the
    whole bias and writes one channel per group; each group is run here as an ungrouped
    ConvTranspose of its own input channels, weight rows and bias entries.
    """

    def _run(
        self,
        X: Any,  # noqa: N803 (onnx's names)
        W: Any,  # noqa: N803
        B: Any = None,  # noqa: N803
        auto_pad: Any = None,
        dilations: Any = None,
        group: Any = None,
        kernel_shape: Any = None,
        output_padding: Any = None,
        output_shape: Any = None,
        pads: Any = None,
        strides: Any = None,
    ) -> Any:
        ungrouped: Callable[..., Any] = super()._run
        attributes = {
            "auto_pad": auto_pad,
            "dilations": dilations,
            "kernel_shape": kernel_shape,
            "output_padding": output_padding,
            "output_shape": output_shape,
            "pads": pads,
            "strides": strides,
        }
        groups = int(group or 1)
        if groups == 1:
            return ungrouped(X, W, B, group=group, **attributes)
        rows = X.shape[1] // groups  # input channels per group: W is [C_in, C_out / group, k...]
        columns = W.shape[1]
        outputs = []
        for index in range(groups):
            weight = W[index * rows : (index + 1) * rows]
            bias = None if B is None else B[index * columns : (index + 1) * columns]
            inputs = X[:, index * rows : (index + 1) * rows]
            outputs.append(ungrouped(inputs, weight, bias, group=1, **attributes)[0])
        return (np.concatenate(outputs, axis=1),)


class BatchNormalization(OpRun):
    """BatchNormalization in inference mode whenever the node is an inference node.

    onnx 1.23's kernel for opsets 9 to 13 mixes the batch's own statistics in whenever the
    node has a `momentum` attribute (every exporter writes one), although a node with one
    output is in inference mode: what onnxruntime computes. Inference mode is: one output
    (opsets 7 to 13), `is_test` (6), `training_mode = 0` (14 on).
    """

    def _run(
        self,
        x: Any,
        scale: Any,
        bias: Any,
        mean: Any,
        var: Any,
        epsilon: Any = None,
        momentum: Any = None,
        training_mode: Any = None,
        is_test: Any = None,
        spatial: Any = None,
    ) -> Any:
        del spatial  # per-channel statistics either way for the inputs onnx accepts
        eps = 1e-5 if epsilon is None else float(epsilon)
        outputs = [name for name in self.onnx_node.output if name]
        if training_mode is not None:
            training = bool(training_mode)
        elif is_test is not None:
            training = not is_test
        else:
            training = len(outputs) > 1
        if not training:
            return (_batchnorm_test_mode(x, scale, bias, mean, var, epsilon=eps),)
        y, saved_mean, saved_var, running_mean, running_var = _batchnorm_training_mode(
            x, scale, bias, mean, var, 0.9 if momentum is None else float(momentum), eps
        )
        if training_mode is not None:  # opset 14: Y, running_mean, running_var
            return (y, running_mean, running_var)[: len(outputs)]
        return (y, running_mean, running_var, saved_mean, saved_var)[: len(outputs)]


@functools.cache
def op_classes() -> tuple[type[OpRun], ...]:
    """The `new_ops` classes: every registered kernel, and fixes of onnx's own kernels."""
    kernels = (_make_op_class(kernel) for kernel in KERNELS.values())
    return (*kernels, ConvTranspose, BatchNormalization)


class ReferenceSession:
    """A model evaluated by `onnx.reference.ReferenceEvaluator` plus the custom kernels."""

    def __init__(self, proto: object) -> None:
        """Build the evaluator; raises whatever `ReferenceEvaluator` raises for bad models."""
        self._evaluator = ReferenceEvaluator(proto, new_ops=list(op_classes()))

    def run(self, feeds: Mapping[str, object]) -> list[object]:
        """Run on `feeds`; returns the outputs in graph order, numpy scalars made arrays."""
        results = self._evaluator.run(None, dict(feeds))
        return [np.asarray(r) if isinstance(r, np.generic) else r for r in results]
