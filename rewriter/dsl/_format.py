"""The canonical layout of `.rw` files (`rewrite fmt`).

The formatter prints the AST, so formatting never changes what a file means
(`parse(text) == parse(format_file(text))`), and re-inserts the comments:

* Two-space indentation per block level, one statement per line, single spaces around
  `=`, binary operators and `|`, `Op <attrs> (inputs)` as in ONNX's text format, minimal
  parentheses. One-line rules stay one line; block rules print their sections in the order
  match, where, rewrite; `priority` comes before `requires`.
* A bracketed list whose items start on different lines is "exploded": one item per line,
  each followed by a comma, which keeps comments on those lines beside their items.
* A comment alone on its line stays on its own line before the statement that follows it;
  a comment after code stays after that statement. A comment inside a statement that is
  printed on one line moves to its own line just before the statement.
* Blank lines between statements are kept (runs collapse to one).

Formatting is idempotent: formatting its own output changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rewriter._errors import Span
from rewriter.dsl import _ast as ast
from rewriter.dsl._parser import parse
from rewriter.dsl._print_expr import COALESCE, ExprPrinter, format_const
from rewriter.dsl._transform import is_op_name

_INDENT = "  "


def format_file(text: str, filename: str = "<string>") -> str:
    """The canonical layout of one rule file's text.

    Raises:
        RuleSyntaxError: the text does not parse (nothing is formatted then).
    """
    return _Formatter(parse(text, filename)).run()


class _Formatter:
    """Prints one file's AST, weaving its comments back in."""

    def __init__(self, file: ast.File) -> None:
        self.file = file
        self.source_lines = file.source.split("\n")
        self.comments: dict[int, ast.Comment] = {c.span.line: c for c in file.comments}
        self.out: list[str] = []
        self.last_line = 0  # the last source line accounted for in the output
        self.block_just_opened = True  # no blank line right after `{` or at the top
        self.printer = ExprPrinter(self._group)

    def run(self) -> str:
        for item in self.file.items:
            self._item(item)
        self._flush_comments(len(self.source_lines) + 1, 0)
        while self.out and not self.out[-1].strip():
            self.out.pop()
        return "\n".join(self.out) + "\n" if self.out else ""

    # -- emission ------------------------------------------------------------------------------

    def _emit(self, first: int, last: int, depth: int, text: str) -> None:
        """Emit one unit (text may hold several lines) written on source lines first..last.

        Comments before `first` go before it; comments inside the unit that printing did
        not place go before it too, except the one on its last line, which stays at its end.
        """
        self._flush_comments(first, depth)
        self._blank_line_before(first)
        inner = self._unplaced_comments(first, last)
        trailing = inner.pop() if inner and inner[-1].span.line == last else None
        for comment in inner:
            self.out.append(_INDENT * depth + comment.text)
        lines = text.split("\n")
        lines[0] = _INDENT * depth + lines[0]
        if trailing is not None:
            lines[-1] += "  " + trailing.text
        self.out.extend(lines)
        self.last_line = max(self.last_line, last)
        self.block_just_opened = text.endswith("{")

    def _close(self, line: int, depth: int) -> None:
        """Emit a block's `}` (source line `line`), after the comments left inside the block."""
        self._flush_comments(line, depth + 1)
        self.block_just_opened = True  # no blank line before `}`
        self._emit(line, line, depth, "}")
        self.block_just_opened = False

    def _flush_comments(self, before: int, depth: int) -> None:
        for line in sorted(self.comments):
            if line >= before:
                break
            comment = self.comments.pop(line)
            self._blank_line_before(line)
            self.out.append(_INDENT * depth + comment.text)
            self.last_line = max(self.last_line, line)
            self.block_just_opened = False

    def _unplaced_comments(self, first: int, last: int) -> list[ast.Comment]:
        lines = [line for line in sorted(self.comments) if first <= line <= last]
        return [self.comments.pop(line) for line in lines]

    def _take_comment(self, line: int) -> ast.Comment | None:
        return self.comments.pop(line, None)

    def _blank_line_before(self, line: int) -> None:
        """Keep one blank line where the source had any between the last unit and `line`."""
        if self.block_just_opened:
            return
        for number in range(self.last_line + 1, line):
            if 1 <= number <= len(self.source_lines) and not self.source_lines[number - 1].strip():
                self.out.append("")
                return

    # -- groups --------------------------------------------------------------------------------

    def _group(
        self,
        open_: str,
        close: str,
        renderers: Sequence[Callable[[int], str]],
        spans: Sequence[Span],
        closer_line: int | None,
        depth: int,
    ) -> str:
        """`(a, b)` inline, or exploded one per line when the items start on different lines."""
        if len(spans) < 2 or len({s.line for s in spans}) == 1:
            return open_ + ", ".join(render(depth) for render in renderers) + close
        lines = [open_]
        previous_end = spans[0].line
        for position, (render, span) in enumerate(zip(renderers, spans, strict=True)):
            lines.extend(self._comment_lines(previous_end, span.line, depth + 1))
            text = _INDENT * (depth + 1) + render(depth + 1) + ","
            next_line = spans[position + 1].line if position + 1 < len(spans) else None
            trailing = self._take_comment(span.end_line) if next_line != span.end_line else None
            if trailing is not None:
                text += "  " + trailing.text
            lines.append(text)
            previous_end = span.end_line
        if closer_line is not None:
            lines.extend(self._comment_lines(previous_end, closer_line, depth + 1))
        lines.append(_INDENT * depth + close)
        return "\n".join(lines)

    def _comment_lines(self, after: int, before: int, depth: int) -> list[str]:
        lines = [line for line in sorted(self.comments) if after < line < before]
        return [_INDENT * depth + self.comments.pop(line).text for line in lines]

    # -- declarations --------------------------------------------------------------------------

    def _item(self, item: ast.Item) -> None:
        if isinstance(item, ast.Rule):
            self._rule(item)
        elif isinstance(item, ast.PassDecl):
            self._pass(item)
        else:
            self._emit(item.span.line, item.span.end_line, 0, f"use {format_const(item.module)}")

    def _pass(self, decl: ast.PassDecl) -> None:
        text = f"pass {decl.name}"
        spans = decl.option_spans or tuple(value.span for _, value in decl.options)
        if not decl.options:
            self._emit(decl.span.line, decl.span.end_line, 0, text)
            return
        options = [f"{key} = {self.printer.expr(value, 1)}" for key, value in decl.options]
        if len({s.line for s in spans}) == 1:
            self._emit(decl.span.line, decl.span.end_line, 0, f"{text} {{ {', '.join(options)} }}")
            return
        self._emit(decl.span.line, decl.span.line, 0, text + " {")
        for option, span, (_, value) in zip(options, spans, decl.options, strict=True):
            self._emit(span.line, value.span.end_line, 1, option)
        self._close(decl.span.end_line, 0)

    def _rule(self, rule: ast.Rule) -> None:
        header = f"rule {rule.name}"
        if rule.priority:
            header += f" priority {rule.priority}"
        if rule.requires:
            header += " requires " + ", ".join(_requirement(r) for r in rule.requires)
        if rule.one_line:
            self._emit(
                rule.span.line, rule.span.end_line, 0, header + ": " + self._one_line_body(rule)
            )
            return
        self._emit(rule.span.line, rule.span.line, 0, header + " {")
        self._match(rule.match, 1)
        if rule.where:
            self._where(rule, 1)
        self._rewrite(rule.rewrite, 1)
        self._close(rule.span.end_line, 0)

    def _one_line_body(self, rule: ast.Rule) -> str:
        pattern = rule.match.patterns[0]
        assert isinstance(rule.rewrite, ast.RewriteBlock), "a one-line rule has a rewrite line"
        text = f"{self._pattern(pattern, 0)} => {self._rewrite_stmt(rule.rewrite.stmts[0], 0)}"
        for expr in rule.where:
            text += f" where {self.printer.expr(expr, 0)}"
        return text

    # -- sections ------------------------------------------------------------------------------

    def _match(self, match: ast.MatchBlock, depth: int) -> None:
        patterns = match.patterns
        if match.repeat is not None:
            repeat = match.repeat
            header = (
                f"match repeat ({repeat.count_var} {repeat.count_op} {repeat.count}) "
                f"from {repeat.from_var} to {repeat.to_var} {{"
            )
            patterns = repeat.body
        else:
            header = "match {"
        self._block(header, match.span, [(p.span, self._bind_pattern(p)) for p in patterns], depth)

    def _where(self, rule: ast.Rule, depth: int) -> None:
        units = [(e.span, _bind_expr(self.printer, e)) for e in rule.where]
        self._block("where {", rule.where_span, units, depth)

    def _rewrite(self, rewrite: ast.RewriteBlock | ast.RewriteLoop, depth: int) -> None:
        if isinstance(rewrite, ast.RewriteLoop):
            self._emit(rewrite.span.line, rewrite.span.end_line, depth, "rewrite loop")
            return
        units = [(s.span, self._bind_stmt(s)) for s in rewrite.stmts]
        self._block("rewrite {", rewrite.span, units, depth)

    def _block(
        self,
        header: str,
        span: Span,
        units: Sequence[tuple[Span, Callable[[int], str]]],
        depth: int,
    ) -> None:
        self._emit(span.line, span.line, depth, header)
        for unit_span, render in units:
            self._emit(unit_span.line, unit_span.end_line, depth + 1, render(depth + 1))
        self._close(span.end_line, depth)

    def _bind_pattern(self, pattern: ast.NodePattern) -> Callable[[int], str]:
        def render(depth: int) -> str:
            return self._pattern(pattern, depth)

        return render

    def _bind_stmt(self, stmt: ast.RewriteStmt) -> Callable[[int], str]:
        def render(depth: int) -> str:
            return self._rewrite_stmt(stmt, depth)

        return render

    # -- node lines ----------------------------------------------------------------------------

    def _pattern(self, pattern: ast.NodePattern, depth: int) -> str:
        outputs = [_output(o) for o in pattern.outputs]
        if pattern.outputs_open:
            outputs.append("...")
        op = " | ".join(_op(r) for r in pattern.op.alternatives) or "_"
        text = f"{', '.join(outputs)} = {op}"
        text += self._attrs(pattern.attrs, depth)
        renderers = [_bind_input(self.printer, i) for i in pattern.inputs]
        closer = pattern.span.end_line if pattern.as_name is None else None
        text += " " + self._group(
            "(", ")", renderers, [i.span for i in pattern.inputs], closer, depth
        )
        if pattern.as_name is not None:
            text += f" as {pattern.as_name}"
        return text

    def _rewrite_stmt(self, stmt: ast.RewriteStmt, depth: int) -> str:
        if isinstance(stmt, ast.LetStmt):
            return f"let {stmt.name} = {self.printer.expr(stmt.expr, depth)}"
        if isinstance(stmt, ast.AliasStmt):
            source = self.printer.expr(stmt.source, depth)
            if isinstance(stmt.source, ast.Call) and is_op_name(stmt.source.func):
                source = f"({source})"  # `y = Op(x)` would be a node line
            return f"{stmt.target} = {source}"
        text = f"{', '.join(_output(o) for o in stmt.outputs)} = {_op(stmt.op)}"
        attrs = self._attrs(stmt.attrs, depth)
        if not attrs and not is_op_name(_op(stmt.op)):
            attrs = " <>"  # `y = f (x)` would call the function `f`
        text += attrs
        closer = stmt.span.end_line if stmt.as_name is None else None
        text += " " + self.printer.items("(", ")", stmt.inputs, depth, closer)
        if stmt.as_name is not None:
            text += f" as {stmt.as_name}"
        return text

    def _attrs(self, attrs: tuple[ast.AttrEntry | ast.AttrCopy, ...], depth: int) -> str:
        if not attrs:
            return ""
        renderers = [_bind_attr(self.printer, a) for a in attrs]
        return " " + self._group("<", ">", renderers, [a.span for a in attrs], None, depth)


