"""Opt-in Python helpers: `use "module"` declarations.

This is the only place where loading rules may import Python code, and it is reached only
when the caller passed `allow_python=True` (`--allow-python` on the command line). A helper
module registers its functions in a module-level dict `RW_FUNCTIONS: dict[str, Callable]`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Collection, Sequence

from rewriter._errors import Span
from rewriter.dsl import _ast as ast
from rewriter.dsl._reporter import Reporter, head

Functions = dict[str, Callable[..., object]]


def refuse_uses(files: Sequence[ast.File], report: Reporter) -> None:
    """Report every `use` declaration: Python helpers were not permitted."""
    for file in files:
        for item in file.items:
            if isinstance(item, ast.UseDecl):
                report.error(
                    head(item.span, len("use")),
                    f'`use "{item.module}"` runs Python code, which loads only when Python '
                    "helpers are allowed (the allow-python option)",
                )


def import_uses(
    files: Sequence[ast.File], builtins: Collection[str], report: Reporter
) -> tuple[Functions, dict[str, ast.UseDecl]]:
    """Import every module named by a `use` and collect its `RW_FUNCTIONS`.

    A helper may not take the name of one of `builtins`.

    Returns:
        The helpers by name, and the `use` that registered each.
    """
    functions: Functions = {}
    origin: dict[str, ast.UseDecl] = {}
    for file in files:
        for item in file.items:
            if isinstance(item, ast.UseDecl):
                for name, function in _import_one(item, builtins, report).items():
                    if name in functions and functions[name] is not function:
                        report.error(
                            _module_span(item),
                            f"`{item.module}` registers `{name}`, which "
                            f"`{origin[name].module}` registers too",
                        )
                        continue
                    functions[name] = function
                    origin[name] = item
    return functions, origin


def _import_one(decl: ast.UseDecl, builtins: Collection[str], report: Reporter) -> Functions:
    span = _module_span(decl)
    try:
        module = importlib.import_module(decl.module)
    except Exception as exc:  # a helper module is user code: any failure is reported
        report.error(span, f"cannot import `{decl.module}`: {type(exc).__name__}: {exc}")
        return {}
    table = getattr(module, "RW_FUNCTIONS", None)
    if not isinstance(table, dict):
        report.error(
            span,
            f"`{decl.module}` has no `RW_FUNCTIONS` dict mapping function names to callables",
        )
        return {}
    functions: Functions = {}
    for name, function in table.items():
        if not isinstance(name, str) or not name.isidentifier() or not callable(function):
            report.error(
                span, f"`{decl.module}`.RW_FUNCTIONS entry {name!r} is not name -> callable"
            )
        elif name in builtins:
            report.error(span, f"`{decl.module}` registers `{name}`, which is a built-in function")
        else:
            functions[name] = function
    return functions


def _module_span(decl: ast.UseDecl) -> Span:
    """The module string of a `use` (module names hold no escapes, so its width is known)."""
    span = decl.span
    width = len(decl.module) + 2
    return Span(span.path, span.end_line, max(1, span.end_col - width), span.end_line, span.end_col)
