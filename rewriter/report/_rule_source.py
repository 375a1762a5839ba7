"""The source text of a rule or pass declaration, sliced from its file by its span.

A rule built in Python has no file: its text is printed from the rule IR (`rule_text`).

The comment lines directly above a declaration (the `# x*1 -> x` algebra comment) are kept,
since they say what the rule does.
"""

from __future__ import annotations

import dataclasses

from rewriter._errors import Span
from rewriter.rules import RuleSet, rule_text


@dataclasses.dataclass(frozen=True, slots=True)
class RuleSource:
    """A declaration's text and where it starts (`first_line` is 1-based)."""

    path: str
    first_line: int
    text: str


def find_rule_source(ruleset: RuleSet, name: str) -> RuleSource | None:
    """The text of the rule or pass declaration called `name`, or None if unknown.

    A rule without a source file (built in Python) is printed from the rule IR.
    """
    span = _find_span(ruleset, name)
    if span is None:
        return None
    text = ruleset.sources.get(span.path)
    rule = ruleset.rule(name)
    if not text and rule is not None:
        return RuleSource(span.path, span.line, rule_text(rule))
    if not text:
        return None
    lines = text.splitlines()
    first = span.line - 1
    while first > 0 and lines[first - 1].lstrip().startswith("#"):
        first -= 1
    last = max(span.end_line, span.line)
    return RuleSource(span.path, first + 1, "\n".join(lines[first:last]))


def _find_span(ruleset: RuleSet, name: str) -> Span | None:
    rule = ruleset.rule(name)
    if rule is not None:
        return rule.span
    for declared in ruleset.passes:
        if declared.name == name:
            return declared.span
    return None
