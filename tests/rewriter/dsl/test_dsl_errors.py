"""Golden diagnostics: each malformed rule file and the exact first error line it produces.

Every diagnostic also shows the source line with a caret under the offending text.
"""

from __future__ import annotations

import pytest

from rewriter._errors import Diagnostic, RuleError, RuleSyntaxError
from rewriter.api import check_files as check
from rewriter.dsl import parse

# (source, first error line). Syntax errors first, then the semantic checks.
CASES: list[tuple[str, str]] = [
    (
        "rule r: y = Mul (x, 1.0) -> y = x",
        "<string>:1:26: error: expected `=>` after pattern, found `->`",
    ),
    (
        "rule r: y = Mul (x, 1.0)\n",
        "<string>:1:25: error: expected `=>` after pattern, found the end of the line",
    ),
    (
        "rule r: y = Mul (x, 1.0) =>\n",
        "<string>:1:28: error: expected a name or `_` after `=>`, found the end of the file",
    ),
    (
        "rule r {\n  match {\n    y = Relu (x\n  }\n}\n",
        "<string>:4:3: error: expected `)`, `,`, `...` or `?`, found `}`",
    ),
    (
        "rule r {\n  match {\n    y Relu (x)\n  }\n}\n",
        "<string>:3:7: error: expected `,` or `=` after `y`, found `Relu`",
    ),
    (
        "rule r {\n  match {\n    y = (x)\n  }\n}\n",
        "<string>:3:9: error: expected a name or `_` after `=`, found `(`",
    ),
    (
        "rule r {\n  match {\n    y = Relu (x)\n  }\n  where {\n    rank(x) ==\n  }\n  rewrite {\n    y = x\n  }\n}\n",
        "<string>:6:13: error: expected an expression after `==`, found the end of the line",
    ),
    (
        "rule r {\n  match {\n    y = Relu (x)\n  }\n  where {\n    rank(x) = 3\n  }\n  rewrite {\n    y = x\n  }\n}\n",
        "<string>:6:13: error: expected `}` or an operator, found `=` (compare with `==`)",
    ),
    (
        "rule r {\n  match {\n    y = Relu (x)\n  }\n  where {\n    a +\n  }\n  rewrite {\n    y = x\n  }\n}\n",
        "<string>:6:7: error: expected an expression after `+`, found the end of the line",
    ),
    (
        "rule { }\n",
        "<string>:1:6: error: expected a name after `rule`, found `{`",
    ),
    (
        "rule r\n",
        "<string>:1:7: error: expected `{`, `:`, `approximate`, `assumes`, `priority` or `requires`, found the end of the line",
    ),
    (
        "rule r priority high: y = Relu (x) => y = x\n",
        "<string>:1:17: error: expected an integer or `-` after `priority`, found `high`",
    ),
    (
        "rule r requires version >= 1: y = Relu (x) => y = x\n",
        "<string>:1:17: error: expected `opset` in `requires`, found `version`",
    ),
    (
        "rule r requires opset != 1: y = Relu (x) => y = x\n",
        "<string>:1:23: error: `requires` compares with >=, >, <=, < or ==, not `!=`",
    ),
    (
        "rule r priority 1 priority 2: y = Relu (x) => y = x\n",
        "<string>:1:19: error: `priority` is given twice",
    ),
    (
        "rule r assumes positive: y = Relu (x) => y = x\n",
        "<string>:1:16: error: expected `finite` or `nonempty` after `assumes`, found `positive`",
    ),
    (
        "rule r assumes finite assumes finite: y = Relu (x) => y = x\n",
        "<string>:1:31: error: `assumes finite` is given twice",
    ),
    (
        "rule r assumes nonempty, finite, nonempty: y = Relu (x) => y = x\n",
        "<string>:1:34: error: `assumes nonempty` is given twice",
    ),
    (
        "rule r approximate psnr >= 30: y = Relu (x) => y = x\n",
        "<string>:1:20: error: unknown accuracy metric `psnr` (known: snr, cosine, max_rel, max_abs)",
    ),
    (
        "rule r approximate snr <= 30: y = Relu (x) => y = x\n",
        "<string>:1:24: error: `approximate snr` takes `>=` (a bound the result must meet)",
    ),
    (
        "rule r approximate snr >= 30 approximate snr >= 20: y = Relu (x) => y = x\n",
        "<string>:1:30: error: `approximate` is given twice",
    ),
    (
        "use helpers\n",
        "<string>:1:5: error: expected a string after `use`, found `helpers`",
    ),
    (
        "pass fold_constants { max_output_bytes = }\n",
        "<string>:1:42: error: expected an expression after `=`, found `}`",
    ),
    (
        'rule r: y = Relu (x) => y = x where dtype(x) == "float\n',
        "<string>:1:49: error: this string is not closed before the end of the line",
    ),
    (
        'rule r: y = Relu (x) => y = "a\\qb"\n',
        '<string>:1:31: error: unknown escape `\\q` in string; use \\\\ \\" \\n \\t \\r or \\0',
    ),
    (
        "rule r: y = Relu (x) => y = x $\n",
        "<string>:1:31: error: unexpected character `$`",
    ),
    (
        "rule r: y = Relu <alpha 1> (x) => y = x\n",
        "<string>:1:25: error: expected `=` after attribute name `alpha`, found `1`",
    ),
    (
        "rule r: y = Relu <alpha = > (x) => y = x\n",
        "<string>:1:27: error: expected a name or a literal after `=`, found `>`",
    ),
    (
        "rule r: y = Relu (f(x)) => y = x\n",
        "<string>:1:20: error: expected `)`, `,`, `...` or `?`, found `(`",
    ),
    (
        "rule r: y = Relu (x) => y = Relu (x, alpha = 1)\n",
        "<string>:1:46: error: node inputs are positional; `alpha = ...` looks like an attribute: put it in `<...>` after the op name",
    ),
    (
        "rule r: y = Relu (x) => y = f(a = 1, x)\n",
        "<string>:1:38: error: a positional argument follows a keyword argument",
    ),
    (
        "rule r: y = Relu (x) => y, z = x\n",
        "<string>:1:28: error: an alias `y = x` has one target; a node line has an op and `(...)`",
    ),
    (
        "rule r: y = Relu (x) => y = x as n\n",
        "<string>:1:34: error: `as` names a node, but this line creates none (it is an alias)",
    ),
    (
        "rule r: y = Relu (x) => y = 1e999\n",
        "<string>:1:29: error: number `1e999` is too large",
    ),
    (
        "rule r2: y = Mul (x, c) => y = Reshape (x, [99999999999999999999999])\n",
        "<string>:1:45: error: integer `99999999999999999999999` is outside the int64 range [-9223372036854775808, 9223372036854775807]",
    ),
    (
        "rule r: y = Relu (x) => y = x where rank(x) == 9223372036854775808\n",
        "<string>:1:48: error: integer `9223372036854775808` is outside the int64 range [-9223372036854775808, 9223372036854775807]",
    ),
    (
        "rule r: y = Relu (x) => y = x where rank(x) == - -9223372036854775808\n",
        "<string>:1:48: error: integer `9223372036854775808` is outside the int64 range [-9223372036854775808, 9223372036854775807]",
    ),
    (
        "rule r: y = Add (x, -9223372036854775809) => y = x\n",
        "<string>:1:21: error: integer `-9223372036854775809` is outside the int64 range [-9223372036854775808, 9223372036854775807]",
    ),
    (
        "rule r {\n  match {\n    y = Relu <alpha = 18446744073709551616> (x)\n  }\n  rewrite {\n    y = x\n  }\n}\n",
        "<string>:3:23: error: integer `18446744073709551616` is outside the int64 range [-9223372036854775808, 9223372036854775807]",
    ),
    (
        "rule r priority 9223372036854775808: y = Relu (x) => y = x\n",
        "<string>:1:17: error: integer `9223372036854775808` is outside the int64 range [-9223372036854775808, 9223372036854775807]",
    ),
    (
        "rule r {\n  match {\n    y = Relu (x)\n  }\n  match {\n    y = Relu (x)\n  }\n  rewrite {\n    y = x\n  }\n}\n",
        "<string>:5:3: error: a rule has one `match` section; this is a second",
    ),
    (
        "rule r {\n  match {\n    y = Relu (x)\n  }\n}\n",
        "<string>:1:8: error: this rule has no `rewrite` section",
    ),
    (
        "rule r {\n  match repeat (n in 3) from x to y {\n    y = Relu (x)\n  }\n  rewrite loop\n}\n",
        "<string>:2:19: error: `repeat` compares with >=, >, ==, <= or <, not `in`",
    ),
    (
        "rule r {\n  match {\n    y = Relu (x)\n  }\n  rewrite {\n    y = (a + b\n  }\n}\n",
        "<string>:7:3: error: expected `)`, found `}`",
    ),
    (
        "rule r {\n  match {\n    y = Relu (x)\n  }\n  where {\n    x not y\n  }\n  rewrite {\n    y = x\n  }\n}\n",
        "<string>:6:11: error: expected `in` after `not`, found `y`",
    ),
    (
        "rule r: y = Relu (x) => y = x; rule s: y = Relu (x) =>; y = x\n",
        "<string>:1:55: error: expected a name or `_` after `=>`, found `;`",
    ),
    (
        "rule r: y = Rleu (x) => y = x\n",
        "<string>:1:13: error: unknown op `Rleu`; did you mean `Relu`?",
    ),
    (
        "rule r: y = ai.onnx.ml.Relu (x) => y = x\n",
        "<string>:1:13: error: unknown op `Relu` in domain `ai.onnx.ml`",
    ),
    (
        "rule r {\n  match {\n    y = LeakyRelu <alpah = a> (x)\n  }\n  rewrite {\n    y = x\n  }\n}\n",
        "<string>:3:20: error: `LeakyRelu` has no attribute `alpah`; did you mean `alpha`?",
    ),
    (
        "rule r requires opset >= 7: y = Mul <axis = 1> (x, 1) => y = x\n",
        "<string>:1:38: error: `Mul` has no attribute `axis` at opset >= 7 (this rule's `requires`); only Mul-1, Mul-6 declared it",
    ),
    (
        "rule r requires opset >= 7 {\n  match {\n    y = Relu (x)\n  }\n  rewrite {\n    y = Mul <broadcast = 1> (x, x)\n  }\n}\n",
        "<string>:6:14: error: `Mul` has no attribute `broadcast` at opset >= 7 (this rule's `requires`); only Mul-1, Mul-6 declared it",
    ),
    (
        "rule r {\n  match {\n    y = Relu (x, z)\n  }\n  rewrite {\n    y = x\n  }\n}\n",
        "<string>:3:9: error: `Relu` takes 1 input, but this line gives 2 inputs",
    ),
    (
        "rule r {\n  match {\n    y = Add (x)\n  }\n  rewrite {\n    y = x\n  }\n}\n",
        "<string>:3:9: error: `Add` takes 2 inputs, but this line gives 1 input",
    ),
    (
        "rule r {\n  match {\n    y, z = Relu (x)\n  }\n  rewrite {\n    y = x\n  }\n}\n",
        "<string>:3:12: error: `Relu` has 1 output, but this line names 2 outputs",
    ),
    (
        "rule r {\n  match {\n    y = Relu (xs..., x)\n  }\n  rewrite {\n    y = x\n  }\n}\n",
        "<string>:3:15: error: `xs...` takes the rest of the inputs, so it comes last",
    ),
    (
        "rule r {\n  match {\n    y = Relu (x)\n  }\n  rewrite {\n    y = z\n  }\n}\n",
        "<string>:6:9: error: unbound variable `z`: neither the match nor an earlier `let` or rewrite line defines it",
    ),
    (
        "rule r {\n  match {\n    y = Relu (x)\n  }\n  where {\n    rank(q) == 1\n  }\n  rewrite {\n    y = x\n  }\n}\n",
        "<string>:6:10: error: unbound variable `q`: the match does not bind it",
    ),
    (
        "rule r: y = Relu (x) => y = x\n\n\nrule r: y = Relu (x) => y = x\n",
        "<string>:4:6: error: duplicate rule name `r`",
    ),
    (
        'use "helpers"\n',
        '<string>:1:1: error: `use "helpers"` runs Python code, which loads only when Python helpers are allowed (the allow-python option)',
    ),
    (
        "rule r {\n  match {\n    y = Relu (x)\n  }\n  where {\n    foo(x)\n  }\n  rewrite {\n    y = x\n  }\n}\n",
        "<string>:6:5: error: unknown function `foo`",
    ),
    (
        "rule r {\n  match {\n    y = Relu (x)\n  }\n  where {\n    rank(x, x) == 1\n  }\n  rewrite {\n    y = x\n  }\n}\n",
        "<string>:6:5: error: `rank(v)` takes at most 1 argument, got 2",
    ),
    (
        "rule r {\n  match {\n    y = Relu (x)\n  }\n  where {\n    all_close(x, x, tol = 1)\n  }\n  rewrite {\n    y = x\n  }\n}\n",
        "<string>:6:27: error: `all_close` has no keyword `tol` (it accepts rtol, atol)",
    ),
    (
        "rule r {\n  match {\n    y = Relu (x)\n  }\n  where {\n    reshape(x)\n  }\n  rewrite {\n    y = x\n  }\n}\n",
        "<string>:6:5: error: `reshape(x, shape)` needs `shape`",
    ),
    (
        'rule r {\n  match {\n    y = Relu (x)\n  }\n  where {\n    const(x, "float")\n  }\n  rewrite {\n    y = x\n  }\n}\n',
        "<string>:6:5: error: `const` builds rewrite values; use it in `let` or a rewrite line",
    ),
    (
        "pass fold_constant\n",
        "<string>:1:6: error: unknown pass `fold_constant` (built-in passes: eliminate_common_subexpressions, eliminate_dead_code, flatten_concats, fold_constants, inline_constant_ifs, optimize_transposes, outline_functions, roll_loops, unroll_loops)",
    ),
    (
        "pass fold_constants { max_bytes = 3 }\n",
        "<string>:1:23: error: pass `fold_constants` has no option `max_bytes` (it takes `max_output_bytes`, `keep_matmul_scales`)",
    ),
    (
        "pass roll_loops { min_repeats = -3 }\n",
        "<string>:1:33: error: option `min_repeats` takes a non-negative integer",
    ),
    (
        '# x\nrule a: y = LeakyRelu <alpha = "0.1"> (x) => y = Relu (x)\n',
        "<string>:2:32: error: attribute `alpha` takes a number, not the string '0.1'",
    ),
    (
        '# x\nrule a: y = Transpose <perm = [1, "a"]> (x) => y = x\n',
        "<string>:2:31: error: attribute `perm` takes a list of integers, not a list holding the string 'a'",
    ),
    (
        '# x\nrule a: y = Cast <to = "floaty"> (x) => y = x\n',
        '<string>:2:24: error: attribute `to` takes an integer or a dtype name ("float", "int64", ...), not the string \'floaty\'',
    ),
    (
        "pass roll_loops { min_repeats = 1 }\n",
        "<string>:1:33: error: option `min_repeats` of pass `roll_loops` must be at least 2, not 1",
    ),
    (
        "pass unroll_loops { max_trip_count = 0 }\n",
        "<string>:1:38: error: option `max_trip_count` of pass `unroll_loops` must be at least 1, not 0",
    ),
    (
        "rule r {\n  match {\n    y = Relu (x)\n  }\n  rewrite loop\n}\n",
        "<string>:5:3: error: `rewrite loop` needs a `match repeat (...)` block",
    ),
    (
        "rule r {\n  match repeat (n >= 3) from x to y {\n    y = Relu (x)\n  }\n  rewrite {\n    y = x\n  }\n}\n",
        "<string>:2:9: error: a `match repeat` block is rewritten with `rewrite loop`",
    ),
    (
        "rule r {\n  match {\n    y = Relu (x)\n  }\n  rewrite {\n  }\n}\n",
        "<string>:5:3: error: rewrite block is empty",
    ),
    (
        "rule r {\n  match {\n    y = Relu (x)\n  }\n  rewrite {\n    let x = 1\n  }\n}\n",
        "<string>:6:9: error: the rewrite cannot redefine `x`: the match binds it as an input (a value produced outside the match)",
    ),
    (
        "rule r {\n  match {\n    y = Relu (x) as n\n  }\n  rewrite {\n    y = Relu <...m> (x)\n  }\n}\n",
        "<string>:6:15: error: `...m`: `m` is not bound; name a node with `as`",
    ),
    (
        "rule r {\n  match {\n    y = Relu (x) as n\n  }\n  where {\n    x.alpha == 1\n  }\n  rewrite {\n    y = x\n  }\n}\n",
        "<string>:6:5: error: `x` is a value, not a node: `.alpha` reads a node's attribute; name the node with `as`",
    ),
    (
        "rule r {\n  match {\n    y = Relu (x) as n\n  }\n  where {\n    rank(n) == 1\n  }\n  rewrite {\n    y = x\n  }\n}\n",
        "<string>:6:10: error: `n` names a node, not a value; read its attributes as `n.attr`",
    ),
    (
        "rule r {\n  match {\n    y = Relu (x)\n  }\n  where {\n    _ == 1\n  }\n  rewrite {\n    y = x\n  }\n}\n",
        "<string>:6:5: error: `_` is not a value; it only appears in patterns",
    ),
    (
        "rule r {\n  match {\n    y = Relu (x)\n    y = Relu (x)\n  }\n  rewrite {\n    y = x\n  }\n}\n",
        "<string>:4:5: error: `y` is defined by two match lines; a value has one producer",
    ),
    (
        "rule r {\n  match {\n    y, m = Dropout (x)\n  }\n  rewrite {\n    y = Identity (x)\n  }\n}\n",
        "<string>:6:5: error: this line redefines `y, m` from a match line with 2 outputs, but has 1; list as many outputs, or alias values one by one (`y = x`)",
    ),
    (
        "rule r {\n  match {\n    y = Relu (x)\n  }\n  rewrite {\n    y = Relu <alpha = 1> (x)\n  }\n}\n",
        "<string>:6:15: error: `Relu` has no attribute `alpha`",
    ),
    (
        "rule r {\n  match {\n    y = Relu (x)\n  }\n  rewrite {\n    y = Relu <...> (x)\n  }\n}\n",
        "<string>:6:15: error: `...` in a rewrite copies from a node: write `<...name>` with a node named by `as`",
    ),
    (
        "rule r {\n  match {\n    y = Relu (x)\n  }\n  rewrite {\n    x = Relu (y)\n  }\n}\n",
        "<string>:6:5: error: the rewrite cannot redefine `x`: the match binds it as an input (a value produced outside the match)",
    ),
]

