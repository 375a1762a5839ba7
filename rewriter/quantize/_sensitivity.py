"""Scoring rewrites with some approximate sites left out, serially, on local cores, or on Ray.

The accuracy budget (`_budget`) asks many independent questions of one shape: "rewrite the
model with these (rule, anchor) sites excluded; how accurate is the result?". `evaluate`
answers one. It is a plain importable function of picklable arguments (a `Workload`, which
holds the model as a path or as bytes, the loaded rule set, the rewrite options and the
inputs with the original's outputs on them, and a set of sites), so the same function runs
in this process, in a `concurrent.futures` process pool (`spawn`: onnxruntime's threads do
not survive a fork) or as a Ray task. `Evaluator` picks one of those and keeps it open for
every batch of a tuning run.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import multiprocessing
import os
import pickle
import socket
from collections.abc import Iterator, Sequence
from types import TracebackType
from typing import Any

from rewriter._errors import RewriteError
from rewriter.api._options import RewriteOptions
from rewriter.api._rewrite import rewrite
from rewriter.dsl import _ast as ast
from rewriter.verification import ALL_OUTPUTS, Acceptance, AccuracyData, VerifyError, score

Site = tuple[str, str]
"""(rule name, anchor): one application of a rule, as `TraceEntry.site` names it."""


@dataclasses.dataclass(frozen=True)
class Workload:
    """What every evaluation of one tuning run shares (picklable).

    `source` is the original model as a path, or its ONNX bytes (for workers that may not
    see this machine's files, e.g. on a Ray cluster). `options` has no progress callback
    and no budget.
    """

    source: str | bytes
    ruleset: ast.RuleSet
    options: RewriteOptions
    data: AccuracyData
    accept: tuple[Acceptance, ...]
    # Judge by the pessimistic bootstrap bound at this confidence (None: the measured value).
    confidence: float | None = None


@dataclasses.dataclass(frozen=True)
class Evaluation:
    """The outcome of one evaluation: metric values over all outputs, or why there are none.

    `fired` lists the approximate sites the run applied (to tell a caller when leaving some
    out let others appear); `bytes` is the rewritten model's serialized size; `bounds` the
    pessimistic bootstrap bounds of the budget's metrics, when the workload asks for them.
    """

    excluded: frozenset[Site]
    values: tuple[tuple[str, float], ...]
    fired: tuple[Site, ...]
    bytes: int = 0
    failure: str = ""
    bounds: tuple[tuple[str, float], ...] = ()

    def value(self, metric: str) -> float:
        """The value of `metric` (KeyError when it was not measured)."""
        return dict(self.values)[metric]

    def meets(self, accept: Sequence[Acceptance]) -> bool:
        """True when every acceptance holds (by its bound when there is one; never failed)."""
        judged = {**dict(self.values), **dict(self.bounds)}
        return not self.failure and all(a.met_by(judged[a.metric]) for a in accept)


def evaluate(workload: Workload, excluded: frozenset[Site]) -> Evaluation:
    """Rewrite the workload's model without `excluded` and score it (the worker function)."""
    model: Any = workload.source
    if isinstance(model, bytes):
        import onnx

        model = onnx.load_from_string(model)
    reason = "left out to measure the other sites"
    options = dataclasses.replace(
        workload.options, excluded_sites=dict.fromkeys(excluded, reason), copy=False
    )
    try:
        result = rewrite(model, workload.ruleset, options)
        measured = score(
            result.model, workload.data, workload.accept, confidence=workload.confidence
        )
    except (RewriteError, VerifyError) as exc:
        return Evaluation(excluded, (), (), failure=str(exc))
    overall = next(r for r in measured.rows if r.output == ALL_OUTPUTS)
    return Evaluation(
        excluded,
        overall.values,
        result.trace.approximate_sites(),
        result.proto.ByteSize(),
        overall.note,
        overall.bounds,
    )


def default_jobs() -> int:
    """The cores this process may use."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


class Evaluator:
    """Runs `evaluate` on many site sets: serially, in a process pool, or on a Ray cluster.

    Use as a context manager; the pool (or the Ray connection this opened) closes on exit.
    A Ray connection the caller opened before (`ray.is_initialized()`) is used and left open.
    """

    def __init__(self, workload: Workload, *, jobs: int = 1, ray_address: str | None = None):
        if jobs < 1:
            raise ValueError(f"jobs must be at least 1, got {jobs}")
        self.workload = workload
        self.jobs = jobs
        self.ray_address = ray_address
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
        """`serially`, `on 4 local processes` or `on Ray at ADDRESS`."""
        if self.ray_address is not None:
            return f"on Ray at {self.ray_address}"
        return "serially" if self.jobs == 1 else f"on {self.jobs} local processes"

    def __enter__(self) -> Evaluator:
        if self.ray_address is not None or self.jobs > 1:
            _check_picklable(self.workload)
        if self.ray_address is not None:
            self._open_ray()
        elif self.jobs > 1:
            context = multiprocessing.get_context("spawn")
            self._pool = concurrent.futures.ProcessPoolExecutor(self.jobs, mp_context=context)
        return self

    def _open_ray(self) -> None:
        try:
            import ray
        except ImportError:
            raise RewriteError(
                "--ray needs Ray: pip install 'ray' (the `ray` extra of this package)"
            ) from None
        if not ray.is_initialized():
            _check_reachable(self.ray_address)
            try:
                ray.init(address=self.ray_address, log_to_driver=False)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise RewriteError(f"--ray {self.ray_address}: cannot connect: {exc}") from exc
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
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None
        if self._ray_started:
            self._ray.shutdown()
            self._ray_started = False

    def map(self, site_sets: Sequence[frozenset[Site]]) -> list[Evaluation]:
        """The evaluation of each site set, in order."""
        if self._ray is not None:
            refs = [self._remote.remote(self._workload_ref, sites) for sites in site_sets]
            return list(self._ray.get(refs))
        if self._pool is not None and len(site_sets) > 1:
            futures = [self._pool.submit(evaluate, self.workload, s) for s in site_sets]
            return [future.result() for future in futures]
        return list(_serially(self.workload, site_sets))


def _check_picklable(workload: Workload) -> None:
    """Other processes get the workload pickled: say so when it cannot be.

    Raises:
        RewriteError: something in the rules or options does not pickle.
    """
    try:
        pickle.dumps(workload)
    except (pickle.PicklingError, TypeError, AttributeError) as exc:
        raise RewriteError(
            f"cannot send the rules and the model to other processes ({exc}); --jobs 1 "
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
        raise RewriteError(f"--ray {address}: cannot connect ({exc})") from None


_CONNECT_SECONDS = 5.0


def _serially(workload: Workload, site_sets: Sequence[frozenset[Site]]) -> Iterator[Evaluation]:
    for sites in site_sets:
        yield evaluate(workload, sites)
