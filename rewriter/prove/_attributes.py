"""The values an attribute a rule leaves open may take, by op: what instances enumerate.

An attribute a match line binds (`<perm = p>`) or does not mention is open: the rule must hold
for each value the schema allows. Integer attributes that shape the result (axes, perms,
keepdims) are enumerated over the values legal for the instance's ranks; float attributes
(alpha, beta, Clip's bounds before opset 11) are one symbolic float32 each, so a proof holds for
every value; attributes the prover's semantics does not read are left out (their default),
except on ops the prover treats as unknown functions, where an open attribute is an unknown
value of its own (`FreeAttribute`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

from rewriter.prove._tensor import SymbolicTensor

SYMBOLIC_FLOAT = "symbolic float"
"""Marks an attribute that is one symbolic float32 (its own z3 variable)."""

Options = list[object] | str
Domain = Callable[[Sequence[SymbolicTensor | None]], Options]


def _rank(inputs: Sequence[SymbolicTensor | None], position: int = 0) -> int:
    tensor = inputs[position] if len(inputs) > position else None
    return tensor.rank if tensor is not None else 0


def axis_range(rank: int, *, inclusive: bool = False) -> list[object]:
    """Every axis of a tensor of `rank`, negative spellings too (`inclusive`: up to rank)."""
    return list(range(-rank, rank + 1 if inclusive else rank))


def axes_lists(rank: int, longest: int = 2) -> list[list[int]]:
    """Lists of 1 to `longest` distinct axes of `rank`, each spelled positive or negative."""
    found: list[list[int]] = []
    for length in range(1, min(longest, rank) + 1):
        for picked in itertools.permutations(range(rank), length):
            for signs in itertools.product((False, True), repeat=length):
                found.append(
                    [a - rank if negative else a for a, negative in zip(picked, signs, strict=True)]
                )
    return found


def _perm(inputs: Sequence[SymbolicTensor | None]) -> Options:
    rank = _rank(inputs)
    return [None, *([list(p) for p in itertools.permutations(range(rank))])]


def _axis(inputs: Sequence[SymbolicTensor | None]) -> Options:
    return axis_range(_rank(inputs))


def _flatten_axis(inputs: Sequence[SymbolicTensor | None]) -> Options:
    return axis_range(_rank(inputs), inclusive=True)


def _shape_bound(inputs: Sequence[SymbolicTensor | None]) -> Options:
    return [None, *axis_range(_rank(inputs), inclusive=True)]


def _axes_attribute(inputs: Sequence[SymbolicTensor | None]) -> Options:
    return [None, *axes_lists(_rank(inputs))]


def _unsqueeze_axes(inputs: Sequence[SymbolicTensor | None]) -> Options:
    rank = _rank(inputs)
    return [a for a in axes_lists(rank + 2) if _fits_unsqueeze(a, rank)]


def _fits_unsqueeze(axes: object, rank: int) -> bool:
    assert isinstance(axes, list), "axes are lists"
    out = rank + len(axes)
    return all(-out <= a < out for a in axes)


def _flag(default: int) -> Domain:
    return lambda inputs: [default, 1 - default]


def _float(inputs: Sequence[SymbolicTensor | None]) -> Options:
    return SYMBOLIC_FLOAT


_REDUCTIONS = (
    "ReduceSum",
    "ReduceMean",
    "ReduceMax",
    "ReduceMin",
    "ReduceProd",
    "ReduceL1",
    "ReduceL2",
    "ReduceLogSum",
    "ReduceLogSumExp",
    "ReduceSumSquare",
)

DOMAINS: dict[tuple[str, str], Domain] = {
    ("Transpose", "perm"): _perm,
    ("Concat", "axis"): _axis,
    ("Gather", "axis"): _axis,
    ("Flatten", "axis"): _flatten_axis,
    ("Softmax", "axis"): _axis,
    ("LogSoftmax", "axis"): _axis,
    ("Hardmax", "axis"): _axis,
    ("Squeeze", "axes"): _axes_attribute,
    ("Unsqueeze", "axes"): _unsqueeze_axes,
    ("Reshape", "allowzero"): _flag(0),
    ("Shape", "start"): _shape_bound,
    ("Shape", "end"): _shape_bound,
    ("LeakyRelu", "alpha"): _float,
    ("HardSigmoid", "alpha"): _float,
    ("HardSigmoid", "beta"): _float,
    ("Elu", "alpha"): _float,
    ("Celu", "alpha"): _float,
    ("Selu", "alpha"): _float,
    ("Selu", "gamma"): _float,
    ("ThresholdedRelu", "alpha"): _float,
    ("Clip", "min"): _float,
    ("Clip", "max"): _float,
    ("IsInf", "detect_negative"): _flag(1),
    ("IsInf", "detect_positive"): _flag(1),
    ("Gelu", "approximate"): lambda inputs: ["none", "tanh"],
    **{(op, "keepdims"): _flag(1) for op in _REDUCTIONS},
    **{(op, "noop_with_empty_axes"): _flag(0) for op in _REDUCTIONS},
    **{(op, "axes"): _axes_attribute for op in _REDUCTIONS},
}
"""Open attribute -> its values at the instance's inputs (see the module docstring)."""

IGNORED = frozenset({("Dropout", "seed"), ("Cast", "saturate"), ("Cast", "round_mode")})
"""Attributes that do not change a result the prover models."""
