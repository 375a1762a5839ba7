"""A rule that changes numerics on purpose must say so: the `approximate` header check.

A rewrite that introduces quantization ops (QuantizeLinear, DequantizeLinear, the integer
matmuls and convolutions, the QLinear* ops, MatMulNBits), quantizes a constant with the
`quantize` built-in, or narrows a float to float16/bfloat16 (a `Cast` node, or a `cast` or
`round_to` call, with that dtype written as a literal) cannot compute what its match
computed. Without `approximate METRIC CMP BOUND` such a rule would be held to equivalence by
check-rules and taken for exact by the accuracy budget, so loading it is an error, at the op
or call that narrows.

An op the match already has is not introduced (a rule that drops QLinearConv's zero bias
keeps the QLinearConv). A Cast back to a dtype computed from the match
(`Cast <to = dtype(x)>`, as the decompositions that widen float16 to float and back write
it) restores the input's precision and is fine.
"""

from __future__ import annotations

from rewriter._errors import Span
from rewriter.dsl import _ast as ast
from rewriter.dsl._reporter import Reporter
from rewriter.rules import QUANTIZATION_OPS, walk

# Built-ins whose result holds a value in fewer bits.
_NARROWING_CALLS = frozenset({"quantize"})


def check_approximate(rule: ast.Rule, report: Reporter) -> None:
    """Report the first narrowing statement of a rule that has no `approximate` header."""
    if rule.approximate is not None or not isinstance(rule.rewrite, ast.RewriteBlock):
        return
    matched = {ref.op_type for pattern in rule.match.patterns for ref in pattern.op.alternatives}
    for stmt in rule.rewrite.stmts:
        found = _narrowing(stmt, matched)
        if found is not None:
            span, what = found
            report.error(
                span,
                f"rule `{rule.name}` {what} but declares no accuracy bound; add "
                "`approximate METRIC CMP BOUND` to its header (e.g. `approximate snr >= 30`)",
            )
            return


def _narrowing(stmt: ast.RewriteStmt, matched: set[str]) -> tuple[Span, str] | None:
    expressions: list[ast.Expr] = []
    if isinstance(stmt, ast.NodeStmt):
        # `...n` keeps an op the match already has: it introduces no quantization op.
        op = stmt.op.op_type if isinstance(stmt.op, ast.OpRef) else ""
        quantizes = op in QUANTIZATION_OPS or op.startswith("QLinear")
        if quantizes and op not in matched:
            return stmt.op.span, f"introduces the quantization op `{op}`"
        if op == "Cast":
            for attr in stmt.attrs:
                if isinstance(attr, ast.AttrEntry) and attr.name == "to":
                    target = _half_literal(attr.value)
                    if target is not None:
                        return stmt.op.span, f"casts to {target} (lowers float precision)"
        expressions.extend(stmt.inputs)
        expressions.extend(a.value for a in stmt.attrs if isinstance(a, ast.AttrEntry))
    elif isinstance(stmt, ast.LetStmt):
        expressions.append(stmt.expr)
    elif isinstance(stmt, ast.AliasStmt):
        expressions.append(stmt.source)
    for expr in expressions:
        for node, _ in walk(expr):
            if not isinstance(node, ast.Call):
                continue
            if node.func in _NARROWING_CALLS:
                return node.span, f"quantizes a tensor with `{node.func}`"
            if node.func in ("cast", "round_to") and len(node.args) == 2:
                target = _half_literal(node.args[1])
                if target is not None:
                    return node.span, f"casts to {target} (lowers float precision)"
    return None


def _half_literal(expr: ast.Expr) -> str | None:
    """The half dtype (float16 or bfloat16) `expr` spells by name or ONNX number, or None."""
    if not isinstance(expr, ast.Const) or isinstance(expr.value, bool):
        return None
    names = {10: "float16", 16: "bfloat16", "float16": "float16", "bfloat16": "bfloat16"}
    return names.get(expr.value) if isinstance(expr.value, int | str) else None
