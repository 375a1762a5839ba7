"""Named choices: every random decision of an instance is drawn once, under a key.

An instance is built from choices such as `("shape", "x")`, `("attr", "p1")` or
`("op", 2)`. The first build draws each choice from hypothesis (`st.data()`); a rebuild after
a *repair* (see `_repair`) reuses the same draws and replaces only the choices the repair
overrides. Because a rebuild is a pure function of the recorded draws and the overrides,
hypothesis sees a deterministic test and a given seed always gives the same instances.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any, Protocol, TypeVar

import numpy as np

T = TypeVar("T")


class DataSource(Protocol):
    """What `Choices` draws from: hypothesis' `st.data()` object (or a test's stand-in)."""

    def draw(self, strategy: Any, label: Any = None) -> Any:
        """Draw one value from a hypothesis strategy."""


class Choices:
    """Draws keyed choices once and replays them; overrides replace chosen values."""

    def __init__(self, data: DataSource) -> None:
        self._data = data
        self._cache: dict[Hashable, Any] = {}
        self.overrides: dict[Hashable, Any] = {}

    def _draw(self, key: Hashable, strategy: Any) -> Any:
        if key in self.overrides:
            return self.overrides[key]
        if key not in self._cache:
            self._cache[key] = self._data.draw(strategy)
        return self._cache[key]

    def known(self, key: Hashable) -> bool:
        """True when `key` has been drawn or overridden."""
        return key in self.overrides or key in self._cache

    def integer(self, key: Hashable, low: int, high: int) -> int:
        """An int in `[low, high]`."""
        from hypothesis import strategies as st

        if key in self.overrides:
            return int(self.overrides[key])
        if low >= high:
            return low
        # A rebuild may ask for the same key with another range: clamp the recorded draw.
        return min(max(int(self._draw(key, st.integers(low, high))), low), high)

    def pick(self, key: Hashable, options: Sequence[T]) -> T:
        """One of `options` (repeat an option to weight it); the first is the simplest."""
        from hypothesis import strategies as st

        if key in self.overrides:
            return self.overrides[key]  # type: ignore[no-any-return]
        if len(options) == 1:
            return options[0]
        index = self._draw(("index", key), st.integers(0, len(options) - 1))
        return options[int(index) % len(options)]

    def chance(self, key: Hashable, percent: int) -> bool:
        """True with about `percent`% probability (False is the simpler outcome)."""
        if key in self.overrides:
            return bool(self.overrides[key])
        return self.integer(("chance", key), 0, 99) >= 100 - percent

    def permutation(self, key: Hashable, n: int) -> list[int]:
        """A permutation of `range(n)`."""
        if key in self.overrides:
            return list(self.overrides[key])
        # Uniform through a seed: hypothesis' own permutations favour the identity, which
        # commutes with everything and would hide a wrongly composed permutation.
        seed = self.integer((key, "seed"), 0, 2**16)
        return [int(i) for i in np.random.default_rng(seed).permutation(n)]

    def override(self, key: Hashable, value: Any) -> None:
        """Force the choice `key` to `value` in the next builds."""
        self.overrides[key] = value
