"""Which rule files a run uses: the shipped library, folders, files, or a loaded RuleSet.

A folder means every `.rw` file below it in sorted path order, except the opt-in subfolders
(`loops/`, `ort/`, `relaxed/`), which are used only when named directly. Loaded rule sets are
kept by their files' names and stat, so a program rewriting many models with the same rules parses
them once (an edited file has a new mtime or size and is loaded again).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from rewriter._errors import RewriteError
from rewriter.api._vocabulary import load_rules
from rewriter.dsl import File, parse, parse_query
from rewriter.rules import LiteralValue, RuleSet

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
            files.append(parse(text, label))
        elif queries:
            files.append(parse_query(text, f"e{number}", label))
        else:
            raise RewriteError(
                f"{label}: expected a rule (`rule NAME: PATTERN => REPLACEMENT`), found "
                f"{text.strip()[:40]!r}; `rewrite find -e` lists what match lines match"
            )
    return files


def load_ruleset(
    rules: RulesLike,
    *,
    allow_python: bool = False,
    inline: Sequence[File] = (),
    params: Mapping[str, LiteralValue] | None = None,
) -> RuleSet:
    """Rules from paths (files or folders), an existing RuleSet, or the shipped library.

    `inline` files (from `inline_files`) are loaded after the paths; with inline files and
    no paths (`rules=None`), they are the only rules: the shipped library is not added.
    `params` set rule parameters the files declare (a loaded RuleSet has its values).
    """
    if isinstance(rules, RuleSet):
        if inline:
            raise RewriteError("inline rules cannot be added to an already loaded RuleSet")
        if params:
            raise RewriteError("rule parameters cannot be set on an already loaded RuleSet")
        return rules
    if inline:
        paths = [] if rules is None else _expand(rules)
        return load_rules(*paths, allow_python=allow_python, inline=inline, params=params)
    paths = _expand(rules)
    settings = (allow_python, repr(sorted((params or {}).items())))
    key = _cache_key(paths, settings)
    if key is None:
        return load_rules(*paths, allow_python=allow_python, params=params)
    cached = _RULESET_CACHE.get(key)
    if cached is not None and _cache_key(cached[1], settings) == cached[2]:
        return cached[0]
    ruleset = load_rules(*paths, allow_python=allow_python, params=params)
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
