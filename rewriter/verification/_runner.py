"""Sessions that run one model: onnxruntime when it can load the model, else `onnx.reference`.

onnxruntime runs on the CPU provider (unless told otherwise) with *all graph optimizations
disabled*, so its own fusions cannot hide a wrong rewrite; `open_optimized` opens a second
session with all of them (`ORT_ENABLE_ALL`), the way models are deployed. A model that
onnxruntime rejects because it contains an op it does not know (a custom-domain op such as a
converter's `ExtractImagePatches`) runs on `onnx.reference` with the project's reference
kernels. A model onnxruntime rejects for any other reason (an ill-typed graph) is an error,
never silently handed to the more lenient reference evaluator. A rewritten model is held to
what its original needs (`open_rewritten`): where the original runs on onnxruntime, a
rewritten model onnxruntime cannot load fails every run, whatever the reason.

`onnxruntime` and `onnx.reference` are imported inside the functions that need them.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Protocol

import numpy as np

import ir
from rewriter.verification._errors import VerifyError
from rewriter.verification._kernels import KERNELS
from rewriter.verification._source import LoadedModel

logger = logging.getLogger(__name__)

ORT = "onnxruntime"
REFERENCE = "onnx.reference"
DISABLED = "ORT_DISABLE_ALL"
ENABLED = "ORT_ENABLE_ALL"
UNLOADABLE = "nothing (onnxruntime cannot load it)"

# onnxruntime's messages when a model uses an op it has no implementation for.
_UNKNOWN_OP = re.compile(
    r"is not a registered function/op|No opset import for domain|No Op registered for"
    r"|Could not find an implementation for"
)
# ml_dtypes element types that onnxruntime's numpy binding cannot convert by itself.
_EXOTIC = (
    ir.DataType.BFLOAT16,
    ir.DataType.FLOAT8E4M3FN,
    ir.DataType.FLOAT8E4M3FNUZ,
    ir.DataType.FLOAT8E5M2,
    ir.DataType.FLOAT8E5M2FNUZ,
)
_EXTERNAL_FOLDER_KEY = "session.model_external_initializers_file_folder_path"


class RunError(Exception):
    """A model failed while running on particular inputs (the message is one line)."""


class Session(Protocol):
    """One model, ready to run on feeds; `runtime` says which runtime runs it."""

    runtime: str
    output_names: tuple[str, ...]
    fallback_reason: str

    def run(self, feeds: Mapping[str, object]) -> dict[str, object]:
        """Outputs by name; raises RunError if the model fails on these inputs."""
        ...


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message, with onnxruntime's boilerplate removed.

    onnxruntime continues some messages on indented lines (which dims of which input are
    wrong: " index: 2 Got: 8 Expected: 16"); those join the first, its advice does not.
    """
    text = str(exc).strip() or type(exc).__name__
    first, *rest = text.splitlines()
    details = [
        part.strip()
        for part in rest
        if part[:1].isspace() and part.strip() and not part.strip().startswith("Please fix")
    ]
    line = "; ".join([first, *details])
    line = re.sub(r"^\[ONNXRuntimeError\] : \d+ : \w+ : ", "", line)
    return line[:300]


@functools.cache
def _exotic_numpy_names() -> dict[str, int]:
    return {ir.numpy_dtype(dt).name: int(dt) for dt in _EXOTIC}


def _iter_nodes(model: ir.Model) -> Iterator[ir.Node]:
    for graph in model.graphs():
        yield from graph


class OrtSession:
    """A model run by onnxruntime with graph optimizations disabled."""

    runtime = ORT
    fallback_reason = ""

    def __init__(self, session: Any) -> None:
        import onnxruntime as ort

        self._session = session
        self._run_options = ort.RunOptions()
        self._run_options.log_severity_level = 4
        self.output_names = tuple(o.name for o in session.get_outputs())
        self._exotic_out = any(
            o.type in ("tensor(bfloat16)",) or o.type.startswith("tensor(float8")
            for o in session.get_outputs()
        )

    def run(self, feeds: Mapping[str, object]) -> dict[str, object]:
        """Run on `feeds`; exotic dtypes (bfloat16, float8) go through OrtValues."""
        exotic = _exotic_numpy_names()
        feeds = {name: _feedable(value) for name, value in feeds.items()}
        needs_values = self._exotic_out or any(
            isinstance(v, np.ndarray) and v.dtype.name in exotic for v in feeds.values()
        )
        try:
            if needs_values:
                results = self._run_with_values(feeds)
            else:
                results = self._session.run(None, dict(feeds), self._run_options)
        except Exception as exc:  # onnxruntime raises its own untyped error classes
            raise RunError(first_line(exc)) from exc
        return dict(zip(self.output_names, results, strict=True))

    def _run_with_values(self, feeds: Mapping[str, object]) -> list[object]:
        import onnxruntime as ort

        exotic = _exotic_numpy_names()
        values = {}
        for name, array in feeds.items():
            assert isinstance(array, np.ndarray), f"feed {name} is not an array"
            if array.dtype.name in exotic:
                raw = np.ascontiguousarray(array).view(f"u{array.dtype.itemsize}")
                values[name] = ort.OrtValue.ortvalue_from_numpy_with_onnx_type(
                    raw, exotic[array.dtype.name]
                )
            else:
                values[name] = ort.OrtValue.ortvalue_from_numpy(array)
        outputs = self._session.run_with_ort_values(None, values, self._run_options)
        return [_from_ort_value(v) for v in outputs]


