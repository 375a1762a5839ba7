"""Load rule files and folders into a checked `RuleSet`.

A folder contributes every `*.rw` file below it, in sorted path order; a file path
contributes that file. A file's `include "path"` declarations (resolved against its folder)
bring in further files, after the named ones, in the order first included. Each file is
read once even when named or included twice. Syntax errors in one file do not hide the
errors of the others: every file is parsed, every parsed file is checked, and all errors are
raised together.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import ir
from rewriter import rules
from rewriter._cache import CacheFolder, digest
from rewriter._errors import (
    Diagnostic,
    RewriteError,
    RuleCheckError,
    RuleError,
    RuleSyntaxError,
)
from rewriter.dsl import _ast as ast
from rewriter.dsl._ast_cache import parse_cached
from rewriter.dsl._check import Checked, check_and_collect
from rewriter.dsl._files import read_rule_file
from rewriter.dsl._lower import Lowering, literal_value, lower_passes
from rewriter.dsl._source import diagnostic
from rewriter.dsl._stamp import checker_stamp
from rewriter.rules import Vocabulary, format_const


def parse_files(
    files: Iterable[Path],
    cache: CacheFolder | None = None,
    inline: Sequence[ast.File] = (),
) -> tuple[list[ast.File], list[Diagnostic]]:
    """Parse every file and the files they include; return the ASTs and the errors.

    The errors are syntax errors and includes that cannot be read (reported at the include's
    path). `inline` files (rules given as text, parsed by the caller) come after `files`;
    their includes are read relative to the working folder. Included files come after
    those, in the order first included; a file already loaded is not included again. With a
    `cache`, a file whose exact text was parsed before is read from there.

    Raises:
        OSError: one of `files` cannot be read.
    """
    # Each entry: the path, then the parse when there is one already (inline text), or
    # the include that asked for the file.
    queue: list[tuple[Path, ast.File | _Inclusion | None]] = [(path, None) for path in files]
    loaded: dict[Path, None] = {_identity(path): None for path, _ in queue}
    queue.extend((Path(file.path), file) for file in inline)
    parsed: list[ast.File] = []
    errors: list[Diagnostic] = []
    position = 0
    while position < len(queue):
        path, given = queue[position]
        position += 1
        if isinstance(given, ast.File):
            file = given
            path = Path(".") / "inline"  # includes resolve against the working folder
        else:
            try:
                file = _parse_file(path, cache)
            except RuleError as exc:
                errors.extend(exc.diagnostics)
                continue
            except OSError as exc:
                if given is None:
                    raise
                errors.append(given.error(_reason(exc)))
                continue
        parsed.append(file)
        for target, include in _includes(file, path, errors):
            key = _identity(target)
            if key not in loaded:
                loaded[key] = None
                queue.append((target, _Inclusion(include, file.source)))
    return parsed, errors


def _parse_file(path: Path, cache: CacheFolder | None) -> ast.File:
    text = read_rule_file(path)
    if cache is not None:
        return parse_cached(text, str(path), cache)
    from rewriter.dsl._parser import parse  # the parser (and Lark) load only to parse

    return parse(text, str(path))


@dataclasses.dataclass(frozen=True, slots=True)
class _Inclusion:
    """Why a file is loaded: an `include` (and the text of the file that says it)."""

    include: ast.IncludeDecl
    source: str

    def error(self, reason: str) -> Diagnostic:
        """An error at the include's path string."""
        message = f"cannot include {format_const(self.include.path)}: {reason}"
        return diagnostic("error", self.include.path_span, message, self.source)


def _includes(
    file: ast.File, path: Path, errors: list[Diagnostic]
) -> list[tuple[Path, ast.IncludeDecl]]:
    """The files `file` includes; one that is not a readable file is reported at its path."""
    found: list[tuple[Path, ast.IncludeDecl]] = []
    for item in file.items:
        if not isinstance(item, ast.IncludeDecl):
            continue
        target = Path(os.path.normpath(path.parent / item.path))
        shown = format_const(target.as_posix())
        try:
            if target.is_file():
                found.append((target, item))
                continue
            reason = f"{shown} is a folder" if target.is_dir() else f"there is no file {shown}"
        except (OSError, ValueError) as exc:  # a name too long, a NUL character
            reason = _reason(exc)
        errors.append(_Inclusion(item, file.source).error(reason))
    return found


