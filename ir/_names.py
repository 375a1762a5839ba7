"""Deterministic fresh names for values and nodes, unique across a whole model."""

from __future__ import annotations

import re

from ir._core import Model


class NameAllocator:
    """Hands out names not yet used anywhere in a model (all graphs, all functions).

    Names are derived from a readable stem (`stem`, `stem_1`, `stem_2`, ...), so the same
    model and the same requests give the same names.
    """

    __slots__ = ("_counters", "_used")

    def __init__(self, model: Model | None = None) -> None:
        self._used: set[str] = set()
        self._counters: dict[str, int] = {}
        if model is not None:
            for graph in model.graphs():
                for value in graph.values():
                    self._used.add(value.name)
                for node in graph:
                    if node.name:
                        self._used.add(node.name)
                    for read in node.inputs:
                        if read is not None:
                            self._used.add(read.name)

    def reserve(self, name: str) -> None:
        """Mark `name` as taken."""
        self._used.add(name)

    def is_used(self, name: str) -> bool:
        """True when `name` has been seen or handed out."""
        return name in self._used

    def fresh(self, stem: str) -> str:
        """A new name starting with `stem` (sanitized), never returned before."""
        stem = _sanitize(stem) or "v"
        if stem not in self._used:
            self._used.add(stem)
            return stem
        counter = self._counters.get(stem, 0)
        while True:
            counter += 1
            candidate = f"{stem}_{counter}"
            if candidate not in self._used:
                break
        self._counters[stem] = counter
        self._used.add(candidate)
        return candidate


_UNSAFE = re.compile(r"[^A-Za-z0-9_./:-]+")


def _sanitize(stem: str) -> str:
    return _UNSAFE.sub("_", stem).strip("_")
