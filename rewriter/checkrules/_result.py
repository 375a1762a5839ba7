"""Results of `check-rules`: one `RuleReport` per rule, the counterexample of a failure."""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Mapping
from typing import Any

import numpy as np


class Status(enum.Enum):
    """The verdict on one rule."""

    VERIFIED = "verified"
    FAILED = "failed"
    NOT_INSTANTIABLE = "not instantiable"


@dataclasses.dataclass(frozen=True, slots=True)
class Counterexample:
    """A failing instance: the model (ONNX text), its inputs, the error and the message."""

    model_text: str
    inputs: Mapping[str, np.ndarray[Any, Any]]
    max_abs_err: float | None
    message: str
    rewritten_text: str = ""

    def to_json(self) -> dict[str, object]:
        """JSON-ready fields (inputs as nested lists)."""
        return {
            "model": self.model_text,
            "rewritten": self.rewritten_text,
            "inputs": {k: _jsonable(v) for k, v in self.inputs.items()},
            "max_abs_err": _finite(self.max_abs_err),
            "message": self.message,
        }

    def render(self) -> str:
        """Readable text: message, error, inputs, the instance model."""
        lines = [f"  {self.message}"]
        if self.max_abs_err is not None:
            lines.append(f"  max abs error: {self.max_abs_err:.6g}")
        for name, array in self.inputs.items():
            text = np.array2string(np.asarray(array), precision=6, threshold=64)
            lines.append(f"  input {name} {np.asarray(array).dtype} {list(np.shape(array))}:")
            lines.extend(f"    {line}" for line in text.splitlines())
        lines.append("  instance model:")
        lines.extend(f"    {line}" for line in self.model_text.splitlines())
        if self.rewritten_text:
            lines.append("  rewritten model:")
            lines.extend(f"    {line}" for line in self.rewritten_text.splitlines())
        return "\n".join(lines)


@dataclasses.dataclass(frozen=True, slots=True)
class RuleReport:
    """The verdict on one rule, with its location and how much was checked."""

    name: str
    location: str
    status: Status
    instances: int = 0
    examples: int = 0
    detail: str = ""
    counterexample: Counterexample | None = None
    seconds: float = 0.0
    kind: str = "rule"
    # Not built by check-rules by design; the project's tests verify it (loop rules and passes,
    # rules over sequence values). `--strict` accepts these.
    by_tests: bool = False
    # The first instance model of a checked rule (ONNX ModelProto), reused to check passes.
    sample: Any = dataclasses.field(default=None, compare=False, repr=False)

    def to_json(self) -> dict[str, object]:
        """JSON-ready fields."""
        return {
            "name": self.name,
            "kind": self.kind,
            "location": self.location,
            "status": self.status.value,
            "instances": self.instances,
            "examples": self.examples,
            "detail": self.detail,
            "verified_by_tests": self.by_tests,
            "seconds": round(self.seconds, 3),
            "counterexample": None
            if self.counterexample is None
            else self.counterexample.to_json(),
        }


def _finite(value: float | None) -> float | str | None:
    if value is None or math.isfinite(value):
        return value
    return str(value)


def _jsonable(array: np.ndarray[Any, Any]) -> dict[str, object]:
    data = np.asarray(array)
    values: list[object]
    if data.dtype.kind in "fc":
        values = [_finite(float(x)) for x in data.astype(np.float64).reshape(-1)]
    else:
        values = data.reshape(-1).tolist()
    return {"dtype": str(data.dtype), "shape": list(data.shape), "values": values}