def _requirement(requirement: ast.Requirement) -> str:
    domain = f" {requirement.domain}" if requirement.domain else ""
    return f"opset{domain} {requirement.op} {requirement.version}"


def _op(ref: ast.OpRef) -> str:
    return f"{ref.domain}.{ref.op_type}" if ref.domain else ref.op_type


def _output(output: ast.OutputPattern) -> str:
    return output.name if isinstance(output, ast.OutputVar) else "_"


def _bind_expr(printer: ExprPrinter, expr: ast.Expr) -> Callable[[int], str]:
    def render(depth: int) -> str:
        return printer.expr(expr, depth)

    return render


def _bind_input(printer: ExprPrinter, item: ast.InputPattern) -> Callable[[int], str]:
    def render(depth: int) -> str:
        if isinstance(item, ast.Wildcard):
            return "_"
        if isinstance(item, ast.InputLiteral):
            return printer.expr(item.value, depth)
        suffix = "?" if item.optional else "..." if item.variadic else ""
        return item.name + suffix

    return render


def _bind_attr(printer: ExprPrinter, entry: ast.AttrEntry | ast.AttrCopy) -> Callable[[int], str]:
    def render(depth: int) -> str:
        if isinstance(entry, ast.AttrCopy):
            return "..." + (entry.source or "")
        return f"{entry.name} = {printer.expr(entry.value, depth, COALESCE)}"

    return render
