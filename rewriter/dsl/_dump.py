"""`dump`: a stable, layout-independent printed form of an AST, for golden tests.

One declaration or statement per line, indented by nesting; expressions as
S-expressions: `(+ a (* b 2))`, `(call sqrt x)`, `(. conv group)`, `([] x 0)`,
`(: 1 () 2)` for a slice, `[1 2]` for a list. Names print bare, strings quoted, `none`,
`true`, `false` as written. Spans are left out, so two ASTs that compare equal dump equal,
and vice versa.
"""

from __future__ import annotations

from rewriter.dsl import _ast as ast
from rewriter.rules import format_const

DumpNode = (
    ast.File
    | ast.Rule
    | ast.PassDecl
    | ast.UseDecl
    | ast.Constraint
    | ast.IncludeDecl
    | ast.ParamDecl
    | ast.MatchBlock
    | ast.NodePattern
    | ast.RewriteBlock
    | ast.RewriteLoop
    | ast.LetStmt
    | ast.NodeStmt
    | ast.AliasStmt
    | ast.Expr
    | ast.Slice
)


def dump(node: DumpNode) -> str:
    """The stable printed form of `node` (a file, rule, statement or expression)."""
    lines: list[str] = []
    _dump(node, 0, lines)
    return "\n".join(lines)


def _dump(node: object, depth: int, lines: list[str]) -> None:
    pad = "  " * depth
    if isinstance(node, ast.File):
        lines.append(f"{pad}file {node.path}")
        for item in node.items:
            _dump(item, depth + 1, lines)
        lines.extend(f"{pad}  comment {format_const(c.text)}" for c in node.comments)
    elif isinstance(node, ast.Rule):
        _dump_rule(node, depth, lines)
    elif isinstance(node, ast.PassDecl):
        options = "".join(f" {k}={expr(v)}" for k, v in node.options)
        lines.append(f"{pad}pass {node.name}{options}")
    elif isinstance(node, ast.UseDecl):
        lines.append(f"{pad}use {format_const(node.module)}")
    elif isinstance(node, ast.ParamDecl):
        lines.append(f"{pad}param {node.name} {expr(node.value)}")
    elif isinstance(node, ast.IncludeDecl):
        lines.append(f"{pad}include {format_const(node.path)}")
    elif isinstance(node, ast.Constraint):
        lines.append(f"{pad}constraint {node.name} ({' '.join(node.param_names)})")
        lines.extend(f"{pad}  {expr(condition)}" for condition in node.conditions)
    elif isinstance(node, ast.MatchBlock):
        _dump_match(node, depth, lines)
    elif isinstance(node, ast.NodePattern):
        lines.append(pad + _pattern(node))
    elif isinstance(node, ast.RewriteBlock):
        lines.append(f"{pad}rewrite")
        for stmt in node.stmts:
            _dump(stmt, depth + 1, lines)
    elif isinstance(node, ast.RewriteLoop):
        lines.append(f"{pad}rewrite loop")
    elif isinstance(node, ast.LetStmt):
        lines.append(f"{pad}let {node.name} = {expr(node.expr)}")
    elif isinstance(node, ast.NodeStmt):
        lines.append(pad + _node_stmt(node))
    elif isinstance(node, ast.AliasStmt):
        lines.append(f"{pad}alias {node.target} = {expr(node.source)}")
    else:
        lines.append(pad + expr(node))  # type: ignore[arg-type]


def _dump_rule(rule: ast.Rule, depth: int, lines: list[str]) -> None:
    pad = "  " * depth
    header = f"{pad}rule {rule.name}"
    if rule.one_line:
        header += " one-line"
    if rule.priority:
        header += f" priority={rule.priority}"
    for requirement in rule.requires:
        header += (
            f" requires=(opset {requirement.domain or '-'} {requirement.op} {requirement.version})"
        )
    assumed = [
        a for a, on in (("finite", rule.assumes_finite), ("nonempty", rule.assumes_nonempty)) if on
    ]
    if assumed:
        header += f" assumes={','.join(assumed)}"
    if rule.approximate is not None:
        header += f" approximate=({rule.approximate})"
    lines.append(header)
    _dump(rule.match, depth + 1, lines)
    if rule.where:
        lines.append(f"{pad}  where")
        lines.extend(f"{pad}    {expr(e)}" for e in rule.where)
    _dump(rule.rewrite, depth + 1, lines)


