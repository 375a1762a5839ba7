"""The Python API: `rewrite(model, rules=None, ...)`."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import ir
from rewriter._errors import RewriteError
from rewriter.api._vocabulary import load_rules, pass_manager
from rewriter.dsl import _ast as ast
from rewriter.engine import _trace
from rewriter.engine._manager import ProgressCallback, RewriteOptions
from rewriter.engine._trace import SkipEntry, Trace, TraceEntry

ModelLike = str | os.PathLike[str] | ir.Model | Any  # Any: an onnx.ModelProto
RulesLike = str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | ast.RuleSet | None


def library_path() -> Path:
    """The folder of the shipped rule library (`patterns/`)."""
    import patterns

    return Path(patterns.__file__).parent


# Rule folders that are opt-in: below a folder given as rules, a subfolder with one of these
# names is left out; name it directly (`--rules patterns/loops`) to use it.
OPT_IN_FOLDERS = ("loops", "ort")


def rule_files(folder: str | os.PathLike[str]) -> list[Path]:
    """The `.rw` files below `folder`, sorted by path, opt-in subfolders left out."""
    root = Path(folder)
    files = (
        p
        for p in root.rglob("*.rw")
        if not any(part in OPT_IN_FOLDERS for part in p.relative_to(root).parts[:-1])
    )
    return sorted(files, key=lambda p: p.as_posix())


def default_library_files() -> list[Path]:
    """The shipped `.rw` files used when no rules are given (opt-in folders left out)."""
    return rule_files(library_path())


class PhaseClock:
    """Wall time per phase of a run, in seconds, in the order the phases first ran.

    A phase entered more than once accumulates.
    """

    __slots__ = ("seconds",)

    def __init__(self) -> None:
        """An empty clock."""
        self.seconds: dict[str, float] = {}

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Add the time spent in the `with` block to phase `name`."""
        start = time.perf_counter()
        try:
            yield
        finally:
            elapsed = time.perf_counter() - start
            self.seconds[name] = self.seconds.get(name, 0.0) + elapsed


@dataclasses.dataclass(frozen=True)
class RewriteResult:
    """The outcome of `rewrite`: the rewritten model (IR and ONNX), the trace, statistics.

    `timings` holds seconds per phase: `load_rules` (only when `rewrite` loaded them),
    `load_model`, `convert` (when the opset was converted), `rewrite` (type inference,
    rules and passes, and any replay to roll a rule back) and `check` (onnx's checker).
    """

    model: ir.Model
    trace: Trace
    ops_before: dict[str, int]
    ops_after: dict[str, int]
    timings: dict[str, float]
    ruleset: ast.RuleSet

    @property
    def proto(self) -> Any:
        """The rewritten model as an onnx.ModelProto."""
        return ir.to_onnx(self.model)

    @property
    def nodes_before(self) -> int:
        """Node count before (main graph and subgraphs)."""
        return sum(self.ops_before.values())

    @property
    def nodes_after(self) -> int:
        """Node count after."""
        return sum(self.ops_after.values())

    def to_json(self) -> dict[str, object]:
        """Trace, node counts by op type before/after, and timings, ready for json.dump."""
        return {
            "trace": self.trace.to_json(),
            "nodes_before": self.nodes_before,
            "nodes_after": self.nodes_after,
            "ops_before": self.ops_before,
            "ops_after": self.ops_after,
            "timings_seconds": {k: round(v, 6) for k, v in self.timings.items()},
        }


