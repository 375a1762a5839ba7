"""Parse `.rw` text into the AST: Lark LALR parse, then the separate AST builder.

The Lark parser is built once per process from `grammar.lark` and reused. Every failure
becomes a `RuleSyntaxError` whose diagnostic carries `file:line:col` and the source line;
no Lark exception type reaches the caller.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import hashlib
import importlib.resources
import io
import logging
import os
from collections.abc import Iterator

import lark
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

logger = logging.getLogger(__name__)


_GRAMMAR = "grammar.lark"
_TABLES = "grammar.lalr"  # the built parser, shipped beside the grammar (see `lark_parser`)
_OPTIONS = {
    "parser": "lalr",
    "lexer": "contextual",
    "strict": True,
    "propagate_positions": True,
    "maybe_placeholders": False,
}


def grammar_text() -> str:
    """The text of `grammar.lark`."""
    return importlib.resources.files("rewriter.dsl").joinpath(_GRAMMAR).read_text()


def grammar_digest(grammar: str) -> str:
    """What the shipped tables were built from: the grammar text and the parser options."""
    key = grammar + repr(sorted(_OPTIONS.items()))
    return hashlib.sha256(key.encode()).hexdigest()


def _tables_key(grammar: str) -> bytes:
    # Lark's own version too: its pickled tables are only read by the version that wrote them.
    return f"{grammar_digest(grammar)} lark {lark.__version__}\n".encode()


def _build(grammar: str) -> Lark:
    return Lark(grammar, postlex=StatementPostlexer(), **_OPTIONS)


@functools.cache
def lark_parser() -> Lark:
    """The process-wide LALR parser for `grammar.lark`, built on first use.

    Building it (grammar analysis, strict-mode collision checks) takes about a second, so the
    built parser ships beside the grammar (`grammar.lalr`, written by `write_tables`) and is
    read instead when it was built from this grammar with this version of Lark; otherwise the
    parser is built here (nothing is written at run time). Lark's own `cache=True` was not
    used: it writes into the temporary folder, non-atomically.
    """
    grammar = grammar_text()
    tables = importlib.resources.files("rewriter.dsl").joinpath(_TABLES)
    key = _tables_key(grammar)
    try:
        data = tables.read_bytes()
    except OSError:
        data = b""
    if data.startswith(key):
        with contextlib.suppress(Exception):  # a damaged file is rebuilt rather than trusted
            return Lark.load(io.BytesIO(data[len(key) :]))
    logger.debug("building the rule-language parser (%s is stale or missing)", _TABLES)
    return _build(grammar)


def write_tables(path: str | os.PathLike[str] | None = None) -> str:
    """Build the parser and write it to `grammar.lalr` (or `path`); returns the path.

    Run `python -c "from rewriter.dsl._parser import write_tables; write_tables()"` after
    changing the grammar (a test checks that the shipped tables are current).
    """
    grammar = grammar_text()
    target = path or str(importlib.resources.files("rewriter.dsl").joinpath(_TABLES))
    buffer = io.BytesIO()
    _build(grammar).save(buffer)
    with open(target, "wb") as f:
        f.write(_tables_key(grammar) + buffer.getvalue())
    return str(target)


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
