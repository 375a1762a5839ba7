"""Which nodes compute a function of their inputs and nothing else.

Only such nodes may be merged with an equal node (two draws of RandomUniformLike are not one
draw) or folded into a constant. A node is pure when its op is a standard op that is neither
random nor stateful, when it calls a local function whose body is pure, and when every node
of its subgraphs is pure. An op of any other domain is impure: nothing says what it does.
"""

from __future__ import annotations

import ir

# Standard ops whose result is not a function of their inputs alone.
NONDETERMINISTIC = frozenset(
    {
        "RandomNormal",
        "RandomNormalLike",
        "RandomUniform",
        "RandomUniformLike",
        "Multinomial",
        "Bernoulli",
        "Dropout",
    }
)
_STANDARD = ("", "ai.onnx", "ai.onnx.ml")


class Purity:
    """Answers `is_pure(node)` for the nodes of one model (function bodies looked through)."""

    def __init__(self, model: ir.Model) -> None:
        self._functions = model.functions
        self._function_purity: dict[tuple[str, str, str], bool] = {}

    def is_pure(self, node: ir.Node) -> bool:
        """True when `node` computes a function of its inputs and has no other effect."""
        if node.domain in _STANDARD:
            if node.op_type in NONDETERMINISTIC:
                return False
        else:
            function = self._functions.get((node.domain, node.op_type, node.overload))
            if function is None or not self._function_is_pure(function):
                return False
        return all(self.is_pure(inner) for sub in node.subgraphs() for inner in sub.all_nodes())

    def _function_is_pure(self, function: ir.Function) -> bool:
        key = function.identifier
        known = self._function_purity.get(key)
        if known is None:
            # A function that calls itself (directly or not) is not pure by assumption.
            self._function_purity[key] = False
            known = all(self.is_pure(node) for node in function.graph.all_nodes())
            self._function_purity[key] = known
        return known
