"""`find(model, rules)`: where rules or queries match in a model, without rewriting it."""

from __future__ import annotations

import os
from collections.abc import Sequence

import onnx

import ir
from rewriter.api import RulesLike, as_model, inline_files, load_rules
from rewriter.engine import Found, find_matches


def find(
    model: str | os.PathLike[str] | ir.Model | onnx.ModelProto,
    rules: RulesLike = None,
    *,
    queries: Sequence[str] = (),
    allow_python: bool = False,
) -> list[Found]:
    """Every match of the given rules and queries in `model`; the model is left unchanged.

    Args:
        model: a path, a ModelProto or an IR model (copied: facts are recorded on a copy).
        rules: rule files or folders (the shipped library when None and no `queries`).
        queries: texts as `rewrite find -e` takes them: match lines and `where` clauses
            (`y = Softmax (x)`), or whole rules.
        allow_python: permit `use` declarations in the rule files.

    Returns:
        The matches in graph order, then rule order: rule, `file:line`, graph, the matched
        nodes and the bindings (values with the types the facts know).
    """
    inline = inline_files(queries, queries=True)
    ruleset = load_rules(rules, allow_python=allow_python, inline=inline)
    return find_matches(ruleset, as_model(model))
