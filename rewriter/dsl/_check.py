"""The semantic checker: every rule-file error and warning that parsing cannot see.

`check` reports everything it finds, in all files at once (nothing stops at the first
error). It never imports Python code unless `allow_python` is set, and then only the
modules named by `use` declarations.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from rewriter._errors import Diagnostic
from rewriter.dsl import _ast as ast
from rewriter.dsl._check_calls import KnownFunctions
from rewriter.dsl._check_constraints import check_constraints, collect_constraints
from rewriter.dsl._check_params import collect_params
from rewriter.dsl._check_rules import check_rule
from rewriter.dsl._plugins import Functions, import_uses, refuse_uses
from rewriter.dsl._reporter import Reporter, head
from rewriter.rules import PassSignature, Vocabulary


def check(
    files: Sequence[ast.File], vocabulary: Vocabulary, *, allow_python: bool = False
) -> list[Diagnostic]:
    """Check parsed rule files together; return their errors and warnings.

    Args:
        files: parsed files, in load order (duplicate rule names are found across them).
        vocabulary: the functions and passes the rules may name.
        allow_python: permit `use` declarations (imports the named modules).

    Returns:
        Diagnostics ordered by file (in `files` order), then position.
    """
    diagnostics, _ = check_and_collect(files, vocabulary, allow_python=allow_python)
    return diagnostics


@dataclasses.dataclass(frozen=True, slots=True)
class Checked:
    """What checking found besides diagnostics: helpers, named constraints, rule parameters."""

    functions: Functions
    constraints: dict[str, ast.Constraint]
    params: dict[str, ast.ParamDecl] = dataclasses.field(default_factory=dict)


def check_and_collect(
    files: Sequence[ast.File],
    vocabulary: Vocabulary,
    *,
    allow_python: bool,
    known_clean: bool = False,
) -> tuple[list[Diagnostic], Checked]:
    """`check`, also returning the helpers `use`s registered and the constraints defined.

    `known_clean`: these exact files were checked without a diagnostic before (by this
    checker, vocabulary and schemas: `clean_check_key`), so only what is collected is
    collected, and the constraints and rules are not checked again.
    """
    report = Reporter({f.path: f.source for f in files})
    helpers: dict[str, ast.UseDecl] = {}
    if allow_python:
        functions, helpers = import_uses(files, vocabulary.functions, report)
    else:
        refuse_uses(files, report)
        functions = {}
    _check_duplicate_rules(files, report)
    _check_passes(files, vocabulary.passes, report)
    constraints = collect_constraints(files, vocabulary.functions, helpers, report)
    known = KnownFunctions(vocabulary.functions, functions)
    taken = {*vocabulary.functions, *functions, *constraints}
    if known_clean:
        return [], Checked(functions, constraints, collect_params(files, taken, report))
    infos = check_constraints(files, constraints, known, report)
    params = collect_params(files, taken, report)
    known = dataclasses.replace(known, constraints=infos, params=params)
    for file in files:
        for item in file.items:
            if isinstance(item, ast.Rule):
                check_rule(item, known, report)
    order = {f.path: index for index, f in enumerate(files)}
    report.diagnostics.sort(
        key=lambda d: (order.get(d.span.path, len(order)), d.span.line, d.span.col)
    )
    return report.diagnostics, Checked(functions, constraints, params)


def _check_duplicate_rules(files: Sequence[ast.File], report: Reporter) -> None:
    first: dict[str, ast.Rule] = {}
    for file in files:
        for item in file.items:
            if not isinstance(item, ast.Rule):
                continue
            earlier = first.get(item.name)
            if earlier is None:
                first[item.name] = item
                continue
            note = report.note(earlier.name_span, f"`{item.name}` is first defined here")
            report.error(item.name_span, f"duplicate rule name `{item.name}`", [note])


def _check_passes(
    files: Sequence[ast.File], passes: Mapping[str, PassSignature], report: Reporter
) -> None:
    first: dict[str, ast.PassDecl] = {}
    for file in files:
        for item in file.items:
            if isinstance(item, ast.PassDecl):
                _check_pass(item, passes, first, report)


def _check_pass(
    decl: ast.PassDecl,
    passes: Mapping[str, PassSignature],
    first: dict[str, ast.PassDecl],
    report: Reporter,
) -> None:
    name_span = report.locate(decl.span, decl.name, skip=len("pass"))
    signature = passes.get(decl.name)
    if signature is None:
        known = ", ".join(sorted(passes))
        report.error(name_span, f"unknown pass `{decl.name}` (built-in passes: {known})")
        return
    earlier = first.get(decl.name)
    if earlier is not None:
        note = report.note(head(earlier.span, len("pass")), "the first declaration is here")
        report.error(name_span, f"pass `{decl.name}` is declared twice", [note])
    first.setdefault(decl.name, decl)
    seen: dict[str, None] = {}
    spans = decl.option_spans or tuple(value.span for _, value in decl.options)
    for (option, value), span in zip(decl.options, spans, strict=True):
        spec = signature.option(option)
        if spec is None:
            accepted = ", ".join(f"`{o.name}`" for o in signature.options) or "no options"
            report.error(span, f"pass `{decl.name}` has no option `{option}` (it takes {accepted})")
        elif option in seen:
            report.error(span, f"option `{option}` is given twice")
        elif not _is_count(value):
            report.error(value.span, f"option `{option}` takes a non-negative integer")
        elif isinstance(value, ast.Const) and isinstance(value.value, int):
            minimum = spec.minimum
            given = value.value
            if given < minimum:
                report.error(
                    value.span,
                    f"option `{option}` of pass `{decl.name}` must be at least {minimum}, "
                    f"not {given}",
                )
        seen[option] = None


def _is_count(value: ast.Expr) -> bool:
    return (
        isinstance(value, ast.Const)
        and isinstance(value.value, int)
        and not isinstance(value.value, bool)
        and value.value >= 0
    )
