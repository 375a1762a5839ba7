"""Inputs for verification: what each graph input may hold, and hypothesis strategies for it.

Analysis (`analyze_inputs`) reads the graph inputs' types and follows their uses in the IR:

* every named symbolic dim gets one size per example, shared by all inputs that use it; an
  unknown dim (`None`) is keyed by its axis, so the unknown batch axes of two inputs agree;
  static dims are kept. An input of unknown rank gets 1 to 3 dims of its own;
* an integer input that reaches the indices of a `Gather`/`GatherElements` (directly or
  through Cast, Unsqueeze, Reshape, Concat, ... and Add/Sub/Mul by an integer constant) is
  kept inside `[0, size)` of the gathered axis, mapped back through that arithmetic; the size
  may be a symbolic dim, resolved per example. BERT's `input_ids -> Gather(table, ids)` never
  indexes out of range;
* an integer input that reaches Sub, Mul or Where (an attention mask), or whose name contains
  "mask", holds 0 and 1 only;
* a user range `(lo, hi)` overrides all of that (closed interval; integers use the integers
  inside it).

Sizes: every dim key draws its size from a range, 1 to 6 unless the caller fixes it
(`input_shapes` binds the dims of one input, and through them the symbols it shares with
other inputs; `dims` binds a symbol everywhere) or the size search (`_sizes`) found that the
model needs larger ones. `suggested_sizes` lists the sizes the model's constants mention.

Generation is a *recipe* drawn by hypothesis and expanded by numpy: dims, whether the example
draws special values, then per input a distribution kind, a numpy seed and up to four special
elements placed at drawn positions. Hypothesis shrinks the recipe, so a counterexample ends
up with small dims, no special values if it can, the simplest kind (kind 0: small integers in
[-3, 3] for floats) and few special elements; the elements themselves come from the seed,
which keeps generation fast for large tensors (drawing every element through hypothesis
would overflow its buffer past a few thousand elements).

Float kinds (mostly moderate values, so models do not overflow): small integers, N(0, 1),
uniform in [-3, 3], small-variance (`c + 0.1 * N(0, 1)` with one `c` in [-0.5, 0.5] per
tensor: rows with a variance near 0.01 expose a wrong epsilon in a normalization), small
scale (`1e-3 * N(0, 1)`). Special elements of every example: +0.0, -0.0, +-1, +-tiny (1e-30
where the dtype has it), +-subnormal, +-large (1e4; 100 for float16 and float8). Besides up
to four placed ones, a drawn share of the elements (none, 10% or 50%, and then at least one
of each where the input has room) holds the exact values +-0.0 and +-1.

*Special examples* (when `special_values` is on, the default; never the first, simplest
example) come in two kinds, one in `SPECIAL_ODDS` examples each. *Non-finite* examples draw
NaN, +-inf and the dtype's smallest subnormal, placed and in a share of at least 10%; *extreme*
examples draw the dtype's largest magnitudes (+-max, with `float_extremes`) and its smallest
subnormal instead, and integer inputs that are not indices or masks draw their dtype's extremes
there (`min + 1` and `max`: `min / -1` traps the process in onnxruntime's integer Div, so no
extreme is drawn at all when a model divides). The kinds are kept apart because they test
different things: NaN and infinity test what a rewrite does with them (a rule that drops a NaN
fails), extremes test arithmetic at the edge of the range, where a rewrite that reorders
operations legitimately overflows elsewhere (`_compare` does not judge overflow on such
examples). Whole-model checks thereby keep finite examples (one infinity in a transformer makes
every output NaN and hides everything else) while NaN and infinity still reach every rule
check. Float extremes are drawn for rule checks only (`float_extremes`): in a whole model a
fold that scales weights overflows where the original did not, and a Clip or Relu after it
turns that infinity into a finite wrong value that no comparison can tell from a bug.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import math
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np
import numpy.typing as npt

import ir
from rewriter.verification._errors import VerifyError, VerifyOptionError

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

logger = logging.getLogger(__name__)

DIM_MIN = 1
DIM_MAX = 6
MAX_SPECIALS = 4
# One example in SPECIAL_ODDS draws NaN and infinities, another one extremes (see the module
# docstring); the others are plain.
SPECIAL_ODDS = 6
NONFINITE = "non-finite"
EXTREME = "extreme"
# Shares of an input's elements replaced by special values (at least the second in special
# examples): a few placed elements are easily missed by a difference that only one special
# value shows (a rule that zeroes NaNs, or flips the sign of -0.0).
SPECIAL_SHARES = (0.0, 0.1, 0.5)

DimKey: TypeAlias = tuple[str, str]
"""A sampled dim: `("sym", name)` for a named symbolic dim, `("axis", "i")` for unknown ones."""

Array: TypeAlias = npt.NDArray[np.generic]

_FLOAT_TYPES = (
    ir.DataType.FLOAT,
    ir.DataType.DOUBLE,
    ir.DataType.FLOAT16,
    ir.DataType.BFLOAT16,
    ir.DataType.FLOAT8E4M3FN,
    ir.DataType.FLOAT8E4M3FNUZ,
    ir.DataType.FLOAT8E5M2,
    ir.DataType.FLOAT8E5M2FNUZ,
)
_INT_TYPES = (
    ir.DataType.INT8,
    ir.DataType.INT16,
    ir.DataType.INT32,
    ir.DataType.INT64,
    ir.DataType.UINT8,
    ir.DataType.UINT16,
    ir.DataType.UINT32,
    ir.DataType.UINT64,
)
_COMPLEX_TYPES = (ir.DataType.COMPLEX64, ir.DataType.COMPLEX128)

FLOAT_KINDS = ("small integers", "normal", "uniform", "small variance", "small scale")
RANGED_FLOAT_KINDS = ("uniform", "small variance", "endpoints")
INT_KINDS = ("lowest", "uniform", "boundaries")
BOOL_KINDS = ("all false", "all true", "random")
STRING_KINDS = ("words",)
COMPLEX_KINDS = ("normal",)
_WORDS = ("", "a", "b", "hello", "x y", "\u00fcn\u00efc\u00f6de")

# Ops that pass integer values through unchanged from these input positions
# (None: every input position).
_TRANSPARENT: Mapping[str, tuple[int, ...] | None] = {
    "Identity": (0,),
    "Cast": (0,),
    "CastLike": (0,),
    "Unsqueeze": (0,),
    "Squeeze": (0,),
    "Reshape": (0,),
    "Flatten": (0,),
    "Expand": (0,),
    "Transpose": (0,),
    "Concat": None,
    "Slice": (0,),
    "Tile": (0,),
    "Split": (0,),
    "Gather": (0,),
    "GatherElements": (0,),
    "GatherND": (0,),
}
_MAX_DEPTH = 24


# ---------------------------------------------------------------------------------------------
# Analysis


@dataclasses.dataclass(frozen=True, slots=True)
class IndexChain:
    """An input reaches the indices of a gather over `size` elements through `steps`.

    `steps` are the affine ops from the input toward the gather, each `("add", c)`,
    `("neg", 0)` or `("mul", k)` with `k > 0`.
    """

    size: int | DimKey
    steps: tuple[tuple[str, int], ...]
    node: str

    def interval(self, dims: Mapping[DimKey, int]) -> tuple[int, int] | None:
        """The closed range of input values that index inside the gather, for these dims."""
        size = self.size if isinstance(self.size, int) else dims.get(self.size)
        if size is None:
            return None
        lo, hi = 0, size - 1
        for op, c in reversed(self.steps):
            if op == "add":
                lo, hi = lo - c, hi - c
            elif op == "neg":
                lo, hi = -hi, -lo
            else:
                lo, hi = -((-lo) // c), hi // c
        return lo, hi


@dataclasses.dataclass(frozen=True, slots=True)
class InputSpec:
    """One graph input: its type, sampled dims and what its elements may hold.

    `role` is one of "float", "int", "index", "mask", "bool", "string", "complex".
    `dims` is None for an input of unknown rank.
    """

    name: str
    dtype: ir.DataType
    dims: tuple[int | DimKey, ...] | None
    role: str
    user_range: tuple[float, float] | None = None
    index_chains: tuple[IndexChain, ...] = ()
    # Integer inputs draw their dtype's extremes in special examples (off when a model divides).
    extremes: bool = True
    # Float inputs draw their dtype's largest magnitudes in extreme examples.
    float_extremes: bool = True

    @property
    def kinds(self) -> tuple[str, ...]:
        """The distribution kinds this input draws from, simplest first."""
        if self.role == "float":
            return RANGED_FLOAT_KINDS if self.user_range else FLOAT_KINDS
        if self.role == "bool":
            return BOOL_KINDS
        if self.role == "string":
            return STRING_KINDS
        if self.role == "complex":
            return COMPLEX_KINDS
        return INT_KINDS

    def describe(self) -> str:
        """One line: type, shape and value policy (used in logs and results)."""
        if self.dims is None:
            shape = "?"
        else:
            shape = ",".join(d if isinstance(d, str) else _dim_name(d) for d in self.dims)
        text = f"{self.dtype.onnx_name}[{shape}]"
        if self.user_range is not None:
            return f"{text} in [{self.user_range[0]:g}, {self.user_range[1]:g}] (given)"
        if self.role == "index":
            sizes = ", ".join(
                f"`{c.node}` ({c.size if isinstance(c.size, int) else c.size[1]} rows)"
                for c in self.index_chains
            )
            return f"{text} indices kept in range for {sizes}"
        if self.role == "mask":
            return f"{text} mask in {{0, 1}}"
        return f"{text} {self.role}"


def _dim_name(dim: int | DimKey) -> str:
    if isinstance(dim, int):
        return str(dim)
    return dim[1] if dim[0] == "sym" else "?"


def _dim_keys(shape: tuple[ir.Dim, ...]) -> tuple[int | DimKey, ...]:
    dims: list[int | DimKey] = []
    for axis, dim in enumerate(shape):
        if isinstance(dim, int) and dim >= 0:
            dims.append(dim)
        elif isinstance(dim, str) and dim:
            dims.append(("sym", dim))
        else:
            dims.append(("axis", str(axis)))
    return tuple(dims)


def _merge_dims(
    name: str, dims: tuple[int | DimKey, ...] | None, other: ir.TensorType
) -> tuple[int | DimKey, ...] | None:
    """Take static dims the other model declares where this one has a symbol."""
    if other.shape is None:
        return dims
    if dims is None:
        return _dim_keys(other.shape)
    if len(other.shape) != len(dims):
        raise VerifyError(
            f"input `{name}` has rank {len(dims)} in the original model but "
            f"{len(other.shape)} in the rewritten one"
        )
    merged: list[int | DimKey] = []
    for axis, (mine, declared) in enumerate(zip(dims, other.shape, strict=True)):
        # A negative declared dim is no size (exporters write -1 for "unknown").
        theirs = declared if not (isinstance(declared, int) and declared < 0) else None
        if isinstance(mine, int) and isinstance(theirs, int) and mine != theirs:
            raise VerifyError(
                f"input `{name}` dim {axis} is {mine} in the original model but "
                f"{theirs} in the rewritten one"
            )
        merged.append(theirs if isinstance(theirs, int) else mine)
    return tuple(merged)


def _int_constant(value: ir.Value | None) -> int | None:
    """The value of a scalar (or one-element) integer constant, else None."""
    if value is None:
        return None
    tensor = value.const_value
    producer = value.producer()
    if tensor is None and producer is not None and producer.op_type == "Constant":
        payload = producer.attribute("value")
        if isinstance(payload, ir.Tensor):
            tensor = payload
        else:
            single = producer.attribute("value_int")
            return single if isinstance(single, int) else None
    if tensor is None or tensor.size != 1 or tensor.is_external:
        return None
    array = tensor.numpy()
    if array.dtype.kind not in "iu":
        return None
    return int(array.reshape(-1)[0])


def _gathered_size(node: ir.Node, index_of: str) -> int | DimKey | None:
    data = node.inputs[0]
    if data is None:
        return None
    shape: tuple[ir.Dim, ...] | None
    if data.const_value is not None:
        shape = data.const_value.shape
    else:
        producer = data.producer()
        payload = producer.attribute("value") if producer is not None else None
        if (
            producer is not None
            and producer.op_type == "Constant"
            and isinstance(payload, ir.Tensor)
        ):
            shape = payload.shape
        else:
            shape = data.shape
    if shape is None:
        return None
    axis = node.attribute("axis", 0)
    if not isinstance(axis, int) or not -len(shape) <= axis < len(shape):
        return None
    dim = shape[axis]
    if isinstance(dim, int):
        return dim if dim >= 0 else None  # a negative declared dim is no size
    if isinstance(dim, str) and dim:
        return ("sym", dim)
    logger.debug("%s: gathered axis of `%s` has an unknown size", index_of, node.name)
    return None


def _is_default_domain(node: ir.Node) -> bool:
    return node.domain in ("", "ai.onnx")


def _affine_step(node: ir.Node, index: int) -> tuple[tuple[str, int], ...] | None:
    """The affine step(s) an Add/Sub/Mul by an integer constant applies to input `index`."""
    if len(node.inputs) != 2:
        return None
    constant = _int_constant(node.inputs[1 - index])
    if constant is None:
        return None
    if node.op_type == "Add":
        return (("add", constant),)
    if node.op_type == "Sub":
        return (("add", -constant),) if index == 0 else (("neg", 0), ("add", constant))
    if node.op_type == "Mul" and constant > 0:
        return (("mul", constant),)
    return None


def _index_chains(
    value: ir.Value, steps: tuple[tuple[str, int], ...], depth: int
) -> Iterator[IndexChain]:
    if depth > _MAX_DEPTH:
        return
    for use in value.uses:
        node = use.node
        if not _is_default_domain(node):
            continue
        op = node.op_type
        if op in ("Gather", "GatherElements") and use.index == 1:
            size = _gathered_size(node, value.name)
            if size is not None:
                yield IndexChain(size=size, steps=steps, node=node.name or op)
            continue
        if op in _TRANSPARENT:
            positions = _TRANSPARENT[op]
            if positions is None or use.index in positions:
                for out in node.outputs:
                    yield from _index_chains(out, steps, depth + 1)
            continue
        if op in ("Add", "Sub", "Mul"):
            step = _affine_step(node, use.index)
            if step is not None:
                yield from _index_chains(node.outputs[0], steps + step, depth + 1)


def _feeds_mask_arithmetic(value: ir.Value, depth: int) -> bool:
    if depth > _MAX_DEPTH:
        return False
    for use in value.uses:
        node = use.node
        if not _is_default_domain(node):
            continue
        if node.op_type in ("Sub", "Mul", "Where"):
            return True
        if node.op_type == "Cast" and node.attribute("to") == int(ir.DataType.BOOL):
            return True
        positions = _TRANSPARENT.get(node.op_type, ())
        if (positions is None or use.index in positions) and any(
            _feeds_mask_arithmetic(out, depth + 1) for out in node.outputs
        ):
            return True
    return False


def _role(
    dtype: ir.DataType, name: str, values: Sequence[ir.Value]
) -> tuple[str, tuple[IndexChain, ...]]:
    if dtype in _FLOAT_TYPES:
        return "float", ()
    if dtype in _COMPLEX_TYPES:
        return "complex", ()
    if dtype == ir.DataType.BOOL:
        return "bool", ()
    if dtype == ir.DataType.STRING:
        return "string", ()
    if dtype not in _INT_TYPES:
        raise VerifyError(f"input `{name}`: cannot generate values of type {dtype.onnx_name}")
    chains: dict[IndexChain, None] = {}
    for value in values:
        for chain in _index_chains(value, (), 0):
            chains[chain] = None
    if chains:
        return "index", tuple(chains)
    if "mask" in name.lower() or any(_feeds_mask_arithmetic(v, 0) for v in values):
        return "mask", ()
    return "int", ()


def _graph_inputs(model: ir.Model) -> dict[str, ir.Value]:
    """Graph inputs that must be fed (initializers listed as inputs keep their values)."""
    return {v.name: v for v in model.graph.inputs if not v.is_initializer()}


def _divides(model: ir.Model) -> bool:
    """True when some node of the model is an integer-capable Div (see the module docstring)."""
    return any(
        node.op_type == "Div" and _is_default_domain(node)
        for graph in model.graphs()
        for node in graph
    )


def _check_names(what: str, names: Sequence[str], inputs: Mapping[str, ir.Value]) -> None:
    unknown = [name for name in names if name not in inputs]
    if unknown:
        raise VerifyError(
            f"{what} given for unknown input(s) {', '.join(map(repr, unknown))}; "
            f"the model's inputs are {', '.join(map(repr, inputs)) or '(none)'}"
        )


def analyze_inputs(
    original: ir.Model,
    rewritten: ir.Model,
    input_ranges: Mapping[str, tuple[float, float]] | None = None,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    *,
    float_extremes: bool = True,
) -> tuple[InputSpec, ...]:
    """What to feed each graph input of the original model (see the module docstring).

    Constraints found in either model apply (an index input must index inside the gathers
    of both). An input named in `input_shapes` gets those static dims.

    Raises:
        VerifyError: an input type cannot be generated, the two models disagree on an input's
            type, `input_ranges` names an unknown input or an empty range, or `input_shapes`
            names an unknown input or contradicts a static dim.
    """
    ranges = dict(input_ranges or {})
    shapes = dict(input_shapes or {})
    ours = _graph_inputs(original)
    theirs = _graph_inputs(rewritten)
    _check_names("input range", list(ranges), ours)
    _check_names("input shape", list(shapes), ours)
    extremes = not (_divides(original) or _divides(rewritten))
    specs = []
    for name, value in ours.items():
        value_type = value.type
        if not isinstance(value_type, ir.TensorType):
            raise VerifyError(
                f"input `{name}` has type {value_type}; only tensors can be generated"
            )
        other = theirs.get(name)
        dims = None if value_type.shape is None else _dim_keys(value_type.shape)
        if other is not None and isinstance(other.type, ir.TensorType):
            if other.type.dtype != value_type.dtype:
                raise VerifyError(
                    f"input `{name}` is {value_type.dtype.onnx_name} in the original model but "
                    f"{other.type.dtype.onnx_name} in the rewritten one"
                )
            dims = _merge_dims(name, dims, other.type)
        users = [value] if other is None else [value, other]
        role, chains = _role(value_type.dtype, name, users)
        user_range = ranges.get(name)
        if user_range is not None:
            user_range = _check_range(name, user_range, value_type.dtype)
            chains = ()
        if name in shapes:
            dims = _given_shape(name, dims, shapes[name])
        spec = InputSpec(
            name, value_type.dtype, dims, role, user_range, chains, extremes, float_extremes
        )
        specs.append(spec)
    for spec in specs:
        logger.info("input %s: %s", spec.name, spec.describe())
    return tuple(specs)


def _given_shape(
    name: str, dims: tuple[int | DimKey, ...] | None, given: Sequence[int]
) -> tuple[int | DimKey, ...]:
    """The dims of an input whose shape the user gave: keys keep their place (see `bound_dims`).

    Raises:
        VerifyError: the rank or a static dim differs from the model's.
    """
    sizes = tuple(int(d) for d in given)
    if any(d < 0 for d in sizes):
        raise VerifyError(f"input `{name}`: a shape has no negative dims, got {list(sizes)}")
    if dims is None:
        return sizes
    if len(dims) != len(sizes):
        raise VerifyError(
            f"input `{name}` has rank {len(dims)}, but the given shape {_shape_text(sizes)} "
            f"has rank {len(sizes)}"
        )
    for axis, (mine, wanted) in enumerate(zip(dims, sizes, strict=True)):
        if isinstance(mine, int) and mine != wanted:
            raise VerifyError(
                f"input `{name}` dim {axis} is {mine} in the model, but the given shape "
                f"{_shape_text(sizes)} says {wanted}"
            )
    return dims


def _shape_text(sizes: Sequence[int]) -> str:
    return "x".join(map(str, sizes)) or "(scalar)"


def bound_dims(
    specs: Sequence[InputSpec],
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    dims: Mapping[str, int] | None = None,
) -> dict[DimKey, int]:
    """The dim keys fixed by `input_shapes` (through each input's own keys) and `dims`.

    Raises:
        VerifyError: a symbol that no input has, a size below 1, or two different sizes for
            one key.
    """
    fixed: dict[DimKey, int] = {}
    origin: dict[DimKey, str] = {}
    symbols = {key[1] for key in dim_keys(specs) if key[0] == "sym"}
    for symbol, size in (dims or {}).items():
        if symbol not in symbols:
            known = ", ".join(f"`{s}`" for s in sorted(symbols)) or "none"
            raise VerifyOptionError(
                "dims", f"no input has that symbolic dim (symbols: {known})", key=symbol
            )
        if int(size) < 1:
            raise VerifyOptionError("dims", "a size is at least 1", key=symbol, value=str(size))
        fixed[("sym", symbol)] = int(size)
        origin[("sym", symbol)] = f"the size given for `{symbol}`"
    by_name = {spec.name: spec for spec in specs}
    for name, given in (input_shapes or {}).items():
        spec = by_name[name]
        for key, size in zip(spec.dims or (), given, strict=False):
            if isinstance(key, int):
                continue
            if key in fixed and fixed[key] != int(size):
                raise VerifyOptionError(
                    "shapes",
                    f"gives `{_dim_name(key)}` the size {size}, but {origin[key]} gives it "
                    f"{fixed[key]}",
                    key=name,
                    value=_shape_text(given),
                )
            fixed[key] = int(size)
            origin[key] = f"the shape given for input `{name}`"
    return fixed


def suggested_sizes(model: ir.Model, limit: int = 16) -> tuple[int, ...]:
    """Sizes the model's constants mention (dims of its weights, small int vectors' values).

    The most frequent first; what the size search tries after growing every dim.
    """
    counts: dict[int, int] = {}

    def count(size: int) -> None:
        if 2 <= size <= MAX_SEARCHED_SIZE:
            counts[size] = counts.get(size, 0) + 1

    for value in model.graph.initializers.values():
        tensor = value.const_value
        if tensor is None:
            continue
        for dim in tensor.shape:
            count(int(dim))
        if tensor.dtype in _INT_TYPES and tensor.size <= 8 and not tensor.is_external:
            for item in np.asarray(tensor.numpy()).reshape(-1).tolist():
                count(int(item))
    ranked = sorted(counts, key=lambda size: (-counts[size], size))
    return tuple(ranked[:limit])


MAX_SEARCHED_SIZE = 8192


def split_samples(
    samples: Sequence[Mapping[str, Array]], specs: Sequence[InputSpec]
) -> list[dict[str, Array]]:
    """Real inputs, one dict per sample: each mapping holds one sample or several stacked.

    An array with one more dim than its input's rank holds several samples along its first
    axis (every input of that mapping then holds as many). Arrays are cast to the input's
    dtype when they are of the same kind (a float64 array for a float32 input).

    Raises:
        VerifyError: a missing or unknown input, a rank that fits neither way, stacks of
            different lengths, or a dtype of another kind.
    """
    result: list[dict[str, Array]] = []
    by_name = {spec.name: spec for spec in specs}
    for index, sample in enumerate(samples):
        label = f"sample set {index + 1}" if len(samples) > 1 else "the given inputs"
        missing = [name for name in by_name if name not in sample]
        unknown = [name for name in sample if name not in by_name]
        if missing or unknown:
            parts = []
            if missing:
                parts.append(f"no array for input(s) {', '.join(map(repr, missing))}")
            if unknown:
                parts.append(f"arrays for unknown input(s) {', '.join(map(repr, unknown))}")
            raise VerifyError(
                f"{label}: {'; '.join(parts)}; the model's inputs are "
                f"{', '.join(map(repr, by_name)) or '(none)'}"
            )
        stacked: dict[str, Array] = {}
        counts: dict[str, int] = {}
        for name, spec in by_name.items():
            array = _cast_sample(label, spec, np.asarray(sample[name]))
            rank = len(spec.dims) if spec.dims is not None else array.ndim
            if array.ndim == rank + 1:
                counts[name] = array.shape[0]
            elif array.ndim != rank:
                raise VerifyError(
                    f"{label}: input `{name}` has rank {rank}, the array has {array.ndim} dims "
                    f"(shape {list(array.shape)}); give one sample with {rank} dims or several "
                    f"stacked along a new first axis"
                )
            stacked[name] = array
        lengths = set(counts.values())
        if len(lengths) > 1 or (counts and len(counts) != len(by_name)):
            raise VerifyError(
                f"{label}: some arrays hold several samples and others do not, or different "
                f"numbers of them ({', '.join(f'{n}: {c}' for n, c in counts.items())})"
            )
        if not counts:
            result.append(stacked)
            continue
        length = lengths.pop()
        if not length:
            raise VerifyError(
                f"{label}: the arrays stack no sample (their first axis, one more than the "
                f"inputs' rank, is 0)"
            )
        for position in range(length):
            result.append({name: array[position] for name, array in stacked.items()})
    return result


def _cast_sample(label: str, spec: InputSpec, array: Array) -> Array:
    target = ir.numpy_dtype(spec.dtype)
    if array.dtype == target:
        return array
    kinds = {"f": "fV", "i": "iu", "u": "iu", "b": "b", "U": "UO", "O": "UO", "c": "c"}
    if array.dtype.kind not in kinds.get(np.dtype(target).kind, np.dtype(target).kind):
        raise VerifyError(
            f"{label}: input `{spec.name}` is {spec.dtype.onnx_name}, the array is {array.dtype}"
        )
    return array.astype(target)


def _check_range(name: str, bounds: tuple[float, float], dtype: ir.DataType) -> tuple[float, float]:
    try:
        lo, hi = (float(b) for b in bounds)
    except (TypeError, ValueError):
        raise VerifyError(f"input `{name}`: range must be two numbers, got {bounds!r}") from None
    if not (math.isfinite(lo) and math.isfinite(hi)) or lo > hi:
        raise VerifyError(f"input `{name}`: empty or infinite range [{lo:g}, {hi:g}]")
    if dtype in _INT_TYPES and math.ceil(lo) > math.floor(hi):
        raise VerifyError(f"input `{name}`: range [{lo:g}, {hi:g}] holds no integer")
    if dtype in (ir.DataType.BOOL, ir.DataType.STRING) or dtype in _COMPLEX_TYPES:
        raise VerifyError(f"input `{name}`: a range applies to numbers only, not {dtype.onnx_name}")
    return lo, hi


# ---------------------------------------------------------------------------------------------
# Recipes and their strategies


@dataclasses.dataclass(frozen=True, slots=True)
class Recipe:
    """How to fill one input: a kind index, a numpy seed and `(position, special)` pairs."""

    kind: int
    seed: int
    specials: tuple[tuple[int, int], ...]
    free_dims: tuple[int, ...] = ()
    # Index into SPECIAL_SHARES: the fraction of a float input's elements (drawn by the seed)
    # that hold special values, besides the placed ones.
    special_share: int = 0


@dataclasses.dataclass(frozen=True, slots=True)
class Example:
    """One drawn example: a size for every dim key and one recipe per input (in spec order).

    `special` says which special values the example draws ("", `NONFINITE` or `EXTREME`, see
    the module docstring); the draw behind it is kept (`special_draw`) so that different
    draws stay different examples.
    """

    dims: tuple[tuple[DimKey, int], ...]
    recipes: tuple[Recipe, ...]
    special_draw: int = 0

    @property
    def special(self) -> str:
        """The kind of special values this example draws ("" for none)."""
        if self.special_draw == SPECIAL_ODDS - 1:
            return NONFINITE
        if self.special_draw == SPECIAL_ODDS - 2:
            return EXTREME
        return ""


def dim_keys(specs: Sequence[InputSpec]) -> tuple[DimKey, ...]:
    """Every sampled dim key of `specs`, in first-seen order, plus sizes of gathered axes."""
    keys: dict[DimKey, None] = {}
    for spec in specs:
        for dim in spec.dims or ():
            if not isinstance(dim, int):
                keys[dim] = None
    return tuple(keys)


def _recipe_strategy(spec: InputSpec, special_values: bool) -> SearchStrategy[Recipe]:
    from hypothesis import strategies as st

    count = len(_specials(spec, NONFINITE if special_values else "", ()))
    specials: SearchStrategy[tuple[tuple[int, int], ...]] = st.just(())
    if count:
        pair = st.tuples(st.integers(0, 2**31 - 1), st.integers(0, count - 1))
        specials = st.lists(pair, max_size=MAX_SPECIALS).map(tuple)
    free_dims: SearchStrategy[tuple[int, ...]] = st.just(())
    if spec.dims is None:
        free_dims = st.lists(st.integers(DIM_MIN, DIM_MAX), min_size=1, max_size=3).map(tuple)
    shares = st.integers(0, len(SPECIAL_SHARES) - 1) if spec.role == "float" else st.just(0)
    return st.builds(
        Recipe,
        kind=st.integers(0, len(spec.kinds) - 1),
        seed=st.integers(0, 2**32 - 1),
        specials=specials,
        free_dims=free_dims,
        special_share=shares,
    )


def example_strategy(
    specs: Sequence[InputSpec],
    *,
    special_values: bool = True,
    sizes: Mapping[DimKey, tuple[int, int]] | None = None,
) -> SearchStrategy[Example]:
    """The hypothesis strategy of examples for these inputs (imports hypothesis lazily).

    `sizes` gives a dim key its closed range of sizes (default `DIM_MIN` to `DIM_MAX`).
    """
    from hypothesis import strategies as st

    ranges = dict(sizes or {})
    dims = st.tuples(
        *(
            st.tuples(st.just(key), st.integers(*ranges.get(key, (DIM_MIN, DIM_MAX))))
            for key in dim_keys(specs)
        )
    )
    recipes = st.tuples(*(_recipe_strategy(spec, special_values) for spec in specs))
    special: SearchStrategy[int] = st.just(0)
    if special_values:
        special = st.integers(0, SPECIAL_ODDS - 1)
    return st.builds(Example, dims=dims, recipes=recipes, special_draw=special)


# ---------------------------------------------------------------------------------------------
# Expanding a recipe into arrays


@functools.cache
def _finfo(dtype: ir.DataType) -> tuple[float, float, float, float, float]:
    """(tiny, subnormal, large, max, smallest subnormal) magnitudes for a float dtype."""
    import ml_dtypes

    info = ml_dtypes.finfo(ir.numpy_dtype(dtype))  # type: ignore[no-untyped-call]
    tiny = 1e-30 if float(info.tiny) < 1e-30 else float(info.tiny)
    smallest = float(info.smallest_subnormal)
    subnormal = smallest
    if dtype in (ir.DataType.FLOAT, ir.DataType.BFLOAT16):
        subnormal = 1e-40
    elif dtype == ir.DataType.DOUBLE:
        subnormal = 1e-310
    large = 1e4 if float(info.max) > 1e30 else 100.0
    return tiny, subnormal, large, float(info.max), smallest


def _float_extremes(spec: InputSpec, special: str) -> tuple[float, ...]:
    """The values only special examples of that kind draw (see the module docstring)."""
    _, _, _, top, smallest = _finfo(spec.dtype)
    if special == NONFINITE:
        return (math.nan, math.inf, -math.inf, smallest, -smallest)
    if special == EXTREME and spec.float_extremes:
        return (top, -top, smallest, -smallest)
    if special == EXTREME:
        return (smallest, -smallest)
    return ()


def _specials(
    spec: InputSpec, special: str, interval: tuple[int, int] | tuple[()]
) -> tuple[object, ...]:
    """The special element values of an input, simplest first (`special`: the example's kind).

    Integer inputs get the ends of their interval (`interval`), and their dtype's extremes in
    special examples. A recipe's placed specials index this tuple modulo its length.
    """
    if spec.role == "float":
        if spec.user_range is not None:
            lo, hi = spec.user_range
            inside = (0.0, -0.0) if lo <= 0.0 <= hi else ()
            return (lo, hi, *inside)
        tiny, subnormal, large, _, _ = _finfo(spec.dtype)
        values: tuple[object, ...] = (0.0, -0.0, 1.0, -1.0, tiny, -tiny, subnormal, -subnormal)
        values += (large, -large)
        return values + _float_extremes(spec, special)
    if spec.role == "complex":
        return (0j, 1 + 0j, -1 + 0j, 1j)
    if spec.role == "bool":
        return (False, True)
    if spec.role == "string":
        return ()
    if not interval:
        return ("lo", "hi")  # resolved per example: the ends of the integer interval
    ends: tuple[object, ...] = tuple(interval)
    if special == EXTREME and spec.role == "int" and spec.extremes:
        ends += _int_extremes(spec)
    return ends


def _int_extremes(spec: InputSpec) -> tuple[int, ...]:
    info = np.iinfo(ir.numpy_dtype(spec.dtype))
    low = int(info.min) + 1 if info.min < 0 else int(info.min)
    return (low, int(info.max))


def _shared_specials(spec: InputSpec, special: str) -> tuple[float, ...]:
    """The special values a share of an input's elements takes: exact values only.

    For floats, zeros of both signs and +-1, and the special example's own values (see the
    module docstring); the other extreme magnitudes stay a few placed elements, so that a
    share does not turn every example into an ill-conditioned one (1e4 beside 1e-30 in one
    reduction). Integer inputs share their extremes in extreme examples.
    """
    if spec.user_range is not None:
        return ()
    if spec.role == "int" and special == EXTREME and spec.extremes:
        return tuple(float(v) for v in _int_extremes(spec))
    if spec.role != "float":
        return ()
    return (0.0, -0.0, 1.0, -1.0, *_float_extremes(spec, special))


def _int_interval(spec: InputSpec, dims: Mapping[DimKey, int]) -> tuple[int, int]:
    info = np.iinfo(ir.numpy_dtype(spec.dtype))
    if spec.user_range is not None:
        lo, hi = math.ceil(spec.user_range[0]), math.floor(spec.user_range[1])
    elif spec.role == "mask":
        lo, hi = 0, 1
    elif spec.role == "index":
        lo, hi = int(info.min), int(info.max)
        resolved = False
        for chain in spec.index_chains:
            bounds = chain.interval(dims)
            if bounds is not None:
                lo, hi = max(lo, bounds[0]), min(hi, bounds[1])
                resolved = True
        if not resolved or lo > hi:
            logger.debug("input %s: no usable index range for these dims", spec.name)
            lo, hi = 0, 0
    else:
        lo, hi = (-8, 8) if info.min < 0 else (0, 16)
    return max(lo, int(info.min)), min(hi, int(info.max))


def _float_base(
    kind: str, shape: tuple[int, ...], rng: np.random.Generator, bounds: tuple[float, float] | None
) -> npt.NDArray[np.float64]:
    if bounds is not None:
        lo, hi = bounds
        if kind == "uniform":
            return rng.uniform(lo, hi, shape)
        if kind == "small variance":
            centre = rng.uniform(lo, hi)
            noise = 0.05 * (hi - lo) * rng.standard_normal(shape)
            return np.clip(centre + noise, lo, hi)
        return np.where(rng.random(shape) < 0.5, lo, hi)
    if kind == "small integers":
        return rng.integers(-3, 4, shape).astype(np.float64)
    if kind == "normal":
        return rng.standard_normal(shape)
    if kind == "uniform":
        return rng.uniform(-3.0, 3.0, shape)
    if kind == "small variance":
        return rng.uniform(-0.5, 0.5) + 0.1 * rng.standard_normal(shape)
    return 1e-3 * rng.standard_normal(shape)


def _int_base(
    kind: str, shape: tuple[int, ...], rng: np.random.Generator, lo: int, hi: int
) -> npt.NDArray[np.int64]:
    if kind == "lowest":
        return np.full(shape, lo, dtype=np.int64)
    if kind == "uniform":
        return rng.integers(lo, hi, shape, endpoint=True, dtype=np.int64)
    return np.where(rng.random(shape) < 0.5, lo, hi).astype(np.int64)


def _fill(
    spec: InputSpec,
    recipe: Recipe,
    shape: tuple[int, ...],
    dims: Mapping[DimKey, int],
    special: str,
) -> Array:
    rng = np.random.default_rng(recipe.seed)
    kind = spec.kinds[recipe.kind % len(spec.kinds)]
    specials: list[Any] = list(_specials(spec, special, ()))
    target = ir.numpy_dtype(spec.dtype)
    base: Array
    if spec.role == "float":
        base = _float_base(kind, shape, rng, spec.user_range)
    elif spec.role == "complex":
        base = rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
    elif spec.role == "bool":
        base = rng.random(shape) < 0.5 if kind == "random" else np.full(shape, kind == "all true")
    elif spec.role == "string":
        base = np.array(rng.choice(np.array(_WORDS, dtype=object), shape), dtype=object)
    else:
        lo, hi = _int_interval(spec, dims)
        base = _int_base(kind, shape, rng, lo, hi)
        specials = list(_specials(spec, special, (lo, hi)))
    flat = base.reshape(-1)
    share = SPECIAL_SHARES[recipe.special_share % len(SPECIAL_SHARES)]
    if special:
        share = max(share, SPECIAL_SHARES[1])
    shared = _shared_specials(spec, special)
    if flat.size and share and shared:
        # At least one element of every such value where the input is big enough, so a
        # difference that one value alone shows is seen in any example with a share.
        count = min(flat.size, max(round(share * flat.size), len(shared)))
        chosen = rng.permutation(flat.size)[:count]
        picks = (rng.integers(len(shared)) + np.arange(count)) % len(shared)
        with np.errstate(invalid="ignore", over="ignore"):
            flat[chosen] = np.asarray(shared).astype(flat.dtype)[picks]
    if flat.size:
        for position, which in recipe.specials:
            flat[position % flat.size] = specials[which % len(specials)]
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        # np.ascontiguousarray would turn a 0-d input into shape (1,); np.require keeps it.
        return np.require(base.astype(target), requirements="C")


def materialize(example: Example, specs: Sequence[InputSpec]) -> dict[str, Array]:
    """The input arrays of `example`, by input name."""
    dims = dict(example.dims)
    feeds: dict[str, Array] = {}
    for spec, recipe in zip(specs, example.recipes, strict=True):
        if spec.dims is None:
            shape = recipe.free_dims
        else:
            shape = tuple(d if isinstance(d, int) else dims[d] for d in spec.dims)
        feeds[spec.name] = _fill(spec, recipe, shape, dims, example.special)
    return feeds


def plain_example(specs: Sequence[InputSpec], dims: Mapping[DimKey, int]) -> Example:
    """An example with the given dims and plain values (N(0, 1) floats, no special elements).

    What the size search runs the original model on.
    """
    recipes = []
    for spec in specs:
        kind = spec.kinds.index("normal") if "normal" in spec.kinds else 0
        free = () if spec.dims is not None else (DIM_MAX // 2,)
        recipes.append(Recipe(kind=kind, seed=0, specials=(), free_dims=free))
    ordered = tuple((key, int(dims[key])) for key in dim_keys(specs))
    return Example(dims=ordered, recipes=tuple(recipes))


def sized_example(specs: Sequence[InputSpec], dims: Mapping[DimKey, int]) -> Example:
    """An example with the given dims and ordinary values, no special elements.

    What the examples at the sizes a model mentions run on (`_size_examples`): N(0, 1)
    floats, integers spread over their interval (indices inside their tables, masks of both
    values), booleans of both values.
    """
    wanted = {"float": "normal", "index": "uniform", "mask": "uniform", "int": "uniform"}
    recipes = []
    for spec in specs:
        kind_name = wanted.get(spec.role, "random")
        kind = spec.kinds.index(kind_name) if kind_name in spec.kinds else 0
        free = () if spec.dims is not None else (DIM_MAX // 2,)
        recipes.append(Recipe(kind=kind, seed=1, specials=(), free_dims=free))
    ordered = tuple((key, int(dims[key])) for key in dim_keys(specs))
    return Example(dims=ordered, recipes=tuple(recipes))


def example_size(example: Example) -> tuple[int, int]:
    """(number of special elements, total of sampled dims): what shrinking minimizes."""
    specials = sum(len(r.specials) + r.special_share for r in example.recipes)
    return specials + (1 if example.special else 0), sum(size for _, size in example.dims)
