"""One registration per built-in function: its name, signature, summary and implementation.

`@builtin("len", "length of a list")` on `def length(ctx, x)` registers the function under
the name rules use. The signature the load-time checker enforces is read from the Python
signature itself (the parameters after the evaluation context; those without a default are
required; `*args` makes it variadic), so the two cannot drift apart. Parameters a rule may
pass by keyword are listed explicitly (`keywords=("axis",)`).
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Any

from rewriter.rules import Signature

Implementation = Callable[..., Any]
"""Takes the evaluation context first, then the call's arguments."""


@dataclasses.dataclass(frozen=True, slots=True)
class Builtin:
    """A built-in function of the rule language."""

    signature: Signature
    implementation: Implementation

    @property
    def name(self) -> str:
        """The name rules call it by."""
        return self.signature.name


def builtin(
    name: str,
    summary: str,
    *,
    keywords: tuple[str, ...] = (),
    let_only: bool = False,
) -> Callable[[Implementation], Builtin]:
    """Register the decorated function as the built-in `name`.

    Args:
        name: the name rules call it by.
        summary: one line for LANGUAGE.md's table and for error messages.
        keywords: parameters a rule may pass as `name = value`.
        let_only: only usable where a rewrite builds values, not in `where`.
    """

    def register(implementation: Implementation) -> Builtin:
        signature = _signature_of(implementation, name, summary, keywords, let_only)
        return Builtin(signature, implementation)

    return register


def _signature_of(
    implementation: Implementation,
    name: str,
    summary: str,
    keywords: tuple[str, ...],
    let_only: bool,
) -> Signature:
    parameters = list(inspect.signature(implementation).parameters.values())[1:]
    positional = [p for p in parameters if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD]
    variadic = any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in parameters)
    accepted = {p.name for p in parameters if p.kind is not inspect.Parameter.VAR_POSITIONAL}
    unknown = set(keywords) - accepted
    assert not unknown, f"built-in `{name}` lists keywords it has no parameter for: {unknown}"
    return Signature(
        name=name,
        params=tuple(p.name for p in positional),
        required=sum(1 for p in positional if p.default is inspect.Parameter.empty),
        variadic=variadic,
        keywords=keywords,
        summary=summary,
        let_only=let_only,
    )


def collect(modules: Iterable[ModuleType]) -> dict[str, Builtin]:
    """Every `Builtin` defined in `modules`, by name, in definition order."""
    found: dict[str, Builtin] = {}
    for module in modules:
        for item in vars(module).values():
            if isinstance(item, Builtin):
                assert item.name not in found, f"built-in `{item.name}` is registered twice"
                found[item.name] = item
    return found
