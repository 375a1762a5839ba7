"""The built-in functions of the rule language: one registry of name, signature and code.

`BUILTINS` maps each name to its `Builtin` (signature and implementation); `signatures()`
is what the rule checker needs to know. The implementations are grouped by what they work
on: facts about matched values, their elements' ranges, numbers and lists, tensors.
"""

from __future__ import annotations

from collections.abc import Mapping

from rewriter.engine._builtins import (
    _numbers,
    _quantize,
    _tensors,
    _value_facts,
    _value_ranges,
)
from rewriter.engine._builtins._registry import Builtin, Implementation, builtin, collect
from rewriter.rules import Signature

BUILTINS: Mapping[str, Builtin] = collect(
    (_value_facts, _value_ranges, _numbers, _tensors, _quantize)
)
"""Every built-in function, by name."""


def signatures() -> dict[str, Signature]:
    """The signature of every built-in, by name (for the rule checker)."""
    return {name: entry.signature for name, entry in BUILTINS.items()}


__all__ = ["BUILTINS", "Builtin", "Implementation", "builtin", "signatures"]