def _feedable(value: object) -> object:
    """Unicode arrays (strings read back from an .npz) become the object arrays ORT wants."""
    if isinstance(value, np.ndarray) and value.dtype.kind == "U":
        return value.astype(object)
    return value


def _from_ort_value(value: Any) -> object:
    if not value.is_tensor():
        return value.numpy()
    dtype = ir.numpy_dtype(ir.DataType(value.element_type()))
    if dtype.name not in _exotic_numpy_names():
        return value.numpy()
    data = ctypes.string_at(value.data_ptr(), value.tensor_size_in_bytes())
    return np.frombuffer(data, dtype=dtype).reshape(value.shape()).copy()


class _ReferenceRunner:
    """A model run by `onnx.reference` with the project's custom kernels."""

    runtime = REFERENCE

    def __init__(self, session: Any, output_names: tuple[str, ...], fallback_reason: str) -> None:
        self._session = session
        self.output_names = output_names
        self.fallback_reason = fallback_reason

    def run(self, feeds: Mapping[str, object]) -> dict[str, object]:
        """Run on `feeds`."""
        try:
            results = self._session.run(feeds)
        except Exception as exc:  # a reference kernel may raise anything on bad inputs
            raise RunError(first_line(exc)) from exc
        return dict(zip(self.output_names, results, strict=True))


def _ort_options(model_dir: str | None, optimized: bool = False) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    level = ort.GraphOptimizationLevel
    options.graph_optimization_level = level.ORT_ENABLE_ALL if optimized else level.ORT_DISABLE_ALL
    # Failures on rejected inputs are reported by the verifier, not logged by onnxruntime.
    options.log_severity_level = 4
    if model_dir is not None:
        options.add_session_config_entry(_EXTERNAL_FOLDER_KEY, model_dir)
    return options


def _open_ort(loaded: LoadedModel, providers: Sequence[str], optimized: bool = False) -> Any:
    import onnxruntime as ort

    if loaded.path is not None:
        options = _ort_options(None, optimized)
        return ort.InferenceSession(loaded.path, options, providers=list(providers))
    options = _ort_options(loaded.model.base_dir, optimized)
    return ort.InferenceSession(loaded.serialized(), options, providers=list(providers))


def _reference_proto(loaded: LoadedModel) -> Any:
    """The model as a ModelProto for `onnx.reference`, external data loaded into it.

    A converter may omit the opset import of a custom domain (tf2onnx's Python API does);
    the reference evaluator refuses such a model, so the import is added to a copy.
    """
    import onnx.external_data_helper

    model = loaded.model
    missing = {
        node.domain: None
        for node in _iter_nodes(model)
        if (node.domain, node.op_type) in KERNELS and node.domain not in model.opset_imports
    }
    proto = ir.to_onnx(model)
    if missing:
        copy = ir.from_onnx(proto, base_dir=model.base_dir)
        for domain in missing:
            copy.opset_imports[domain] = 1
        proto = ir.to_onnx(copy)
    base_dir = model.base_dir
    if base_dir is None and loaded.path is not None:
        base_dir = os.path.dirname(os.path.abspath(loaded.path))
    if base_dir is not None:
        onnx.external_data_helper.load_external_data_for_model(proto, base_dir)
    return proto


def _unrunnable_op(model: ir.Model) -> ir.Node | None:
    """The first node that neither onnx's schemas, our kernels nor a local function define."""
    local = {(fn.domain, fn.name) for fn in model.functions.values()}
    for node in _iter_nodes(model):
        key = (node.domain, node.op_type)
        if key in KERNELS or key in local:
            continue
        if not ir.schemas.op_exists(node.op_type, node.domain):
            return node
    return None


def _open_reference(loaded: LoadedModel, ort_error: BaseException) -> _ReferenceRunner:
    from rewriter.verification._reference import ReferenceSession

    try:
        session = ReferenceSession(_reference_proto(loaded))
    except Exception as exc:  # onnx.reference raises many unrelated types for unknown ops
        node = _unrunnable_op(loaded.model)
        if node is not None:
            raise VerifyError(
                f"{loaded.label}: neither onnxruntime nor the reference kernels can run op "
                f"`{node.op_type}` (domain `{node.domain or 'ai.onnx'}`)"
            ) from exc
        raise VerifyError(
            f"{loaded.label}: onnxruntime cannot load the model ({first_line(ort_error)}) and "
            f"the reference evaluator failed too ({first_line(exc)})"
        ) from exc
    outputs = tuple(v.name for v in loaded.model.graph.outputs)
    return _ReferenceRunner(session, outputs, first_line(ort_error))


