"""Names a package gives on first use (PEP 562), so that importing it stays cheap.

A package lists the names it exports lazily with the module defining each, and forwards its
module `__getattr__` to a `LazyNames`; a name is imported when first asked for and kept in
the package's namespace after that.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, MutableMapping


class LazyNames:
    """The lazily exported names of one package."""

    def __init__(
        self, package: str, modules: Mapping[str, str], namespace: MutableMapping[str, object]
    ) -> None:
        """Names of `package`, each imported from `modules[name]` into `namespace`.

        `namespace` is the package's `globals()`: a name imported once is found there next.
        """
        self.package = package
        self.modules = dict(modules)
        self.namespace = namespace

    def get(self, name: str) -> object:
        """The value of `name`, imported now if needed.

        Raises:
            AttributeError: the package does not export `name`.
        """
        module = self.modules.get(name)
        if module is None:
            raise AttributeError(f"module {self.package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        self.namespace[name] = value
        return value
