"""`verify_grafted`: check on generated inputs that a grafted model runs A, then B.

A grafted model AB is checked in two parts, each against the model it came from, with the
verifier's criterion (`check_equivalence`):

* A's part: the values of A that feed B or stay outputs, computed in AB from A's inputs,
  against A computing the same values;
* B's part: B's outputs, computed in AB from the values that reach B's connected inputs
  (an adapter's output when the connection has one), against B itself.

Together they say AB computes B(adapter(A(x))); the adapter nodes are the ops asked for. The
two sides of each comparison get the same input and output names (`A:NAME`, `B:NAME` after
the reference's names), whatever the graft renamed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

import ir
from rewriter._errors import RewriteError
from rewriter.surgery._extract import extract

if TYPE_CHECKING:
    from rewriter.verification import VerifyProgress, VerifyResult


@dataclasses.dataclass(frozen=True, slots=True)
class GraftPlan:
    """Where A's and B's parts meet in a grafted model, by value name in AB.

    `feeds[k]` is the value that B's input `b_inputs[k]` reads in AB; `b_outputs[k]` is
    AB's name of B's output `b_output_names[k]`; `a_values` are A's values that feed B or stay
    outputs.
    """

    b_inputs: tuple[str, ...]
    feeds: tuple[str, ...]
    b_output_names: tuple[str, ...]
    b_outputs: tuple[str, ...]
    a_values: tuple[str, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class GraftVerification:
    """The two checks of a grafted model: A's part and B's part."""

    parts: tuple[tuple[str, VerifyResult], ...]

    @property
    def ok(self) -> bool:
        """True when every part agrees with the model it came from."""
        return all(result.ok for _, result in self.parts)


def verify_grafted(
    a: ir.Model,
    b: ir.Model,
    grafted: ir.Model,
    plan: GraftPlan,
    *,
    examples: int = 20,
    seed: int = 0,
    progress: VerifyProgress | None = None,
) -> GraftVerification:
    """Check A's and B's parts of `grafted` against A and B on generated inputs.

    Raises:
        RewriteError: one A value feeds two inputs of B (B's part cannot be cut apart).
    """
    from rewriter.verification import InputOptions, VerifyOptions, check_equivalence

    def check(reference: ir.Model, candidate: ir.Model, tag: str) -> VerifyResult:
        inputs, outputs = _shared_names(reference, candidate, tag)
        return check_equivalence(
            _renamed(reference, inputs, outputs),
            _renamed(candidate, inputs, outputs),
            VerifyOptions(
                InputOptions(examples, seed), save_counterexample=False, progress=progress
            ),
        )

    if len(set(plan.feeds)) != len(plan.feeds):
        raise RewriteError(
            "graft --verify: one value feeds two inputs of B, so B's part cannot be cut apart"
        )
    parts: list[tuple[str, VerifyResult]] = []
    a_inputs = [v.name for v in a.graph.inputs if not v.is_initializer()]
    if plan.a_values:
        reference = extract(a, a_inputs, plan.a_values)
        candidate = extract(grafted, a_inputs, plan.a_values)
        parts.append(("A's values in the grafted model", check(reference, candidate, "A")))
    if plan.b_outputs:
        reference = extract(b, plan.b_inputs, plan.b_output_names)
        candidate = extract(grafted, plan.feeds, plan.b_outputs)
        parts.append(("B's outputs in the grafted model", check(reference, candidate, "B")))
    return GraftVerification(tuple(parts))


def _shared_names(
    reference: ir.Model, candidate: ir.Model, tag: str
) -> tuple[list[str], list[str]]:
    """Input and output names both models can take: `TAG:NAME` after the reference's names."""
    taken = {v.name for model in (reference, candidate) for v in model.graph.values()}
    inputs = [
        _fresh(f"{tag}:{value.name}", taken)
        for value in reference.graph.inputs
        if not value.is_initializer()
    ]
    outputs = [_fresh(f"{tag}:{value.name}", taken) for value in reference.graph.outputs]
    return inputs, outputs


def _renamed(model: ir.Model, inputs: Sequence[str], outputs: Sequence[str]) -> ir.Model:
    """`model` with its inputs renamed and each output passed through a renamed Identity."""
    graph = model.graph
    fed = [value for value in graph.inputs if not value.is_initializer()]
    for value, name in zip(fed, inputs, strict=True):
        value.name = name
    for index, (value, name) in enumerate(zip(list(graph.outputs), outputs, strict=True)):
        alias = ir.Value(name, type=value.type or ir.fact_type(value))
        graph.append(ir.Node("Identity", [value], outputs=[alias]))
        graph.set_output(index, alias)
    return model


def _fresh(name: str, taken: set[str]) -> str:
    candidate, number = name, 1
    while candidate in taken:
        number += 1
        candidate = f"{name}_{number}"
    taken.add(candidate)
    return candidate