# A missing `=` is reported where the text stops making sense: at what follows the name.
MISSING_EQUALS: list[tuple[str, str]] = [
    (
        "rule r { match { y = LayerNormalization <epsilon eps> (x, s, b) } rewrite { y = x } }",
        "<string>:1:50: error: expected `=` after attribute name `epsilon`, found `eps`",
    ),
    (
        "rule r {\n  match {\n    y = LayerNormalization <axis = -1, epsilon eps> (x, s)\n  }\n  rewrite {\n    y = x\n  }\n}\n",
        "<string>:3:48: error: expected `=` after attribute name `epsilon`, found `eps`",
    ),
    (
        "rule r: y = Softmax <axis> (x) => y = x\n",
        "<string>:1:26: error: expected `=` after attribute name `axis`, found `>`",
    ),
    (
        "rule r: y = Softmax <axis: -1> (x) => y = x\n",
        "<string>:1:26: error: expected `=` after attribute name `axis`, found `:`",
    ),
    (
        "rule r {\n  match {\n    y = Relu (x)\n  }\n  rewrite {\n    y = LeakyRelu <alpha 0.1> (x)\n  }\n}\n",
        "<string>:6:26: error: expected `=` after attribute name `alpha`, found `0.1`",
    ),
    (
        "rule r {\n  match {\n    y = Relu (x) as n\n  }\n  rewrite {\n    y = LeakyRelu <...n, alpha 0.1> (x)\n  }\n}\n",
        "<string>:6:32: error: expected `=` after attribute name `alpha`, found `0.1`",
    ),
    (
        'rule r {\n  match {\n    y = Relu (x)\n  }\n  rewrite {\n    y = com.microsoft.Gelu <approximate "tanh"> (x)\n  }\n}\n',
        '<string>:6:41: error: expected `=` after attribute name `approximate`, found string "tanh"',
    ),
    (
        "rule r {\n  match {\n    y = Relu (x)\n  }\n  rewrite {\n    let k 2\n    y = x\n  }\n}\n",
        "<string>:6:11: error: expected `=` after `let k`, found `2`",
    ),
    (
        'rule r {\n  match {\n    y = Relu (x)\n  }\n  where {\n    opset(domain "") >= 13\n  }\n  rewrite {\n    y = x\n  }\n}\n',
        '<string>:6:18: error: expected `)`, `,`, `=` or an operator after `domain`, found string ""',
    ),
    (
        "pass fold_constants { max_output_bytes 1024 }\n",
        "<string>:1:40: error: expected `=` after option `max_output_bytes`, found `1024`",
    ),
]

