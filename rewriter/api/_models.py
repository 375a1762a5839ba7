"""The model a run starts from: read from a path, lifted from a ModelProto, or copied.

Also the changes a run makes to a model before and after the rules: input shapes fixed by the
user, opset imports added for opt-in rules (and dropped again when unused), initializer
inputs frozen into constants, and IR version 4 for an IR 3 model that ends up with
initializers outside its inputs.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import ir
from rewriter._errors import OptionError, RewriteError

if TYPE_CHECKING:
    import onnx


def as_model(
    model: str | os.PathLike[str] | ir.Model | onnx.ModelProto, *, copy: bool = True
) -> ir.Model:
    """An IR model from a path, a ModelProto or an IR model (copied unless `copy=False`)."""
    if isinstance(model, ir.Model):
        return ir.from_onnx(ir.to_onnx(model), base_dir=model.base_dir) if copy else model
    if isinstance(model, str | os.PathLike):
        return ir.load(model)
    try:
        import onnx
    except ImportError as exc:  # pragma: no cover - onnx is a dependency
        raise RewriteError("onnx is required to read a ModelProto") from exc
    if isinstance(model, onnx.ModelProto):
        return ir.from_onnx(model)
    raise TypeError(
        f"expected a path, an onnx.ModelProto or an ir.Model, got {type(model).__name__}"
    )


def add_opsets(model: ir.Model, opsets: Mapping[str, int]) -> list[str]:
    """Import the given domains the model lacks; returns the domains added."""
    added = []
    for domain, version in opsets.items():
        key = ir.schemas.normalize_domain(domain)
        if key not in model.opset_imports:
            model.opset_imports[key] = int(version)
            added.append(key)
    return added


def freeze_inputs_with_initializers(model: ir.Model) -> None:
    """Make main-graph inputs that an initializer defines plain initializers.

    Such a value is, from IR version 4 on, a default a caller may override, so no rule treats
    it as a constant (`is_const` is false for it). Removing the input makes it one. Before IR
    4 every initializer had to be an input too (onnxruntime treats them all as constants);
    the IR version becomes 4, the first that allows an initializer without an input.
    """
    graph = model.graph
    frozen = [v for v in graph.inputs if v.is_initializer()]
    for value in frozen:
        graph.remove_input(value)
    if frozen and 0 < model.ir_version < 4:
        model.ir_version = 4


def drop_unused_opsets(model: ir.Model, added: Sequence[str]) -> None:
    """Remove imports `_add_opsets` added that no node ended up using."""
    if not added:
        return
    used = {
        ir.schemas.normalize_domain(node.domain)
        for graph in model.graphs()
        for node in graph.all_nodes()
    }
    for domain in added:
        if domain not in used:
            model.opset_imports.pop(domain, None)


def raise_ir_version_for_initializers(model: ir.Model) -> None:
    """IR 4 for an IR 3 model that a pass gave an initializer which is not also an input.

    Rules and folding make `Constant` nodes in such a model; a pass that adds an initializer
    (a Loop's trip count) would otherwise leave a model onnx's checker refuses.
    """
    if not 0 < model.ir_version < 4:
        return
    for graph in model.graphs():
        inputs = {value.name for value in graph.inputs}
        if any(name not in inputs for name in graph.initializers):
            model.ir_version = 4
            return


def set_input_shapes(model: ir.Model, shapes: Mapping[str, Sequence[int]]) -> None:
    """Fix graph inputs' shapes (their dtypes kept), as onnxsim's `--overwrite-input-shape`.

    A symbolic dim of an input takes the given size everywhere it is declared.

    Raises:
        RewriteError: an unknown input, or a shape of another rank than the declared one.
    """
    inputs = {value.name: value for value in model.graph.inputs}
    bound: dict[str, int] = {}
    for name, dims in shapes.items():
        value = inputs.get(name)
        if value is None:
            known = ", ".join(inputs)
            raise OptionError("input_shapes", f"no graph input of that name ({known})", key=name)
        declared = value.type
        if not isinstance(declared, ir.TensorType):
            raise OptionError("input_shapes", "the input is not a tensor", key=name)
        if declared.shape is not None and len(declared.shape) != len(dims):
            raise OptionError(
                "input_shapes",
                f"{len(dims)} dims given, the input has {len(declared.shape)} ({declared})",
                key=name,
            )
        if declared.shape is not None:
            for dim, size in zip(declared.shape, dims, strict=True):
                if isinstance(dim, str):
                    bound[dim] = int(size)
        value.type = ir.TensorType(declared.dtype, tuple(int(d) for d in dims))
    _bind_symbols(model, bound)


def _bind_symbols(model: ir.Model, bound: Mapping[str, int]) -> None:
    """Write the sizes of the symbols an input shape fixed into every declared type.

    A graph output declared `[batch, 10]` after `--input-shape x=4x3` (x: `[batch, 3]`)
    becomes `[4, 10]`, as the run would compute; left symbolic, it would keep the facts
    symbolic where inference meets the declaration.
    """
    if not bound:
        return
    for graph in model.graphs():
        for value in [*graph.values(), *graph.outputs]:
            declared = value.type
            if not isinstance(declared, ir.TensorType) or declared.shape is None:
                continue
            if any(isinstance(d, str) and d in bound for d in declared.shape):
                dims = tuple(bound.get(d, d) if isinstance(d, str) else d for d in declared.shape)
                value.type = dataclasses.replace(declared, shape=dims)