def _reason(exc: OSError | ValueError) -> str:
    """What went wrong with a path, without the path itself (it may be long or odd)."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc)


def _identity(path: Path) -> Path:
    """What makes two paths the same file (symbolic links and `..` resolved)."""
    try:
        return path.resolve()
    except (OSError, ValueError):
        return path.absolute()


def load_checked(
    files: Sequence[Path],
    *,
    vocabulary: Vocabulary,
    allow_python: bool = False,
    cache: CacheFolder | None = None,
    inline: Sequence[ast.File] = (),
    params: Mapping[str, rules.LiteralValue] | None = None,
) -> rules.RuleSet:
    """Parse and check `files` (and what they include), and lower them into the rule IR.

    `rewriter.dsl.load_files` without its cache of whole rule sets: the arguments are its
    own, `files` found (`find_rule_files`). With a `cache`, each file's parse is read from
    there when its text was parsed before, and files checked clean before are not checked
    again.

    Raises:
        RuleSyntaxError: some file does not parse, or includes a file that does not exist
            (carries every diagnostic found).
        RuleCheckError: the files parse but break semantic rules (every error found).
        RewriteError: `params` names a parameter no file declares, or gives a value of
            another kind than the parameter's default.
    """
    parsed, syntax_errors = parse_files(files, cache, inline)
    # Files checked clean before are not checked again (helpers `use` imports could change
    # what a check says without the files changing, so those are always checked).
    clean = None
    if cache is not None and not allow_python and not syntax_errors:
        clean = clean_check_key(parsed, vocabulary)
    known_clean = clean is not None and cache is not None and cache.read(clean) is not None
    diagnostics, checked = check_and_collect(
        parsed, vocabulary, allow_python=allow_python, known_clean=known_clean
    )
    if clean is not None and cache is not None and not known_clean and not diagnostics:
        cache.write(clean, b"")
    errors = [d for d in diagnostics if d.severity == "error"]
    if syntax_errors:
        raise RuleSyntaxError([*syntax_errors, *errors])
    if errors:
        raise RuleCheckError(errors)
    values = param_values(checked.params, params or {})
    warnings = tuple(d for d in diagnostics if d.severity == "warning")
    return _ruleset(parsed, checked, warnings, values)


def clean_check_key(parsed: Sequence[ast.File], vocabulary: Vocabulary) -> str:
    """The cache entry saying these files were checked without a diagnostic.

    It names everything a check depends on: each file's path and text in load order, the
    vocabulary's signatures, the op schemas' source and the code of the checker, the rule IR
    and ir (their modules' names, sizes and modification times: an edited checker checks
    again).
    """
    parts = [checker_stamp(), ir.schemas.source_version()]
    parts.append(repr(sorted(vocabulary.functions.items())))
    parts.append(repr(sorted(vocabulary.passes.items())))
    for file in parsed:
        parts.extend((file.path, file.source))
    return f"checked-{digest(*parts)}"


def param_values(
    declared: Mapping[str, ast.ParamDecl], given: Mapping[str, rules.LiteralValue]
) -> dict[str, rules.LiteralValue]:
    """Each declared rule parameter's value: the one given, else its default.

    Raises:
        RewriteError: a given name is not declared, or its value is not of the kind of the
            declared default (a bool, a number, a string, a list, or none).
    """
    values = {name: literal_value(decl.value) for name, decl in declared.items()}
    for name, value in given.items():
        if name not in values:
            known = ", ".join(f"`{n}`" for n in sorted(values)) or "none"
            raise RewriteError(
                f"no loaded rule file declares the parameter `{name}` (declared: {known})"
            )
        default = values[name]
        if default is not None and _kind(value) != _kind(default):
            raise RewriteError(
                f"parameter `{name}` takes {_kind(default)} like its default "
                f"{format_const(default) if not isinstance(default, list) else default}, "
                f"not {value!r}"
            )
        values[name] = value
    return values


def _kind(value: rules.LiteralValue) -> str:
    """What kind of literal a value is, in words."""
    if isinstance(value, bool):
        return "a bool"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "none"


def _ruleset(
    parsed: list[ast.File],
    checked: Checked,
    warnings: tuple[Diagnostic, ...],
    params: Mapping[str, rules.LiteralValue],
) -> rules.RuleSet:
    """The checked files lowered into the rule IR (see `_lower`)."""
    lowering = Lowering(checked.constraints, params)
    items = [item for f in parsed for item in f.items]
    return rules.RuleSet(
        rules=tuple(lowering.rule(item) for item in items if isinstance(item, ast.Rule)),
        passes=lower_passes([item for item in items if isinstance(item, ast.PassDecl)]),
        functions=checked.functions,
        constraints={name: lowering.constraint(name) for name in checked.constraints},
        warnings=warnings,
        sources={f.path: f.source for f in parsed},
        params=dict(params),
    )
