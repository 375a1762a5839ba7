"""Running a model with `onnx.reference`, extended with the project's reference kernels.

Used for models onnxruntime cannot load because they contain custom ops (a converter's
`ExtractImagePatches`). Each `Kernel` of `rewriter.verify._kernels` becomes an `OpRun`
subclass named after its op type, as `ReferenceEvaluator(new_ops=...)` requires. Importing
this module imports `onnx.reference`, so only the runner imports it, and only when needed.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import numpy as np
from onnx.reference import ReferenceEvaluator
from onnx.reference.op_run import OpRun

from rewriter.verify._kernels import KERNELS, Array, Kernel


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


@functools.cache
def op_classes() -> tuple[type[OpRun], ...]:
    """The `new_ops` classes for every registered kernel."""
    return tuple(_make_op_class(kernel) for kernel in KERNELS.values())


class ReferenceSession:
    """A model evaluated by `onnx.reference.ReferenceEvaluator` plus the custom kernels."""

    def __init__(self, proto: object) -> None:
        """Build the evaluator; raises whatever `ReferenceEvaluator` raises for bad models."""
        self._evaluator = ReferenceEvaluator(proto, new_ops=list(op_classes()))

    def run(self, feeds: Mapping[str, object]) -> list[object]:
        """Run on `feeds`; returns the outputs in graph order, numpy scalars made arrays."""
        results = self._evaluator.run(None, dict(feeds))
        return [np.asarray(r) if isinstance(r, np.generic) else r for r in results]
