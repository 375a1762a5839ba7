"""Enumerating a rule's instances: every combination of the choices instantiating it makes.

Instantiating a rule asks questions as it goes (the rank of `x`, the dtype of Mul's `T`, the
perm of a Transpose, whether an optional input is there), and the options of a later question
may depend on earlier answers (a perm is a permutation of the rank chosen before). A
`Chooser` answers each question from a script of earlier answers and records the questions
it meets, and `next_script` gives the script of the next combination: the prover (`_proof`)
runs the instantiation again and again, depth first, until every combination has been tried
or a limit is reached. A run that finds its combination
impossible (a condition that is false, an op that refuses its inputs) stops early, which
prunes every combination that shares its answers so far.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")


@dataclasses.dataclass(frozen=True, slots=True)
class Choice:
    """One answered question: what was asked, the answer's text, and how many options."""

    label: str
    answer: str
    options: int


class Chooser:
    """Answers questions from a script of option indices; records the questions it met."""

    def __init__(self, script: Sequence[int]) -> None:
        self._script = list(script)
        self.made: list[Choice] = []
        self._indices: list[int] = []

    def choose(self, label: str, options: Sequence[T], describe: Callable[[T], str] = str) -> T:
        """One of `options` (the next in the enumeration); `label` names the question.

        Raises:
            ValueError: no options (the caller should have found the instance impossible).
        """
        if not options:
            raise ValueError(f"no options for {label}")
        position = len(self._indices)
        index = self._script[position] if position < len(self._script) else 0
        chosen = options[index]
        self._indices.append(index)
        self.made.append(Choice(label, describe(chosen), len(options)))
        return chosen

    def next_script(self) -> list[int] | None:
        """The script of the next combination after this run's (None: all were tried)."""
        for position in reversed(range(len(self._indices))):
            if self._indices[position] + 1 < self.made[position].options:
                return [*self._indices[:position], self._indices[position] + 1]
        return None
