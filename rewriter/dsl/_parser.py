"""Parse `.rw` text into the AST: Lark LALR parse, then the separate AST builder.

The Lark parser is built once per process from `grammar.lark` and reused. Every failure
becomes a `RuleSyntaxError` whose diagnostic carries `file:line:col` and the source line;
no Lark exception type reaches the caller.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import importlib.resources
from collections.abc import Iterator

from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedInput

from rewriter._errors import RuleSyntaxError, Span
from rewriter.dsl import _ast as ast
from rewriter.dsl._located import LocatedError
from rewriter.dsl._postlex import (
    COLLECTED_COMMENTS,
    MAX_NESTING,
    NestingTooDeepError,
    RawComment,
    StatementPostlexer,
    token_span,
)
from rewriter.dsl._source import diagnostic
from rewriter.dsl._syntax_messages import describe_unexpected
from rewriter.dsl._transform import AstBuilder


@functools.cache
def lark_parser() -> Lark:
    """The process-wide LALR parser for `grammar.lark`, built on first use.

    Building it (grammar analysis, strict-mode collision checks) takes about half a second.
    Lark's on-disk cache (`cache=True`) would save that per process, but it writes to the
    temporary folder non-atomically and logs a traceback when two processes race on it.
    """
    grammar = importlib.resources.files("rewriter.dsl").joinpath("grammar.lark").read_text()
    return Lark(
        grammar,
        parser="lalr",
        lexer="contextual",
        strict=True,
        propagate_positions=True,
        maybe_placeholders=False,
        postlex=StatementPostlexer(),
    )


def parse(text: str, filename: str = "<string>") -> ast.File:
    """Parse one rule file.

    Args:
        text: the file's contents.
        filename: the path shown in diagnostics and stored in every span.

    Returns:
        The file's AST, with its comments and source text.

    Raises:
        RuleSyntaxError: the text does not parse; the diagnostic says where and what was
            expected.
    """
    comments: list[RawComment] = []
    with _collector_paused():
        tree = _parse_tree(text, filename, comments)
        try:
            items = AstBuilder(filename).transform(tree)
        except LocatedError as exc:
            raise RuleSyntaxError([diagnostic("error", exc.span, exc.message, text)]) from exc
    lines = text.count("\n") + 1
    return ast.File(
        filename,
        items,
        tuple(ast.Comment(c.text, span=_comment_span(filename, c)) for c in comments),
        source=text,
        span=Span(filename, 1, 1, lines, len(text) - text.rfind("\n")),
    )


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector while a file is parsed.

    Parsing allocates a parse tree and an AST of many small objects without reference
    cycles; with the collector running, its repeated passes over them took about half of the
    parse time (benchmarks/parse_speed.py). Reference counting still frees everything.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _parse_tree(text: str, filename: str, comments: list[RawComment]) -> Tree[Token]:
    reset = COLLECTED_COMMENTS.set(comments)
    try:
        return lark_parser().parse(text)
    except UnexpectedInput as exc:
        span, message = describe_unexpected(exc, text, filename)
        raise RuleSyntaxError([diagnostic("error", span, message, text)]) from exc
    except NestingTooDeepError as exc:
        span = token_span(filename, exc.token)
        message = f"brackets nest deeper than {MAX_NESTING} levels"
        raise RuleSyntaxError([diagnostic("error", span, message, text)]) from exc
    finally:
        COLLECTED_COMMENTS.reset(reset)


def _comment_span(path: str, comment: RawComment) -> Span:
    return Span(path, comment.line, comment.col, comment.line, comment.col + len(comment.text))
