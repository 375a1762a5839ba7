"""onnxruntime's symbolic shape inference, used before onnx's when it succeeds.

onnxruntime's engine relates dims through Shape/Gather/Concat/Reshape chains (so an exported
Reshape's output is `[batch, sequence, 4, 16]` rather than fresh `unk__7` symbols), which
lets shape conditions of fusion rules hold on TorchScript exports. It runs without
`auto_merge`: when two symbols would have to be assumed equal it gives up, and onnx's own
(weaker, sound) inference is used instead, so no fact rests on an assumption.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import io
import logging
import os
import sys
from typing import Any

logger = logging.getLogger(__name__)

# The engine is pure Python (sympy): past this many nodes onnx's C++ inference is used, so
# rewriting time stays linear in the graph size.
MAX_NODES = 30_000


def _infer(engine: Any, proto: Any) -> Any:
    """`SymbolicShapeInference.infer_shapes` without its side effect.

    On an incomplete inference the public entry point saves `sym_shape_infer_temp.onnx` and a
    data file into the working directory; this runs the same steps and only raises.
    """
    opset = next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), 0)
    if opset < 7:
        raise ValueError("symbolic shape inference needs opset 7 or later")
    inference = engine(2**31 - 1, False, False, 0)
    inference._preprocess(proto)
    complete = False
    while inference.run_:
        complete = inference._infer_impl()
    inference._update_output_from_vi()
    if not complete:
        raise ValueError("incomplete symbolic shape inference")
    return inference.out_mp_


def _dims_all_known(proto: Any) -> bool:
    """True when every value of the main graph that something reads has all dims known.

    Known: a number, or a symbol onnx's inference did not have to invent (`unk__N`), which
    is a symbol the model declares (a dynamo export's value_info names every dim `s0`,
    `s0*s1`...); the engine could only relate dims that are already related by name. An
    output nothing reads (Dropout's mask, often untyped) asks no question of the engine.
    """
    graph = proto.graph
    infos = (*graph.input, *graph.value_info, *graph.output)
    known = {info.name for info in infos if _known_dims(info.type)}
    read = {name for node in graph.node for name in node.input}
    read.update(output.name for output in graph.output)
    for node in graph.node:
        if node.op_type in ("If", "Loop", "Scan") or any(a.HasField("g") for a in node.attribute):
            return False  # subgraph values are not listed here; let the stronger engine run
        if any(name and name in read and name not in known for name in node.output):
            return False
    return True


def _known_dims(type_proto: Any) -> bool:
    if type_proto.WhichOneof("value") != "tensor_type":
        return False
    tensor = type_proto.tensor_type
    return tensor.HasField("shape") and all(
        d.HasField("dim_value") or (d.dim_param and not d.dim_param.startswith("unk__"))
        for d in tensor.shape.dim
    )


@functools.cache
def _engine_class() -> Any:
    """The `SymbolicShapeInference` class of onnxruntime, imported without `onnxruntime.tools`.

    The package `onnxruntime.tools` imports torch in its `__init__` whenever torch is
    installed (for an unrelated export helper): 1.4 s added to every rewrite on a machine
    that has torch. The module itself needs only onnx, numpy, sympy and packaging, so it is
    loaded from its file under a private name; if that fails, the normal import is used.
    """
    try:
        spec = importlib.util.find_spec("onnxruntime")
        folders = list(spec.submodule_search_locations or []) if spec else []
        path = os.path.join(folders[0], "tools", "symbolic_shape_infer.py") if folders else ""
        module_spec = importlib.util.spec_from_file_location(_PRIVATE_NAME, path)
        if module_spec is None or module_spec.loader is None or not os.path.isfile(path):
            raise ImportError(path)
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[_PRIVATE_NAME] = module
        module_spec.loader.exec_module(module)
        return module.SymbolicShapeInference
    except Exception:  # a layout this does not know: the ordinary import
        sys.modules.pop(_PRIVATE_NAME, None)
        from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference

        return SymbolicShapeInference


_PRIVATE_NAME = "rewriter._ort_symbolic_shape_infer"


def ort_symbolic_inference(proto: Any) -> Any:
    """Infer shapes with onnxruntime's SymbolicShapeInference (no assumed merges).

    onnx's C++ inference (with data propagation) runs first; when it already gives every value
    read a shape of numbers and declared symbols there is nothing to relate and its result is
    returned, at a fraction of the cost of the pure-Python engine (a static 8k-node chain:
    0.6 s less; no sympy import for a dynamo export).
    """
    if len(proto.graph.node) > MAX_NODES:
        raise ValueError(f"more than {MAX_NODES} nodes; left to onnx's inference")
    import ir

    with contextlib.suppress(Exception):  # any failure leaves the question to the engine
        plain = ir.onnx_inference(proto)
        if _dims_all_known(plain):
            return plain
    engine = _engine_class()
    # The engine prints and logs its complaints; keep them out of the tool's output.
    chatter = io.StringIO()
    engine_logger = logging.getLogger(engine.__module__)
    level = engine_logger.level
    engine_logger.setLevel(logging.CRITICAL)
    with contextlib.redirect_stdout(chatter), contextlib.redirect_stderr(chatter):
        try:
            return _infer(engine, proto)
        finally:
            engine_logger.setLevel(level)
            if chatter.getvalue():
                logger.debug("symbolic shape inference said: %s", chatter.getvalue().strip())