# Named constraints: their definitions and their calls.
_RULE_CALLING = "rule r {{\n  match {{\n    y = Relu (x)\n  }}\n  where {{\n    {call}\n  }}\n  rewrite {{\n    y = x\n  }}\n}}\n"
CONSTRAINT_CASES: list[tuple[str, str]] = [
    (
        'constraint is_float(x) {\n  dtype(x) == "float"\n}\nconstraint is_float(y) {\n  rank(y) == 1\n}\n',
        "<string>:4:12: error: duplicate constraint name `is_float`",
    ),
    (
        "constraint rank(x) {\n  x != none\n}\n",
        "<string>:1:12: error: constraint `rank` has the name of a built-in function; choose another name",
    ),
    (
        "constraint a(x) {\n  b(x)\n}\nconstraint b(x) {\n  a(x)\n}\n",
        "<string>:5:3: error: recursive constraint: `a` -> `b` -> `a`; a constraint cannot call itself, directly or through others",
    ),
    (
        "constraint a(x) {\n  rank(x) == 1 and not a(x)\n}\n",
        "<string>:2:24: error: recursive constraint: `a` -> `a`; a constraint cannot call itself, directly or through others",
    ),
    (
        'constraint is_float(x) {\n  dtype(y) == "float"\n}\n',
        "<string>:2:9: error: unbound variable `y`: constraint `is_float` sees only its parameters (`x`)",
    ),
    (
        'constraint is_float(x) {\n  dtype(x) == "float" and flaot(x)\n}\n',
        "<string>:2:27: error: unknown function `flaot`; did you mean `float`?",
    ),
    (
        'constraint is_float(x) {\n  const(x, "float") == 1\n}\n',
        "<string>:2:3: error: `const` builds rewrite values; use it in `let` or a rewrite line",
    ),
    (
        'constraint is_float(x, x) {\n  dtype(x) == "float"\n}\n',
        "<string>:1:24: error: parameter `x` is listed twice",
    ),
    (
        "constraint is_float(_) {\n  true\n}\n",
        "<string>:1:21: error: `_` cannot name a parameter; write `_x` for one that is unused",
    ),
    (
        "constraint is_float(x) {\n}\n",
        "<string>:1:12: error: constraint `is_float` has no conditions",
    ),
    (
        "constraint grouped(n) {\n  n.group == 1 and rank(n) == 4\n}\n",
        "<string>:2:25: error: parameter `n` is used both as a node (`n.attr`) and as a value; a parameter is one or the other",
    ),
    (
        'constraint is_float(x) {\n  dtype(x) == "float"\n}\n'
        + _RULE_CALLING.format(call="is_float(x, y)"),
        "<string>:9:5: error: `is_float(x)` takes at most 1 argument, got 2",
    ),
    (
        "constraint same_shape(a, b) {\n  shape(a) == shape(b)\n}\n"
        + _RULE_CALLING.format(call="same_shape(x)"),
        "<string>:9:5: error: `same_shape(a, b)` needs `b`",
    ),
    (
        'constraint is_float(x) {\n  dtype(x) == "float"\n}\n'
        + _RULE_CALLING.format(call="is_float(x, k = 1)"),
        "<string>:9:21: error: `is_float` has no keyword `k` (it accepts no keyword arguments)",
    ),
    (
        _RULE_CALLING.format(call="is_flaot(x)")
        + 'constraint is_float(x) {\n  dtype(x) == "float"\n}\n',
        "<string>:6:5: error: unknown function `is_flaot`; did you mean `is_float`?",
    ),
    (
        "constraint grouped(n) {\n  n.group == 1\n}\n" + _RULE_CALLING.format(call="grouped(x)"),
        "<string>:9:13: error: `x` is a value, but constraint `grouped` reads `n` as a node (`n.attr`); pass a node named with `as`",
    ),
    (
        'constraint is_float(x) {\n  dtype(x) == "float"\n}\nrule r {\n  match {\n    y = Relu (x)\n  }\n  rewrite {\n    let f = is_float(x)\n    y = Identity (f)\n  }\n}\n',
        "<string>:9:13: error: `is_float` is a constraint; call it in a `where` line or in another constraint",
    ),
]