def open_optimized(loaded: LoadedModel, providers: Sequence[str] | None = None) -> Session:
    """An onnxruntime session for `loaded` with every graph optimization (`ORT_ENABLE_ALL`).

    Raises:
        VerifyError: onnxruntime cannot load the model so (the message is one line).
    """
    chosen = tuple(providers) if providers else ("CPUExecutionProvider",)
    try:
        return OrtSession(_open_ort(loaded, chosen, optimized=True))
    except VerifyError:
        raise
    except Exception as exc:  # onnxruntime's error classes are not importable types
        raise VerifyError(
            f"{loaded.label}: onnxruntime cannot load the model with {ENABLED}: {first_line(exc)}"
        ) from exc


def save_optimized(loaded: LoadedModel, path: str, providers: Sequence[str] | None = None) -> None:
    """Write the graph onnxruntime's `ORT_ENABLE_ALL` optimizer makes of `loaded` to `path`.

    Through onnxruntime's public `SessionOptions.optimized_model_filepath`: what its fusions
    and its own constant folding did, as a model file.

    Raises:
        VerifyError: onnxruntime cannot load the model so, or cannot write the result (the
            message is one line).
    """
    import onnxruntime as ort

    chosen = list(providers) if providers else ["CPUExecutionProvider"]
    folder = loaded.model.base_dir if loaded.path is None else None
    options = _ort_options(folder, optimized=True)
    options.optimized_model_filepath = path
    try:
        if loaded.path is not None:
            ort.InferenceSession(loaded.path, options, providers=chosen)
        else:
            ort.InferenceSession(loaded.serialized(), options, providers=chosen)
    except VerifyError:
        raise
    except Exception as exc:  # onnxruntime's error classes are not importable types
        raise VerifyError(
            f"{loaded.label}: onnxruntime cannot optimize the model with {ENABLED}: "
            f"{first_line(exc)}"
        ) from exc


def open_session(
    loaded: LoadedModel, providers: Sequence[str] | None = None, *, reference: bool = True
) -> Session:
    """A session for `loaded`: onnxruntime if it can load it, else the reference evaluator.

    `reference=False`: onnxruntime or nothing (a model onnxruntime cannot load raises).

    Raises:
        VerifyError: onnxruntime rejects the model for a reason other than an unknown op (for
            any reason, without `reference`), or the model contains an op that neither
            runtime can run (named in the message).
    """
    chosen = tuple(providers) if providers else ("CPUExecutionProvider",)
    try:
        return OrtSession(_open_ort(loaded, chosen))
    except VerifyError:
        raise
    except Exception as exc:  # onnxruntime's error classes are not importable types
        if not reference or not _UNKNOWN_OP.search(str(exc)):
            raise VerifyError(
                f"{loaded.label}: onnxruntime cannot load the model: {first_line(exc)}"
            ) from exc
        logger.info("%s: onnxruntime cannot run it (%s); using onnx.reference", loaded.label, exc)
        return _open_reference(loaded, exc)


class UnloadableSession:
    """A rewritten model onnxruntime cannot load although it loads the original.

    Every run fails with the reason: such a model is a verification failure, never judged on
    the more lenient reference evaluator (a rewrite that writes Conv in float64, which
    onnxruntime's CPU provider has no kernel for, broke the model for its users).
    """

    runtime = UNLOADABLE

    def __init__(self, output_names: tuple[str, ...], reason: str) -> None:
        self.output_names = output_names
        self.fallback_reason = reason

    def run(self, feeds: Mapping[str, object]) -> dict[str, object]:
        """Always raises RunError with the load failure."""
        del feeds
        raise RunError(
            f"onnxruntime cannot load it, although it runs the original: {self.fallback_reason}"
        )


def open_rewritten(
    loaded: LoadedModel, original_runtime: str, providers: Sequence[str] | None = None
) -> Session:
    """A session for a rewritten model whose original runs on `original_runtime`.

    Where the original runs on onnxruntime, so must the rewritten model: when onnxruntime
    cannot load it the session is an `UnloadableSession` (each run fails). Where the
    original needs the reference evaluator (an op onnxruntime does not have), the rewritten
    model may too.

    Raises:
        VerifyError: as `open_session`, for a rewritten model of an original that does not
            run on onnxruntime.
    """
    if original_runtime != ORT:
        return open_session(loaded, providers)
    try:
        return open_session(loaded, providers, reference=False)
    except VerifyError as exc:
        reason = str(exc).removeprefix(f"{loaded.label}: onnxruntime cannot load the model: ")
        logger.info("%s: onnxruntime cannot load it: %s", loaded.label, reason)
        outputs = tuple(v.name for v in loaded.model.graph.outputs)
        return UnloadableSession(outputs, reason)
