"""Parse `.rw` text into the AST: Lark LALR parse, then the separate AST builder.

The Lark parser (`_lark.lark_parser`) is built once per process and reused. Every failure
becomes a `RuleSyntaxError` whose diagnostic carries `file:line:col` and the source line;
no Lark exception type reaches the caller.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Iterator

from lark import Token, Tree
from lark.exceptions import UnexpectedInput

from rewriter import rules
from rewriter._errors import RuleSyntaxError, Span
from rewriter.dsl import _ast as ast
from rewriter.dsl._lark import lark_parser
from rewriter.dsl._located import LocatedError
from rewriter.dsl._lower import literal_value
from rewriter.dsl._postlex import (
    COLLECTED_COMMENTS,
    MAX_NESTING,
    NestingTooDeepError,
    RawComment,
    token_span,
)
from rewriter.dsl._source import diagnostic
from rewriter.dsl._syntax_messages import syntax_diagnostic
from rewriter.dsl._transform import AstBuilder

logger = logging.getLogger(__name__)


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
    try:
        items, comments = _parse_items(text, filename)
    except (RuleSyntaxError, LocatedError):
        # The first error is reported as a parse of the whole text reports it (an item cut
        # off by a missing brace reads on into the next item there, not into the end).
        items, comments = _parse_whole(text, filename)
    lines = text.count("\n") + 1
    return ast.File(
        filename,
        items,
        tuple(ast.Comment(c.text, span=_comment_span(filename, c)) for c in comments),
        source=text,
        span=Span(filename, 1, 1, lines, len(text) - text.rfind("\n")),
    )


def parse_query(text: str, name: str, filename: str = "<query>") -> ast.File:
    """Parse a query: match lines, then `where` clauses, with no rule around them.

    What `rewrite find -e` takes: the match part of a rule, for listing what it matches.
    The result is a file holding one rule named `name`, marked `query` (its rewrite block is
    empty; checks and tools that build replacements leave queries alone).

    Raises:
        RuleSyntaxError: the text does not parse; the diagnostic says where and what was
            expected.
    """
    comments: list[RawComment] = []
    tree = _parse_tree(text, filename, comments, start="query")
    try:
        (rule,) = AstBuilder(filename).transform(tree)
    except LocatedError as exc:
        raise RuleSyntaxError([diagnostic("error", exc.span, exc.message, text)]) from exc
    assert isinstance(rule, ast.Rule), "a query builds one rule"
    lines = text.count("\n") + 1
    return ast.File(
        filename,
        (dataclasses.replace(rule, name=name),),
        tuple(ast.Comment(c.text, span=_comment_span(filename, c)) for c in comments),
        source=text,
        span=Span(filename, 1, 1, lines, len(text) - text.rfind("\n")),
    )


def parse_param_value(text: str, filename: str = "<param>") -> rules.LiteralValue:
    """A rule parameter's value written as a literal (`true`, `1e-5`, `"SAME"`, `[0, 1]`).

    Raises:
        RuleSyntaxError: the text is not one literal.
    """
    comments: list[RawComment] = []
    tree = _parse_tree(text, filename, comments, start="param_value")
    try:
        (expr,) = AstBuilder(filename).transform(tree)
    except LocatedError as exc:
        raise RuleSyntaxError([diagnostic("error", exc.span, exc.message, text)]) from exc
    assert isinstance(expr, rules.Const | rules.ListExpr | rules.Unary), "a literal"
    return literal_value(expr)


def _parse_items(text: str, filename: str) -> tuple[tuple[ast.Item, ...], list[RawComment]]:
    """Parse `text` one top-level item at a time (see `top_level_chunks`).

    Each item's parse tree becomes AST and is dropped before the next item is parsed, so
    the parser's working set is one item, not the whole file's tree: on a 2,000-rule file
    that is what keeps the garbage collector's passes short.
    """
    items: list[ast.Item] = []
    comments: list[RawComment] = []
    for offset, chunk in top_level_chunks(text):
        found: list[RawComment] = []
        tree = _parse_tree(chunk, filename, found)
        items.extend(AstBuilder(filename, offset).transform(tree))
        comments.extend(dataclasses.replace(c, line=c.line + offset) for c in found)
    return tuple(items), comments


def _parse_whole(text: str, filename: str) -> tuple[tuple[ast.Item, ...], list[RawComment]]:
    comments: list[RawComment] = []
    tree = _parse_tree(text, filename, comments)
    try:
        items = AstBuilder(filename).transform(tree)
    except LocatedError as exc:
        raise RuleSyntaxError([diagnostic("error", exc.span, exc.message, text)]) from exc
    return items, comments


# What decides where a top-level item starts: comments and strings (which may hold any
# character), brackets, and the keywords that open an item at the start of a line.
_ITEM_SCAN = re.compile(
    r'#[^\r\n]*|"(?:[^"\\\r\n]|\\[^\r\n])*"|[{}()\[\]]|^(?:rule|constraint|pass|use|include|param)\b',
    re.M,
)


_CHUNK_BYTES = 600


def top_level_chunks(text: str) -> Iterator[tuple[int, str]]:
    """Split `text` into runs of whole top-level items: (lines before the chunk, its text).

    An item starts at a line beginning with `rule`, `constraint`, `pass`, `use`, `include`
    or `param`
    outside every bracket; the text before the first one (comments) belongs to the first
    chunk. Every chunk starts at a line start, so columns need no shift. Unbalanced brackets
    stop the splitting: the rest is one chunk, parsed (and reported) as part of the whole.
    """
    starts = [0]
    depth = 0
    for found in _ITEM_SCAN.finditer(text):
        token = found.group()
        if token in "{([":
            depth += 1
        elif token in "})]":
            depth -= 1
            if depth < 0:
                break
        elif token[0] not in '#"' and depth == 0 and found.start() > 0:
            starts.append(found.start())
    starts.append(len(text))
    line = 0
    begin = 0
    for end in starts[1:]:
        # Items are grouped up to about _CHUNK_BYTES: one parse per item would cost more in
        # per-parse setup than it saves.
        if end - begin < _CHUNK_BYTES and end != len(text):
            continue
        chunk = text[begin:end]
        if chunk:
            yield line, chunk
            line += chunk.count("\n")
        begin = end


def _parse_tree(
    text: str, filename: str, comments: list[RawComment], start: str = "start"
) -> Tree[Token]:
    reset = COLLECTED_COMMENTS.set(comments)
    try:
        return lark_parser().parse(text, start=start)
    except UnexpectedInput as exc:
        raise RuleSyntaxError([syntax_diagnostic(exc, text, filename)]) from exc
    except NestingTooDeepError as exc:
        span = token_span(filename, exc.token)
        message = f"brackets nest deeper than {MAX_NESTING} levels"
        raise RuleSyntaxError([diagnostic("error", span, message, text)]) from exc
    finally:
        COLLECTED_COMMENTS.reset(reset)


def _comment_span(path: str, comment: RawComment) -> Span:
    return Span(path, comment.line, comment.col, comment.line, comment.col + len(comment.text))
