"""Turn Lark's parse failures into messages in the user's terms.

A message says what was expected and what was found, with tokens spelled as the user types
them (``expected `=>` after pattern, found `->` ``), never with Lark's terminal names
(`RPAR`, `__ANON_0`). Groups of terminals collapse into words: "an expression", "a
literal", "an operator".
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

from lark import Token
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken
from lark.lexer import PatternStr

from rewriter._errors import Diagnostic, Span
from rewriter.dsl._lark import lark_parser
from rewriter.dsl._postlex import token_span
from rewriter.dsl._source import diagnostic

_REGEX_TERMINALS = {
    "NAME": "a name",
    "INT": "an integer",
    "FLOAT": "a number",
    "STRING": "a string",
    "LANGLE": "`<`",
    "_NL": "a line break",
    "$END": "the end of the file",
}
_EXPRESSION_STARTS = frozenset(
    {"NAME", "INT", "FLOAT", "STRING", "LPAR", "LSQB", "MINUS", "PLUS", "NOT", "TRUE", "FALSE"}
    | {"NONE"}
)
_LITERAL_STARTS = frozenset({"INT", "FLOAT", "STRING", "LSQB", "MINUS", "PLUS", "TRUE", "FALSE"})
_OPERATORS = frozenset(
    {"PLUS", "MINUS", "STAR", "SLASH", "DSLASH", "PERCENT", "DSTAR", "QQ", "EQEQ", "NOTEQ"}
    | {"LT", "GT", "LE", "GE", "IN", "NOT", "AND", "OR", "IF", "DOT", "LPAR", "LSQB"}
)
_COMPARISONS = frozenset({"EQEQ", "NOTEQ", "LT", "LE", "GT", "GE", "IN", "NOT"})
# Shown first when present, in this order; anything else follows alphabetically.
_ORDER = ("RPAR", "RSQB", "GT", "RBRACE", "COMMA", "EQUAL", "ARROW", "LBRACE", "COLON")
_OPERATOR_CHARS = re.compile(r"[-+*/%=<>!?|&^~:.]+")
_NEXT_WORD = re.compile(r"([ \t]*)([^\s,>]*)")
# Tokens too common to make a useful "after ..." context.
_NO_CONTEXT = frozenset({"RPAR", "RSQB", "RBRACE", "GT", "LPAR", "LSQB", "LBRACE", "COMMA"})
_MAX_SHOWN = 6
# Brackets that may still be open on the parser's stack (the innermost gives the context).
_OPENER_TYPES = frozenset({"LANGLE", "LPAR", "LSQB", "LBRACE"})
_ATTRIBUTE_NAME = re.compile(r"[ \t]*([A-Za-z_][A-Za-z0-9_]*)[ \t]*")
_WORD = re.compile(r"[^\s,>()\[\]{}]+")
# `Op <name ` at the end of a line's text: an op name, `<`, an attribute name.
_OP_THEN_NAME = re.compile(r"([A-Za-z_][A-Za-z0-9_.]*)[ \t]*<[ \t]*([A-Za-z_][A-Za-z0-9_]*)[ \t]*")


def syntax_diagnostic(exc: UnexpectedInput, text: str, path: str) -> Diagnostic:
    """The error of a failed parse, with notes that say where the problem began.

    The caret goes where the text stops making sense, which is not always where the parser
    stopped: a line that ends with an operator reads on into the next one, so when that next
    line starts a statement of its own, the error is the trailing operator (a note shows the
    line that could not continue it). A bracket still open when the parser gives up is shown
    by a note where it opened.
    """
    span, message = describe_unexpected(exc, text, path)
    notes: list[Diagnostic] = []
    if isinstance(exc, UnexpectedToken):
        trailing = _trailing_operator(exc.token, text, path)
        if trailing is not None:
            span, message, note = trailing
            notes.append(note)
        else:
            notes.extend(_open_bracket(exc, text, path))
    return diagnostic("error", span, message, text, notes)


def describe_unexpected(exc: UnexpectedInput, text: str, path: str) -> tuple[Span, str]:
    """Where a parse failed and a message saying what was expected and what was found."""
    if isinstance(exc, UnexpectedToken):
        return _describe_token(exc, text, path)
    if isinstance(exc, UnexpectedCharacters):
        return _describe_character(exc, path)
    line = getattr(exc, "line", 1) or 1
    col = getattr(exc, "column", 1) or 1
    return Span(path, line, col, line, col + 1), "unexpected input"


def _describe_token(exc: UnexpectedToken, text: str, path: str) -> tuple[Span, str]:
    token: Token = exc.token
    expected = _expected(exc)
    at_end = token.type == "$END"
    span = _end_of_text(text, path) if at_end else token_span(path, token)
    if token.type == "LT" and "LANGLE" in expected:
        return _describe_attribute_list(token, text, path)
    found_text, width = _found(token, text)
    if width:
        span = Span(span.path, span.line, span.col, span.line, span.col + width)
    elif token.type in ("_NL", "$END"):
        span = Span(span.path, span.line, span.col, span.line, span.col + 1)
    attribute = _unlisted_attribute(token, text)
    if attribute is not None:
        return span, f"expected `=` after attribute name `{attribute}`, found {found_text}"
    phrase = _expected_phrase(expected)
    if "ARROW" not in expected:
        phrase += _after(exc, expected)
    message = f"{phrase}, found {found_text}"
    if token.type == "EQUAL" and "EQEQ" in expected:
        message += " (compare with `==`)"
    return span, message


def _describe_attribute_list(token: Token, text: str, path: str) -> tuple[Span, str]:
    """`Op <alpha 1>`: the `<` did not look like the start of an attribute list.

    When a name follows the `<`, what follows the name is where the text stops making sense
    (`<epsilon eps>` lacks the `=` before `eps`): the message points there.
    """
    end = token.end_pos if token.end_pos is not None else 0
    line, col = token.line or 1, (token.column or 1) + 1
    name = _ATTRIBUTE_NAME.match(text, end)
    if name is not None:
        found, width = _text_at(text, name.end())
        col += name.end() - end
        span = Span(path, line, col, line, col + width)
        return span, f"expected `=` after attribute name `{name.group(1)}`, found {found}"
    rest = _NEXT_WORD.match(text, end)
    if rest is not None:
        col += len(rest.group(1))
        word = rest.group(2) or "the end of the line"
        found = f"`{word}`" if rest.group(2) else word
    else:
        found = "the end of the line"
    span = Span(path, line, col, line, col + max(1, len(rest.group(2)) if rest else 1))
    expected = "expected `name = value`, `...` or `>` in the attribute list after `<`"
    return span, f"{expected}, found {found}"


def _text_at(text: str, position: int) -> tuple[str, int]:
    """How to name the text at `position` (a word, a character, or the end of the line)."""
    if position >= len(text) or text[position] in "\r\n#":
        return "the end of the line", 1
    if text[position] in ",>":
        return f"`{text[position]}`", 1
    word = _WORD.match(text, position)
    shown = word.group() if word is not None else text[position]
    return f"`{shown}`", len(shown)


def _unlisted_attribute(token: Token, text: str) -> str | None:
    """The attribute name in a rewrite's `Op <name value ...>`, found at `value`.

    A `<` after an op name whose entry lacks its `=` does not open an attribute list: the
    line reads on as a comparison (`Op < name`) until `value`, where it stops making sense.
    """
    start = token.start_pos
    if start is None or token.type in ("_NL", "$END"):
        return None
    line_start = text.rfind("\n", 0, start) + 1
    found = _OP_THEN_NAME.search(text, line_start, start)
    if found is None or found.end() != start:
        return None
    op = found.group(1)
    return found.group(2) if op[:1].isupper() or "." in op else None


def _after(exc: UnexpectedToken, expected: set[str]) -> str:
    """` after `+`` when the token before the error is a keyword or an operator.

    After a name where an `=` could follow, the name is the context: ` after `let k``,
    ` after attribute name `epsilon``, ` after `k`` (the `=` of `name = value` is missing).
    """
    stack = getattr(exc.state, "value_stack", None)
    if not stack:
        return ""
    previous = stack[-1]
    if not isinstance(previous, Token) or previous.type in _NO_CONTEXT:
        return ""
    if previous.type == "NAME" and "EQUAL" in expected:
        return _after_name(stack, previous)
    if previous.type in _terminal_literals():
        return f" after `{previous}`"
    return ""


def _after_name(stack: list[object], name: Token) -> str:
    before = stack[-2] if len(stack) >= 2 else None
    if isinstance(before, Token) and before.type == "LET":
        return f" after `let {name}`"
    openers = [t for t in stack if isinstance(t, Token) and t.type in _OPENER_TYPES]
    innermost = openers[-1].type if openers else None
    if innermost == "LANGLE":
        return f" after attribute name `{name}`"
    in_pass = any(isinstance(t, Token) and t.type == "PASS" for t in stack)
    if innermost == "LBRACE" and in_pass:
        return f" after option `{name}`"
    return f" after `{name}`"


# An operator that ends a line: the statement reads on into the next line (see _postlex).
_TRAILING_OPERATOR = re.compile(
    r"(\*\*|//|\?\?|==|!=|<=|>=|=>|[-+*/%=]|\band|\bor|\bnot|\bin)[ \t]*$"
)
# A line that starts a statement of its own: it cannot continue an expression.
_STATEMENT_START = re.compile(
    r"[ \t]*(?:[A-Za-z_][A-Za-z0-9_]*(?:[ \t]*,[ \t]*(?:[A-Za-z_][A-Za-z0-9_]*|\.\.\.))*"
    r"[ \t]*=(?![=>])|(?:let|rule|constraint|include|pass|use|match|where|rewrite)\b|\})"
)


def _trailing_operator(token: Token, text: str, path: str) -> tuple[Span, str, Diagnostic] | None:
    """The operator ending the line before the failure, when that is the mistake.

    It is, when the line of the failure starts a statement of its own (`y = ...`, `let`,
    `}`): the operator made the parser read it as the continuation of the line before.
    """
    start = token.start_pos
    if start is None or token.type == "$END":
        return None
    line_start = text.rfind("\n", 0, start) + 1
    if not _STATEMENT_START.match(text, line_start):
        return None
    lines = text[:line_start].split("\n")[:-1]
    for index in range(len(lines) - 1, -1, -1):
        code = _without_comment(lines[index])
        if not code.strip():
            continue
        found = _TRAILING_OPERATOR.search(code)
        if found is None:
            return None
        number, col = index + 1, found.start(1) + 1
        operator = found.group(1)
        span = Span(path, number, col, number, col + len(operator))
        message = f"expected an expression after `{operator}`, found the end of the line"
        line = token.line or 1
        first = line_start + len(text[line_start:]) - len(text[line_start:].lstrip(" \t"))
        note_col = first - line_start + 1
        what = "closes the block" if text[first] == "}" else "starts a statement of its own"
        note = diagnostic(
            "note",
            Span(path, line, note_col, line, note_col + 1),
            f"a line that ends with `{operator}` goes on into the next one, and this line {what}",
            text,
        )
        return span, message, note
    return None


def _without_comment(line: str) -> str:
    """`line` without a `#` comment (a `#` inside a string is kept)."""
    in_string = False
    index = 0
    while index < len(line):
        char = line[index]
        if in_string and char == "\\":
            index += 2
            continue
        if char == '"':
            in_string = not in_string
        elif char == "#" and not in_string:
            return line[:index]
        index += 1
    return line


_CLOSERS = {"LPAR": "RPAR", "LSQB": "RSQB", "LANGLE": "GT", "LBRACE": "RBRACE"}


def _open_bracket(exc: UnexpectedToken, text: str, path: str) -> list[Diagnostic]:
    """A note at the innermost bracket still open, when its closer was expected instead."""
    stack = getattr(exc.state, "value_stack", None) or []
    openers = [t for t in stack if isinstance(t, Token) and t.type in _CLOSERS]
    if not openers or exc.token.type == _CLOSERS[openers[-1].type]:
        return []
    opener = openers[-1]
    if _CLOSERS[opener.type] not in _expected(exc):
        return []
    if opener.type == "LBRACE" and exc.token.type != "$END":
        return []  # a block's `{`: the statement inside it is the problem, not the block
    return [
        diagnostic(
            "note", token_span(path, opener), f"the `{opener}` opened here is not closed", text
        )
    ]


def _describe_character(exc: UnexpectedCharacters, path: str) -> tuple[Span, str]:
    line, col = exc.line, exc.column
    span = Span(path, line, col, line, col + 1)
    if exc.char == '"':
        return span, "this string is not closed before the end of the line"
    if exc.char == "\\":
        return span, "unexpected `\\` outside a string"
    if exc.char.isprintable():
        return span, f"unexpected character `{exc.char}`"
    return span, f"unexpected character U+{ord(exc.char):04X}"


def _expected(exc: UnexpectedToken) -> set[str]:
    """The terminals the parser could take where it failed.

    They are found by simulation, which leaves out the lookaheads that LALR merges into a
    state but that would fail after a reduction.
    """
    interactive = getattr(exc, "interactive_parser", None)
    names = set(interactive.accepts() if interactive is not None else exc.expected or ())
    # The table also holds the nonterminals it can go to; keep the terminals.
    return {n for n in names if n == n.upper()}


def _expected_phrase(expected: set[str]) -> str:
    if "ARROW" in expected:
        return "expected `=>` after pattern"
    words: list[str] = []
    remaining = set(expected)
    if {"NAME", "INT", "LPAR"} <= remaining and len(remaining & _EXPRESSION_STARTS) >= 6:
        words.append("an expression")
        remaining -= _EXPRESSION_STARTS
    elif {"INT", "STRING"} <= remaining and len(remaining & _LITERAL_STARTS) >= 5:
        names = "NAME" in remaining
        words.append("a name or a literal" if names else "a literal")
        remaining -= _LITERAL_STARTS | {"NAME", "NONE"}
    has_operators = {"STAR", "DSTAR"} <= remaining
    if has_operators:
        remaining -= _OPERATORS
    has_comparisons = len(remaining & _COMPARISONS) >= 5
    if has_comparisons:
        remaining -= _COMPARISONS
    if len(remaining) > 1 or words:
        remaining.discard("_NL")
    if len(remaining) > 1 or words:
        remaining.discard("$END")
    words.extend(_terminal_words(remaining))
    if has_operators:
        words.append("an operator")
    if has_comparisons:
        words.append("a comparison (`>=`, `<`, ...)")
    if not words:
        return "unexpected input"
    if len(words) > _MAX_SHOWN:
        words = [*words[: _MAX_SHOWN - 1], "..."]
        return "expected one of " + ", ".join(words)
    return "expected " + _join_or(words)


def _terminal_words(names: Iterable[str]) -> list[str]:
    ordered = sorted(names, key=lambda n: (_ORDER.index(n) if n in _ORDER else len(_ORDER), n))
    words: list[str] = []
    for name in ordered:
        word = _terminal_word(name)
        if word not in words:
            words.append(word)
    return words


def _terminal_word(name: str) -> str:
    if name in _REGEX_TERMINALS:
        return _REGEX_TERMINALS[name]
    literal = _terminal_literals().get(name)
    return f"`{literal}`" if literal is not None else name.lower()


@functools.cache
def _terminal_literals() -> dict[str, str]:
    return {
        t.name: t.pattern.value
        for t in lark_parser().terminals
        if isinstance(t.pattern, PatternStr)
    }


def _found(token: Token, text: str) -> tuple[str, int]:
    """How to name the token found, and how many characters to underline (0: default)."""
    if token.type == "$END":
        return "the end of the file", 0
    if token.type == "_NL":
        return ("`;`", 1) if str(token).startswith(";") else ("the end of the line", 0)
    value = str(token)
    if token.type == "STRING":
        shown = value if len(value) <= 30 else value[:27] + '..."'
        return f"string {shown}", 0
    start = token.start_pos
    if start is not None and _OPERATOR_CHARS.fullmatch(value):
        run = _OPERATOR_CHARS.match(text, start)
        if run is not None:
            value = run.group()
    return f"`{value}`", len(value)


def _join_or(words: list[str]) -> str:
    if len(words) == 1:
        return words[0]
    return ", ".join(words[:-1]) + " or " + words[-1]


def _end_of_text(text: str, path: str) -> Span:
    """The position just after the last non-blank character (so a caret has a line to sit on)."""
    stripped = text.rstrip()
    if not stripped:
        return Span(path, 1, 1, 1, 2)
    line = stripped.count("\n") + 1
    col = len(stripped) - (stripped.rfind("\n") + 1) + 1
    return Span(path, line, col, line, col + 1)
