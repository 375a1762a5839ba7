"""Hypothesis strategies: syntactically valid `.rw` text with varied layout, and edits of it.

`rule_files()` draws whole files (rules in both forms, constraints, passes, uses, includes)
written with random spacing, redundant parentheses, lists and argument lists broken over
lines, expressions broken after an operator, blocks written on one line, `;` separators
(also between declarations), blank lines, and comments: on their own lines, after code, and
after an operator where an expression breaks. Every drawn text parses; the checker is not involved,
so names and ops need not make sense.
"""

from __future__ import annotations

import re

from hypothesis import strategies as st

NAMES = ("x", "y", "w", "b", "t", "k", "mu", "eps", "conv", "xs", "_z", "to_x", "alpha")
OPS = ("Relu", "Conv", "Add", "Mul", "com.microsoft.Gelu", "ai.onnx.ml.Scaler", "Transpose")
FUNCS = ("rank", "shape", "sqrt", "reshape", "is_const", "take", "f")
ATTRS = ("axis", "perm", "to", "alpha", "mode", "from")
COMMENT_TEXT = st.text(
    alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=12
).map(lambda s: "#" + s.rstrip())


@st.composite
def space(draw: st.DrawFn) -> str:
    """Optional horizontal whitespace."""
    return draw(st.sampled_from(["", " ", "  "]))


@st.composite
def sep(draw: st.DrawFn, indent: str = "    ") -> str:
    """A list separator: a comma, maybe followed by a line break (and maybe a comment)."""
    if draw(st.booleans()):
        return ", "
    comment = draw(COMMENT_TEXT) if draw(st.booleans()) else ""
    return "," + (" " + comment if comment else "") + "\n" + indent


@st.composite
def operator_break(draw: st.DrawFn) -> str:
    """What follows a binary operator: a space, or a line break, maybe after a comment."""
    kind = draw(st.sampled_from(["space", "space", "break", "comment"]))
    if kind == "space":
        return " "
    comment = f"  {draw(COMMENT_TEXT)}" if kind == "comment" else ""
    return comment + "\n      "


def bracketed(draw: st.DrawFn, open_: str, close: str, items: list[str]) -> str:
    if not items:
        return open_ + close
    text = items[0]
    for item in items[1:]:
        text += draw(sep()) + item
    trailing = draw(st.sampled_from(["", ",", ",\n  "])) if len(items) > 0 else ""
    return open_ + text + trailing + close


@st.composite
def literal(draw: st.DrawFn, depth: int = 0) -> str:
    """A literal as the match side accepts it."""
    kind = draw(
        st.sampled_from(
            ["int", "float", "neg", "string", "bool", "list"] if depth < 2 else ["int", "float"]
        )
    )
    if kind == "int":
        return str(draw(st.integers(0, 10**6)))
    if kind == "float":
        value = draw(st.floats(0, 1e6, allow_nan=False, allow_infinity=False))
        return draw(st.sampled_from([repr(value), f"{value:.3e}", f"{value:.2f}"]))
    if kind == "neg":
        return "-" + draw(st.sampled_from(["1", "2.5", "1e-5"]))
    if kind == "string":
        return '"' + draw(st.sampled_from(["", "float", 'a\\"b', "x\\\\y", "tab\\t"])) + '"'
    if kind == "bool":
        return draw(st.sampled_from(["true", "false"]))
    items = [draw(literal(depth + 1)) for _ in range(draw(st.integers(0, 3)))]
    return bracketed(draw, "[", "]", items)


