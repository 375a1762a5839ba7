"""The LALR parser for `grammar.lark`, built once per process and cached between processes.

Building it (grammar analysis, strict-mode collision checks) takes about a second. The built
parser is saved with Lark's own `save` into the user's cache folder, under a name made from
the grammar text, the parser options and the versions of Lark and Python, so a stale or
foreign table is never read; nothing is written into the installed package. Without a usable
cache folder the parser is simply built.
"""

from __future__ import annotations

import functools
import importlib.resources
import io
import logging
import sys
from typing import TYPE_CHECKING

from rewriter._cache import CacheFolder, digest, user_cache

if TYPE_CHECKING:
    from lark import Lark

logger = logging.getLogger(__name__)

_GRAMMAR = "grammar.lark"
_OPTIONS = {
    "parser": "lalr",
    "lexer": "contextual",
    "strict": True,
    "propagate_positions": True,
    "maybe_placeholders": False,
    # A rule file, or the match lines of a query (`rewrite find -e`).
    "start": ["start", "query", "param_value"],
}


def grammar_text() -> str:
    """The text of `grammar.lark`."""
    return importlib.resources.files("rewriter.dsl").joinpath(_GRAMMAR).read_text()


def grammar_digest(grammar: str) -> str:
    """What a parse depends on: the grammar text and the parser options."""
    return digest(grammar, repr(sorted(_OPTIONS.items())))


def _table_name(grammar: str) -> str:
    import lark  # Lark itself loads only to parse (a cached parse needs only the digest)

    # Lark's saved tables are read only by the Lark (and Python) that wrote them.
    versions = f"lark {lark.__version__} python {sys.version_info[:3]}"
    return f"parser-{digest(grammar_digest(grammar), versions)}.lark"


def build_parser(grammar: str) -> Lark:
    """A new parser for `grammar` (about a second)."""
    from lark import Lark

    from rewriter.dsl._postlex import StatementPostlexer

    return Lark(grammar, postlex=StatementPostlexer(), **_OPTIONS)


def load_or_build_parser(cache: CacheFolder) -> Lark:
    """The parser from `cache` when it holds one for this grammar; else built and stored."""
    grammar = grammar_text()
    name = _table_name(grammar)
    data = cache.read(name)
    if data is not None:
        from lark import Lark

        try:
            return Lark.load(io.BytesIO(data))
        except Exception as exc:  # a damaged entry is rebuilt rather than trusted
            logger.debug("parser cache %s is unusable (%s); rebuilding", name, exc)
    parser = build_parser(grammar)
    buffer = io.BytesIO()
    parser.save(buffer)
    cache.write(name, buffer.getvalue())
    return parser


@functools.cache
def lark_parser() -> Lark:
    """The process-wide parser, from the user's cache folder when it is there."""
    return load_or_build_parser(user_cache())