def load_ruleset(rules: RulesLike, *, allow_python: bool = False) -> ast.RuleSet:
    """Rules from paths (files or folders), an existing RuleSet, or the shipped library."""
    if isinstance(rules, ast.RuleSet):
        return rules
    if rules is None:
        given: list[str | os.PathLike[str]] = [library_path()]
    elif isinstance(rules, str | os.PathLike):
        given = [rules]
    else:
        given = list(rules)
    paths: list[str | os.PathLike[str]] = []
    for path in given:
        if Path(path).is_dir():
            found = rule_files(path)
            if not found:
                raise RewriteError(f"{path}: no .rw rule files in this folder")
            paths.extend(_readable(p) for p in found)
        else:
            paths.append(path)
    key = _cache_key(paths, allow_python)
    if key is None:
        return load_rules(*paths, allow_python=allow_python)
    cached = _RULESET_CACHE.get(key)
    if cached is not None and _cache_key(cached[1], allow_python) == cached[2]:
        return cached[0]
    ruleset = load_rules(*paths, allow_python=allow_python)
    # The files that were included are checked too when the entry is read again.
    loaded = [file.path for file in ruleset.files]
    stamp = _cache_key(loaded, allow_python)
    if stamp is not None:
        if len(_RULESET_CACHE) >= _RULESET_CACHE_SIZE:
            _RULESET_CACHE.pop(next(iter(_RULESET_CACHE)))
        _RULESET_CACHE[key] = (ruleset, loaded, stamp)
    return ruleset


# Loaded rule sets by their files' names and stat (path, mtime, size): a program that rewrites
# many models with the same rules parses them once. A RuleSet is immutable, so sharing it is
# safe; an edited file (named, or included by one) has a new mtime or size and is loaded
# again. Each entry holds the rule set, every file it was loaded from, and their stat.
_RULESET_CACHE: dict[tuple[object, ...], tuple[ast.RuleSet, Sequence[str], tuple[object, ...]]] = {}
_RULESET_CACHE_SIZE = 8


def _cache_key(
    paths: Sequence[str | os.PathLike[str]], allow_python: bool
) -> tuple[object, ...] | None:
    """The cache key of loading `paths`, or None when a file cannot be stat'ed (not cached)."""
    key: list[object] = [allow_python]
    for path in paths:
        try:
            stat = os.stat(path)
        except OSError:
            return None  # load_rules reports it
        key.append((os.fspath(path), stat.st_ino, stat.st_mtime_ns, stat.st_size))
    return tuple(key)


def _readable(path: Path) -> Path:
    """`path` relative to the working folder when it is below it (shorter locations)."""
    try:
        return path.resolve().relative_to(Path.cwd())
    except ValueError:
        return path


def as_model(model: ModelLike, *, copy: bool = True) -> ir.Model:
    """An IR model from a path, a ModelProto or an IR model (copied unless `copy=False`)."""
    if isinstance(model, ir.Model):
        return ir.from_onnx(ir.to_onnx(model), base_dir=model.base_dir) if copy else model
    if isinstance(model, str | os.PathLike):
        return ir.load(model)
    try:
        import onnx
    except ImportError as exc:  # pragma: no cover - onnx is a dependency
        raise RewriteError("onnx is required to read a ModelProto") from exc
    if isinstance(model, onnx.ModelProto):
        return ir.from_onnx(model)
    raise TypeError(
        f"expected a path, an onnx.ModelProto or an ir.Model, got {type(model).__name__}"
    )


