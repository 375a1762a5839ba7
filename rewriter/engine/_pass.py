"""Built-in passes as values: a name, typed options, and the function that runs them.

A pass is work that is not a local pattern (constant folding, dead code, loop rolling). A run
uses the default pipeline (`rewriter.engine.DEFAULT_PIPELINE`) and the passes rule files
switch on with `pass NAME { option = value }`; the pass manager turns the option values into
the pass's frozen options dataclass (checked against each option's minimum) and runs it
between rounds of rules with the run's `PassContext` (what the runtime can run), through
`run_checked`: under an `ir.Journal`, validated like a rule's rewrite, undone and reported
when it breaks the model. Packages that define passes (the engine's own, the loop passes of
`rewriter.loops`) each export their `PassDefinition`s; the caller of the pass manager says
which ones a run may use.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar

import ir
from rewriter.engine import _trace
from rewriter.engine._builder import Runnable
from rewriter.engine._validate import find_change_problem
from rewriter.rules import PassOption, PassSignature

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True, slots=True)
class PassContext:
    """What a run tells its passes besides their options.

    `runnable` says whether the runtime can run a node (None: not known); a pass that writes
    an op the nodes it replaces did not have (a MatMul becoming a Conv) keeps the old nodes
    where the runtime could run them and has no kernel for the new one, as the rules'
    rewrites do (`RunOptions.runnable`). None: no such check.
    """

    runnable: Runnable | None = None


NO_CONTEXT = PassContext()
"""The context of a pass run outside the pass manager: nothing known."""


@dataclasses.dataclass(frozen=True, slots=True)
class PassChange:
    """What a pass changed in one graph (trace labels, see `TraceEntry`)."""

    graph: str
    removed: tuple[str, ...]
    created: tuple[str, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class PassResult:
    """What a pass did; `changes` is empty for passes that do not itemize them."""

    name: str
    changed: bool
    touched: tuple[ir.Node, ...] = ()
    count: int = 0
    changes: tuple[PassChange, ...] = ()


class ChangeLog:
    """Collects, graph by graph in order of first change, what a pass removed and added."""

    def __init__(self) -> None:
        self._graphs: dict[ir.Graph, tuple[list[str], dict[str, None]]] = {}

    def _entry(self, graph: ir.Graph) -> tuple[list[str], dict[str, None]]:
        entry = self._graphs.get(graph)
        if entry is None:
            entry = ([], {})
            self._graphs[graph] = entry
        return entry

    def removed(self, graph: ir.Graph, label: str) -> None:
        """`label` (a node or `%initializer`) was removed or replaced."""
        self._entry(graph)[0].append(label)

    def created(self, graph: ir.Graph, label: str) -> None:
        """`label` now stands where removed things were (new, or kept from duplicates).

        Kept nodes are listed once however many duplicates they replaced.
        """
        self._entry(graph)[1][label] = None

    def changes(self) -> tuple[PassChange, ...]:
        """One `PassChange` per changed graph."""
        return tuple(
            PassChange(_trace.graph_label(graph), tuple(removed), tuple(created))
            for graph, (removed, created) in self._graphs.items()
        )


def option(default: int, summary: str, *, minimum: int = 0) -> Any:
    """A field of a pass's options dataclass: a non-negative integer with a documented role."""
    return dataclasses.field(default=default, metadata={"summary": summary, "minimum": minimum})


def check_options(options: object) -> None:
    """Refuse option values that are not integers or are below their minimum.

    Options dataclasses call this from `__post_init__`, so an options object is valid
    however it was made.

    Raises:
        ValueError: naming the option and what it takes.
    """
    for field in dataclasses.fields(options):  # type: ignore[arg-type]
        value = getattr(options, field.name)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"option `{field.name}` takes an integer, not {value!r}")
        minimum = field.metadata.get("minimum", 0)
        if value < minimum:
            raise ValueError(f"option `{field.name}` must be at least {minimum}, not {value}")


OptionsT = TypeVar("OptionsT")


@dataclasses.dataclass(frozen=True, slots=True)
class PassDefinition(Generic[OptionsT]):
    """A pass: its name, what it does, its options dataclass, and how to run it."""

    name: str
    summary: str
    options: type[OptionsT]
    run: Callable[[ir.Model, OptionsT, PassContext], PassResult]

    @property
    def signature(self) -> PassSignature:
        """What the rule checker needs to know: the name and each option's minimum."""
        return PassSignature(
            self.name,
            self.summary,
            tuple(
                PassOption(field.name, field.metadata["summary"], field.metadata["minimum"])
                for field in dataclasses.fields(self.options)  # type: ignore[arg-type]
            ),
        )

    def make_options(self, values: Mapping[str, object]) -> OptionsT:
        """The options dataclass for declared values (defaults for the ones not given).

        Raises:
            ValueError: an unknown option, a value that is not an integer, or one below its
                minimum (the rule checker reports these at load time; this guards the API).
        """
        known = {f.name for f in dataclasses.fields(self.options)}  # type: ignore[arg-type]
        for key in values:
            if key not in known:
                raise ValueError(f"pass `{self.name}` has no option `{key}`")
        return self.options(**values)


def pass_table(*definitions: PassDefinition[Any]) -> dict[str, PassDefinition[Any]]:
    """Definitions by name (a name defined twice is a bug)."""
    table: dict[str, PassDefinition[Any]] = {}
    for definition in definitions:
        assert definition.name not in table, f"pass `{definition.name}` is defined twice"
        table[definition.name] = definition
    return table


def run_checked(
    definition: PassDefinition[Any],
    options: object,
    model: ir.Model,
    context: PassContext = NO_CONTEXT,
) -> PassResult | str:
    """Run one pass under an `ir.Journal` and keep what it did only if it is valid.

    The pass's changes are validated like a rule's rewrite (`find_change_problem`); when
    they are not valid, or the pass raises, every change is undone and the reason returned
    instead of the result, so a broken pass is reported and the model stays as it was.
    """
    with ir.Journal(model) as journal:
        try:
            result = definition.run(model, options, context)
        except Exception as exc:  # a pass is code like any other; the model must survive it
            journal.undo()
            logger.warning("pass `%s` failed and was undone", definition.name, exc_info=True)
            return f"failed ({type(exc).__name__}: {exc})"
        if not journal:
            return result
        problem = find_change_problem(journal, model)
        if problem is not None:
            journal.undo()
            return problem
    return result