@st.composite
def expression(draw: st.DrawFn, depth: int = 0) -> str:
    """Any expression (where, let, alias source)."""
    if depth >= 3:
        return draw(st.one_of(st.sampled_from(NAMES[:-1]), literal(2), st.just("none")))
    kind = draw(
        st.sampled_from(
            [
                "atom",
                "atom",
                "binary",
                "compare",
                "bool",
                "not",
                "unary",
                "call",
                "attr",
                "index",
                "slice",
                "cond",
                "coalesce",
                "paren",
                "list",
            ]
        )
    )

    def sub() -> str:
        return draw(expression(depth + 1))

    s = draw(space())
    if kind == "atom":
        return draw(st.one_of(st.sampled_from(NAMES[:-1]), literal(), st.just("none")))
    if kind == "binary":
        op = draw(st.sampled_from(["+", "-", "*", "/", "//", "%", "**"]))
        brk = draw(operator_break())
        left, right = _atomic(sub()), _atomic(sub())
        return f"({left} {op}{brk}{right})" if draw(st.booleans()) else f"{left} {op} {right}"
    if kind == "compare":
        op = draw(st.sampled_from(["==", "!=", "<", "<=", ">", ">=", "in", "not in"]))
        return f"({_atomic(sub())} {op} {_atomic(sub())})"
    if kind == "bool":
        op = draw(st.sampled_from(["and", "or"]))
        return f"({sub()} {op}{draw(operator_break())}{sub()})"
    if kind == "not":
        return f"not {_atomic(sub())}"
    if kind == "unary":
        return draw(st.sampled_from(["-", "+"])) + s + _atomic(sub())
    if kind == "call":
        args = [sub() for _ in range(draw(st.integers(0, 3)))]
        if draw(st.booleans()):
            args.append(f"{draw(st.sampled_from(ATTRS))}{s}={s}{sub()}")
        return draw(st.sampled_from(FUNCS)) + bracketed(draw, "(", ")", args)
    if kind == "attr":
        return f"{draw(st.sampled_from(NAMES[:-1]))}.{draw(st.sampled_from(ATTRS))}"
    if kind == "index":
        return f"{_atomic(sub())}[{sub()}]"
    if kind == "slice":
        parts = [draw(st.sampled_from(["", "1", "-1", "k"])) for _ in range(3)]
        text = f"{parts[0]}:{parts[1]}" + (f":{parts[2]}" if draw(st.booleans()) else "")
        return f"{draw(st.sampled_from(NAMES[:-1]))}[{text}]"
    if kind == "cond":
        return f"({sub()} if {sub()} else {sub()})"
    if kind == "coalesce":
        return f"({_atomic(sub())} ?? {_atomic(sub())})"
    if kind == "paren":
        return f"({s}{sub()}{s})"
    return bracketed(draw, "[", "]", [sub() for _ in range(draw(st.integers(0, 3)))])


def _atomic(text: str) -> str:
    """Parenthesize unless `text` is obviously an atom."""
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*|[0-9.]+", text):
        return text
    return f"({text})"


@st.composite
def match_line(draw: st.DrawFn) -> str:
    outputs = [draw(st.sampled_from([*NAMES, "_"])) for _ in range(draw(st.integers(1, 3)))]
    if draw(st.integers(0, 5)) == 0:
        outputs.append("...")
    if draw(st.booleans()):
        op = "_"
    else:
        op = " | ".join(draw(st.sampled_from(OPS)) for _ in range(draw(st.integers(1, 2))))
    attrs = ""
    if draw(st.booleans()):
        entries = []
        for _ in range(draw(st.integers(0, 3))):
            value = draw(st.one_of(st.sampled_from(NAMES), literal(), st.just("none")))
            entries.append(
                draw(st.sampled_from(["...", f"{draw(st.sampled_from(ATTRS))} = {value}"]))
            )
        attrs = " " + bracketed(draw, "<", ">", entries)
    inputs = []
    for _ in range(draw(st.integers(0, 4))):
        name = draw(st.sampled_from(NAMES))
        inputs.append(draw(st.sampled_from([name, name + "?", "_", draw(literal())])))
    if draw(st.booleans()):
        inputs.append(draw(st.sampled_from(NAMES)) + "...")
    text = f"{', '.join(outputs)} = {op}{attrs} " + bracketed(draw, "(", ")", inputs)
    if draw(st.booleans()):
        text += f" as {draw(st.sampled_from(NAMES))}"
    return text


