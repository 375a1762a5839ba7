"""The `.rw` rule language: parse, check, load, format and dump rule files.

`parse` turns text into a frozen AST (`File`), raising `RuleSyntaxError` with located
diagnostics. `load_rules` reads files and folders, parses and checks them and returns a
`RuleSet`, raising `RuleSyntaxError` / `RuleCheckError` with every error found. `check`
runs the semantic checks on parsed files. `format_file` gives a file's canonical layout,
`dump` a stable printed form of an AST. `inline_constraints` spells out the named
constraints a rule's `where` lines call. Loading never runs Python unless `allow_python`.

The language is described in LANGUAGE.md beside this file; the grammar is `grammar.lark`.
"""

from __future__ import annotations

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
    NodePattern,
    NodeStmt,
    OpPattern,
    OpRef,
    OutputPattern,
    OutputVar,
    Param,
    PassDecl,
    RepeatPattern,
    Requirement,
    RewriteBlock,
    RewriteLoop,
    RewriteStmt,
    Rule,
    RuleSet,
    Slice,
    Unary,
    UseDecl,
    Wildcard,
)
from rewriter.dsl._cache import CacheFolder, user_cache
from rewriter.dsl._check import check
from rewriter.dsl._check_approximate import QUANTIZATION_OPS
from rewriter.dsl._dump import dump
from rewriter.dsl._format import format_file
from rewriter.dsl._inline import inline_constraints
from rewriter.dsl._loader import load_rules
from rewriter.dsl._opsets import OpsetRange, opset_range
from rewriter.dsl._parser import parse, parse_query
from rewriter.dsl._print_expr import expression_text
from rewriter.dsl._vocabulary import PassOption, PassSignature, Signature, Vocabulary

__all__ = [
    "APPROXIMATION_METRICS",
    "QUANTIZATION_OPS",
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
    "MatchBlock",
    "Name",
    "NodePattern",
    "NodeStmt",
    "OpPattern",
    "OpRef",
    "OpsetRange",
    "OutputPattern",
    "OutputVar",
    "Param",
    "PassDecl",
    "PassOption",
    "PassSignature",
    "RepeatPattern",
    "Requirement",
    "RewriteBlock",
    "RewriteLoop",
    "RewriteStmt",
    "Rule",
    "RuleSet",
    "Signature",
    "Slice",
    "Unary",
    "UseDecl",
    "Vocabulary",
    "Wildcard",
    "check",
    "dump",
    "expression_text",
    "format_file",
    "inline_constraints",
    "load_rules",
    "opset_range",
    "parse",
    "parse_query",
    "user_cache",
]
