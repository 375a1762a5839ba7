"""The rule IR: the one typed form of a rewrite rule that every consumer reads.

Rules written in `.rw` files are lowered into this form once, when they are loaded
(`rewriter.load_rules`); rules can also be built in Python from the same classes, or with
the short builders `rule`, `node`, `new_node`, `call`, ... (see README.md beside this file).
The engine's matcher and builder, `--why-not`, loop rolling, rule checking, reports and the
prover read only this form, so they work the same on rules of either origin.

* Expressions (`Name`, `Const`, `Call`, `Compare`, ...): conditions and rewrite-time values.
* Patterns (`Pattern`, `NodePattern`, `InputVar`, `InputConst`, `AttrBind`, ...): what a
  rule matches.
* Rewrites (`Rewrite`, `Let`, `NewNode`, `Alias`, `RollLoop`): what replaces a match.
* `Rule`, `RuleSet`, `PassUse`: rules and what a run loads.
* `Vocabulary`, `Signature`, `PassSignature`: what rules may call besides ops.
* `encode_ir`, `decode_ir`: IR values as flat JSON-ready tokens and back (how a loaded rule
  set is cached).

Everything here is a frozen, slotted dataclass holding tuples; nothing here imports onnx,
numpy or the layers above.
"""

from __future__ import annotations

from rewriter.rules._build import (
    ExprLike,
    alias,
    all_of,
    any_of,
    call,
    eq,
    expr,
    is_in,
    le,
    let,
    lit,
    lt,
    ne,
    new_node,
    node,
    not_,
    rule,
    var,
)
from rewriter.rules._codec import IR_LAYOUT, decode_ir, encode_ir
from rewriter.rules._expr import (
    NO_SPAN,
    Attribute,
    Binary,
    BoolOp,
    Call,
    Coalesce,
    Compare,
    Conditional,
    Const,
    Constraint,
    ConstraintCall,
    Expr,
    Index,
    ListExpr,
    Name,
    Slice,
    Unary,
)
from rewriter.rules._pattern import (
    AnyValue,
    AttrBind,
    AttrEquals,
    AttrPattern,
    InputConst,
    InputPattern,
    InputVar,
    LiteralValue,
    NodePattern,
    OpId,
    OutputPattern,
    OutputVar,
    Pattern,
    RepeatPattern,
)
from rewriter.rules._print import ExprPrinter, expression_text, format_const
from rewriter.rules._rewrite import (
    Alias,
    CopyAttrs,
    Let,
    MatchedOp,
    NewNode,
    Rewrite,
    RewriteStmt,
    RollLoop,
    SetAttr,
)
from rewriter.rules._rule import (
    APPROXIMATION_METRICS,
    Approximation,
    Assumption,
    Helper,
    PassUse,
    Requirement,
    Rule,
    RuleSet,
)
from rewriter.rules._rule_text import constraint_text, rule_text
from rewriter.rules._scope import unbound_names
from rewriter.rules._vocabulary import (
    QUANTIZATION_OPS,
    PassOption,
    PassSignature,
    Signature,
    Vocabulary,
)
from rewriter.rules._walk import children, inline_constraints, names_in, rebuild, substituted, walk

__all__ = [
    "APPROXIMATION_METRICS",
    "IR_LAYOUT",
    "NO_SPAN",
    "QUANTIZATION_OPS",
    "Alias",
    "AnyValue",
    "Approximation",
    "Assumption",
    "AttrBind",
    "AttrEquals",
    "AttrPattern",
    "Attribute",
    "Binary",
    "BoolOp",
    "Call",
    "Coalesce",
    "Compare",
    "Conditional",
    "Const",
    "Constraint",
    "ConstraintCall",
    "CopyAttrs",
    "Expr",
    "ExprLike",
    "ExprPrinter",
    "Helper",
    "Index",
    "InputConst",
    "InputPattern",
    "InputVar",
    "Let",
    "ListExpr",
    "LiteralValue",
    "MatchedOp",
    "Name",
    "NewNode",
    "NodePattern",
    "OpId",
    "OutputPattern",
    "OutputVar",
    "PassOption",
    "PassSignature",
    "PassUse",
    "Pattern",
    "RepeatPattern",
    "Requirement",
    "Rewrite",
    "RewriteStmt",
    "RollLoop",
    "Rule",
    "RuleSet",
    "SetAttr",
    "Signature",
    "Slice",
    "Unary",
    "Vocabulary",
    "alias",
    "all_of",
    "any_of",
    "call",
    "children",
    "constraint_text",
    "decode_ir",
    "encode_ir",
    "eq",
    "expr",
    "expression_text",
    "format_const",
    "inline_constraints",
    "is_in",
    "le",
    "let",
    "lit",
    "lt",
    "names_in",
    "ne",
    "new_node",
    "node",
    "not_",
    "rebuild",
    "rule",
    "rule_text",
    "substituted",
    "unbound_names",
    "var",
    "walk",
]
