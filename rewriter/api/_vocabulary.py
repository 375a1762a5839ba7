"""What a standard run may use: the engine's built-ins and passes plus the loop passes.

The rule language checks files against a `Vocabulary` and the engine runs passes from a
table; this module is where the two meet, so that neither layer imports the ones above it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from rewriter import dsl, engine, loops, rules
from rewriter._errors import Diagnostic

PASSES: dict[str, engine.PassDefinition[Any]] = {**engine.BUILTIN_PASSES, **loops.LOOP_PASSES}
"""Every pass a rule file may declare."""

VOCABULARY = rules.Vocabulary(
    functions=engine.signatures(),
    passes={name: definition.signature for name, definition in PASSES.items()},
)
"""The functions and passes rule files may name."""


def load_files(
    *paths: str | os.PathLike[str],
    allow_python: bool = False,
    use_cache: bool = True,
    inline: Sequence[dsl.File] = (),
    params: Mapping[str, rules.LiteralValue] | None = None,
) -> rules.RuleSet:
    """Load, parse and check rule files with the standard vocabulary (`rewriter.dsl.load_files`).

    Every `.rw` file below a folder is loaded here (the library's opt-in subfolders too):
    `rewriter.api.load_rules`, the loader to use, decides which files a folder means.

    With `use_cache`, files read before are not parsed again: their parse is kept in the
    user's cache folder (`~/.cache/onnx-rewrite`), keyed by their exact text; files checked
    without a diagnostic before are not checked again. `params` set
    rule parameters the files declare (`param NAME = literal`).

    Raises:
        RuleSyntaxError: some file does not parse (carries every diagnostic found).
        RuleCheckError: the files parse but break semantic rules (every error found).
        FileNotFoundError: a path does not exist.
        RewriteError: `params` names an undeclared parameter or gives a value of another kind.
    """
    cache = dsl.user_cache() if use_cache else None
    return dsl.load_files(
        *paths,
        vocabulary=VOCABULARY,
        allow_python=allow_python,
        cache=cache,
        inline=inline,
        params=params,
    )


def check_files(files: list[dsl.File], *, allow_python: bool = False) -> list[Diagnostic]:
    """The semantic checks of parsed files against the standard vocabulary."""
    return dsl.check(files, VOCABULARY, allow_python=allow_python)


def pass_manager(
    ruleset: rules.RuleSet, options: engine.RunOptions | None = None
) -> engine.PassManager:
    """A pass manager that runs every standard pass and applies `match repeat` rules."""
    return engine.PassManager(
        ruleset, options, passes=PASSES, block_rules=loops.repeat_rule_applier
    )