@st.composite
def rewrite_line(draw: st.DrawFn, allow_let: bool = True) -> str:
    kind = draw(st.sampled_from(["node", "alias", "let"] if allow_let else ["node", "alias"]))
    if kind == "let":
        return f"let {draw(st.sampled_from(NAMES))} = {draw(expression())}"
    if kind == "alias":
        source = draw(expression())
        if re.match(r"[A-Za-z_][A-Za-z0-9_.]*\s*\(", source):
            source = f"({source})"
        return f"{draw(st.sampled_from(NAMES))} = {source}"
    outputs = [draw(st.sampled_from([*NAMES, "_"])) for _ in range(draw(st.integers(1, 2)))]
    attrs = ""
    if draw(st.booleans()):
        entries = []
        for _ in range(draw(st.integers(0, 2))):
            value = _atomic(draw(expression(1)))
            entries.append(
                draw(
                    st.sampled_from(
                        [
                            f"...{draw(st.sampled_from(NAMES))}",
                            f"{draw(st.sampled_from(ATTRS))} = {value}",
                        ]
                    )
                )
            )
        attrs = " " + bracketed(draw, "<", ">", entries)
    inputs = [draw(expression(1)) for _ in range(draw(st.integers(0, 3)))]
    text = f"{', '.join(outputs)} = {draw(st.sampled_from(OPS))}{attrs} " + bracketed(
        draw, "(", ")", inputs
    )
    if draw(st.booleans()):
        text += f" as {draw(st.sampled_from(NAMES))}"
    return text


@st.composite
def header(draw: st.DrawFn) -> str:
    parts = []
    if draw(st.booleans()):
        parts.append(f"priority {draw(st.integers(-5, 20))}")
    if draw(st.booleans()):
        reqs = []
        for _ in range(draw(st.integers(1, 2))):
            domain = draw(st.sampled_from(["", " com.microsoft", " ai.onnx"]))
            op = draw(st.sampled_from([">=", ">", "<=", "<", "=="]))
            reqs.append(f"opset{domain} {op} {draw(st.integers(1, 21))}")
        parts.append("requires " + ", ".join(reqs))
    if draw(st.booleans()):
        parts.reverse()
    return "".join(" " + p for p in parts)


@st.composite
def block_lines(draw: st.DrawFn, lines: list[str], indent: str) -> str:
    """Statements inside a block: newlines or `;`, with comments and blank lines."""
    text = ""
    for line in lines:
        before = ""
        if draw(st.integers(0, 4)) == 0:
            before += f"{indent}{draw(COMMENT_TEXT)}\n"
        if draw(st.integers(0, 5)) == 0:
            before += "\n"
        after = f"  {draw(COMMENT_TEXT)}" if draw(st.integers(0, 3)) == 0 else ""
        end = "\n" if after or draw(st.integers(0, 4)) else "; "
        text += f"{before}{indent}{line}{after}{end}"
    return text


@st.composite
def section(draw: st.DrawFn, header: str, lines: list[str]) -> str:
    """`header {`, the lines and `}`: one statement per line, or all on one line."""
    if draw(st.integers(0, 3)):
        return f"  {header} {{\n" + draw(block_lines(lines, "    ")) + "  }\n"
    # An empty `where` is dropped by the formatter, leaving a comment after it nothing to
    # follow, so it gets none.
    droppable = header == "where" and not lines
    trailing = f"  {draw(COMMENT_TEXT)}" if draw(st.booleans()) and not droppable else ""
    return f"  {header} {{ " + "; ".join(lines) + " }" + trailing + "\n"


@st.composite
def block_rule(draw: st.DrawFn, name: str) -> str:
    if draw(st.integers(0, 6)) == 0:
        count = f"n {draw(st.sampled_from(['>=', '>', '==']))} {draw(st.integers(1, 5))}"
        match = f"match repeat ({count}) from x to y"
        rewrite = "  rewrite loop\n"
    else:
        match = "match"
        rewrite_lines = [draw(rewrite_line()) for _ in range(draw(st.integers(0, 3)))]
        rewrite = draw(section("rewrite", rewrite_lines))
    match_lines = [draw(match_line()) for _ in range(draw(st.integers(0, 3)))]
    sections = [draw(section(match, match_lines)), rewrite]
    if draw(st.booleans()):
        where = [draw(expression()) for _ in range(draw(st.integers(0, 3)))]
        sections.insert(1, draw(section("where", where)))
    if draw(st.integers(0, 5)) == 0:
        sections.reverse()
    trailing = f"  {draw(COMMENT_TEXT)}" if draw(st.booleans()) else ""
    return f"rule {name}{draw(header())} {{{trailing}\n" + "".join(sections) + "}"


@st.composite
def one_line_rule(draw: st.DrawFn, name: str) -> str:
    rewrite = draw(rewrite_line(allow_let=False))
    text = f"rule {name}{draw(header())}: {draw(match_line())} => {rewrite}"
    if draw(st.booleans()):
        text += f" where {draw(expression())}"
    return text


