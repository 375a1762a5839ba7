"""The language's keywords (a test checks this list against grammar.lark).

They are reserved only where the grammar accepts them: an attribute `<to = 1>`, an
attribute access `node.to` or a keyword argument `f(in = 2)` may still use the word.
Generated code avoids them everywhere.
"""

from __future__ import annotations

KEYWORDS = frozenset(
    {
        "rule",
        "constraint",
        "include",
        "param",
        "match",
        "where",
        "rewrite",
        "let",
        "pass",
        "use",
        "requires",
        "priority",
        "assumes",
        "approximate",
        "repeat",
        "from",
        "to",
        "loop",
        "as",
        "and",
        "or",
        "not",
        "in",
        "if",
        "else",
        "true",
        "false",
        "none",
    }
)