def rewrite(
    model: ModelLike,
    rules: RulesLike = None,
    *,
    allow_python: bool = False,
    max_rewrites: int | None = None,
    max_iterations: int = 8,
    replay_limit: int | None = None,
    exclude_rules: Sequence[str] = (),
    progress: ProgressCallback | None = None,
    copy: bool = True,
    target_opset: int | None = None,
    record_subgraphs: bool = False,
    add_opsets: Mapping[str, int] | None = None,
    freeze_initializer_inputs: bool = False,
) -> RewriteResult:
    """Apply `rules` (default: the shipped library) to `model` until nothing changes.

    Args:
        model: a path, an onnx.ModelProto, or an ir.Model (copied unless `copy=False`).
        rules: rule files/folders, a loaded RuleSet, or None for the shipped library.
        allow_python: permit `use` declarations (opt-in Python helpers).
        max_rewrites: the rewrite budget (default proportional to the graph size).
        max_iterations: rounds of rules and passes at most.
        replay_limit: stop after this many rewrites (to replay a prefix of a run).
        exclude_rules: names of rules not to apply.
        progress: called as progress(applied, pending) during long runs.
        copy: when `model` is an ir.Model, work on a copy (the default) or in place.
        target_opset: convert the default-domain opset to this version: up first (so fusions
            into newer ops can fire), or down after rules that decompose ops the target lacks
            (`where target_opset() < N`), with onnx's version converter.
        record_subgraphs: keep each rewrite's matched subgraph and replacement (with their
            neighbours) in the trace, for reports.
        add_opsets: opset imports to add before rewriting (e.g. {"com.microsoft": 1} so the
            opt-in onnxruntime fusions can apply); an added import nothing uses is dropped.
        freeze_initializer_inputs: main-graph inputs that an initializer also defines stop
            being inputs, so rules and folding may treat them as constants; a caller can no
            longer feed other values for them. Always done for models before IR version 4,
            which had to list every initializer as an input and whose initializers
            onnxruntime treats as constants (such a model becomes IR 4). From IR 4 on the
            input is an overridable default (as `keep_initializers_as_inputs=True` exports
            write every weight), kept unless this is set.

    Returns:
        The rewritten model, its trace and statistics.
    """
    clock = PhaseClock()
    if isinstance(rules, ast.RuleSet):
        ruleset = rules  # loaded by the caller, who can time that itself
    else:
        with clock.phase("load_rules"):
            ruleset = load_ruleset(rules, allow_python=allow_python)
    with clock.phase("load_model"):
        ir_model = as_model(model, copy=copy)
    start = time.perf_counter()
    before = _trace.op_histogram(ir_model)
    options = RewriteOptions(
        max_rewrites=max_rewrites,
        max_iterations=max_iterations,
        replay_limit=replay_limit,
        exclude_rules=frozenset(exclude_rules),
        progress=progress,
        target_opset=target_opset,
        record_subgraphs=record_subgraphs,
    )
    added = _add_opsets(ir_model, add_opsets or {})
    freeze = freeze_initializer_inputs or 0 < ir_model.ir_version < 4
    if freeze:
        freeze_inputs_with_initializers(ir_model)
    # To replay the run if the final model fails onnx's checker (see _checked_run).
    fresh = _fresh_copies(
        model,
        ir_model,
        copy=copy,
        add_opsets=add_opsets or {},
        freeze=freeze,
    )
    ir_model, trace = _checked_run(ir_model, fresh, ruleset, options, clock)
    _drop_unused_opsets(ir_model, added)
    after = _trace.op_histogram(ir_model)
    return RewriteResult(ir_model, trace, before, after, _timings(clock, start), ruleset)


FreshModel = Callable[[], ir.Model]
"""Makes a new IR model equal to the one a run started from."""


def _fresh_copies(
    given: ModelLike,
    lifted: ir.Model,
    *,
    copy: bool,
    add_opsets: Mapping[str, int],
    freeze: bool = False,
) -> FreshModel:
    """How to get the model a run starts from again, without copying it up front.

    A path is loaded again, a ModelProto lifted again, a copied ir.Model copied again (the
    caller's objects are never changed); only a model rewritten in place (`copy=False`) is
    lowered now, before the run changes it. Replays are rare (the checker refused the
    result), and lowering a model of large weights up front cost a copy of all of them.
    """
    if isinstance(given, ir.Model) and not copy:
        snapshot = ir.to_onnx(lifted)
        base_dir = lifted.base_dir
        return lambda: ir.from_onnx(snapshot, base_dir=base_dir)

    def again() -> ir.Model:
        model = as_model(given, copy=True)
        _add_opsets(model, add_opsets)
        if freeze:
            freeze_inputs_with_initializers(model)
        return model

    return again


