"""An error found while building the AST, with the span it is about."""

from __future__ import annotations

from rewriter._errors import Span


class LocatedError(Exception):
    """A construct the grammar accepts but the language rejects, with its location.

    For example `priority` given twice, a keyword argument as a node input, `a == not b`.
    """

    def __init__(self, span: Span, message: str) -> None:
        super().__init__(message)
        self.span = span
        self.message = message
