"""The one list of built-in functions and built-in passes that rule files may name.

The loader checks every call in `where`, `let`, attribute values and rewrite inputs against
`SIGNATURES` (name, argument count, keyword names), and every `pass` declaration against
`PASS_OPTIONS`. The evaluator (`rewriter._builtins.BUILTINS`) implements exactly these
names; a test keeps the two in step. LANGUAGE.md documents each entry.

`WHERE_BUILTINS` are callable in `where`; `LET_BUILTINS` in `let`, attribute values and
node inputs of a rewrite. They differ only in `const`, which fixes the dtype of a new
initializer and so means nothing in a condition.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping


@dataclasses.dataclass(frozen=True, slots=True)
class Signature:
    """How a built-in may be called, Python style.

    `params` are the positional parameters, the first `required` of them mandatory;
    `variadic` accepts any number of further positional arguments. `keywords` are the
    names that may be passed as `name = value` (positional parameters or keyword-only ones).
    """

    name: str
    params: tuple[str, ...]
    required: int
    variadic: bool = False
    keywords: tuple[str, ...] = ()
    summary: str = ""

    @property
    def usage(self) -> str:
        """The call as documented: `all_close(a, b, rtol, atol)`."""
        parts = list(self.params)
        if self.variadic:
            parts.append("...")
        parts.extend(f"{k} = ..." for k in self.keywords if k not in self.params)
        return f"{self.name}({', '.join(parts)})"


def _sig(
    usage: str, required: int, summary: str, *keywords: str, variadic: bool = False
) -> Signature:
    name, _, rest = usage.partition("(")
    params = tuple(p.strip() for p in rest.rstrip(")").split(",") if p.strip())
    return Signature(name, params, required, variadic, keywords, summary)


_ALL = (
    # facts about matched values
    _sig("is_const(v)", 1, "every argument is a constant (none is not)", variadic=True),
    _sig("value(v)", 1, "a constant's contents as a tensor"),
    _sig("is_scalar(v)", 1, "a constant with exactly one element, any rank"),
    _sig("uses(v)", 1, "how many node inputs and graph outputs use a value"),
    _sig(
        "lower_bound(v)",
        1,
        "the smallest element v can hold, from its producers (sizes from Shape/Size are >= 0)",
    ),
    _sig("rank(v)", 1, "number of dimensions"),
    _sig("shape(v)", 1, "list of dims: ints, symbol strings, or none when unknown"),
    _sig("has_static_shape(v)", 1, "every dim is a known int"),
    _sig("numel(v)", 1, "number of elements (static shape or constant)"),
    _sig("size(v)", 1, "the same as `numel`"),
    _sig("dtype(v)", 1, 'ONNX dtype name: "float", "float16", "int64", ...'),
    _sig(
        "opset(domain)", 0, "the model's opset version for a domain (0 if not imported)", "domain"
    ),
    _sig(
        "target_opset(domain)",
        0,
        "the opset a --target-opset conversion heads for (the model's own without one)",
        "domain",
    ),
    # numbers and lists
    _sig("len(x)", 1, "length of a list, or the first dim of a tensor"),
    _sig("abs(x)", 1, "absolute value, elementwise"),
    _sig("min(x)", 1, "smallest element of one list or tensor, or of several", variadic=True),
    _sig("max(x)", 1, "largest element of one list or tensor, or of several", variadic=True),
    _sig("prod(x)", 1, "product of the elements (of one list, or of several)", variadic=True),
    _sig("sum(x)", 1, "sum of the elements (of one list, or of several)", variadic=True),
    _sig(
        "all_close(a, b, rtol, atol)", 2, "numpy.allclose with rtol 1e-5, atol 1e-8", "rtol", "atol"
    ),
    _sig("normalize_axis(axis, rank)", 2, "a negative axis counted from the end"),
    _sig("float(x)", 1, "a float (a one-element tensor too)"),
    _sig("int(x)", 1, "an int (a one-element tensor too)"),
    _sig("any(x)", 1, "some element is true"),
    _sig("all(x)", 1, "every element is true"),
    _sig("range(start, stop, step)", 1, "range(stop) or range(start, stop[, step]): int list"),
    _sig("sort(x)", 1, "the elements of a list or 1-D tensor, ascending, as a list"),
    _sig("setdiff(a, b)", 2, "the elements of a not in b, ascending, as a list"),
    _sig("same(a, b)", 2, "three-valued equality as a function"),
    _sig("static_or(dims, fill)", 2, "a shape with every unknown or symbolic dim replaced by fill"),
    _sig("count_unknown(dims)", 1, "how many dims of a shape are unknown or symbolic"),
    _sig(
        "reshape_dims(target, source)",
        2,
        "a Reshape shape input giving `target` from `source`: static dims, 0 where a symbolic "
        "dim equals source's at the same index, one -1; none when that cannot express it",
    ),
    # elementwise math
    _sig("sqrt(x)", 1, "square root, elementwise"),
    _sig("exp(x)", 1, "e ** x, elementwise"),
    _sig("log(x)", 1, "natural logarithm, elementwise"),
    _sig("sign(x)", 1, "-1, 0 or 1, elementwise"),
    _sig("signbit(x)", 1, "true where the sign bit is set (negatives and -0.0), elementwise"),
    _sig("tanh(x)", 1, "hyperbolic tangent, elementwise"),
    _sig("erf(x)", 1, "error function, elementwise"),
    _sig("reciprocal(x)", 1, "1 / x, keeping the dtype"),
    _sig("clip(x, lo, hi)", 1, "clip to [lo, hi]; a missing bound is open", "lo", "hi"),
    _sig("where(cond, a, b)", 3, "elementwise choice"),
    # building tensors
    _sig("reshape(x, shape)", 2, "reshape; -1 infers one dim"),
    _sig("transpose(x, perm)", 1, "permute axes; reverses them without perm", "perm"),
    _sig("concat(items, axis)", 1, "concat([a, b, ...], axis = 0)", "axis"),
    _sig("stack(items, axis)", 1, "stack([a, b, ...], axis = 0) along a new axis", "axis"),
    _sig("expand_dims(x, axis)", 2, "insert size-1 axes; axis may be a list", "axis"),
    _sig("squeeze(x, axis)", 1, "drop size-1 axes (all of them without axis)", "axis"),
    _sig("zeros(shape, dtype)", 1, 'zeros, dtype "float" unless given', "dtype"),
    _sig("ones(shape, dtype)", 1, 'ones, dtype "float" unless given', "dtype"),
    _sig(
        "full(shape, value, dtype)", 2, 'a tensor filled with value, "float" unless given', "dtype"
    ),
    _sig("zeros_like(x)", 1, "zeros of x's shape and dtype"),
    _sig("ones_like(x)", 1, "ones of x's shape and dtype"),
    _sig("eye(n, dtype)", 1, 'the n x n identity, "float" unless given', "dtype"),
    _sig("one_hot(indices, depth, dtype)", 2, "a new last axis of size depth", "dtype"),
    _sig("take(a, indices, axis)", 2, "numpy.take; take(p1, p2) composes permutations", "axis"),
    _sig("cast(x, dtype)", 2, 'convert to an ONNX dtype: cast(x, "float16")'),
    _sig("const(v, dtype)", 2, 'a tensor of exactly that dtype: const(0, "int64")'),
    _sig("arange(start, stop, step)", 1, "numpy.arange, int64 unless dtype given", "dtype"),
    _sig("flip(x, axis)", 1, "reverse along axis (all axes without it)", "axis"),
    _sig("pad(x, pads, value)", 2, "constant padding with ONNX pads [b1, ..., e1, ...]"),
)

SIGNATURES: Mapping[str, Signature] = {s.name: s for s in _ALL}
"""Every built-in function, by name."""

LET_ONLY = frozenset({"const"})
"""Built-ins that only make sense where a rewrite builds values."""

LET_BUILTINS: frozenset[str] = frozenset(SIGNATURES)
"""Functions callable in `let`, rewrite attribute values and rewrite node inputs."""

WHERE_BUILTINS: frozenset[str] = LET_BUILTINS - LET_ONLY
"""Functions callable in `where`."""

PASS_OPTIONS: Mapping[str, Mapping[str, str]] = {
    "fold_constants": {"max_output_bytes": "largest tensor a fold may produce, in bytes"},
    "eliminate_dead_code": {},
    "eliminate_common_subexpressions": {},
    "roll_loops": {
        "min_repeats": "fewest identical blocks worth a Loop",
        "min_block_nodes": "fewest nodes in one block",
    },
    "unroll_loops": {"max_trip_count": "largest constant trip count to unroll"},
    "outline_functions": {"min_repeats": "fewest copies of a subgraph worth a function"},
}
"""Built-in passes and their options (each option takes a non-negative integer)."""

PASS_OPTION_MINIMUMS: Mapping[tuple[str, str], int] = {
    ("roll_loops", "min_repeats"): 2,
    ("roll_loops", "min_block_nodes"): 1,
    ("unroll_loops", "max_trip_count"): 1,
    ("outline_functions", "min_repeats"): 2,
}
"""The smallest value a pass option takes where 0 is not meaningful (others: 0)."""

__all__ = [
    "LET_BUILTINS",
    "LET_ONLY",
    "PASS_OPTIONS",
    "PASS_OPTION_MINIMUMS",
    "SIGNATURES",
    "WHERE_BUILTINS",
    "Signature",
]
