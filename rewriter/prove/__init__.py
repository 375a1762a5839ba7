"""SMT semantics of ONNX ops, and equivalence queries over them (the prover's foundation).

Everything said about a rule outside this package rests on samples. Here a rewrite is
checked for *every* input: the pattern and the rewrite are built as symbolic tensors over the
same symbolic inputs, and z3 (the `z3-solver` binding) is asked for an input on which they
differ. Like Alive2 for LLVM's peephole rewrites, the semantics is bit-precise where that is
decidable:

* element types: IEEE-754 binary16/32/64 (and bfloat16) in z3's floating-point theory (NaN,
  signed zeros, infinities, subnormals, round-to-nearest-even), bit-vectors for the integer
  types, Bool (`_dtypes`);
* tensors: a shape of integer terms (concrete or symbolic dims) and a function from an index
  to an element, with a poison condition for unspecified elements and a validity condition
  for shape preconditions (`_tensor`); numpy broadcasting over symbolic dims (`_broadcast`);
* elementwise ops exactly as onnxruntime's CPU kernels compute them, checked bit for bit
  against onnxruntime by the tests (`_elementwise`); index algebra for Transpose, Reshape,
  Squeeze, Unsqueeze, Slice, Concat, Gather, Expand, Flatten, Shape, Size (`_indexing`);
  uninterpreted functions for ops outside the fragment (Exp, Tanh, Erf, Pow, reductions,
  MatMul, Softmax, ...), so a rule that only moves them is still proved (`_opaque`);
* a query: for each output, is the rewrite's result a refinement of the original's (same
  shape, same values where the original is specified; floats equal as numbers, NaN matching
  NaN; `signed_zeros=True` for the sign of zero too), answered `Proved`, `Counterexample`
  (dims, input arrays, the index and both values) or `Unknown` (the solver's reason)
  (`_query`).

Use:

    x = symbolic_input("x", ir.DataType.FLOAT, ["n"])
    one = constant(np.array(1.0, np.float32))
    (lhs,) = apply_op("Mul", "", {}, [x, one])
    verdict = equivalent([lhs], [x], inputs={"x": x})      # Proved

A rule's match and rewrite blocks instantiate with `apply_nodes([NodeSpec(op, domain,
attributes, input names, output names), ...], {name: tensor})`: free variables become
`symbolic_input`s (or `constant`s where the rule pins them), float attributes may be z3 terms
(a rule proved for every alpha), and where-conditions become `assumptions`.

Whole rules (`rewrite prove`): `prove_rules(ruleset, ProveOptions(timeout=...), jobs=N)` gives
one `RuleProof` per rule, `proved`, `refuted` or `unsupported` with the reason. A rule of the
typed rule IR is read once (`_plan`: its order, the inputs whose contents it reads, the opsets,
and why it cannot be proved at all: an approximate rule, an op without semantics); each
instance fixes what a query cannot leave symbolic (ranks up to `max_rank`, dtypes, integer
attributes and axes, optional inputs present or absent) through a `Chooser` (`_choices`,
`_instance`), keeps dims, elements, constants bound by `is_const` and float attributes
symbolic, and turns the where-conditions and `assumes finite` / `assumes nonempty` into
assumptions (`_expressions`, `_functions`: the built-ins over symbolic values). A
counterexample is replayed on onnxruntime before a rule is called refuted (`_replay`); one
that differs only by rounding (within `ROUNDING_ULPS` of the result or of its rounding
scale) is asked again allowing that much (`_proof`).
"""

from __future__ import annotations

from rewriter.prove._dtypes import UnsupportedTypeError, from_python, sort_of, to_python
from rewriter.prove._evaluate import Concrete, NotConcreteError, concrete
from rewriter.prove._proof import (
    ProofStatus,
    ProveOptions,
    RuleCounterexample,
    RuleProof,
    prove_rule,
    prove_rules,
)
from rewriter.prove._query import (
    Counterexample,
    Proved,
    Unknown,
    Verdict,
    equivalent,
    same_value,
)
from rewriter.prove._registry import (
    SEMANTICS,
    NodeSpec,
    UnsupportedOpError,
    apply_nodes,
    apply_op,
)
from rewriter.prove._store import RecalledProof, recall, remember, remember_all
from rewriter.prove._tensor import (
    Dim,
    Element,
    Index,
    SymbolicTensor,
    constant,
    scalar_constant,
    symbolic_input,
)

__all__ = [
    "SEMANTICS",
    "Concrete",
    "Counterexample",
    "Dim",
    "Element",
    "Index",
    "NodeSpec",
    "NotConcreteError",
    "ProofStatus",
    "ProveOptions",
    "Proved",
    "RecalledProof",
    "RuleCounterexample",
    "RuleProof",
    "SymbolicTensor",
    "Unknown",
    "UnsupportedOpError",
    "UnsupportedTypeError",
    "Verdict",
    "apply_nodes",
    "apply_op",
    "concrete",
    "constant",
    "equivalent",
    "from_python",
    "prove_rule",
    "prove_rules",
    "recall",
    "remember",
    "remember_all",
    "same_value",
    "scalar_constant",
    "sort_of",
    "symbolic_input",
    "to_python",
]
