"""The layers import one way only, and no module imports itself through a cycle.

Every module of `ir/` and `rewriter/` is parsed with `ast`; every import of a project module is
checked, the ones inside functions included (a function-local import does not make a wrong-way
dependency right). Imports under `if TYPE_CHECKING:` are types only and are not counted.

The order, lowest first (a module may import its own package and the layers before it):

    ir
    rewriter._errors          errors and source spans, shared by every layer
    rewriter._cache           the user's cache folder, shared likewise
    rewriter._lazy            names a package imports on first use (PEP 562), likewise
    rewriter.rules            the rule IR: the one form of a rule every consumer reads
    rewriter.dsl              the rule language (parses, checks, lowers into the rule IR),
    rewriter.engine             and beside it, never importing it: compiling, matching,
                                building, the pass manager
    rewriter.loops            clients of the engine: loop passes,
    rewriter.verification       running models to compare them,
    rewriter.prove              SMT semantics of ops and equivalence queries
    rewriter.quantize         calibration, presets, accuracy budgets, speed checks (runs models)
    rewriter.api              the Python API (assembles the engine and the loop passes)
    rewriter.checkrules       clients of the API: rule checking,
    rewriter.report             HTML reports,
    rewriter.surgery            extract, graft, split, find,
    rewriter.lsp                the language server
    rewriter.cli              the command line
    rewriter                  the package facade (`rewriter/__init__.py`)

onnxruntime may be imported only where models are run (verification, quantization, rule
checking, and constant folding, which computes what onnxruntime computes).

No module imports another package's private module (a name starting with `_`): a package's
surface is its `__init__`. A module may import the private modules of its own package and of
the packages enclosing it (a private subpackage is part of its parent).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

LAYERS: tuple[tuple[str, ...], ...] = (
    ("ir",),
    ("rewriter._errors", "rewriter._cache", "rewriter._lazy"),
    ("rewriter.rules",),
    ("rewriter.dsl", "rewriter.engine"),
    ("rewriter.loops", "rewriter.verification", "rewriter.prove"),
    ("rewriter.quantize",),
    ("rewriter.api",),
    ("rewriter.checkrules", "rewriter.report", "rewriter.surgery", "rewriter.lsp"),
    ("rewriter.cli",),
    ("rewriter",),
)
RUNS_MODELS = (
    "rewriter.verification",
    "rewriter.quantize",
    "rewriter.checkrules",
    "rewriter.engine._runtime",
    "rewriter.prove._replay",
)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    found = {}
    for package in ("ir", "rewriter"):
        for path in sorted((ROOT / package).rglob("*.py")):
            found[_module_name(path)] = path
    return found


MODULES = _modules()


def _is_type_checking_block(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _imports(tree: ast.AST) -> Iterator[tuple[str, int]]:
    """(imported module, line) for every import outside `if TYPE_CHECKING:` blocks."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if _is_type_checking_block(node):
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                # `from rewriter.engine import _facts` imports a module, not a name.
                candidate = f"{node.module}.{alias.name}"
                yield (candidate if candidate in MODULES else node.module), node.lineno
        stack.extend(ast.iter_child_nodes(node))


def _layer(module: str) -> tuple[int, str]:
    """The layer index and the package of `module` (the longest matching prefix)."""
    best: tuple[int, str] = (-1, "")
    for index, packages in enumerate(LAYERS):
        for package in packages:
            matches = module == package or module.startswith(package + ".")
            if matches and len(package) > len(best[1]):
                best = (index, package)
    assert best[0] >= 0, f"{module} belongs to no layer; add it to LAYERS"
    return best


def _project_imports(module: str) -> list[tuple[str, int]]:
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    return [
        (name, line) for name, line in _imports(tree) if name.split(".")[0] in ("ir", "rewriter")
    ]


