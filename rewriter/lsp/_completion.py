"""Completion: what may be typed at the cursor, judged from the text before it.

The text being typed rarely parses, so the context comes from the text itself: the block the
cursor is in (`match`, `where`, `rewrite`, a rule's header, the top level), an open `<` after
an op, or an op's place after `=` on a node line. Names in scope come from the buffer's last
parse that succeeded (the server keeps it).
"""

from __future__ import annotations

import dataclasses
import re

from rewriter import dsl
from rewriter.api import VOCABULARY
from rewriter.lsp._analysis import Analysis
from rewriter.lsp._lookup import name_spans
from rewriter.lsp._schemas import attribute_names, op_names

TOP_LEVEL_KEYWORDS = ("rule", "constraint", "include", "pass", "use")
SECTION_KEYWORDS = ("match", "where", "rewrite")
EXPRESSION_KEYWORDS = ("and", "or", "not", "in", "if", "else", "none", "true", "false")

# `y, z = Op | Other` up to the cursor: the op's place on a node line.
_OP_PLACE = re.compile(
    r"^\s*[A-Za-z_][\w]*(\s*,\s*([A-Za-z_]\w*|\.\.\.))*\s*=\s*([\w.]+\s*\|\s*)*[\w.]*$"
)
# `Op <name = v, na` up to the cursor: an attribute name's place.
_ATTRIBUTE_PLACE = re.compile(r"([A-Za-z_][\w.]*)\s*<([^<>]*,)?\s*(\w*)$")


@dataclasses.dataclass(frozen=True, slots=True)
class Completion:
    """One proposal: the text, what it is, and a short detail.

    Kinds: `op`, `attribute`, `function`, `constraint`, `value`, `keyword`.
    """

    label: str
    kind: str
    detail: str = ""


def complete_at(
    analysis: Analysis, parsed: dsl.File | None, line: int, col: int
) -> list[Completion]:
    """The proposals at (line, col); `parsed` is the buffer's last successful parse."""
    before = _text_before(analysis.text, line, col)
    statement = _current_statement(before)
    block = _block(before)
    item = _item_at(parsed, line)
    opsets = dsl.opset_range(item) if isinstance(item, dsl.Rule) else dsl.OpsetRange()
    attribute = _ATTRIBUTE_PLACE.search(statement)
    if attribute is not None and block in ("match", "rewrite", "oneline"):
        op = attribute.group(1)
        domain, _, op_type = op.rpartition(".")
        return [
            Completion(name, "attribute", f"attribute of {op_type}")
            for name in attribute_names(op_type, domain, opsets)
        ]
    if block is None:
        return [Completion(word, "keyword") for word in TOP_LEVEL_KEYWORDS]
    if block == "rule" and re.fullmatch(r"\s*\w*", statement):
        return [Completion(word, "keyword") for word in SECTION_KEYWORDS]
    proposals: list[Completion] = []
    node_line = block in ("match", "rewrite", "oneline") and _OP_PLACE.match(statement)
    if node_line and not statement.lstrip().startswith("let "):
        detail = f"op at {opsets.describe()}" if opsets.bounded else "op"
        proposals += [Completion(name, "op", detail) for name in op_names(opsets)]
    proposals += _values(item, parsed)
    proposals += _functions(analysis)
    proposals += [Completion(word, "keyword") for word in EXPRESSION_KEYWORDS]
    return proposals


def _functions(analysis: Analysis) -> list[Completion]:
    found = [
        Completion(name, "constraint", f"constraint at {constraint.name_span}")
        for name, constraint in sorted(analysis.constraints().items())
    ]
    found += [
        Completion(name, "function", signature.usage)
        for name, signature in sorted(VOCABULARY.functions.items())
    ]
    return found


def _values(item: dsl.Item | None, parsed: dsl.File | None) -> list[Completion]:
    if not isinstance(item, dsl.Rule | dsl.Constraint) or parsed is None:
        return []
    seen: dict[str, None] = {}
    for name, _ in name_spans(item, parsed.source):
        seen.setdefault(name, None)
    kind = "parameter" if isinstance(item, dsl.Constraint) else "value"
    return [Completion(name, "value", f"{kind} of `{item.name}`") for name in seen]


def _item_at(parsed: dsl.File | None, line: int) -> dsl.Item | None:
    """The rule or constraint around `line` in the last parse (the nearest one above it)."""
    if parsed is None:
        return None
    best = None
    for item in parsed.items:
        span = getattr(item, "span", None)
        if span is not None and span.line <= line:
            best = item
    return best


def _text_before(text: str, line: int, col: int) -> str:
    lines = text.split("\n")
    if line - 1 >= len(lines):
        return text
    return "\n".join([*lines[: line - 1], lines[line - 1][: col - 1]])


def _current_statement(before: str) -> str:
    """The statement the cursor is in, from its start up to the cursor.

    It starts after the last `{`, `}`, `;`, line break outside brackets, `=>`, or the `:` of
    a one-line rule.
    """
    depth = 0
    for index in range(len(before) - 1, -1, -1):
        char = before[index]
        if char in ")]":
            depth += 1
        elif char in "([" and depth:
            depth -= 1
        elif depth == 0 and char in "{};\n":
            return before[index + 1 :]
        elif depth == 0 and before.startswith("=>", index):
            return before[index + 2 :]
        elif depth == 0 and char == ":" and re.match(r"\s*rule\b", _line_of(before, index)):
            return before[index + 1 :]
    return before


def _line_of(text: str, index: int) -> str:
    return text[text.rfind("\n", 0, index) + 1 : index]


def _block(before: str) -> str | None:
    """The innermost block around the cursor, by the keyword that opened it.

    `match`, `where`, `rewrite`, `rule`, `constraint`, `pass`; `oneline` in a one-line rule;
    None at the top level.
    """
    stack: list[str] = []
    statement_start = 0
    in_string = False
    index = 0
    while index < len(before):
        char = before[index]
        if in_string:
            if char == "\\":
                index += 1
            elif char == '"' or char == "\n":
                in_string = False
        elif char == '"':
            in_string = True
        elif char == "#":
            end = before.find("\n", index)
            index = len(before) if end < 0 else end
            continue
        elif char == "{":
            words = re.findall(r"[A-Za-z_]\w*", before[statement_start:index])
            stack.append(words[0] if words else "")
            statement_start = index + 1
        elif char == "}":
            if stack:
                stack.pop()
            statement_start = index + 1
        elif char in ";\n":
            statement_start = index + 1
        index += 1
    if stack:
        return stack[-1]
    last_line = before[before.rfind("\n") + 1 :]
    if re.match(r"\s*rule\b[^:]*:", last_line):
        return "oneline"
    return None
