"""Load rule files and folders into a `RuleSet`, from the cache when they were loaded before.

A load of exactly these files (the same paths, texts and included files), with the same
parameters, vocabulary, op schemas and language code, gives the same rule set every time: the
cache keeps it lowered into the rule IR (`rewriter.rules` encodes it), so such a load reads
one entry and imports neither the parser, the checker nor the lowering. Any other load
(`use` helpers allowed, inline rules, warnings to report) goes through `_loader`.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import ir
from rewriter import rules
from rewriter._cache import CacheFolder, digest
from rewriter._errors import RuleError
from rewriter.dsl._files import find_rule_files, read_rule_file
from rewriter.dsl._stamp import checker_stamp
from rewriter.rules import Vocabulary

if TYPE_CHECKING:
    from rewriter.dsl._ast import File

logger = logging.getLogger(__name__)

_FORMAT = "1"


def load_files(
    *paths: str | os.PathLike[str],
    vocabulary: Vocabulary,
    allow_python: bool = False,
    cache: CacheFolder | None = None,
    inline: Sequence[File] = (),
    params: Mapping[str, rules.LiteralValue] | None = None,
) -> rules.RuleSet:
    """Load, parse and check rule files and folders, and lower them into the rule IR.

    Args:
        *paths: `.rw` files, or folders whose `*.rw` files (recursively) are loaded; the
            files they `include` are loaded too.
        vocabulary: the functions and passes the rules may name (the engine's).
        allow_python: permit `use "module"` declarations, importing those modules.
        cache: where rule sets and parses of files read before are kept (`user_cache()` for
            the user's cache folder); None parses and checks every file.
        inline: rules given as text (`rewrite -e`), parsed by the caller with `parse` or
            `parse_query`; checked with the files and loaded after them.
        params: values for rule parameters the files declare (`param NAME = literal`),
            instead of their declared defaults.

    Returns:
        The rules (in the rule IR) and passes in load order, the helpers that `use`
        registered, and the warnings.

    Raises:
        RuleSyntaxError: some file does not parse, or includes a file that does not exist
            (carries every diagnostic found).
        RuleCheckError: the files parse but break semantic rules (every error found).
        FileNotFoundError: a path does not exist.
        RewriteError: `params` names a parameter no file declares, or gives a value of
            another kind than the parameter's default.
    """
    files = find_rule_files(paths)
    given = dict(params or {})
    entry = None
    # Helpers `use` imports could change what a load gives without any file changing.
    if cache is not None and not allow_python and not inline:
        texts = _texts(files)
        if texts is not None:
            entry = _entry_name(texts, vocabulary, given)
            stored = _read(cache, entry, texts)
            if stored is not None:
                return stored
    from rewriter.dsl._loader import load_checked  # the parser, checker and lowering

    ruleset = load_checked(
        files,
        vocabulary=vocabulary,
        allow_python=allow_python,
        cache=cache,
        inline=inline,
        params=given,
    )
    if entry is not None and cache is not None and not ruleset.warnings:
        _write(cache, entry, ruleset)
    return ruleset


def _texts(files: Sequence[Path]) -> list[tuple[str, str]] | None:
    """Each file's path and text, or None when one cannot be read (the loader says why)."""
    try:
        return [(str(path), read_rule_file(path)) for path in files]
    except (OSError, RuleError):
        return None


def _entry_name(
    texts: Sequence[tuple[str, str]],
    vocabulary: Vocabulary,
    params: Mapping[str, rules.LiteralValue],
) -> str:
    parts = [_FORMAT, rules.IR_LAYOUT, checker_stamp(), ir.schemas.source_version()]
    parts.append(repr(sorted(vocabulary.functions.items())))
    parts.append(repr(sorted(vocabulary.passes.items())))
    parts.append(repr(sorted(params.items())))
    for path, text in texts:
        parts.extend((path, text))
    return f"ruleset-{digest(*parts)}.json"


def _read(cache: CacheFolder, name: str, texts: Sequence[tuple[str, str]]) -> rules.RuleSet | None:
    """The rule set stored under `name`, when every file it was loaded from is unchanged."""
    data = cache.read(name)
    if data is None:
        return None
    named = dict(texts)
    try:
        entry = json.loads(data)
        sources: dict[str, str] = {}
        for path, text_digest in entry["files"]:
            text = named.get(path)
            if text is None:  # an included file: the entry's name does not cover it
                text = read_rule_file(Path(path))
            if digest(text) != text_digest:
                return None
            sources[path] = text
        loaded, passes, constraints, params = rules.decode_ir(entry["ir"])
        return rules.RuleSet(
            rules=loaded,
            passes=passes,
            constraints=dict(constraints),
            sources=sources,
            params=dict(params),
        )
    except (OSError, RuleError, ValueError, TypeError, KeyError, IndexError, StopIteration) as exc:
        logger.debug("stored rule set %s is unusable (%s); loading the files", name, exc)
        return None


def _write(cache: CacheFolder, name: str, ruleset: rules.RuleSet) -> None:
    if ruleset.functions:
        return
    value = (
        ruleset.rules,
        ruleset.passes,
        tuple(ruleset.constraints.items()),
        tuple(ruleset.params.items()),
    )
    try:
        payload: dict[str, Any] = {
            "files": [[path, digest(text)] for path, text in ruleset.sources.items()],
            "ir": rules.encode_ir(value),
        }
        data = json.dumps(payload, separators=(",", ":")).encode()
    except (TypeError, ValueError) as exc:
        logger.debug("not storing the rule set: %s", exc)
        return
    cache.write(name, data)
