"""Newline handling between the lexer and the LALR parser, and comment collection.

The lexer turns every run of newlines, `;` and comments into one `_NL` token. This
postlexer decides which of them separate statements: a `_NL` is dropped inside `()`, `[]`
and attribute `<...>`, at the start of the file, and after any token that cannot end a
statement (an operator, a comma, `=`, `=>`, `|`, `{`, a keyword). So lists, argument lists
and attribute lists may span lines, and so may an expression broken after an operator.

It never looks ahead: the contextual lexer picks the terminals for the next token from the
parser state, which only advances when this generator yields.

Comments are copied out of the `_NL` tokens into the list held by `COLLECTED_COMMENTS`
(set by the parser for each parse) so the formatter can put them back.
"""

from __future__ import annotations

import contextvars
import dataclasses
import re
from collections.abc import Iterator

from lark import Token

from rewriter._errors import Span

MAX_NESTING = 100
"""Deepest bracket nesting accepted; deeper input is reported rather than risking recursion."""

# Tokens that can end a statement; a newline after any other token continues the statement.
_STATEMENT_ENDERS = frozenset(
    {
        "NAME",
        "INT",
        "FLOAT",
        "STRING",
        "RPAR",
        "RSQB",
        "RBRACE",
        "TRUE",
        "FALSE",
        "NONE",
        "UNDERSCORE",
        "LOOP",
    }
)
_OPENERS = {"LPAR": "RPAR", "LSQB": "RSQB", "LANGLE": "GT"}
_COMMENT = re.compile(r"#[^\r\n]*")


@dataclasses.dataclass(frozen=True, slots=True)
class RawComment:
    """A comment found by the postlexer: 1-based position and text (with the `#`)."""

    line: int
    col: int
    text: str


class NestingTooDeepError(Exception):
    """Raised from inside the parse when brackets nest deeper than `MAX_NESTING`."""

    def __init__(self, token: Token) -> None:
        super().__init__(f"brackets nest deeper than {MAX_NESTING} levels")
        self.token = token


COLLECTED_COMMENTS: contextvars.ContextVar[list[RawComment] | None] = contextvars.ContextVar(
    "rw_collected_comments", default=None
)


class StatementPostlexer:
    """Lark postlexer: keeps only the `_NL` tokens that separate statements."""

    always_accept = ("_NL",)

    def process(self, stream: Iterator[Token]) -> Iterator[Token]:
        """Filter `stream`, tracking bracket nesting and the previous significant token."""
        closers: list[str] = []
        previous: str | None = None
        for token in stream:
            if token.type == "_NL":
                _record_comments(token)
                if _is_dropped(token, previous, closers):
                    continue
                previous = "_NL"
                yield token
                continue
            if token.type in _OPENERS:
                closers.append(_OPENERS[token.type])
                if len(closers) > MAX_NESTING:
                    raise NestingTooDeepError(token)
            elif closers and token.type == closers[-1]:
                closers.pop()
            previous = token.type
            yield token


def _is_dropped(newline: Token, previous: str | None, closers: list[str]) -> bool:
    """True when a `_NL` token does not separate statements.

    A `;` is an explicit separator: inside brackets or after an operator it is kept so the
    parser reports it, instead of being silently read as a line break.
    """
    if previous in (None, "_NL", "LBRACE"):
        return True
    if ";" in _COMMENT.sub("", newline):
        return False
    return bool(closers) or previous not in _STATEMENT_ENDERS


def _record_comments(token: Token) -> None:
    sink = COLLECTED_COMMENTS.get()
    if sink is None:
        return
    text = str(token)
    for found in _COMMENT.finditer(text):
        before = text[: found.start()]
        newlines = before.count("\n")
        line = (token.line or 1) + newlines
        if newlines:
            col = found.start() - before.rfind("\n")
        else:
            col = (token.column or 1) + found.start()
        sink.append(RawComment(line, col, found.group().rstrip()))


def token_span(path: str, token: Token, line_offset: int = 0) -> Span:
    """The span of one token (of a text that starts `line_offset` lines into the file)."""
    line = token.line or 1
    col = token.column or 1
    end_line = token.end_line or line
    end_col = token.end_column or col + len(token)
    return Span(path, line + line_offset, col, end_line + line_offset, end_col)
