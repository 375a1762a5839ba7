"""Normalizing the models given to the verifier: a path, an `onnx.ModelProto` or an `ir.Model`.

Every model is lifted into the IR (to read its signature and trace index inputs to the
gathers they feed). A model given as a path is handed to the runtimes by path, so external
data resolves exactly as it would in deployment; an in-memory model is serialized with
`ir.to_onnx`. The rewriter never touches protobuf otherwise.
"""

from __future__ import annotations

import dataclasses
import os
from typing import TYPE_CHECKING, TypeAlias

import ir
from rewriter.verification._errors import VerifyError

if TYPE_CHECKING:
    import onnx

ModelSource: TypeAlias = "str | os.PathLike[str] | onnx.ModelProto | ir.Model"
"""What the verifier accepts as a model."""


@dataclasses.dataclass(frozen=True, slots=True)
class LoadedModel:
    """A model ready to run: its IR, where it came from, and its file if it has one."""

    model: ir.Model
    label: str
    path: str | None
    # True when the IR was lifted here (from a path or a ModelProto): facts may be recorded
    # on it; a caller's `ir.Model` is only read.
    owned: bool = False
    # The serialized model, made once for every session that reads it from memory.
    _bytes: list[bytes] = dataclasses.field(default_factory=list, compare=False, repr=False)

    def serialized(self) -> bytes:
        """The model as ONNX bytes (for onnxruntime), serialized on first use.

        Raises:
            VerifyError: the model is too large for one protobuf message (2 GB).
        """
        if not self._bytes:
            try:
                self._bytes.append(ir.to_onnx(self.model).SerializeToString())
            except ValueError as exc:  # protobuf refuses messages over 2 GB
                raise VerifyError(
                    f"cannot serialize the in-memory model for onnxruntime ({exc}); save it to "
                    "a file with external data and verify the file"
                ) from exc
        return self._bytes[0]

    @property
    def stem(self) -> str | None:
        """The file name without its extension, or None for an in-memory model."""
        if self.path is None:
            return None
        base = os.path.basename(self.path)
        stem, _ = os.path.splitext(base)
        return stem


def load_model(source: ModelSource, role: str) -> LoadedModel:
    """Lift `source` into the IR; `role` ("original"/"rewritten") names it in messages.

    Raises:
        ir.ModelLoadError: the file is not a readable ONNX model.
        TypeError: `source` is none of the accepted kinds.
    """
    if isinstance(source, ir.Model):
        return LoadedModel(model=source, label=f"{role} (in-memory ir.Model)", path=None)
    if isinstance(source, str | os.PathLike):
        path = os.fspath(source)
        return LoadedModel(model=ir.load(path), label=path, path=path, owned=True)
    # ir.from_onnx type-checks its argument (TypeError for anything but a ModelProto).
    try:
        model = ir.from_onnx(source)
    except TypeError:
        raise TypeError(
            f"{role} model must be a path, an onnx.ModelProto or an ir.Model, "
            f"got {type(source).__name__}"
        ) from None
    return LoadedModel(model=model, label=f"{role} (in-memory ModelProto)", path=None, owned=True)
