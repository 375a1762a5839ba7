"""Symbolic dimensions: a small canonical algebra of integer expressions over named dims.

A `DimExpr` is a polynomial with integer coefficients over *atoms*. An atom is a named
symbol (a dim the model declares, `"batch"`, or one onnx's inference invented, `"unk__3"`),
a floor division `floor(n/d)` of a canonical expression by an integer d > 1 that does not
divide it exactly (what Conv, pooling and integer Div leave behind), or the minimum
`min(a, b, ...)` of non-negative expressions none of which is provably the smallest (what
`x[:n]` leaves of a dim that may be shorter than n). Modulo is `a - d*floor(a/d)`, so it
needs no atom of its own.

Invariants:

- Canonical form: terms are kept sorted, with no zero coefficient and each monomial at most
  once; a floor atom's numerator has every coefficient in `[1, d-1]` and its constant in
  `[0, d-1]`, with no common factor with `d` (whole multiples are moved out of the floor),
  and is not itself one floor atom (`floor(floor(n/a)/b)` is `floor(n/(a*b))`).
  Equal canonical forms have equal values, and `str` is canonical: equal forms print the
  same text. Polynomials are equal exactly when their forms are; across floor and min atoms
  some equal values keep different forms (`floor(x/2) + floor((x+1)/2)` is `x`), and such
  dims merely compare unequal, which no fact relies on.
- Every atom denotes a non-negative integer: symbols are sizes, a canonical floor atom's
  numerator has non-negative coefficients over non-negative atoms, and a minimum is built
  only of non-negative expressions. `is_nonnegative` relies on
  it; nothing here creates a symbol for a value that is not a size.
- Text is what rules compare: `to_dim` turns an expression into the `int | str | None` dims
  facts carry (an int, a symbol's own name, or the canonical text such as `"batch*seq"`).
  A symbol whose name is itself spelled like an expression (`"a*b"`) prints as that name, so
  it would compare equal to the product of `a` and `b`; exporters spell dims this way only
  for that product.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping

__all__ = [
    "DimExpr",
    "FloorDiv",
    "Minimum",
    "assume_at_most",
    "const",
    "exact_quotient",
    "from_dim",
    "is_at_least",
    "minimum",
    "minimum_arguments",
    "product",
    "symbol",
    "to_dim",
]


@dataclasses.dataclass(frozen=True, slots=True)
class FloorDiv:
    """The atom `floor(numerator / divisor)`, built only by `DimExpr.__floordiv__`."""

    numerator: DimExpr
    divisor: int
    text: str = dataclasses.field(compare=False, repr=False)

    def __str__(self) -> str:
        return self.text


@dataclasses.dataclass(frozen=True, slots=True)
class Minimum:
    """The atom `min(arguments)`, built only by `minimum`.

    Two or more non-negative expressions, none provably the smallest, sorted by text with a
    constant (at most one) last.
    """

    arguments: tuple[DimExpr, ...]
    text: str = dataclasses.field(compare=False, repr=False)

    def __str__(self) -> str:
        return self.text


Atom = str | FloorDiv | Minimum
"""A symbol (its name), a floor division or a minimum."""

Monomial = tuple[Atom, ...]
"""Atoms multiplied together, sorted by `_atom_key`; a repeated atom is a power."""


def _atom_key(atom: Atom) -> tuple[int, str]:
    if isinstance(atom, str):
        return (0, atom)
    if isinstance(atom, FloorDiv):
        return (1, atom.text)
    return (2, atom.text)


def _monomial_key(monomial: Monomial) -> tuple[int, tuple[tuple[int, str], ...]]:
    # Higher degree first, the constant term last: "batch*seq + 2*seq - 1".
    return (-len(monomial), tuple(_atom_key(a) for a in monomial))


@dataclasses.dataclass(frozen=True, slots=True)
class DimExpr:
    """A canonical polynomial over atoms; build it with `const`, `symbol` and operators.

    `terms` pairs each monomial with its non-zero coefficient, sorted by `_monomial_key`.
    Operators accept a `DimExpr` or an `int` on either side; `//` and `%` take a non-zero
    `int` divisor (floor semantics, as Python's).
    """

    terms: tuple[tuple[Monomial, int], ...] = ()

    # construction ----------------------------------------------------------------------------
    @staticmethod
    def _from_map(coefficients: Mapping[Monomial, int]) -> DimExpr:
        items = [(m, c) for m, c in coefficients.items() if c != 0]
        items.sort(key=lambda item: _monomial_key(item[0]))
        return DimExpr(tuple(items))

    # arithmetic ------------------------------------------------------------------------------
    def __add__(self, other: DimExpr | int) -> DimExpr:
        right = _lift(other)
        if not right.terms:
            return self
        if not self.terms:
            return right
        merged = dict(self.terms)
        for monomial, coefficient in right.terms:
            merged[monomial] = merged.get(monomial, 0) + coefficient
        return DimExpr._from_map(merged)

    __radd__ = __add__

    def __neg__(self) -> DimExpr:
        return DimExpr(tuple((m, -c) for m, c in self.terms))

    def __sub__(self, other: DimExpr | int) -> DimExpr:
        return self + (-_lift(other))

    def __rsub__(self, other: DimExpr | int) -> DimExpr:
        return _lift(other) + (-self)

    def __mul__(self, other: DimExpr | int) -> DimExpr:
        right = _lift(other)
        product: dict[Monomial, int] = {}
        for m1, c1 in self.terms:
            for m2, c2 in right.terms:
                monomial = tuple(sorted(m1 + m2, key=_atom_key)) if m1 and m2 else m1 or m2
                product[monomial] = product.get(monomial, 0) + c1 * c2
        return DimExpr._from_map(product)

    __rmul__ = __mul__

    def __floordiv__(self, divisor: int) -> DimExpr:
        if not isinstance(divisor, int) or isinstance(divisor, bool):
            return NotImplemented
        if divisor == 0:
            raise ZeroDivisionError("floor division of a dim expression by zero")
        if divisor < 0:
            return (-self) // (-divisor)
        if divisor == 1:
            return self
        whole: dict[Monomial, int] = {}
        rest: dict[Monomial, int] = {}
        for monomial, coefficient in self.terms:
            quotient, remainder = divmod(coefficient, divisor)
            if quotient:
                whole[monomial] = quotient
            if remainder:
                rest[monomial] = remainder
        quotient_expr = DimExpr._from_map(whole)
        if not any(monomial for monomial in rest):
            return quotient_expr  # only a constant in [0, divisor) was left: it floors to 0
        common = math.gcd(divisor, *rest.values())
        numerator = DimExpr._from_map({m: c // common for m, c in rest.items()})
        reduced = divisor // common
        if reduced == 1:
            return quotient_expr + numerator
        inner = numerator.terms[0][0][0] if _is_single_atom(numerator) else None
        if isinstance(inner, FloorDiv):
            # floor(floor(n/a)/b) = floor(n/(a*b)) for positive a and b
            return quotient_expr + inner.numerator // (inner.divisor * reduced)
        text = f"floor({_wrapped(numerator)}/{reduced})"
        return quotient_expr + _atom_expr(FloorDiv(numerator, reduced, text))

    def __mod__(self, divisor: int) -> DimExpr:
        if not isinstance(divisor, int) or isinstance(divisor, bool):
            return NotImplemented
        return self - (self // divisor) * divisor

    def ceildiv(self, divisor: int) -> DimExpr:
        """`ceil(self / divisor)` for a positive divisor."""
        if divisor <= 0:
            raise ValueError(f"ceildiv needs a positive divisor, got {divisor}")
        return (self + (divisor - 1)) // divisor

    # questions -------------------------------------------------------------------------------
    def as_int(self) -> int | None:
        """The value when the expression is a constant, else None."""
        if not self.terms:
            return 0
        if len(self.terms) == 1 and not self.terms[0][0]:
            return self.terms[0][1]
        return None

    def as_symbol(self) -> str | None:
        """The name when the expression is exactly one symbol, else None."""
        if len(self.terms) != 1:
            return None
        monomial, coefficient = self.terms[0]
        if coefficient == 1 and len(monomial) == 1 and isinstance(monomial[0], str):
            return monomial[0]
        return None

    def is_nonnegative(self) -> bool:
        """True when the expression is >= 0 for every value of its atoms (sizes, all >= 0).

        Sufficient, not necessary: every coefficient is non-negative.
        """
        return all(c >= 0 for _, c in self.terms)

    def symbols(self) -> tuple[str, ...]:
        """The symbols the expression mentions (inside floors too), sorted, each once."""
        found: dict[str, None] = {}
        _collect_symbols(self, found)
        return tuple(sorted(found))

    def substitute(self, mapping: Mapping[str, DimExpr]) -> DimExpr:
        """The expression with each symbol named in `mapping` replaced (re-canonicalized)."""
        if not mapping or not _mentions(self, mapping):
            return self
        total = DimExpr()
        for monomial, coefficient in self.terms:
            term = const(coefficient)
            for atom in monomial:
                term = term * _substitute_atom(atom, mapping)
            total = total + term
        return total

    def evaluate(self, values: Mapping[str, int]) -> int:
        """The integer value for the given symbol values (KeyError when one is missing)."""
        total = 0
        for monomial, coefficient in self.terms:
            product = coefficient
            for atom in monomial:
                if isinstance(atom, str):
                    product *= values[atom]
                elif isinstance(atom, FloorDiv):
                    product *= atom.numerator.evaluate(values) // atom.divisor
                else:
                    product *= min(a.evaluate(values) for a in atom.arguments)
            total += product
        return total

    # printing --------------------------------------------------------------------------------
    def __str__(self) -> str:
        if not self.terms:
            return "0"
        parts: list[str] = []
        for index, (monomial, coefficient) in enumerate(self.terms):
            magnitude = abs(coefficient)
            if not monomial:
                body = str(magnitude)
            elif magnitude == 1:
                body = "*".join(str(a) for a in monomial)
            else:
                body = f"{magnitude}*" + "*".join(str(a) for a in monomial)
            if index == 0:
                parts.append(f"-{body}" if coefficient < 0 else body)
            else:
                parts.append(f" - {body}" if coefficient < 0 else f" + {body}")
        return "".join(parts)

    def __repr__(self) -> str:
        return f"DimExpr({str(self)!r})"


def _lift(value: DimExpr | int) -> DimExpr:
    if isinstance(value, DimExpr):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return const(value)
    raise TypeError(f"expected a DimExpr or an int, got {type(value).__name__}")


def _atom_expr(atom: Atom) -> DimExpr:
    return DimExpr((((atom,), 1),))


def _wrapped(expr: DimExpr) -> str:
    """The text of `expr`, in parentheses when it is a sum (so `/d` divides all of it)."""
    text = str(expr)
    return f"({text})" if len(expr.terms) > 1 else text


def _mentions(expr: DimExpr, names: Mapping[str, object]) -> bool:
    """True when `expr` mentions a symbol in `names` (inside floors and minimums too)."""
    for monomial, _ in expr.terms:
        for atom in monomial:
            if isinstance(atom, str):
                if atom in names:
                    return True
            elif isinstance(atom, FloorDiv):
                if _mentions(atom.numerator, names):
                    return True
            elif any(_mentions(a, names) for a in atom.arguments):
                return True
    return False


def _collect_symbols(expr: DimExpr, found: dict[str, None]) -> None:
    for monomial, _ in expr.terms:
        for atom in monomial:
            if isinstance(atom, str):
                found[atom] = None
            elif isinstance(atom, FloorDiv):
                _collect_symbols(atom.numerator, found)
            else:
                for argument in atom.arguments:
                    _collect_symbols(argument, found)


def _substitute_atom(atom: Atom, mapping: Mapping[str, DimExpr]) -> DimExpr:
    if isinstance(atom, str):
        return mapping.get(atom, _atom_expr(atom))
    if isinstance(atom, FloorDiv):
        return atom.numerator.substitute(mapping) // atom.divisor
    found = minimum(*(a.substitute(mapping) for a in atom.arguments))
    assert found is not None, "a substitution keeps non-negative expressions non-negative"
    return found


def const(value: int) -> DimExpr:
    """The constant `value`."""
    return DimExpr((((), int(value)),)) if value else DimExpr()


def symbol(name: str) -> DimExpr:
    """The dim named `name` (a size: never negative)."""
    if not name:
        raise ValueError("a symbol needs a name")
    return _atom_expr(name)


def product(exprs: Iterable[DimExpr]) -> DimExpr:
    """The product of `exprs` (1 for none)."""
    total = const(1)
    for expr in exprs:
        total = total * expr
    return total


def minimum(*items: DimExpr) -> DimExpr | None:
    """`min(items)`: the item provably smallest, else a minimum atom.

    None when an item may be negative (an atom is never negative).
    """
    flat: list[DimExpr] = []
    for item in items:
        if not item.is_nonnegative():
            return None
        atom = item.terms[0][0][0] if _is_single_atom(item) else None
        flat.extend(atom.arguments if isinstance(atom, Minimum) else (item,))
    kept: list[DimExpr] = []
    for item in flat:
        if any((item - other).is_nonnegative() for other in kept):
            continue  # never smaller than one already kept
        kept = [k for k in kept if not (k - item).is_nonnegative()]
        kept.append(item)
    if len(kept) == 1:
        return kept[0]
    kept.sort(key=lambda k: (k.as_int() is not None, str(k)))
    text = "min(" + ", ".join(str(k) for k in kept) + ")"
    return _atom_expr(Minimum(tuple(kept), text))


def _is_single_atom(expr: DimExpr) -> bool:
    return len(expr.terms) == 1 and expr.terms[0][1] == 1 and len(expr.terms[0][0]) == 1


def minimum_arguments(expr: DimExpr) -> tuple[DimExpr, ...] | None:
    """The arguments when `expr` is exactly one minimum atom, else None."""
    if not _is_single_atom(expr):
        return None
    atom = expr.terms[0][0][0]
    return atom.arguments if isinstance(atom, Minimum) else None


def is_at_least(a: DimExpr, b: DimExpr) -> bool:
    """True when `a >= b` for every value of the atoms (sufficient, not necessary).

    `a - b` has no negative coefficient, or a minimum is compared argument by argument:
    `min(A) >= b` when every argument of A is, `a >= min(B)` when `a` is at least one of B's
    (`min(n + k, c) >= min(n, c)`: a slice's clamped end against its clamped start).
    """
    if (a - b).is_nonnegative():
        return True
    left = minimum_arguments(a)
    if left is not None:
        return all(is_at_least(argument, b) for argument in left)
    right = minimum_arguments(b)
    return right is not None and any(is_at_least(a, argument) for argument in right)


def assume_at_most(expr: DimExpr, bound: DimExpr, limit: int) -> DimExpr:
    """`expr` simplified under the assumption `bound <= limit`.

    A minimum with an argument y provably at most `bound` (so at most `limit`) loses its
    constant arguments of `limit` or more: `min(y, c) = y` when `y <= bound <= limit <= c`.
    Minimums inside floors and other minimums are simplified too.
    """
    if not any(not isinstance(atom, str) for monomial, _ in expr.terms for atom in monomial):
        return expr
    total = DimExpr()
    for monomial, coefficient in expr.terms:
        term = const(coefficient)
        for atom in monomial:
            term = term * _assume_atom_at_most(atom, bound, limit)
        total = total + term
    return total


def _assume_atom_at_most(atom: Atom, bound: DimExpr, limit: int) -> DimExpr:
    if isinstance(atom, str):
        return _atom_expr(atom)
    if isinstance(atom, FloorDiv):
        return assume_at_most(atom.numerator, bound, limit) // atom.divisor
    arguments = [assume_at_most(a, bound, limit) for a in atom.arguments]
    if any(a.as_int() is None and is_at_least(bound, a) for a in arguments):
        arguments = [a for a in arguments if not _at_least_constant(a, limit)]
    found = minimum(*arguments)
    assert found is not None, "simplifying keeps non-negative expressions non-negative"
    return found


def _at_least_constant(expr: DimExpr, limit: int) -> bool:
    value = expr.as_int()
    return value is not None and value >= limit


def exact_quotient(dividend: DimExpr, divisor: DimExpr) -> DimExpr | None:
    """`dividend / divisor` when it divides exactly as polynomials, else None.

    Handles a divisor that is one term (`4*batch*seq`) and a divisor equal to the dividend.
    """
    if divisor == dividend and dividend.terms:
        return const(1)
    if len(divisor.terms) != 1:
        return None
    div_monomial, div_coefficient = divisor.terms[0]
    quotient: dict[Monomial, int] = {}
    for monomial, coefficient in dividend.terms:
        if coefficient % div_coefficient:
            return None
        remaining = list(monomial)
        for atom in div_monomial:
            if atom not in remaining:
                return None
            remaining.remove(atom)
        quotient[tuple(remaining)] = coefficient // div_coefficient
    return DimExpr._from_map(quotient)


def to_dim(expr: DimExpr | None) -> int | str | None:
    """The dim facts carry: an int, a symbol's name, canonical text, or None.

    A negative constant is no size: None.
    """
    if expr is None:
        return None
    value = expr.as_int()
    if value is not None:
        return value if value >= 0 else None
    name = expr.as_symbol()
    return name if name is not None else str(expr)


def from_dim(dim: int | str | bytes | None) -> DimExpr | None:
    """A declared or inferred dim as an expression.

    A string is one symbol (its text is not parsed); a negative int or None is unknown, and
    so are bytes (a dim_param of the file that is not UTF-8 text, which lifting keeps as it
    was).
    """
    if dim is None or isinstance(dim, bytes):
        return None
    if isinstance(dim, str):
        return symbol(dim) if dim else None
    return const(dim) if dim >= 0 else None
