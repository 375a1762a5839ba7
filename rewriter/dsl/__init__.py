"""The `.rw` rule language: parse, check, load (lowered into the rule IR), format and dump.

`parse` turns text into a frozen AST (`File`), raising `RuleSyntaxError` with located
diagnostics. `load_files` reads files and folders, parses and checks them and lowers every
rule into the rule IR (`rewriter.rules`), returning a `rewriter.rules.RuleSet`, or raising
`RuleSyntaxError` / `RuleCheckError` with every error found. Nothing below this package sees
the syntax tree. `check` runs the semantic checks on parsed files; `Lowering` turns checked
rules into the rule IR. `format_file` gives a file's canonical layout, `dump` a stable
printed form of an AST. Loading never runs Python unless `allow_python`.

The language is described in LANGUAGE.md beside this file; the grammar is `grammar.lark`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rewriter._cache import CacheFolder, user_cache
from rewriter._lazy import LazyNames
from rewriter.dsl._ast import (
    APPROXIMATION_METRICS,
    AliasStmt,
    Approximation,
    AttrCopy,
    AttrEntry,
    Attribute,
    Binary,
    BoolOp,
    Call,
    Coalesce,
    Comment,
    Compare,
    Conditional,
    Const,
    Constraint,
    Expr,
    File,
    IncludeDecl,
    Index,
    InputLiteral,
    InputPattern,
    InputVar,
    Item,
    LetStmt,
    ListExpr,
    MatchBlock,
    Name,
    NodeCopy,
    NodePattern,
    NodeStmt,
    OpPattern,
    OpRef,
    OutputPattern,
    OutputVar,
    Param,
    ParamDecl,
    PassDecl,
    RepeatPattern,
    Requirement,
    RewriteBlock,
    RewriteLoop,
    RewriteStmt,
    Rule,
    Slice,
    Unary,
    UseDecl,
    Wildcard,
)
from rewriter.dsl._check import check
from rewriter.dsl._dump import dump
from rewriter.dsl._extract import extract_rule
from rewriter.dsl._loader import find_rule_files, load_files, parse_files, read_rule_file
from rewriter.dsl._lower import Lowering
from rewriter.dsl._opsets import OpsetRange, opset_range

if TYPE_CHECKING:
    from rewriter.dsl._format import format_file
    from rewriter.dsl._parser import parse, parse_param_value, parse_query

# The parser and the formatter bring in Lark and the grammar's tables: loaded when first
# asked for (PEP 562), so that loading rule files whose parse is cached loads neither.
_LAZY = {
    "format_file": "rewriter.dsl._format",
    "parse": "rewriter.dsl._parser",
    "parse_param_value": "rewriter.dsl._parser",
    "parse_query": "rewriter.dsl._parser",
}


_NAMES = LazyNames(__name__, _LAZY, globals())


def __getattr__(name: str) -> object:
    return _NAMES.get(name)


__all__ = [
    "APPROXIMATION_METRICS",
    "AliasStmt",
    "Approximation",
    "AttrCopy",
    "AttrEntry",
    "Attribute",
    "Binary",
    "BoolOp",
    "CacheFolder",
    "Call",
    "Coalesce",
    "Comment",
    "Compare",
    "Conditional",
    "Const",
    "Constraint",
    "Expr",
    "File",
    "IncludeDecl",
    "Index",
    "InputLiteral",
    "InputPattern",
    "InputVar",
    "Item",
    "LetStmt",
    "ListExpr",
    "Lowering",
    "MatchBlock",
    "Name",
    "NodeCopy",
    "NodePattern",
    "NodeStmt",
    "OpPattern",
    "OpRef",
    "OpsetRange",
    "OutputPattern",
    "OutputVar",
    "Param",
    "ParamDecl",
    "PassDecl",
    "RepeatPattern",
    "Requirement",
    "RewriteBlock",
    "RewriteLoop",
    "RewriteStmt",
    "Rule",
    "Slice",
    "Unary",
    "UseDecl",
    "Wildcard",
    "check",
    "dump",
    "extract_rule",
    "find_rule_files",
    "format_file",
    "load_files",
    "opset_range",
    "parse",
    "parse_files",
    "parse_param_value",
    "parse_query",
    "read_rule_file",
    "user_cache",
]