def first_error(text: str) -> Diagnostic:
    """The first error a file produces: its syntax error, else the checker's first error."""
    try:
        file = parse(text)
    except RuleSyntaxError as exc:
        return exc.diagnostics[0]
    errors = [d for d in check([file]) if d.severity == "error"]
    assert errors, "expected an error"
    return errors[0]


def test_the_table_is_large_enough() -> None:
    assert len(CASES) >= 40


_ALL_CASES = CASES + MISSING_EQUALS + CONSTRAINT_CASES


@pytest.mark.parametrize(
    ("text", "expected"), _ALL_CASES, ids=[f"case{i}" for i in range(len(_ALL_CASES))]
)
def test_first_diagnostic_line(text: str, expected: str) -> None:
    diagnostic = first_error(text)
    rendered = diagnostic.render().split("\n")
    assert rendered[0] == expected
    assert rendered[1] == text.split("\n")[diagnostic.span.line - 1]
    caret = rendered[2]
    assert caret.strip().startswith("^")
    assert caret.index("^") == diagnostic.span.col - 1


def test_rule_errors_are_rule_error_subclasses() -> None:
    with pytest.raises(RuleError):
        parse("rule r: y = Mul (x, 1.0) -> y = x")


def _rendered(text: str) -> str:
    with pytest.raises(RuleSyntaxError) as caught:
        parse(text)
    (diagnostic,) = caught.value.diagnostics
    return diagnostic.render()


