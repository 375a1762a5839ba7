"""What rules may name besides ops: functions and passes, with their signatures.

The rule IR does not define the built-in functions and passes; the engine does (each with
its implementation) and hands the rule language's checker a `Vocabulary` listing their
signatures. So the checker knows every name a rule may call, and neither the language nor the
engine imports the other.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping


@dataclasses.dataclass(frozen=True, slots=True)
class Signature:
    """How a function may be called, Python style.

    `params` are the positional parameters, the first `required` of them mandatory;
    `variadic` accepts any number of further positional arguments. `keywords` are the
    names that may be passed as `name = value`. A `let_only` function builds rewrite values
    (it fixes the dtype of a new initializer) and means nothing in a `where` line.
    """

    name: str
    params: tuple[str, ...]
    required: int
    variadic: bool = False
    keywords: tuple[str, ...] = ()
    summary: str = ""
    let_only: bool = False

    @property
    def usage(self) -> str:
        """The call as documented: `all_close(a, b, rtol, atol)`."""
        parts = list(self.params)
        if self.variadic:
            parts.append("...")
        parts.extend(f"{k} = ..." for k in self.keywords if k not in self.params)
        return f"{self.name}({', '.join(parts)})"


@dataclasses.dataclass(frozen=True, slots=True)
class PassOption:
    """One option of a pass: a non-negative integer of at least `minimum`."""

    name: str
    summary: str
    minimum: int = 0


@dataclasses.dataclass(frozen=True, slots=True)
class PassSignature:
    """A pass that `pass NAME { ... }` may declare, and its options."""

    name: str
    summary: str
    options: tuple[PassOption, ...] = ()

    def option(self, name: str) -> PassOption | None:
        """The option called `name`, or None."""
        return next((o for o in self.options if o.name == name), None)


@dataclasses.dataclass(frozen=True, slots=True)
class Vocabulary:
    """The functions and passes rule files may name, by name."""

    functions: Mapping[str, Signature] = dataclasses.field(default_factory=dict)
    passes: Mapping[str, PassSignature] = dataclasses.field(default_factory=dict)


QUANTIZATION_OPS = frozenset(
    {
        "QuantizeLinear",
        "DequantizeLinear",
        "DynamicQuantizeLinear",
        "MatMulInteger",
        "ConvInteger",
        "MatMulNBits",
        "MatMulIntegerToFloat",
        "DynamicQuantizeMatMul",
    }
)
"""Ops whose presence in a rewrite means values are held in fewer bits (QLinear* too)."""
