"""Scoring choices of approximate layers on one switchable model, here or on other cores.

The accuracy budget (`_budget`) asks many questions of one shape: "with these layers float
and the others approximate, how accurate is the model?". Every answer comes from the same
switchable model (`_sites.materialize(..., switchable=True)`): its boolean inputs pick, per
layer, an approximate option or the float nodes, so a question is one set of feeds, never a
rewrite, and one onnxruntime session (per process) answers them all. The original's outputs
on the tuning inputs are computed once (`AccuracyData`) and shared by every question.

`evaluate` answers one question; it is a plain importable function of picklable arguments (a
`Workload`: the switchable model's bytes, the inputs and the reference outputs), so it runs
in this process, in a `concurrent.futures` process pool (`spawn`: onnxruntime's threads do
not survive a fork; the workers ignore Ctrl-C, which the parent handles by shutting the pool
down) or as a Ray task. `Evaluator` picks one and keeps it open for a whole tuning run.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import hashlib
import math
import multiprocessing
import os
import pickle
import signal
import socket
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any

import numpy as np

from rewriter._errors import OptionError, RewriteError
from rewriter.quantize._sites import switch_name
from rewriter.verification import (
    Acceptance,
    AccuracyData,
    VerifyError,
    load_model,
    measure,
    metric_with_bound,
    open_optimized,
    open_session,
)

Candidate = tuple[int, int]
"""(layer index, option index): one approximate way to compute one layer."""

Choice = Mapping[int, int | None]
"""Layer index -> the option computed, None (or absent) for float."""


@dataclasses.dataclass(frozen=True)
class Workload:
    """What every evaluation of one tuning run shares (picklable).

    `model` is the switchable model's ONNX bytes, `key` a digest of it and of how it is run
    (workers keep one session per key), `metrics` the metrics to measure (the budget's
    first). `as_deployed`: run with onnxruntime's graph optimizations (`ORT_ENABLE_ALL`), for
    layers whose written form computes in float until onnxruntime fuses it into an integer
    kernel (static QDQ int8: QLinearConv); otherwise without, as verification runs.
    """

    model: bytes
    data: AccuracyData
    accept: tuple[Acceptance, ...]
    metrics: tuple[str, ...]
    switches: tuple[str, ...]
    providers: tuple[str, ...] | None = None
    # Judge by the pessimistic bootstrap bound at this confidence (None: the measured value).
    confidence: float | None = None
    key: str = ""
    as_deployed: bool = False

    @staticmethod
    def of(
        model: bytes,
        data: AccuracyData,
        accept: Sequence[Acceptance],
        switches: Sequence[str],
        *,
        providers: Sequence[str] | None = None,
        confidence: float | None = None,
        as_deployed: bool = False,
    ) -> Workload:
        """A workload, its key computed."""
        metrics = tuple(dict.fromkeys(a.metric for a in accept))
        digest = hashlib.sha256(model)
        digest.update(b"deployed" if as_deployed else b"off")
        return Workload(
            model,
            data,
            tuple(accept),
            metrics,
            tuple(switches),
            tuple(providers) if providers else None,
            confidence,
            digest.hexdigest(),
            as_deployed,
        )


@dataclasses.dataclass(frozen=True)
class Evaluation:
    """The outcome of one evaluation: metric values over all outputs, or why there are none.

    `choice` is the layers' options as measured (absent: float); `bounds` the pessimistic
    bootstrap bounds of the budget's metrics, when the workload asks for them.
    """

    choice: tuple[tuple[int, int], ...]
    values: tuple[tuple[str, float], ...]
    failure: str = ""
    bounds: tuple[tuple[str, float], ...] = ()

    def value(self, metric: str) -> float:
        """The value of `metric` (NaN when it was not measured)."""
        return dict(self.values).get(metric, math.nan)

    def meets(self, accept: Sequence[Acceptance]) -> bool:
        """True when every acceptance holds (by its bound when there is one; never failed)."""
        judged = {**dict(self.values), **dict(self.bounds)}
        return not self.failure and all(a.met_by(judged.get(a.metric, math.nan)) for a in accept)


def _feeds(workload: Workload, choice: Choice) -> dict[str, np.ndarray]:
    on = {switch_name(layer, option) for layer, option in choice.items() if option is not None}
    return {name: np.array(name in on) for name in workload.switches}


def nan_where_finite(reference: Sequence[np.ndarray], actual: Sequence[np.ndarray]) -> int:
    """How many elements are NaN in `actual` where `reference` holds a number (not NaN)."""
    count = 0
    for ref, act in zip(reference, actual, strict=True):
        ref_array = np.asarray(ref)
        act_array = np.asarray(act)
        if ref_array.dtype.kind != "f" or act_array.shape != ref_array.shape:
            continue
        count += int(np.count_nonzero(np.isnan(act_array) & ~np.isnan(ref_array)))
    return count


def evaluate_with(session: Any, workload: Workload, choice: Choice) -> Evaluation:
    """Score `choice` on an open session of the workload's model."""
    from rewriter.verification import RunError

    measured = tuple(sorted((k, v) for k, v in choice.items() if v is not None))
    switches = _feeds(workload, choice)
    data = workload.data
    actual: list[list[np.ndarray]] = []
    for index, feeds in enumerate(data.feeds):
        try:
            result = session.run({**feeds, **switches})
        except RunError as exc:
            return Evaluation(measured, (), f"the model failed on input {index + 1}: {exc}")
        actual.append([np.asarray(result[name]) for name in data.outputs])
    reference = [[ref[name] for name in data.outputs] for ref in data.reference]
    flat_ref = [array for arrays in reference for array in arrays]
    flat_act = [array for arrays in actual for array in arrays]
    for ref, act in zip(flat_ref, flat_act, strict=True):
        if np.shape(ref) != np.shape(act):
            return Evaluation(
                measured, (), f"an output has shape {np.shape(act)} not {np.shape(ref)}"
            )
    nans = nan_where_finite(flat_ref, flat_act)
    values: list[tuple[str, float]] = []
    bounds: list[tuple[str, float]] = []
    for metric in workload.metrics:
        if workload.confidence is None:
            values.append((metric, measure(metric, flat_ref, flat_act)))
            continue
        point, bound = metric_with_bound(metric, reference, actual, confidence=workload.confidence)
        values.append((metric, point))
        bounds.append((metric, bound))
    if nans:
        failure = f"NaN in {nans} output elements where the original has none"
        return Evaluation(measured, tuple(values), failure)
    return Evaluation(measured, tuple(values), "", tuple(bounds))


