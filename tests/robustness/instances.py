"""Fuzz cases built from the library's own rule instances, so that every rule is reached.

The random graphs of `random_graphs` are chains of hand-written motifs: rules whose match
those motifs never spell out (a GELU with the half on the other side, ExtractImagePatches,
a BatchNorm after a ConvTranspose) never fire there. check-rules already builds, for every
rule, small models the rule matches (`rewriter.checkrules.library_instances`). Here each such
instance is varied the ways check-rules does not vary it and rewritten with the *whole*
library (all rules and passes, not the one rule alone):

- its dims change at run time (a size may become 0 or another size; equal sizes stay equal)
  and are declared as symbols or as the new sizes;
- its inputs hold special values (NaN, infinities, signed zeros, subnormals, extremes);
- it runs inside both branches of an If (the two branches name their values alike, and like
  nothing in the main graph) or as the body of a local function.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import onnx
import onnx.helper as oh
import onnx.numpy_helper
from hypothesis import strategies as st

from tests.robustness import random_graphs

_ELEMENT_NAMES = {
    onnx.TensorProto.FLOAT: "float32",
    onnx.TensorProto.FLOAT16: "float16",
    onnx.TensorProto.DOUBLE: "float64",
    onnx.TensorProto.BFLOAT16: "bfloat16",
    onnx.TensorProto.INT64: "int64",
    onnx.TensorProto.INT32: "int32",
    onnx.TensorProto.BOOL: "bool",
}


@functools.lru_cache(maxsize=1)
def library_instances() -> tuple[tuple[str, onnx.ModelProto, int | None], ...]:
    """(rule, instance model, target opset) for every instantiable rule of the library."""
    import rewriter
    from rewriter.checkrules import CheckOptions
    from rewriter.checkrules import library_instances as instances_of

    ruleset = rewriter.load_rules(*rewriter.api.default_library_files())
    found = instances_of(ruleset, CheckOptions(instances=2, attempts=30))
    return tuple((name, instance.proto, instance.target) for name, instance in found)


def _input_shape(info: onnx.ValueInfoProto) -> tuple[int, ...] | None:
    """The static shape an instance declares for an input (None: not a static tensor)."""
    if not info.type.HasField("tensor_type"):
        return None
    dims = info.type.tensor_type.shape.dim
    if not all(d.HasField("dim_value") for d in dims):
        return None
    return tuple(d.dim_value for d in dims)


def _uses(graph: onnx.GraphProto, ops: frozenset[str]) -> bool:
    """Whether `graph` (or a graph inside one of its nodes) has a node of one of `ops`."""
    for node in graph.node:
        if node.op_type in ops:
            return True
        for attribute in node.attribute:
            subgraphs = [attribute.g] if attribute.HasField("g") else list(attribute.graphs)
            if any(_uses(subgraph, ops) for subgraph in subgraphs):
                return True
    return False


# Inputs on which onnxruntime's kernels (1.32) kill the process (SIGFPE) instead of raising:
# they cannot be compared, only crash the fuzzer. Integer Div of the type's minimum by -1
# (`random_graphs.input_values(divisible=True)` draws no minimum), and Einsum's batched
# contractions with an empty batch or free axis ("acbe,aecd->abcd" with a, b, c or d of size
# 0), so instances with an Einsum keep their sizes positive.
_DIVIDING_OPS = frozenset({"Div"})
_NO_EMPTY_OPS = frozenset({"Einsum"})


def _as_function(graph: onnx.GraphProto, opsets: list[Any]) -> onnx.ModelProto:
    """A main graph that calls `graph` as the local function `local.body`."""
    constants = [oh.make_node("Constant", [], [t.name], value=t) for t in graph.initializer]
    body = oh.make_function(
        "local",
        "body",
        [i.name for i in graph.input],
        [o.name for o in graph.output],
        [*constants, *graph.node],
        opsets,
    )
    call = oh.make_node(
        "body",
        [i.name for i in graph.input],
        [f"call_{o.name}" for o in graph.output],
        domain="local",
    )
    outputs = [onnx.ValueInfoProto(name=f"call_{o.name}") for o in graph.output]
    main = oh.make_graph([call], "instance", list(graph.input), outputs)
    return oh.make_model(
        main, opset_imports=[*opsets, oh.make_opsetid("local", 1)], functions=[body]
    )


def _in_if(graph: onnx.GraphProto, opsets: list[Any]) -> onnx.ModelProto:
    """A main graph whose If runs `graph` in either branch (the branches alike)."""

    def branch() -> onnx.GraphProto:
        return oh.make_graph(
            list(graph.node), "branch", [], list(graph.output), list(graph.initializer)
        )

    cond = oh.make_tensor_value_info("cond", onnx.TensorProto.BOOL, [])
    results = [f"if_{o.name}" for o in graph.output]
    node = oh.make_node("If", ["cond"], results, then_branch=branch(), else_branch=branch())
    outputs = [onnx.ValueInfoProto(name=name) for name in results]
    main = oh.make_graph([node], "instance", [*graph.input, cond], outputs)
    return oh.make_model(main, opset_imports=opsets)


@st.composite
def instance_cases(draw: st.DrawFn) -> random_graphs.Case:
    """A rule instance, varied in sizes, declared dims, values and scope."""
    name, proto, target = draw(st.sampled_from(library_instances()))
    model = onnx.ModelProto()
    model.CopyFrom(proto)
    graph = model.graph
    # Equal sizes stay equal (the rule may need them equal); each size may change.
    sizes = sorted({d for i in graph.input for d in (_input_shape(i) or ())})
    keep = draw(st.booleans())  # half the cases keep the sizes check-rules drew
    smallest = 1 if _uses(graph, _NO_EMPTY_OPS) else 0
    resized = {
        size: size if keep else draw(st.sampled_from([size, size, smallest, 1, 2, 3]))
        for size in sizes
    }
    symbolic = draw(st.booleans())
    divisible = _uses(graph, _DIVIDING_OPS)
    feeds: dict[str, np.ndarray] = {}
    for info in graph.input:
        shape = _input_shape(info)
        element = _ELEMENT_NAMES.get(info.type.tensor_type.elem_type)
        if shape is None or element is None:
            return draw(random_graphs.cases())  # an input this generator does not fill
        run_shape = tuple(resized[d] for d in shape)
        for dim, size, old in zip(info.type.tensor_type.shape.dim, run_shape, shape, strict=True):
            if symbolic and draw(st.booleans()):
                dim.dim_param = f"d{old}"
            else:
                dim.dim_value = size
        feeds[info.name] = draw(random_graphs.input_values(element, run_shape, divisible=divisible))
    # Sizes changed: only the element types of outputs and intermediates still hold.
    del graph.value_info[:]
    for output in graph.output:
        output.type.tensor_type.ClearField("shape")
    scope = draw(st.sampled_from(["main", "main", "if", "function"]))
    opsets = list(model.opset_import)
    if scope == "if":
        model = _in_if(graph, opsets)
        feeds["cond"] = np.array(draw(st.booleans()))
    elif scope == "function":
        model = _as_function(graph, opsets)
    model.ir_version = max(proto.ir_version, 10)
    return random_graphs.Case(model, feeds, target, (f"instance of {name}", scope))