_PHASES = ("load_rules", "load_model", "convert", "rewrite", "check")


def _timings(clock: PhaseClock, start: float) -> dict[str, float]:
    """The clock's phases and `rewrite`: the time since `start` spent in no other phase."""
    inner = clock.seconds.get("convert", 0.0) + clock.seconds.get("check", 0.0)
    timed = {**clock.seconds, "rewrite": time.perf_counter() - start - inner}
    return {phase: timed[phase] for phase in _PHASES if phase in timed}


def _add_opsets(model: ir.Model, opsets: Mapping[str, int]) -> list[str]:
    """Import the given domains the model lacks; returns the domains added."""
    added = []
    for domain, version in opsets.items():
        key = ir.schemas.normalize_domain(domain)
        if key not in model.opset_imports:
            model.opset_imports[key] = int(version)
            added.append(key)
    return added


def freeze_inputs_with_initializers(model: ir.Model) -> None:
    """Make main-graph inputs that an initializer defines plain initializers.

    Such a value is, from IR version 4 on, a default a caller may override, so no rule treats
    it as a constant (`is_const` is false for it). Removing the input makes it one. Before IR
    4 every initializer had to be an input too (onnxruntime treats them all as constants);
    the IR version becomes 4, the first that allows an initializer without an input.
    """
    graph = model.graph
    frozen = [v for v in graph.inputs if v.is_initializer()]
    for value in frozen:
        graph.remove_input(value)
    if frozen and 0 < model.ir_version < 4:
        model.ir_version = 4


def _drop_unused_opsets(model: ir.Model, added: Sequence[str]) -> None:
    """Remove imports `_add_opsets` added that no node ended up using."""
    if not added:
        return
    used = {
        ir.schemas.normalize_domain(node.domain)
        for graph in model.graphs()
        for node in graph.all_nodes()
    }
    for domain in added:
        if domain not in used:
            model.opset_imports.pop(domain, None)


def _run(
    ir_model: ir.Model,
    ruleset: ast.RuleSet,
    options: RewriteOptions,
    clock: PhaseClock | None = None,
) -> tuple[ir.Model, Trace]:
    """One run of the pass manager, with the opset conversions `target_opset` asks for."""
    clock = clock or PhaseClock()
    manager = pass_manager(ruleset, options)
    target = options.target_opset
    current = ir_model.opset_imports.get("", ir_model.opset_imports.get("ai.onnx"))
    if target is None or current is None or target == current:
        return ir_model, manager.run(ir_model)
    if target > current:
        with clock.phase("convert"):
            ir_model = ir.convert_version(ir_model, target)
        return ir_model, Trace.conversion(current, target).followed_by(manager.run(ir_model))
    # Rules that decompose ops the target lacks run first; then convert and run again.
    trace = manager.run(ir_model)
    with clock.phase("convert"):
        ir_model = ir.convert_version(ir_model, target)
    trace = trace.followed_by(Trace.conversion(current, target)).followed_by(manager.run(ir_model))
    return ir_model, trace


_MAX_CHECKER_RETRIES = 4


def _checker_problem(model: ir.Model) -> str | None:
    """Run onnx's checker on the lowered model: its whole message on one line, or None."""
    import onnx

    # The weights' bytes are not what a rewrite can break (lifting checked them): the checker
    # sees them as typed inputs, and a model of gigabytes checks like a small one.
    proto = ir.to_onnx(model, weights=False)
    if proto.ByteSize() > 2**31 - 1:
        return None  # too big for the in-memory checker; the per-rewrite checks still ran
    try:
        onnx.checker.check_model(proto)
    except (onnx.checker.ValidationError, RuntimeError, ValueError) as exc:
        # onnx names the offending node on the lines after the first one.
        return _trace.one_line(str(exc)) or type(exc).__name__
    return None


