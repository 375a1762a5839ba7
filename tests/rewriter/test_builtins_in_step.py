"""The rule language's list of built-ins and the evaluator's implementations agree."""

from __future__ import annotations

from rewriter._builtins import BUILTINS
from rewriter._passes import PASSES
from rewriter.dsl import builtins as declared


def test_every_declared_builtin_is_implemented_and_vice_versa():
    names = set(declared.SIGNATURES)
    assert names - set(BUILTINS) == set()
    assert set(BUILTINS) - names == set()


def test_every_declared_pass_is_implemented():
    assert set(declared.PASS_OPTIONS) <= set(PASSES)