@st.composite
def constraint_decl(draw: st.DrawFn, name: str) -> str:
    """`constraint name(params) { conditions }`, laid out like a `where` section."""
    params = [draw(st.sampled_from(NAMES)) for _ in range(draw(st.integers(0, 3)))]
    conditions = [draw(expression()) for _ in range(draw(st.integers(1, 3)))]
    head = f"constraint {name}{draw(space())}" + bracketed(draw, "(", ")", params)
    if draw(st.integers(0, 3)):
        trailing = f"  {draw(COMMENT_TEXT)}" if draw(st.booleans()) else ""
        return f"{head} {{{trailing}\n" + draw(block_lines(conditions, "  ")) + "}"
    return f"{head} {{ " + "; ".join(conditions) + " }"


@st.composite
def declaration(draw: st.DrawFn, index: int) -> str:
    kinds = ["block", "line", "line", "pass", "use", "constraint", "include"]
    kind = draw(st.sampled_from(kinds))
    name = f"rule_{index}"
    if kind == "block":
        return draw(block_rule(name))
    if kind == "line":
        return draw(one_line_rule(name))
    if kind == "use":
        return f'use "helpers.mod_{index}"'
    if kind == "constraint":
        return draw(constraint_decl(f"is_{index}"))
    if kind == "include":
        return f'include "../shared_{index}.rw"'
    options = [
        f"{draw(st.sampled_from(ATTRS))} = {draw(st.integers(0, 99))}"
        for _ in range(draw(st.integers(0, 2)))
    ]
    if not options:
        return f"pass p_{index}"
    return f"pass p_{index} " + bracketed(draw, "{ ", " }", options).replace("\n    ", "\n  ")


@st.composite
def rule_files(draw: st.DrawFn) -> str:
    """A whole, syntactically valid file."""
    text = draw(st.sampled_from(["", "# header comment\n", "\n\n"]))
    for index in range(draw(st.integers(1, 4))):
        text += draw(declaration(index))
        text += draw(
            st.sampled_from(["\n", "\n\n", f"  {draw(COMMENT_TEXT)}\n", "\n# between\n", "; "])
        )
    return text


TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9.]+|\.\.\.|=>|[^\sA-Za-z0-9_]|\s+")
NOISE = (
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    "<",
    ">",
    "=",
    "=>",
    ",",
    ";",
    ".",
    "...",
    "?",
    "|",
    "#",
    '"',
    "\\",
    "\n",
    " ",
    "-",
    "+",
    "*",
    "**",
    ":",
    "rule",
    "constraint",
    "include",
    "match",
    "where",
    "rewrite",
    "let",
    "pass",
    "use",
    "repeat",
    "loop",
    "as",
    "not",
    "in",
    "if",
    "else",
    "none",
    "_",
    "1e",
    "0.5",
    "to",
    "\t",
    "\x00",
    "é",
)


@st.composite
def edited(draw: st.DrawFn, base: str) -> str:
    """`base` after a few random character and token edits."""
    text = base
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(
            st.sampled_from(["delete", "insert", "swap", "tok_delete", "tok_dup", "tok_swap"])
        )
        if kind in ("delete", "insert", "swap"):
            if not text:
                text = draw(st.sampled_from(NOISE))
                continue
            i = draw(st.integers(0, len(text) - 1))
            if kind == "delete":
                j = draw(st.integers(i, min(len(text), i + 5)))
                text = text[:i] + text[j:]
            elif kind == "insert":
                text = text[:i] + draw(st.sampled_from(NOISE)) + text[i:]
            else:
                j = draw(st.integers(0, len(text) - 1))
                chars = list(text)
                chars[i], chars[j] = chars[j], chars[i]
                text = "".join(chars)
            continue
        tokens = TOKEN.findall(text)
        if not tokens:
            continue
        i = draw(st.integers(0, len(tokens) - 1))
        if kind == "tok_delete":
            del tokens[i]
        elif kind == "tok_dup":
            tokens.insert(i, tokens[i])
        else:
            j = draw(st.integers(0, len(tokens) - 1))
            tokens[i], tokens[j] = tokens[j], tokens[i]
        text = "".join(tokens)
    return text
