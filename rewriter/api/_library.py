"""`load_rules`: the one rule loader. Files, folders, a loaded RuleSet, or the shipped library.

A folder means every `.rw` file below it in sorted path order, except the opt-in subfolders
(`loops/`, `ort/`, `quantize/`, `relaxed/`), which are used only when named directly. Loaded
rule sets are kept by their files' names and stat, so a program rewriting many models with
the same rules parses them once (an edited file has a new mtime or size and is loaded again).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rewriter import dsl
from rewriter._errors import RewriteError
from rewriter.api._vocabulary import load_files
from rewriter.rules import LiteralValue, RuleSet

if TYPE_CHECKING:
    from rewriter.dsl import File

RulesLike = str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | RuleSet | None
"""Rule files or folders, a loaded RuleSet, or None for the shipped library."""


def library_path() -> Path:
    """The folder of the shipped rule library (`patterns/`)."""
    import patterns

    return Path(patterns.__file__).parent


# Rule folders that are opt-in: below a folder given as rules, a subfolder with one of these
# names is left out; name it directly (`--rules patterns/loops`) to use it.
OPT_IN_FOLDERS = ("loops", "ort", "quantize", "relaxed")


def rule_files(folder: str | os.PathLike[str]) -> list[Path]:
    """The `.rw` files below `folder`, sorted by path, opt-in subfolders left out."""
    root = Path(folder)
    files = (
        p
        for p in root.rglob("*.rw")
        if not any(part in OPT_IN_FOLDERS for part in p.relative_to(root).parts[:-1])
    )
    return sorted(files, key=lambda p: p.as_posix())


def default_library_files() -> list[Path]:
    """The shipped `.rw` files used when no rules are given (opt-in folders left out)."""
    return rule_files(library_path())


# A text given with `-e` holds rules (or, for `rewrite find`, a query) when it starts with
# one of the words that open a top-level item; otherwise it is the match lines of a query.
_RULE_TEXT = re.compile(r"\A(?:\s|#[^\n]*)*(?:rule|constraint|pass|use|include|param)\b")


def inline_files(texts: Sequence[str], *, queries: bool = False) -> list[File]:
    """Rules given as text (`rewrite -e`), parsed as files named `-e#1`, `-e#2`, ...

    With `queries`, a text that is not a rule file is taken as the match lines (and `where`
    clauses) of a query named `e1`, `e2`, ... (what `rewrite find -e` lists).

    Raises:
        RuleSyntaxError: a text does not parse (located in that text).
        RewriteError: without `queries`, a text holds match lines but no rule.
    """
    files = []
    for number, text in enumerate(texts, 1):
        label = f"-e#{number}"
        if _RULE_TEXT.match(text):
            files.append(dsl.parse(text, label))
        elif queries:
            files.append(dsl.parse_query(text, f"e{number}", label))
        else:
            raise RewriteError(
                f"{label}: expected a rule (`rule NAME: PATTERN => REPLACEMENT`), found "
                f"{text.strip()[:40]!r}; `rewrite find -e` lists what match lines match"
            )
    return files


def load_rules(
    *rules: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | RuleSet | None,
    allow_python: bool = False,
    inline: Sequence[File] = (),
    params: Mapping[str, LiteralValue] | None = None,
    use_cache: bool = True,
) -> RuleSet:
    """Load rules: files and folders, a RuleSet (returned as it is), or the shipped library.

    Args:
        *rules: rule files and folders (a folder: its `.rw` files, opt-in subfolders left
            out), or one already loaded `RuleSet`; none (or None): the shipped library.
        allow_python: permit `use` declarations (opt-in Python helpers).
        inline: files parsed from text (`inline_files`, `rewrite -e`), loaded after the
            paths; with inline files and no paths they are the only rules.
        params: values of rule parameters the files declare (`param NAME = literal`).
        use_cache: keep files' parses in the user's cache folder and loaded sets in memory.

    Raises:
        RuleSyntaxError: some file does not parse (carries every diagnostic found).
        RuleCheckError: the files parse but break semantic rules (every error found).
        FileNotFoundError: a path does not exist.
        RewriteError: a folder holds no rule file, a RuleSet is given with other rules or
            with inline rules or parameters, or `params` names an undeclared parameter.
    """
    given = _flatten(rules)
    paths = [item for item in given if not isinstance(item, RuleSet)]
    loaded = [item for item in given if isinstance(item, RuleSet)]
    if loaded:
        if len(given) > 1:
            raise RewriteError("a loaded RuleSet cannot be combined with other rules")
        return _loaded(loaded[0], inline, params)
    return _load_paths(paths or None, allow_python, inline, params, use_cache)


def _flatten(
    rules: tuple[str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | RuleSet | None, ...],
) -> list[str | os.PathLike[str] | RuleSet]:
    """The paths and rule sets `rules` holds (a list of paths counts as its items)."""
    found: list[str | os.PathLike[str] | RuleSet] = []
    for item in rules:
        if item is None:
            continue
        if isinstance(item, str | os.PathLike | RuleSet):
            found.append(item)
        else:
            found.extend(item)
    return found


def _loaded(
    rules: RuleSet, inline: Sequence[File], params: Mapping[str, LiteralValue] | None
) -> RuleSet:
    """A RuleSet given to `load_rules`: itself (nothing can be added to it)."""
    if inline:
        raise RewriteError("inline rules cannot be added to an already loaded RuleSet")
    if params:
        raise RewriteError("rule parameters cannot be set on an already loaded RuleSet")
    return rules


def _load_paths(
    rules: list[str | os.PathLike[str]] | None,
    allow_python: bool,
    inline: Sequence[File],
    params: Mapping[str, LiteralValue] | None,
    use_cache: bool,
) -> RuleSet:
    """Rules from paths (None: the shipped library, unless inline rules are given)."""
    if inline:
        paths = [] if rules is None else _expand(rules)
        return load_files(
            *paths, allow_python=allow_python, inline=inline, params=params, use_cache=use_cache
        )
    paths = _expand(rules)
    settings = (allow_python, repr(sorted((params or {}).items())))
    key = _cache_key(paths, settings) if use_cache else None
    if key is None:
        return load_files(*paths, allow_python=allow_python, params=params, use_cache=use_cache)
    cached = _RULESET_CACHE.get(key)
    if cached is not None and _cache_key(cached[1], settings) == cached[2]:
        return cached[0]
    ruleset = load_files(*paths, allow_python=allow_python, params=params)
    # The files that were included are checked too when the entry is read again.
    loaded = list(ruleset.paths)
    stamp = _cache_key(loaded, settings)
    if stamp is not None:
        if len(_RULESET_CACHE) >= _RULESET_CACHE_SIZE:
            _RULESET_CACHE.pop(next(iter(_RULESET_CACHE)))
        _RULESET_CACHE[key] = (ruleset, loaded, stamp)
    return ruleset


def _expand(
    rules: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None,
) -> list[str | os.PathLike[str]]:
    """The rule files `rules` names: folders become their files (see `rule_files`)."""
    if rules is None:
        given: list[str | os.PathLike[str]] = [library_path()]
    elif isinstance(rules, str | os.PathLike):
        given = [rules]
    else:
        given = list(rules)
    paths: list[str | os.PathLike[str]] = []
    for path in given:
        if Path(path).is_dir():
            found = rule_files(path)
            if not found:
                raise RewriteError(f"{path}: no .rw rule files in this folder")
            paths.extend(_readable(p) for p in found)
        else:
            paths.append(path)
    return paths


# Loaded rule sets by their files' names and stat (path, mtime, size): a program that rewrites
# many models with the same rules parses them once. A RuleSet is immutable, so sharing it is
# safe; an edited file (named, or included by one) has a new mtime or size and is loaded
# again. Each entry holds the rule set, every file it was loaded from, and their stat.
_RULESET_CACHE: dict[tuple[object, ...], tuple[RuleSet, Sequence[str], tuple[object, ...]]] = {}
_RULESET_CACHE_SIZE = 8


def _cache_key(
    paths: Sequence[str | os.PathLike[str]], settings: tuple[object, ...]
) -> tuple[object, ...] | None:
    """The cache key of loading `paths` with `settings` (None: a file cannot be stat'ed)."""
    key: list[object] = [settings]
    for path in paths:
        try:
            stat = os.stat(path)
        except OSError:
            return None  # load_rules reports it
        key.append((os.fspath(path), stat.st_ino, stat.st_mtime_ns, stat.st_size))
    return tuple(key)


def _readable(path: Path) -> Path:
    """`path` relative to the working folder when it is below it (shorter locations)."""
    try:
        return path.resolve().relative_to(Path.cwd())
    except ValueError:
        return path
