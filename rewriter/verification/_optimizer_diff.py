"""What onnxruntime's graph optimizer does differently to two models, by op counts.

When the rewritten model agrees with the original with onnxruntime's optimizations off but not
with `ORT_ENABLE_ALL`, the difference is in what onnxruntime's optimizer makes of each model:
a form the rewrite leaves (a scale folded to a constant) can let one of its fusions fire that
the original's form kept it from (onnxruntime's MatMulScaleFusion folds a constant scalar Mul
or Div on a MatMul's input or output into a `com.microsoft.FusedMatMul`'s alpha). Such
fusions round differently from the ops they replace, and a model that turns values into sizes
(a rounded duration, a length) can make that a different result. This module reads both
optimized graphs (`SessionOptions.optimized_model_filepath`) and names what onnxruntime did to
the rewritten model beyond what it did to the original and what the rewrite itself changed.
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections import Counter
from collections.abc import Mapping, Sequence

import ir
from rewriter.verification._errors import VerifyError
from rewriter.verification._runner import save_optimized
from rewriter.verification._source import LoadedModel, ModelSource, load_model

logger = logging.getLogger(__name__)


def _op_counts(model: ir.Model) -> Counter[str]:
    """Node counts by op (`domain.Op` outside the default domain), subgraphs included."""
    return Counter(
        f"{node.domain}.{node.op_type}" if node.domain not in ("", "ai.onnx") else node.op_type
        for node in model.graph.all_nodes()
    )


def _optimizer_delta(
    loaded: LoadedModel, folder: str, name: str, providers: Sequence[str] | None
) -> Counter[str]:
    """How onnxruntime's `ORT_ENABLE_ALL` optimizer changes `loaded`'s op counts."""
    path = os.path.join(folder, f"{name}.onnx")
    save_optimized(loaded, path, providers)
    delta = _op_counts(ir.load(path))
    delta.subtract(_op_counts(loaded.model))
    return delta


def optimizer_difference(
    original: ModelSource, rewritten: ModelSource, providers: Sequence[str] | None = None
) -> dict[str, int]:
    """Op by op: how much more onnxruntime's optimizer changes `rewritten` than `original`.

    Each count is (optimized rewritten - rewritten) - (optimized original - original): what
    the rewrite itself changed cancels out, and what is left is what onnxruntime's
    `ORT_ENABLE_ALL` optimizer does to one model and not to the other (+12
    `com.microsoft.FusedMatMul`, -12 `MatMul`: twelve more MatMul fused). Empty when it
    treats both alike.

    Raises:
        VerifyError: onnxruntime cannot optimize one of the models, or its optimized graph
            cannot be read back.
    """
    return loaded_difference(
        load_model(original, "original"), load_model(rewritten, "rewritten"), providers
    )


def loaded_difference(
    original: LoadedModel, rewritten: LoadedModel, providers: Sequence[str] | None = None
) -> dict[str, int]:
    """`optimizer_difference` of models already loaded."""
    with tempfile.TemporaryDirectory(prefix="rewrite-ort-optimized-") as folder:
        try:
            delta = _optimizer_delta(rewritten, folder, "rewritten", providers)
            delta.subtract(_optimizer_delta(original, folder, "original", providers))
        except ir.IRError as exc:
            raise VerifyError(f"cannot read onnxruntime's optimized graph back: {exc}") from exc
    return {op: count for op, count in sorted(delta.items()) if count}


def describe_optimizer_difference(difference: Mapping[str, int]) -> str:
    """One line for `optimizer_difference`'s counts (more first, then fewer)."""
    more = [f"{count} more {op}" for op, count in difference.items() if count > 0]
    fewer = [f"{-count} fewer {op}" for op, count in difference.items() if count < 0]
    return ", ".join(more + fewer)