def _checked_run(
    ir_model: ir.Model,
    fresh: FreshModel,
    ruleset: ast.RuleSet,
    options: RewriteOptions,
    clock: PhaseClock | None = None,
) -> tuple[ir.Model, Trace]:
    """Run, then check the final model with onnx's checker.

    If the result fails the checker although the input passed, find the first rewrite that
    broke it by replaying prefixes of the run, leave the rule out at that one place (the whole
    rule if that place breaks the model again), and run again.
    """
    clock = clock or PhaseClock()
    result, trace = _run(ir_model, ruleset, options, clock)
    _raise_ir_version_for_initializers(result)
    with clock.phase("check"):
        problem = _checker_problem(result)
    if problem is None or _checker_problem(fresh()) is not None:
        return result, trace
    rejected: list[SkipEntry] = []
    for _ in range(_MAX_CHECKER_RETRIES):
        found = _first_checker_failure(fresh, ruleset, options, trace, problem)
        if found is None:
            break
        culprit, culprit_problem = found
        rejected.append(_checker_skip(culprit, culprit_problem))
        options = _excluding(options, culprit)
        result, trace = _run(fresh(), ruleset, options)
        _raise_ir_version_for_initializers(result)
        problem = _checker_problem(result)
        if problem is None:
            break
    if problem is not None:
        raise RewriteError(f"the rewritten model fails onnx's checker: {problem}")
    return result, dataclasses.replace(trace, skips=trace.skips + tuple(rejected))


def _raise_ir_version_for_initializers(model: ir.Model) -> None:
    """IR 4 for an IR 3 model that a pass gave an initializer which is not also an input.

    Rules and folding make `Constant` nodes in such a model; a pass that adds an initializer
    (a Loop's trip count) would otherwise leave a model onnx's checker refuses.
    """
    if not 0 < model.ir_version < 4:
        return
    for graph in model.graphs():
        inputs = {value.name for value in graph.inputs}
        if any(name not in inputs for name in graph.initializers):
            model.ir_version = 4
            return


def _checker_skip(culprit: TraceEntry, problem: str) -> SkipEntry:
    """The report of a rewrite left out because the model failed the checker after it."""
    matched = ", ".join(culprit.matched) or culprit.anchor
    where = f"{matched} in {culprit.graph}" if culprit.graph else matched
    return SkipEntry(
        culprit.rule,
        culprit.location,
        f"rolled back: the model failed onnx's checker: {_trace.one_line(problem)}",
        where,
    )


def _excluding(options: RewriteOptions, culprit: TraceEntry) -> RewriteOptions:
    """`options` leaving out the culprit rewrite: its rule at that site, or everywhere.

    The whole rule is left out when the entry names no site (repeat rules) or when leaving
    out the site did not help (the same site was found again).
    """
    site = (culprit.rule, culprit.graph, culprit.anchor)
    if not culprit.anchor or site in options.exclude_sites:
        return dataclasses.replace(options, exclude_rules=options.exclude_rules | {culprit.rule})
    return dataclasses.replace(options, exclude_sites=options.exclude_sites | {site})


def _first_checker_failure(
    fresh: FreshModel,
    ruleset: ast.RuleSet,
    options: RewriteOptions,
    trace: Trace,
    final_problem: str,
) -> tuple[TraceEntry, str] | None:
    """Bisect the applied rewrites for the first one after which the checker fails.

    Returns that rewrite and the checker's message right after it (`final_problem` when it
    is the last one).
    """
    applied = [e for e in trace.entries if e.kind == "rule"]
    good, bad = 0, len(applied)
    problem_at_bad = final_problem
    while bad - good > 1:
        middle = (good + bad) // 2
        replay = dataclasses.replace(options, replay_limit=middle)
        model, _ = _run(fresh(), ruleset, replay)
        problem = _checker_problem(model)
        if problem is None:
            good = middle
        else:
            bad = middle
            problem_at_bad = problem
    return (applied[bad - 1], problem_at_bad) if bad >= 1 else None