def _dump_match(match: ast.MatchBlock, depth: int, lines: list[str]) -> None:
    pad = "  " * depth
    if match.repeat is None:
        lines.append(f"{pad}match")
        patterns = match.patterns
    else:
        r = match.repeat
        lines.append(
            f"{pad}match repeat ({r.count_var} {r.count_op} {r.count}) {r.from_var} -> {r.to_var}"
        )
        patterns = r.body
    lines.extend(f"{pad}  {_pattern(p)}" for p in patterns)


def _pattern(pattern: ast.NodePattern) -> str:
    outputs = [_output(o) for o in pattern.outputs]
    if pattern.outputs_open:
        outputs.append("...")
    op = "_" if pattern.op.is_wildcard else "|".join(_op(r) for r in pattern.op.alternatives)
    inputs = " ".join(_input(i) for i in pattern.inputs)
    text = f"node ({' '.join(outputs)}) = {op} {_attrs(pattern.attrs)}({inputs})"
    return text + (f" as {pattern.as_name}" if pattern.as_name is not None else "")


def _node_stmt(stmt: ast.NodeStmt) -> str:
    outputs = " ".join(_output(o) for o in stmt.outputs)
    inputs = " ".join(expr(i) for i in stmt.inputs)
    text = f"node ({outputs}) = {_op(stmt.op)} {_attrs(stmt.attrs)}({inputs})"
    return text + (f" as {stmt.as_name}" if stmt.as_name is not None else "")


def _attrs(attrs: tuple[ast.AttrEntry | ast.AttrCopy, ...]) -> str:
    if not attrs:
        return ""
    parts = [
        f"...{a.source or ''}" if isinstance(a, ast.AttrCopy) else f"{a.name}={expr(a.value)}"
        for a in attrs
    ]
    return "<" + " ".join(parts) + "> "


def _op(ref: ast.OpRef | ast.NodeCopy) -> str:
    if isinstance(ref, ast.NodeCopy):
        return f"...{ref.node}"
    return f"{ref.domain}.{ref.op_type}" if ref.domain else ref.op_type


def _output(output: ast.OutputPattern) -> str:
    return output.name if isinstance(output, ast.OutputVar) else "_"


def _input(item: ast.InputPattern) -> str:
    if isinstance(item, ast.Wildcard):
        return "_"
    if isinstance(item, ast.InputLiteral):
        return f"(literal {expr(item.value)})"
    return item.name + ("?" if item.optional else "") + ("..." if item.variadic else "")


def expr(node: ast.Expr | ast.Slice) -> str:
    """One expression as an S-expression."""
    if isinstance(node, ast.Name):
        return node.name
    if isinstance(node, ast.Const):
        return format_const(node.value)
    if isinstance(node, ast.ListExpr):
        return "[" + " ".join(expr(i) for i in node.items) + "]"
    if isinstance(node, ast.Unary | ast.Binary | ast.Compare | ast.BoolOp):
        operands = (node.operand,) if isinstance(node, ast.Unary) else (node.left, node.right)
        return f"({node.op} {' '.join(expr(o) for o in operands)})"
    if isinstance(node, ast.Coalesce):
        return f"(?? {expr(node.left)} {expr(node.right)})"
    if isinstance(node, ast.Conditional):
        return f"(if {expr(node.cond)} {expr(node.then)} {expr(node.otherwise)})"
    if isinstance(node, ast.Call):
        args = [expr(a) for a in node.args] + [f"{k}={expr(v)}" for k, v in node.kwargs]
        return f"(call {node.func}{''.join(' ' + a for a in args)})"
    if isinstance(node, ast.Attribute):
        return f"(. {expr(node.obj)} {node.name})"
    if isinstance(node, ast.Index):
        return f"([] {expr(node.obj)} {expr(node.index)})"
    assert isinstance(node, ast.Slice), "the parser builds no constraint calls (lowering does)"
    parts = [node.start, node.stop, node.step]
    return "(: " + " ".join("()" if p is None else expr(p) for p in parts) + ")"