def open_workload_session(workload: Workload) -> Any:
    """An onnxruntime session of the workload (optimizations off unless `as_deployed`)."""
    import onnx

    loaded = load_model(onnx.load_from_string(workload.model), "measured")
    if workload.as_deployed:
        return open_optimized(loaded, workload.providers)
    return open_session(loaded, workload.providers)


# A worker process keeps the session of the workload it last measured (one per process).
_WORKER_SESSION: dict[str, Any] = {}


def evaluate(workload: Workload, choice: Choice) -> Evaluation:
    """Score `choice` (the worker function: opens the session once per process)."""
    session = _WORKER_SESSION.get(workload.key)
    if session is None:
        _WORKER_SESSION.clear()
        try:
            session = open_workload_session(workload)
        except VerifyError as exc:
            measured = tuple(sorted((k, v) for k, v in choice.items() if v is not None))
            return Evaluation(measured, (), str(exc))
        _WORKER_SESSION[workload.key] = session
    return evaluate_with(session, workload, choice)


def default_jobs() -> int:
    """The cores this process may use."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _ignore_interrupts() -> None:
    """Pool workers leave Ctrl-C to the parent, which shuts the pool down in order."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


class Evaluator:
    """Runs `evaluate` on many choices: in this process, in a process pool, or on Ray.

    Use as a context manager; the session, the pool (or the Ray connection this opened) close
    on exit, also when the run is interrupted. A Ray connection the caller opened before
    (`ray.is_initialized()`) is used and left open.
    """

    def __init__(self, workload: Workload, *, jobs: int = 1, ray_address: str | None = None):
        if jobs < 1:
            raise ValueError(f"jobs must be at least 1, got {jobs}")
        self.workload = workload
        self.jobs = jobs
        self.ray_address = ray_address
        self._session: Any = None
        self._pool: concurrent.futures.Executor | None = None
        self._ray: Any = None
        self._ray_started = False
        self._remote: Any = None
        self._workload_ref: Any = None

    @property
    def width(self) -> int:
        """How many evaluations run at once: the processes, or the Ray cluster's CPUs."""
        if self._ray is not None:
            return max(1, int(self._ray.cluster_resources().get("CPU", 1)))
        return self.jobs

    @property
    def description(self) -> str:
        """`in this process`, `on 4 local processes` or `on Ray at ADDRESS`."""
        if self.ray_address is not None:
            return f"on Ray at {self.ray_address}"
        return "in this process" if self.jobs == 1 else f"on {self.jobs} local processes"

    def __enter__(self) -> Evaluator:
        if self.ray_address is not None or self.jobs > 1:
            _check_picklable(self.workload)
        if self.ray_address is not None:
            self._open_ray()
        elif self.jobs > 1:
            context = multiprocessing.get_context("spawn")
            self._pool = concurrent.futures.ProcessPoolExecutor(
                self.jobs, mp_context=context, initializer=_ignore_interrupts
            )
        else:
            try:
                self._session = open_workload_session(self.workload)
            except VerifyError as exc:
                raise RewriteError(f"accuracy budget: {exc}") from exc
        return self

    def _open_ray(self) -> None:
        try:
            import ray
        except ImportError:
            raise OptionError(
                "ray_address",
                "needs Ray: pip install 'ray' (the `ray` extra of this package)",
                value=self.ray_address,
            ) from None
        if not ray.is_initialized():
            _check_reachable(self.ray_address)
            try:
                ray.init(address=self.ray_address, log_to_driver=False)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise OptionError(
                    "ray_address", f"cannot connect: {exc}", value=self.ray_address
                ) from exc
            self._ray_started = True
        self._ray = ray
        self._remote = ray.remote(evaluate)
        self._workload_ref = ray.put(self.workload)

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._session = None
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        if self._ray_started:
            self._ray.shutdown()
            self._ray_started = False

    def map(self, choices: Sequence[Choice]) -> list[Evaluation]:
        """The evaluation of each choice, in order."""
        if self._ray is not None:
            refs = [self._remote.remote(self._workload_ref, dict(c)) for c in choices]
            return list(self._ray.get(refs))
        if self._pool is not None and len(choices) > 1:
            futures = [self._pool.submit(evaluate, self.workload, dict(c)) for c in choices]
            return [future.result() for future in futures]
        if self._session is None:
            return [evaluate(self.workload, choice) for choice in choices]
        return [evaluate_with(self._session, self.workload, choice) for choice in choices]


def _check_picklable(workload: Workload) -> None:
    """Other processes get the workload pickled: say so when it cannot be.

    Raises:
        RewriteError: something in the workload does not pickle.
    """
    try:
        pickle.dumps(workload)
    except (pickle.PicklingError, TypeError, AttributeError) as exc:
        raise RewriteError(
            f"cannot send the model and its inputs to other processes ({exc}); one job "
            "measures in this process"
        ) from None


def _check_reachable(address: str | None) -> None:
    """Fail fast on a `HOST:PORT` (or `ray://HOST:PORT`) nobody listens at.

    Ray itself retries an unreachable head for minutes before it gives up.

    Raises:
        RewriteError: nothing accepts a connection there within a few seconds.
    """
    if address is None or address == "auto":
        return
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not port.isdigit():
        return  # not HOST:PORT: Ray reports what it makes of it
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=_CONNECT_SECONDS):
            pass
    except OSError as exc:
        raise OptionError("ray_address", f"cannot connect ({exc})", value=address) from None


_CONNECT_SECONDS = 5.0