def _display(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def wrong_way_imports(module: str) -> list[str]:
    """Every import in `module` of a later layer, or of another package of its own layer."""
    own_layer, own_package = _layer(module)
    problems = []
    for imported, line in _project_imports(module):
        layer, package = _layer(imported)
        later = layer > own_layer
        sideways = layer == own_layer and package != own_package
        if later or sideways:
            problems.append(f"{_display(MODULES[module])}:{line} imports {imported}")
    return problems


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_point_down_the_layers(module: str) -> None:
    assert wrong_way_imports(module) == []


def _import_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for module in MODULES:
        targets = set()
        for imported, _ in _project_imports(module):
            # `import rewriter.engine._facts` also runs `rewriter.engine`'s __init__.
            while imported and imported not in MODULES:
                imported = imported.rpartition(".")[0]
            if imported and imported != module:
                targets.add(imported)
        graph[module] = targets
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """Some cycle of the graph, as a list of modules, or None when it is acyclic."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                return [*path[path.index(target) :], target]
            if target not in state:
                found = visit(target)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def _is_package_init(module: str, imported: str) -> bool:
    """A package's __init__ importing its own submodules, which import the package back."""
    return imported.startswith(module + ".")


def test_no_module_imports_itself_through_a_cycle() -> None:
    graph = _import_graph()
    # A package's __init__ re-exports its submodules; a submodule that imports a sibling
    # through the package (`from rewriter.engine import _facts`) reaches the __init__ too.
    # Those edges are the package's own business: leave the submodule -> own package edges out.
    for module, targets in graph.items():
        graph[module] = {t for t in targets if not _is_package_init(t, module)}
    assert find_cycle(graph) is None


def test_onnxruntime_is_imported_only_where_models_are_run() -> None:
    found = []
    for module, path in MODULES.items():
        if any(module == p or module.startswith(p + ".") for p in RUNS_MODELS):
            continue
        for imported, line in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            if imported.split(".")[0] == "onnxruntime":
                found.append(f"{_display(path)}:{line}")
    assert found == []


def test_the_checks_catch_a_wrong_way_import(tmp_path: Path) -> None:
    # The engine reaching up into the command line is reported with file and line.
    MODULES["rewriter.engine._planted"] = tmp_path / "planted.py"
    (tmp_path / "planted.py").write_text("def f():\n    from rewriter.cli import _status\n")
    try:
        (problem,) = wrong_way_imports("rewriter.engine._planted")
        assert problem.endswith("planted.py:2 imports rewriter.cli._status")
    finally:
        del MODULES["rewriter.engine._planted"]


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def _all_imports(tree: ast.AST) -> Iterator[tuple[str, int]]:
    """(imported module path, line) of every import, `TYPE_CHECKING` blocks included.

    `from a.b import c` yields `a.b.c` when that is a module of the project, else `a.b`.
    """
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                candidate = f"{node.module}.{alias.name}"
                private_name = alias.name.startswith("_") and candidate in MODULES
                yield (candidate if private_name else node.module), node.lineno


def _package_of(module: str) -> str:
    """The package a module belongs to (a package's `__init__` belongs to itself)."""
    path = MODULES[module]
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


def _private_owner(imported: str) -> str | None:
    """The package whose private module `imported` reaches into, or None if it is public."""
    parts = imported.split(".")
    ours = parts[0] in ("ir", "rewriter")
    for index, part in enumerate(parts):
        # Other libraries also mark private packages by name (`hypothesis.internal`).
        if (part.startswith("_") and not part.startswith("__")) or (
            part == "internal" and not ours
        ):
            return ".".join(parts[:index])
    return None


def private_imports(module: str) -> list[str]:
    """Every import in `module` of a private module of another package."""
    own = _package_of(module)
    problems = []
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    for imported, line in _all_imports(tree):
        owner = _private_owner(imported)
        if owner is None:
            continue
        if owner.split(".")[0] in ("ir", "rewriter") and (
            own == owner or own.startswith(owner + ".")
        ):
            continue
        problems.append(f"{_display(MODULES[module])}:{line} imports {imported}")
    return problems


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_module_imports_another_packages_private_module(module: str) -> None:
    assert private_imports(module) == []


def test_the_private_import_check_catches_a_reach_into_another_package(tmp_path: Path) -> None:
    MODULES["rewriter.engine._planted"] = tmp_path / "planted.py"
    (tmp_path / "planted.py").write_text(
        "from rewriter.dsl import _ast as ast\nfrom rewriter.engine import _facts\n"
        "from hypothesis.internal.conjecture import providers\n"
    )
    try:
        first, second = private_imports("rewriter.engine._planted")
        assert first.endswith("planted.py:1 imports rewriter.dsl._ast")
        assert second.endswith("planted.py:3 imports hypothesis.internal.conjecture")
    finally:
        del MODULES["rewriter.engine._planted"]


def test_the_engine_does_not_import_the_rule_language() -> None:
    found = [
        f"{_display(MODULES[module])}:{line} imports {imported}"
        for module in MODULES
        if module.startswith("rewriter.engine")
        for imported, line in _all_imports(ast.parse(MODULES[module].read_text(encoding="utf-8")))
        if imported == "rewriter.dsl" or imported.startswith("rewriter.dsl.")
    ]
    assert found == []
