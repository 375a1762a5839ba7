"""The canonical layout of `.rw` files (`rewrite fmt`).

The formatter prints the AST, so formatting never changes what a file means
(`parse(text) == parse(format_file(text))`), and re-inserts the comments:

* Two-space indentation per block level, one statement per line, single spaces around
  `=`, binary operators and `|`, `Op <attrs> (inputs)` as in ONNX's text format, minimal
  parentheses. One-line rules stay one line; block rules print their sections in the order
  match, where, rewrite; `priority` comes before `requires`, then `assumes` (finite before
  nonempty, one list), then `approximate`.
* Numbers keep the digits the source wrote (`1e-5`, `3.`); only the spacing changes.
* A bracketed list whose items start on different lines is "exploded": one item per line,
  each followed by a comma, which keeps comments on those lines beside their items.
* A comment alone on its line stays on its own line before the statement that follows it;
  a comment after code stays after the code it follows: the last statement, `}` or list
  item on its line. A comment after an operator keeps the expression's line break there,
  with the rest of the expression on continuation lines one level deeper. Any other
  comment inside a statement printed on one line moves to its own line just before it.
  Sections printed in canonical order take their comments along.
* Blank lines between statements are kept (runs collapse to one).

Formatting is idempotent: formatting its own output changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rewriter._errors import Span
from rewriter.dsl import _ast as ast
from rewriter.dsl._parser import parse
from rewriter.dsl._transform import is_op_name
from rewriter.rules import ExprPrinter, format_const

_INDENT = "  "
# What may stand between code and a comment after it that is still its own: separators,
# and closing parentheses the code's span leaves out (`where { (a)  # c`). Before the
# closer of a list, only separators: a comment after the closer follows what it closes.
_AFTER_CODE = " \t\f\r;,)"
_AFTER_ITEM = " \t\f\r,"


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
        # Comments on this line or before it are not flushed (they belong to a section that
        # is printed later: sections are printed in canonical order, not source order).
        self.floor = 0
        self.printer = ExprPrinter(self._group, self._line_break)

    def run(self) -> str:
        for item in self.file.items:
            self._item(item)
        self._flush_comments(len(self.source_lines) + 1, 0)
        while self.out and not self.out[-1].strip():
            self.out.pop()
        return "\n".join(self.out) + "\n" if self.out else ""

    # -- emission ------------------------------------------------------------------------------

    def _emit(self, unit: Span, depth: int, text: str) -> None:
        """Emit one unit (text may hold several lines) written at `unit` in the source.

        Comments before the unit go before it; comments inside it that printing did not
        place go before it too. A comment after its last token stays at its end, unless more
        code follows on that line: then the comment belongs to that code (`a; b  # on b`).
        """
        first, last = unit.line, unit.end_line
        self._flush_comments(first, depth)
        self._blank_line_before(first)
        inner = self._unplaced_comments(first, last - 1)
        trailing = self._trailing_comment(unit)
        for comment in inner:
            self.out.append(_INDENT * depth + comment.text)
        lines = text.split("\n")
        lines[0] = _INDENT * depth + lines[0]
        if trailing is not None:
            lines[-1] += "  " + trailing.text
        self.out.extend(lines)
        self.last_line = max(self.last_line, last)
        self.block_just_opened = text.endswith("{")

    def _close(self, block: Span, depth: int) -> None:
        """Emit a block's `}` (the end of `block`), after the comments left inside the block."""
        line = block.end_line
        self._flush_comments(line, depth + 1)
        self.block_just_opened = True  # no blank line before `}`
        self._emit(Span(block.path, line, block.end_col - 1, line, block.end_col), depth, "}")
        self.block_just_opened = False

    def _flush_comments(self, before: int, depth: int) -> None:
        for line in sorted(self.comments):
            if line <= self.floor:
                continue
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

    def _trailing_comment(self, code: Span, allowed: str = _AFTER_CODE) -> ast.Comment | None:
        """Take the comment after `code` on its last line, unless other code comes between.

        `allowed` are the characters that may come between and leave the comment to `code`.
        """
        comment = self.comments.get(code.end_line)
        if comment is None:
            return None
        between = self.source_lines[code.end_line - 1][code.end_col - 1 : comment.span.col - 1]
        if between.strip(allowed):
            return None
        return self.comments.pop(code.end_line)

    def _line_break(self, before: Span, after: Span, depth: int) -> str | None:
        """The line break to print between two operands, or None to print them on one line.

        An expression is printed on one line, except where a comment was written between
        `before` and `after` (after an operator, at the end of its line): there the break
        stays, with the comment, and the rest continues at `depth`.
        """
        start = (before.end_line, before.end_col)
        found = [
            comment
            for line, comment in sorted(self.comments.items())
            if start <= (line, comment.span.col) and line < after.line
        ]
        if not found:
            return None
        indent = _INDENT * depth
        text = ""
        for comment in found:
            del self.comments[comment.span.line]
            own_line = not self.source_lines[comment.span.line - 1][: comment.span.col - 1].strip()
            text += f"\n{indent}{comment.text}" if own_line or text else f"  {comment.text}"
        return text + "\n" + indent

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
            next_line = spans[position + 1].line if position + 1 < len(spans) else closer_line
            if next_line == span.end_line:
                trailing = None
            elif next_line is None:  # the closer's line is not known: it may be this one
                trailing = self._trailing_comment(span, _AFTER_ITEM)
            else:
                trailing = self._trailing_comment(span)
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
        elif isinstance(item, ast.Constraint):
            self._constraint(item)
        elif isinstance(item, ast.PassDecl):
            self._pass(item)
        elif isinstance(item, ast.IncludeDecl):
            self._emit(item.span, 0, f"include {format_const(item.path)}")
        elif isinstance(item, ast.ParamDecl):
            self._emit(item.span, 0, f"param {item.name} = {self.printer.expr(item.value, 0)}")
        else:
            self._emit(item.span, 0, f"use {format_const(item.module)}")

    def _constraint(self, constraint: ast.Constraint) -> None:
        """`constraint name(a, b) {`, one condition per line, `}` (like a `where` block)."""
        renderers = [_bind_name(param.name) for param in constraint.params]
        spans = [param.span for param in constraint.params]
        params = self._group("(", ")", renderers, spans, None, 0)
        units = [(e.span, _bind_expr(self.printer, e)) for e in constraint.conditions]
        self._block(f"constraint {constraint.name}{params} {{", constraint.span, units, 0)

    def _pass(self, decl: ast.PassDecl) -> None:
        text = f"pass {decl.name}"
        spans = decl.option_spans or tuple(value.span for _, value in decl.options)
        if not decl.options:
            self._emit(decl.span, 0, text)
            return
        if len({s.line for s in spans}) == 1:
            options = [f"{key} = {self.printer.expr(value, 1)}" for key, value in decl.options]
            self._emit(decl.span, 0, f"{text} {{ {', '.join(options)} }}")
            return
        self._emit(self._header_span(decl.span), 0, text + " {")
        for span, (key, value) in zip(spans, decl.options, strict=True):
            option = Span(span.path, span.line, span.col, value.span.end_line, value.span.end_col)
            self._emit(option, 1, f"{key} = {self.printer.expr(value, 1)}")
        self._close(decl.span, 0)

    def _rule(self, rule: ast.Rule) -> None:
        header = f"rule {rule.name}"
        if rule.priority:
            header += f" priority {rule.priority}"
        if rule.requires:
            header += " requires " + ", ".join(_requirement(r) for r in rule.requires)
        assumed = [
            name
            for name, on in (("finite", rule.assumes_finite), ("nonempty", rule.assumes_nonempty))
            if on
        ]
        if assumed:
            header += " assumes " + ", ".join(assumed)
        if rule.approximate is not None:
            header += f" approximate {rule.approximate}"
        if rule.one_line:
            self._emit(rule.span, 0, header + ": " + self._one_line_body(rule))
            return
        header_span = self._header_span(rule.span)
        self._emit(header_span, 0, header + " {")
        spans = {"match": rule.match.span, "rewrite": rule.rewrite.span}
        if rule.where:
            spans["where"] = rule.where_span
        for kind in ("match", "where", "rewrite"):
            if kind not in spans:
                continue
            # Sections print in this order whatever the source's. Each takes its comments
            # and blank lines along: those between it and the section (or header) before
            # it in the source.
            earlier = [s.end_line for s in spans.values() if s.line < spans[kind].line]
            self.floor = max(earlier, default=header_span.end_line)
            self.last_line = self.floor
            self._section(rule, kind)
        self.floor = 0
        self.last_line = max(s.end_line for s in spans.values())
        self._close(rule.span, 0)

    def _header_span(self, start: Span) -> Span:
        """The span from `start` to the `{` that opens its block (comments skipped)."""
        line, col = start.line, start.col
        while line <= len(self.source_lines):
            text = self.source_lines[line - 1]
            comment = text.find("#", col - 1)
            brace = text.find("{", col - 1, comment if comment >= 0 else len(text))
            if brace >= 0:
                return Span(start.path, start.line, start.col, line, brace + 2)
            line, col = line + 1, 1
        raise AssertionError("a block always has its `{`")

    def _one_line_body(self, rule: ast.Rule) -> str:
        pattern = rule.match.patterns[0]
        assert isinstance(rule.rewrite, ast.RewriteBlock), "a one-line rule has a rewrite line"
        text = f"{self._pattern(pattern, 0)} => {self._rewrite_stmt(rule.rewrite.stmts[0], 0)}"
        for expr in rule.where:
            text += f" where {self.printer.expr(expr, 0)}"
        return text

    # -- sections ------------------------------------------------------------------------------

    def _section(self, rule: ast.Rule, kind: str) -> None:
        if kind == "match":
            self._match(rule.match, 1)
        elif kind == "where":
            self._where(rule, 1)
        else:
            self._rewrite(rule.rewrite, 1)

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
            self._emit(rewrite.span, depth, "rewrite loop")
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
        self._emit(self._header_span(span), depth, header)
        for unit_span, render in units:
            self._emit(unit_span, depth + 1, render(depth + 1))
        self._close(span, depth)

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
        if not attrs and isinstance(stmt.op, ast.OpRef) and not is_op_name(_op(stmt.op)):
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


def _op(ref: ast.OpRef | ast.NodeCopy) -> str:
    if isinstance(ref, ast.NodeCopy):
        return f"...{ref.node}"
    return f"{ref.domain}.{ref.op_type}" if ref.domain else ref.op_type


def _output(output: ast.OutputPattern) -> str:
    return output.name if isinstance(output, ast.OutputVar) else "_"


def _bind_expr(printer: ExprPrinter, expr: ast.Expr) -> Callable[[int], str]:
    def render(depth: int) -> str:
        return printer.expr(expr, depth)

    return render


def _bind_name(name: str) -> Callable[[int], str]:
    def render(depth: int) -> str:
        return name

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
        return f"{entry.name} = {printer.attribute_value(entry.value, depth)}"

    return render