def test_a_trailing_operator_is_reported_on_its_own_line() -> None:
    text = "rule r {\n  match {\n    y = Relu (x)\n  }\n  rewrite {\n    let k = rank(x) +\n    y = Relu (x)\n  }\n}\n"
    assert _rendered(text) == (
        "<string>:6:21: error: expected an expression after `+`, found the end of the line\n"
        "    let k = rank(x) +\n"
        "                    ^\n"
        "<string>:7:5: note: a line that ends with `+` goes on into the next one, and this line "
        "starts a statement of its own\n"
        "    y = Relu (x)\n"
        "    ^"
    )


def test_an_operator_continuing_onto_a_real_continuation_is_not_blamed() -> None:
    text = 'rule r {\n  match {\n    y = Relu (x)\n  }\n  where {\n    rank(x) == 3 and\n    dtype(x) = "float"\n  }\n  rewrite {\n    y = x\n  }\n}\n'
    assert _rendered(text).split("\n")[0] == (
        "<string>:7:14: error: expected `}` or an operator, found `=` (compare with `==`)"
    )


def test_an_unclosed_bracket_is_shown_where_it_opened() -> None:
    text = "rule r {\n  match {\n    y = Relu (x)\n  }\n  where {\n    rank(x) == (3 + 1\n  }\n  rewrite {\n    y = x\n  }\n}\n"
    assert _rendered(text) == (
        "<string>:7:3: error: expected `)`, found `}`\n"
        "  }\n"
        "  ^\n"
        "<string>:6:16: note: the `(` opened here is not closed\n"
        "    rank(x) == (3 + 1\n"
        "               ^"
    )


def test_an_unclosed_block_is_shown_where_it_opened() -> None:
    text = "rule r {\n  match {\n    y = Relu (x)\n  }\n  rewrite {\n    y = x\n  }\n"
    rendered = _rendered(text).split("\n")
    assert rendered[0] == (
        "<string>:7:4: error: expected `}`, `match`, `rewrite` or `where`, found the end of the file"
    )
    assert rendered[3] == "<string>:1:8: note: the `{` opened here is not closed"
