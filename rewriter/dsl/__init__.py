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
from rewriter.dsl._files import find_rule_files, read_rule_file
from rewriter.dsl._load import load_files

if TYPE_CHECKING:
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
    from rewriter.dsl._format import format_file
    from rewriter.dsl._loader import parse_files
    from rewriter.dsl._lower import Lowering
    from rewriter.dsl._opsets import OpsetRange, opset_range
    from rewriter.dsl._parser import parse, parse_param_value, parse_query

# Loaded when first asked for (PEP 562): the parser and the formatter bring in Lark and the
# grammar's tables, and a load served from the cache of rule sets needs neither them nor
# the syntax tree, the checker and the lowering.
_LAZY = {
    "APPROXIMATION_METRICS": "rewriter.dsl._ast",
    "AliasStmt": "rewriter.dsl._ast",
    "Approximation": "rewriter.dsl._ast",
    "AttrCopy": "rewriter.dsl._ast",
    "AttrEntry": "rewriter.dsl._ast",
    "Attribute": "rewriter.dsl._ast",
    "Binary": "rewriter.dsl._ast",
    "BoolOp": "rewriter.dsl._ast",
    "Call": "rewriter.dsl._ast",
    "Coalesce": "rewriter.dsl._ast",
    "Comment": "rewriter.dsl._ast",
    "Compare": "rewriter.dsl._ast",
    "Conditional": "rewriter.dsl._ast",
    "Const": "rewriter.dsl._ast",
    "Constraint": "rewriter.dsl._ast",
    "Expr": "rewriter.dsl._ast",
    "File": "rewriter.dsl._ast",
    "IncludeDecl": "rewriter.dsl._ast",
    "Index": "rewriter.dsl._ast",
    "InputLiteral": "rewriter.dsl._ast",
    "InputPattern": "rewriter.dsl._ast",
    "InputVar": "rewriter.dsl._ast",
    "Item": "rewriter.dsl._ast",
    "LetStmt": "rewriter.dsl._ast",
    "ListExpr": "rewriter.dsl._ast",
    "MatchBlock": "rewriter.dsl._ast",
    "Name": "rewriter.dsl._ast",
    "NodeCopy": "rewriter.dsl._ast",
    "NodePattern": "rewriter.dsl._ast",
    "NodeStmt": "rewriter.dsl._ast",
    "OpPattern": "rewriter.dsl._ast",
    "OpRef": "rewriter.dsl._ast",
    "OutputPattern": "rewriter.dsl._ast",
    "OutputVar": "rewriter.dsl._ast",
    "Param": "rewriter.dsl._ast",
    "ParamDecl": "rewriter.dsl._ast",
    "PassDecl": "rewriter.dsl._ast",
    "RepeatPattern": "rewriter.dsl._ast",
    "Requirement": "rewriter.dsl._ast",
    "RewriteBlock": "rewriter.dsl._ast",
    "RewriteLoop": "rewriter.dsl._ast",
    "RewriteStmt": "rewriter.dsl._ast",
    "Rule": "rewriter.dsl._ast",
    "Slice": "rewriter.dsl._ast",
    "Unary": "rewriter.dsl._ast",
    "UseDecl": "rewriter.dsl._ast",
    "Wildcard": "rewriter.dsl._ast",
    "check": "rewriter.dsl._check",
    "dump": "rewriter.dsl._dump",
    "extract_rule": "rewriter.dsl._extract",
    "parse_files": "rewriter.dsl._loader",
    "Lowering": "rewriter.dsl._lower",
    "OpsetRange": "rewriter.dsl._opsets",
    "opset_range": "rewriter.dsl._opsets",
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
