"""Check rule parameters (`param NAME = literal`): one declaration per name, no clashes.

Every loaded file sees every parameter of every other loaded file, whatever the load order,
as with constraints. A name is declared once across all files and may not be a built-in
function's, a constraint's or a `use`d helper's (errors at the second name, with a note at
the first). A rule reads a parameter by name and may not bind the name itself (the scope
check reports that); a constraint's conditions see only the constraint's own parameters.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from rewriter.dsl import _ast as ast
from rewriter.dsl._reporter import Reporter


def collect_params(
    files: Sequence[ast.File],
    taken: Mapping[str, str] | Collection[str],
    report: Reporter,
) -> dict[str, ast.ParamDecl]:
    """Every parameter of `files` by name (the first of each name), reporting clashes.

    Args:
        files: the loaded files, in load order.
        taken: names of functions and constraints, which a parameter may not take.
        report: where diagnostics go.
    """
    declared: dict[str, ast.ParamDecl] = {}
    for file in files:
        for item in file.items:
            if not isinstance(item, ast.ParamDecl):
                continue
            first = declared.get(item.name)
            if first is not None:
                note = report.note(first.name_span, f"`{item.name}` is first declared here")
                report.error(item.name_span, f"parameter `{item.name}` is declared twice", [note])
                continue
            if item.name in taken:
                report.error(
                    item.name_span,
                    f"`{item.name}` names a function or constraint; choose another parameter name",
                )
                continue
            declared[item.name] = item
    return declared
