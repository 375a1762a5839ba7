"""onnxscript's rewriter tests as a yardstick: every model they rewrite, through both tools.

onnxscript's rewriter has about 60 test modules (`onnxscript/rewriter/**/*_test.py`). This
script runs its rule tests (the modules below the rewriter's subfolders: its default rules,
its standard fusions, its onnxruntime fusions; the modules directly in `onnxscript/rewriter/`
test the pattern machinery with made-up rules) unchanged, from a checkout of onnxscript's
sources outside this repository, with the pytest plugin `onnxscript_capture.py`, which saves
every model a test hands to onnxscript's rewriter (`RewriteRuleSet.apply_to_model`) and the
model it gets back. Models of tests that fail here are left out; a model saved twice is
measured once. For each model:

* onnxscript's result, judged against the model it rewrote with `rewriter.verify`
  (onnxruntime, or onnx's reference evaluator for functions the model defines; generated
  inputs with NaN, infinities and extremes in some examples): *exact*; *exact on finite
  inputs* (it differs only where an input holds NaN or an infinity, as fused attention
  does); *exact only for the default values of its overridable inputs* (it read an
  initializer that is also a graph input as a constant: fed another value, it differs);
  *an invalid model* (onnx's checker refuses it where it accepts the original);
  *approximate* (within 1e-3 relative on plain inputs); or it *differs*;
* this project's default library on the same model (`rewriter.rewrite`), and with
  `patterns/ort` and the `com.microsoft` opset added where onnxscript fused into
  onnxruntime's contrib ops (its `ort_fusions` tests, or a model that has such ops), judged
  the same way: a result that is not exact where no rule of the run declared `assumes
  finite` is *wrong*, unless rules that declare `approximate` made it (listed apart: the
  rule says by how much it may change numerics); a model the rewrite refuses is *refused*
  (and whether onnxruntime runs it).

Nodes are counted with subgraphs and with the functions a model defines inlined (onnxscript's
fusions pass through such functions; what runs is counted). A *node gap* is a model where
this project ends with more nodes than onnxscript's exact result; a *missed fusion* a fused
op (a contrib or custom-domain op, or a standard op onnx defines by a function: FusedMatMul,
SkipLayerNormalization, RotaryEmbedding, HardSwish, ...) that onnxscript's exact result
creates and this project's result has none of, or fewer of without having fewer nodes.

Sources: `--onnxscript-src` names a checkout of https://github.com/microsoft/onnxscript or its
git directory (a bare clone: the tests are taken from `--onnxscript-rev` with `git archive`);
without it the script clones the installed onnxscript's release tag. Nothing is written into
this repository: the sources and saved models go to `--workdir` (default: a folder in the
system's temporary directory). Without sources (no checkout, no network) the suite is
skipped with a message and exit code 0.

    python benchmarks/peer_tests.py --suite onnxscript --onnxscript-src ~/onnxscript
    python benchmarks/peer_onnxscript.py --onnxscript-src ~/onnxscript   # the same
    python benchmarks/peer_onnxscript.py --only 'rules/common/*' --examples 5
    python benchmarks/peer_onnxscript.py --keep --json out.json       # keep the saved models
    python benchmarks/peer_onnxscript.py --saved DIR                   # measure them again
    python benchmarks/peer_onnxscript.py --markdown benchmarks/results/onnxscript_tests.md

Exit code 1 when this project's result is wrong or refused on a model onnxruntime runs, has
more nodes than onnxscript's exact result, or misses a fusion that result makes.
"""

from __future__ import annotations

import argparse
import dataclasses
import fnmatch
import functools
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import onnx
import onnx.checker
import onnx.defs
import onnx.inliner
import onnxruntime
import peer_ort_fusion

import rewriter
from rewriter.verification import (
    Criterion,
    InputOptions,
    RuntimeOptions,
    VerifyError,
    VerifyOptions,
)

BENCH = Path(__file__).resolve().parent
REPO_URL = "https://github.com/microsoft/onnxscript"
TESTS_UNDER = "onnxscript/rewriter"
CONTRIB = "com.microsoft"

# onnxscript rewrites this library leaves out on purpose, by the test module that makes them:
# a node gap on such a model is reported apart, with the reason (as peer_tests.py's INEXACT
# does for onnxoptimizer).
BY_DESIGN: dict[str, str] = {
    "ort_fusions/softmax_test.py": "drops the float32 Casts around a float16 Softmax: equal "
    "only where the runtime computes a float16 Softmax in float32 (onnxruntime's CPU kernel "
    "does); quantize/float16.rw keeps Softmax in float32 for accuracy",
}

# The verdicts a result can get against the model it rewrote.
EXACT = "exact"
FINITE = "exact on finite inputs"
DEFAULTS = "exact only for the default values of its overridable inputs"
INVALID = "an invalid model (onnx's checker refuses it)"
APPROXIMATE = "approximate"
DIFFERS = "differs"
NOT_COMPARED = "not compared"
# How an approximate result is told from one that differs: direct, 1e-3 relative.
_APPROXIMATE_CRITERION = Criterion(compare="direct", rtol=1e-3, atol=1e-4)


# ----------------------------------------------------------------------------- sources


def default_workdir() -> Path:
    """Where sources and saved models go unless `--workdir` says otherwise."""
    return Path(tempfile.gettempdir()) / "onnx-rewrite-onnxscript-tests"


def _git(*args: str, cwd: Path | None = None) -> str:
    done = subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, check=False, timeout=600
    )
    if done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)}: {done.stderr.strip()[:300]}")
    return done.stdout.strip()


def _is_git_dir(path: Path) -> bool:
    return (path / "HEAD").is_file() and (path / "objects").is_dir()


def _export(git_dir: Path, rev: str, workdir: Path) -> Path:
    """`onnxscript/` of `rev` in `git_dir`, unpacked once into the work folder."""
    commit = _git(f"--git-dir={git_dir}", "rev-parse", f"{rev}^{{commit}}")
    target = workdir / f"src-{commit[:12]}"
    if (target / TESTS_UNDER).is_dir():
        return target
    target.mkdir(parents=True, exist_ok=True)
    archive = workdir / f"src-{commit[:12]}.tar"
    with archive.open("wb") as out:
        subprocess.run(
            ["git", f"--git-dir={git_dir}", "archive", commit, "onnxscript", "VERSION", "LICENSE"],
            stdout=out,
            check=True,
            timeout=600,
        )
    with tarfile.open(archive) as tar:
        tar.extractall(target, filter="data")
    archive.unlink()
    return target


def find_sources(src: str | None, rev: str, workdir: Path) -> tuple[Path, str]:
    """A folder holding onnxscript's `onnxscript/` package and tests, and what it is.

    Raises:
        LookupError: no sources (`src` is neither a checkout nor a git directory, or the
            clone failed); the message says what to give instead.
    """
    if src:
        path = Path(src).expanduser().resolve()
        if (path / TESTS_UNDER).is_dir() and not _is_git_dir(path):
            return path, "a checkout"  # no machine path: the label goes into the report
        git_dir = path / ".git" if (path / ".git").is_dir() else path
        if _is_git_dir(git_dir):
            try:
                folder = _export(git_dir, rev, workdir)
            except (RuntimeError, subprocess.SubprocessError, OSError) as exc:
                raise LookupError(f"--onnxscript-src {src}: {exc}") from exc
            return folder, f"{rev} ({folder.name[4:]}) of a git directory"
        raise LookupError(f"--onnxscript-src {src}: neither a checkout nor a git directory")
    version = importlib.metadata.version("onnxscript")
    clone = workdir / f"clone-v{version}"
    if not _is_git_dir(clone / ".git"):
        try:
            _git(
                "clone", "--quiet", "--depth", "1", "--branch", f"v{version}", REPO_URL, str(clone)
            )
        except (RuntimeError, subprocess.SubprocessError, OSError) as exc:
            raise LookupError(
                f"cannot clone {REPO_URL} at v{version} ({exc}); give --onnxscript-src with a "
                "checkout or a git directory of onnxscript"
            ) from exc
    return clone, f"tag v{version} of {REPO_URL}"


# The rule tests: the modules below onnxscript/rewriter/'s subfolders (its rule library, its
# standard and onnxruntime fusions). The modules directly in onnxscript/rewriter/ test the
# pattern machinery with rules they make up for the test (Add into a custom `Double` op,
# Gemm + Relu into `GemmRelu`), which are no rewrite of onnxscript's to compare with.
RULE_TESTS = ("*/*",)


def test_files(source: Path, only: list[str] | None) -> list[str]:
    """The rewriter's rule test modules (relative to `source`), those matching `only` if given
    (globs below onnxscript/rewriter/; `*` takes the machinery's tests too)."""
    root = source / TESTS_UNDER
    files = sorted(p.relative_to(source).as_posix() for p in root.rglob("*_test.py"))
    under = len(TESTS_UNDER) + 1
    patterns = only or RULE_TESTS
    return [f for f in files if any(fnmatch.fnmatch(f[under:], pattern) for pattern in patterns)]


# ----------------------------------------------------------------------------- harvesting


@dataclasses.dataclass
class Case:
    """One model a passing test of onnxscript handed its rewriter, and what it got back."""

    name: str
    test: str
    rules: list[str]
    number: int  # the saved files' number: <number>.before.onnx, <number>.after.onnx
    before: onnx.ModelProto
    after: onnx.ModelProto


def run_tests(
    source: Path, files: list[str], saved: Path, limits: list[str], timeout: float
) -> tuple[int, str]:
    """Run the test modules under the recording plugin; pytest's exit code and summary."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(BENCH), str(source), *filter(None, [env.get("PYTHONPATH")])]
    )
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-p",
        "onnxscript_capture",
        "--save-rewrites",
        str(saved),
        *limits,
        "--continue-on-collection-errors",
        f"--rootdir={source}",
        *files,
    ]
    done = subprocess.run(
        command, cwd=source, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    return done.returncode, done.stdout + done.stderr


def _test_label(test: str) -> str:
    return test.removeprefix(TESTS_UNDER + "/")


@dataclasses.dataclass
class Harvest:
    """What the test run left: the cases, and the models of passing tests not measured."""

    cases: list[Case]
    failing: int  # models of tests that failed here
    left_out: dict[str, list[str]]  # why -> the tests whose models were not saved


def harvest(saved: Path, modules: set[str] | None = None) -> Harvest:
    """The saved models of passing tests (of `modules` if given), each distinct pair once.

    Raises:
        FileNotFoundError: the test run wrote no index (pytest did not start).
    """
    records = json.loads((saved / "index.json").read_text())
    cases: list[Case] = []
    seen: set[int] = set()
    failing = 0
    left_out: dict[str, list[str]] = {}
    per_test: Counter[str] = Counter()
    for record in records:
        test = _test_label(record["test"])
        if modules is not None and test.split("::")[0] not in modules:
            continue
        if not record["passed"]:
            failing += 1
            continue
        if record["number"] is None:
            left_out.setdefault(record["why"], []).append(test)
            continue
        if record["number"] in seen:
            continue
        seen.add(record["number"])
        per_test[test] += 1
        cases.append(
            Case(
                f"{test}#{per_test[test] - 1}",
                test,
                list(record["rules"]),
                record["number"],
                onnx.load(saved / f"{record['number']}.before.onnx"),
                onnx.load(saved / f"{record['number']}.after.onnx"),
            )
        )
    for case in cases:  # a test that rewrote one model is named without "#0"
        if per_test[case.test] == 1:
            case.name = case.test
    return Harvest(cases, failing, left_out)


# ----------------------------------------------------------------------------- measuring


def op_counts(model: onnx.ModelProto) -> Counter[str]:
    """Node count per op type (`domain:op` outside the default domain), subgraphs included.

    A call of a function the model defines counts as the nodes of its body (onnxscript's
    fusions pass through such functions, `ai.onnxruntime._fusion.SDPA` and the like): what
    runs is counted, not how it is packaged.
    """
    if model.functions:
        model = onnx.inliner.inline_local_functions(model)
    return peer_ort_fusion.op_counts(model)


@dataclasses.dataclass
class Outcome:
    """One tool's result on one model."""

    nodes: int | None = None
    ops: dict[str, int] = dataclasses.field(default_factory=dict)
    verdict: str = NOT_COMPARED
    note: str = ""
    assumed: int = 0  # rewrites of rules that `assumes finite` or `assumes nonempty`
    approximated: int = 0  # rewrites of rules that declare `approximate METRIC CMP BOUND`


def _verify(
    original: onnx.ModelProto,
    result: onnx.ModelProto,
    examples: int,
    special_values: bool = True,
    criterion: Criterion | None = None,
) -> Any:
    options = VerifyOptions(
        inputs=InputOptions(examples=examples, seed=0, special_values=special_values),
        criterion=criterion or Criterion(),
        runtime=RuntimeOptions(ort_enable_all=False),
        save_counterexample=False,
    )
    return rewriter.verify(original, result, options)


def overridable_inputs(model: onnx.ModelProto) -> list[str]:
    """Graph inputs that an initializer also defines: their values are defaults a user may
    override, so a rewrite that reads the initializer's value is exact only for that value."""
    inputs = {i.name for i in model.graph.input}
    return [t.name for t in model.graph.initializer if t.name in inputs]


def _fed(model: onnx.ModelProto, names: list[str]) -> onnx.ModelProto:
    """`model` with the initializers of `names` dropped: the inputs must be fed."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    kept = [t for t in copy.graph.initializer if t.name not in names]
    del copy.graph.initializer[:]
    copy.graph.initializer.extend(kept)
    return copy


def _exact_when_fed(
    original: onnx.ModelProto, result: onnx.ModelProto, names: list[str], examples: int
) -> bool:
    """Whether `result` still computes what `original` does when `names` are fed."""
    try:
        return bool(_verify(_fed(original, names), _fed(result, names), examples).ok)
    except VerifyError:  # the result no longer has those inputs
        return False


def judge(
    original: onnx.ModelProto, result: onnx.ModelProto, examples: int, unchanged: bool = False
) -> Outcome:
    """Node counts of `result` and how closely it computes what `original` computes.

    `unchanged`: the tool changed nothing, so `result` is exact without running it (as is a
    result whose graph is byte for byte the original's).
    """
    ops = op_counts(result)
    outcome = Outcome(sum(ops.values()), dict(ops))
    if unchanged or result.graph.SerializeToString() == original.graph.SerializeToString():
        outcome.verdict = EXACT
        return outcome
    # onnx's checker against the result, where it accepts the original: judged once the two
    # ran side by side (an original that always fails is no comparison at all)
    problem = "" if checker_problem(original) else checker_problem(result)
    try:
        verdict = _verify(original, result, examples)
        if problem:
            outcome.verdict = INVALID
            outcome.note = problem
            return outcome
        if verdict.ok:
            overridable = overridable_inputs(original)
            if overridable and not _exact_when_fed(original, result, overridable, examples):
                outcome.verdict = DEFAULTS
                outcome.note = f"differs when {', '.join(overridable)} are fed"
            else:
                outcome.verdict = EXACT
            return outcome
        outcome.note = (verdict.message or "outputs differ").splitlines()[0][:160]
        if _verify(original, result, examples, special_values=False).ok:
            outcome.verdict = FINITE
        elif _verify(
            original, result, examples, special_values=False, criterion=_APPROXIMATE_CRITERION
        ).ok:
            outcome.verdict = APPROXIMATE
        else:
            outcome.verdict = DIFFERS
    except Exception as exc:  # VerifyError, or a model onnx or this project cannot read
        outcome.note = f"{type(exc).__name__}: {exc}".splitlines()[0][:160]
    return outcome


@functools.cache
def _runtime_ops() -> dict[str, int]:
    """Ops onnxruntime registers in the default domain, by the first opset it has them at
    (its own SimplifiedLayerNormalization, LayerNormalization from opset 1, ...)."""
    from onnxruntime.capi import onnxruntime_pybind11_state as ort_schemas  # public schemas

    since: dict[str, int] = {}
    for schema in ort_schemas.get_all_operator_schema():
        if schema.domain in ("", "ai.onnx"):
            since[schema.name] = min(
                since.get(schema.name, schema.since_version), schema.since_version
            )
    return since


def _uses_runtime_only_ops(model: onnx.ModelProto) -> bool:
    """`model` has a default-domain op onnx has no schema for at its opset, that onnxruntime
    registers at that opset (its checker refuses such a model, onnxruntime runs it)."""
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    runtime = _runtime_ops()
    for node in model.graph.node:
        if node.domain in ("", "ai.onnx") and runtime.get(node.op_type, opset + 1) <= opset:
            try:
                onnx.defs.get_schema(node.op_type, opset)
            except onnx.defs.SchemaError:
                return True
    return False


def checker_problem(model: onnx.ModelProto) -> str:
    """What onnx's checker (with strict type inference) says against `model` ('' if nothing).

    A model with onnxruntime's own default-domain ops is not checked: onnx does not know them.
    """
    if _uses_runtime_only_ops(model):
        return ""
    try:
        onnx.checker.check_model(model, full_check=True)
    except Exception as exc:
        return str(exc).strip().splitlines()[0][:160]
    return ""


def is_fused_op(key: str) -> bool:
    """An op that stands for several: a contrib or custom-domain op, or a standard op that
    onnx defines by a function of simpler ones (LayerNormalization, Gelu, HardSwish, ...)."""
    domain, _, op = key.rpartition(":")
    if domain:
        return True
    try:
        schema = onnx.defs.get_schema(op)
    except onnx.defs.SchemaError:
        return False
    return bool(schema.has_function or schema.has_context_dependent_function)


def uses_contrib_ops(case: Case) -> bool:
    """onnxscript fused into onnxruntime's contrib ops here (or the model has some)."""
    return "/ort_fusions/" in f"/{case.test}" or any(
        n.domain == CONTRIB for m in (case.before, case.after) for n in m.graph.node
    )


def run_ours(case: Case, examples: int) -> Outcome:
    """This project's library on the case's model (with `patterns/ort` for contrib cases)."""
    if uses_contrib_ops(case):
        library = rewriter.library_path()
        rules: Any = [library, library / "ort"]
        options = rewriter.RewriteOptions(add_opsets={CONTRIB: 1})
    else:
        rules, options = None, rewriter.RewriteOptions()
    try:
        result = rewriter.rewrite(case.before, rules, options)
    except Exception as exc:
        return Outcome(note=f"{type(exc).__name__}: {exc}".splitlines()[0][:200])
    outcome = judge(case.before, result.proto, examples, unchanged=not result.trace.entries)
    outcome.assumed = sum(1 for entry in result.trace.entries if entry.assumed)
    outcome.approximated = sum(1 for entry in result.trace.entries if entry.approximate)
    return outcome


def onnxruntime_refusal(model: onnx.ModelProto) -> str:
    """Why onnxruntime cannot load `model` ('' when it can)."""
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    try:
        onnxruntime.InferenceSession(
            model.SerializeToString(), options, providers=["CPUExecutionProvider"]
        )
    except Exception as exc:
        return str(exc).strip().splitlines()[0][:160]
    return ""


@dataclasses.dataclass
class Row:
    """Everything measured on one model."""

    name: str
    test: str
    number: int
    contrib: bool
    original: dict[str, int]  # the model's op counts
    ours: Outcome
    peer: Outcome
    ort_refuses: str = ""  # why onnxruntime cannot load the original, when ours refused it

    @property
    def refused(self) -> bool:
        """This project's rewrite failed."""
        return self.ours.nodes is None

    @property
    def declared_approximate(self) -> bool:
        """This project's result is not exact, and rules that declare so made it."""
        return self.ours.verdict in (APPROXIMATE, DIFFERS) and self.ours.approximated > 0

    @property
    def wrong(self) -> bool:
        """This project's result computes something else (no declared assumption covers it)."""
        if self.declared_approximate:
            return False
        if self.ours.verdict in (DEFAULTS, INVALID, APPROXIMATE, DIFFERS):
            return True
        return self.ours.verdict == FINITE and not self.ours.assumed

    def missed_fusions(self) -> dict[str, tuple[int, int]]:
        """Fused ops onnxscript's exact result created, fewer here: op -> (ours, its)."""
        if self.peer.verdict not in (EXACT, FINITE) or self.ours.nodes is None:
            return {}
        return {
            op: (self.ours.ops.get(op, 0), count)
            for op, count in self.peer.ops.items()
            if op not in self.original and is_fused_op(op) and self.ours.ops.get(op, 0) < count
        }

    def misses_a_fusion(self) -> bool:
        """Some fused op of onnxscript's is missing here altogether, or fewer of one while
        this result is not smaller either (three Clips there, one here, is no miss)."""
        fewer_nodes = (self.ours.nodes or 0) < (self.peer.nodes or 0)
        return any(ours == 0 or not fewer_nodes for ours, _ in self.missed_fusions().values())


def measure(cases: list[Case], examples: int, progress: bool) -> list[Row]:
    """Run onnxscript's result and this project on every case."""
    rows = []
    for i, case in enumerate(cases):
        if progress:
            print(f"[{i + 1}/{len(cases)}] {case.name}", file=sys.stderr, flush=True)
        row = Row(
            case.name,
            case.test,
            case.number,
            uses_contrib_ops(case),
            dict(op_counts(case.before)),
            run_ours(case, examples),
            judge(case.before, case.after, examples),
        )
        if row.refused:
            row.ort_refuses = onnxruntime_refusal(case.before)
        rows.append(row)
    return rows


# ----------------------------------------------------------------------------- report


def _op_diff(ours: dict[str, int], theirs: dict[str, int]) -> str:
    keys = sorted(
        set(ours) | set(theirs), key=lambda k: (-abs(ours.get(k, 0) - theirs.get(k, 0)), k)
    )
    return ", ".join(
        f"{k} {ours.get(k, 0)}/{theirs.get(k, 0)}"
        for k in keys
        if ours.get(k, 0) != theirs.get(k, 0)
    )


@dataclasses.dataclass
class Tally:
    """The rows sorted into the report's classes."""

    fewer: list[Row] = dataclasses.field(default_factory=list)
    same: list[Row] = dataclasses.field(default_factory=list)
    gaps: list[Row] = dataclasses.field(default_factory=list)
    finite_gaps: list[Row] = dataclasses.field(default_factory=list)
    peer_inexact: list[Row] = dataclasses.field(default_factory=list)
    not_compared: list[Row] = dataclasses.field(default_factory=list)
    wrong: list[Row] = dataclasses.field(default_factory=list)
    approximate: list[Row] = dataclasses.field(default_factory=list)
    refused: list[Row] = dataclasses.field(default_factory=list)
    refused_by_ort_too: list[Row] = dataclasses.field(default_factory=list)
    missed: list[Row] = dataclasses.field(default_factory=list)
    by_design: list[Row] = dataclasses.field(default_factory=list)

    def add(self, row: Row) -> None:
        """File one row (missed fusions are counted on top of its class)."""
        if row.refused:
            (self.refused_by_ort_too if row.ort_refuses else self.refused).append(row)
            return
        if row.misses_a_fusion():
            self.missed.append(row)
        if row.wrong:
            self.wrong.append(row)
        elif row.declared_approximate:
            self.approximate.append(row)
        elif row.peer.verdict in (DEFAULTS, INVALID, APPROXIMATE, DIFFERS):
            self.peer_inexact.append(row)
        elif row.peer.verdict == NOT_COMPARED or row.ours.verdict == NOT_COMPARED:
            self.not_compared.append(row)
        else:
            assert row.ours.nodes is not None, row.name
            assert row.peer.nodes is not None, row.name
            if row.ours.nodes > row.peer.nodes and row.test.split("::")[0] in BY_DESIGN:
                self.by_design.append(row)
            elif row.ours.nodes > row.peer.nodes:
                (self.gaps if row.peer.verdict == EXACT else self.finite_gaps).append(row)
            elif row.ours.nodes < row.peer.nodes:
                self.fewer.append(row)
            else:
                self.same.append(row)

    def failures(self) -> int:
        """What the acceptance counts: wrong, refused where onnxruntime runs it, gaps, misses."""
        return len(self.wrong) + len(self.refused) + len(self.gaps) + len(self.missed)


def _module_table(rows: list[Row], tally: Tally) -> list[str]:
    """Per test module: models, and how many of them fall short."""
    modules: dict[str, Counter[str]] = {}
    for row in rows:
        modules.setdefault(row.test.split("::")[0], Counter())["models"] += 1
    for label, group in (
        ("gaps", tally.gaps),
        ("missed", tally.missed),
        ("wrong", tally.wrong),
        ("refused", tally.refused),
    ):
        for row in group:
            modules[row.test.split("::")[0]][label] += 1
    lines = [
        "| test module | models | more nodes here | missed fusions | wrong | refused |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for module, counts in sorted(modules.items()):
        lines.append(
            f"| {module} | {counts['models']} | {counts['gaps']} | {counts['missed']} | "
            f"{counts['wrong']} | {counts['refused']} |"
        )
    return lines


def _gap_lines(title: str, text: str, rows: list[Row]) -> list[str]:
    if not rows:
        return []
    lines = [
        f"## {title}",
        "",
        text,
        "",
        "| model | original | ours | onnxscript | op types ours/theirs |",
    ]
    lines.append("|---|---:|---:|---:|---|")
    lines += [
        f"| {r.name} | {sum(r.original.values())} | {r.ours.nodes} | {r.peer.nodes} | "
        f"{_op_diff(r.ours.ops, r.peer.ops)} |"
        for r in rows
    ]
    return [*lines, ""]


def report(rows: list[Row], info: dict[str, Any]) -> tuple[str, int]:
    """The markdown report and the exit code."""
    tally = Tally()
    for row in rows:
        tally.add(row)
    exact = tally.fewer + tally.same + tally.gaps
    ours_total = sum(r.ours.nodes or 0 for r in exact)
    peer_total = sum(r.peer.nodes or 0 for r in exact)
    lines = [
        f"onnxscript's rewriter tests ({info['source']}, onnxscript {info['version']}): "
        f"{len(rows)} models from {len({r.test for r in rows})} passing tests of "
        f"{info['modules']} modules ({info['failing']} models of failing tests left out), "
        f"{info['seconds']:.0f} s; {sum(r.contrib for r in rows)} of them with `patterns/ort`",
        "",
        "| | models |",
        "|---|---:|",
        f"| fewer nodes here (onnxscript exact) | {len(tally.fewer)} |",
        f"| as many nodes (onnxscript exact) | {len(tally.same)} |",
        f"| more nodes here (onnxscript exact) | {len(tally.gaps)} |",
        f"| more nodes here, onnxscript exact on finite inputs only | {len(tally.finite_gaps)} |",
        f"| more nodes here by onnxscript rewrites left out on purpose | {len(tally.by_design)} |",
        *(
            f"| onnxscript's result {verdict} | "
            f"{sum(r.peer.verdict == verdict for r in tally.peer_inexact)} |"
            for verdict in (DEFAULTS, INVALID, APPROXIMATE, DIFFERS)
        ),
        f"| outputs not compared (onnxruntime cannot run a model) | {len(tally.not_compared)} |",
        f"| our result computes something else | {len(tally.wrong)} |",
        f"| our result approximate, by rules that declare it | {len(tally.approximate)} |",
        f"| refused here, onnxruntime runs the original | {len(tally.refused)} |",
        f"| refused here, onnxruntime refuses the original too | {len(tally.refused_by_ort_too)} |",
        f"| missed fusions (a fused op of onnxscript's exact result missing here) | "
        f"{len(tally.missed)} |",
        "",
        f"Nodes over the {len(exact)} models where onnxscript's rewrite is exact: {ours_total} "
        f"here, {peer_total} with onnxscript.",
        "",
        *_module_table(rows, tally),
        "",
    ]
    lines += _gap_lines("More nodes here than onnxscript's exact result", "", tally.gaps)
    lines += _gap_lines(
        "More nodes here than onnxscript's result that is exact on finite inputs",
        "onnxscript's result differs from the original only where an input holds NaN or an "
        "infinity.",
        tally.finite_gaps,
    )
    if tally.by_design:
        lines += ["## More nodes here by onnxscript rewrites left out on purpose", ""]
        lines += [
            f"- {r.name}: {r.ours.nodes} here, {r.peer.nodes} with onnxscript: "
            f"{BY_DESIGN[r.test.split('::')[0]]}"
            for r in tally.by_design
        ]
        lines.append("")
    if tally.missed:
        lines += ["## Missed fusions", "", "| model | op ours/onnxscript's |", "|---|---|"]
        lines += [
            f"| {r.name} | "
            + ", ".join(f"{op} {a}/{b}" for op, (a, b) in r.missed_fusions().items())
            + " |"
            for r in tally.missed
        ]
        lines.append("")
    for title, group in (
        ("Our result differs", tally.wrong),
        ("Our result approximate, by rules that declare it (`approximate`)", tally.approximate),
        ("Refused here, onnxruntime runs the original", tally.refused),
        ("Refused here and by onnxruntime", tally.refused_by_ort_too),
    ):
        if group:
            lines += [f"## {title}", ""]
            lines += [
                f"- {r.name}: {r.ours.verdict}: {r.ours.note}"
                + (f" (onnxruntime: {r.ort_refuses})" if r.ort_refuses else "")
                for r in group
            ]
            lines.append("")
    if tally.peer_inexact:
        lines += ["## onnxscript's results that are not exact", ""]
        lines += [f"- {r.name}: {r.peer.verdict}: {r.peer.note}" for r in tally.peer_inexact]
        lines.append("")
    if info["left_out"]:
        lines += ["## Models of passing tests not measured", ""]
        lines += [
            f"- {why}: {len(tests)} models from {', '.join(sorted(set(tests)))}"
            for why, tests in info["left_out"].items()
        ]
        lines.append("")
    if info["collection_errors"]:
        lines += ["## Test modules that could not run here", ""]
        lines += [f"- {e}" for e in info["collection_errors"]]
        lines.append("")
    return "\n".join(lines), 1 if tally.failures() else 0


# Options whose values are paths on the machine that ran the suite: shown by what they are.
_PATH_OPTIONS = {
    "--onnxscript-src": "ONNXSCRIPT",
    "--workdir": "DIR",
    "--saved": "DIR",
    "--json": "FILE",
}


def _without_paths(argv: list[str]) -> list[str]:
    """The command's arguments with machine paths replaced by what they stand for."""
    words = list(argv)
    for i, word in enumerate(words):
        name, sep, _ = word.partition("=")
        if sep and name in _PATH_OPTIONS:
            words[i] = f"{name}={_PATH_OPTIONS[name]}"
        elif word in _PATH_OPTIONS and i + 1 < len(words):
            words[i + 1] = _PATH_OPTIONS[word]
    return words


def results_section(text: str, argv: list[str]) -> str:
    """The report as a section of benchmarks/RESULTS.md, with the command that reproduces it.

    run.py splices benchmarks/results/onnxscript_tests.md, where run_all.py has it written.
    """
    import datetime

    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        cwd=BENCH,
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    command = " ".join(
        ["python benchmarks/peer_tests.py --suite onnxscript", *_without_paths(argv)]
    )
    when = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    return "\n".join(
        [
            "## onnxscript's rewriter tests",
            "",
            "Every model onnxscript's own rule tests hand its rewriter, through onnxscript's "
            "rewrite and this library (`patterns/ort` added for its `ort_fusions` tests), "
            "judged with `rewriter.verify`; how each class is decided is in "
            "`benchmarks/peer_onnxscript.py`'s docstring. Reproduce with",
            "",
            f"    {command}",
            "",
            f"(a checkout of https://github.com/microsoft/onnxscript, or its git directory, "
            f"as `--onnxscript-src`). Run {when} at commit {commit}; the machine is shared "
            "(2 cores).",
            "",
            text.rstrip(),
            "",
        ]
    )


def _collection_errors(pytest_output: str) -> list[str]:
    return [
        line.removeprefix("ERROR ").strip()
        for line in pytest_output.splitlines()
        if line.startswith("ERROR ")
    ]


def main(argv: list[str] | None = None) -> int:
    """Command line: fetch the tests, run them recording, measure, report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--suite", choices=("onnxscript",), help="this suite (as peer_tests.py names it)"
    )
    parser.add_argument("--onnxscript-src", metavar="PATH", help="onnxscript checkout or git dir")
    parser.add_argument("--onnxscript-rev", default="HEAD", help="revision of a git dir")
    parser.add_argument("--workdir", type=Path, default=default_workdir())
    parser.add_argument(
        "--only", nargs="+", metavar="GLOB", help="test modules below onnxscript/rewriter/"
    )
    parser.add_argument("--examples", type=int, default=10, help="verification examples")
    parser.add_argument(
        "--max-model-mb",
        type=float,
        default=20.0,
        help="leave out models whose initializers hold more (default 20)",
    )
    parser.add_argument(
        "--max-total-mb",
        type=float,
        default=2000.0,
        help="save at most this much of models (default 2000)",
    )
    parser.add_argument(
        "--saved",
        type=Path,
        metavar="DIR",
        help="measure the models an earlier run with --keep saved (no test run)",
    )
    parser.add_argument("--timeout", type=float, default=3600, help="seconds for the test run")
    parser.add_argument("--json", metavar="FILE", help="write every model's figures here")
    parser.add_argument(
        "--markdown",
        metavar="FILE",
        help="also write the report as a RESULTS.md section here (run.py splices "
        "benchmarks/results/onnxscript_tests.md)",
    )
    parser.add_argument("--progress", action="store_true", help="name each model on stderr")
    parser.add_argument(
        "--keep",
        action="store_true",
        help="keep the saved models (<workdir>/saved-*/N.before.onnx, N.after.onnx)",
    )
    args = parser.parse_args(argv)
    start = time.perf_counter()
    args.workdir.mkdir(parents=True, exist_ok=True)
    try:
        source, label = find_sources(args.onnxscript_src, args.onnxscript_rev, args.workdir)
    except LookupError as exc:
        print(f"onnxscript suite skipped: {exc}", file=sys.stderr)
        return 0
    files = test_files(source, args.only)
    if not files:
        raise SystemExit(f"no test module of {source / TESTS_UNDER} matches --only")
    if args.saved:  # the models a run with --keep saved
        saved, output = args.saved, ""
        if not (saved / "index.json").exists():
            raise SystemExit(f"--saved {saved}: no index.json (not a folder --keep left)")
    else:
        saved = Path(tempfile.mkdtemp(prefix="saved-", dir=args.workdir))
        limits = [f"--max-model-mb={args.max_model_mb}", f"--max-total-mb={args.max_total_mb}"]
        code, output = run_tests(source, files, saved, limits, args.timeout)
        if not (saved / "index.json").exists():
            shutil.rmtree(saved)
            tail = output[-2000:]
            raise SystemExit(f"onnxscript's tests did not run (pytest exit {code}):\n{tail}")
    try:
        harvested = harvest(saved, {_test_label(f) for f in files})
    finally:
        if not args.keep and not args.saved:
            shutil.rmtree(saved)
    rows = measure(harvested.cases, args.examples, args.progress)
    info = {
        "source": label,
        "version": _source_version(source),
        "modules": len(files),
        "failing": harvested.failing,
        "left_out": harvested.left_out,
        "seconds": time.perf_counter() - start,
        "collection_errors": _collection_errors(output),
    }
    text, status = report(rows, info)
    print(text)
    if args.keep:
        print(f"saved models: {saved}", file=sys.stderr)
    if args.json:
        Path(args.json).write_text(json.dumps([dataclasses.asdict(r) for r in rows], indent=1))
    if args.markdown:
        shown = [a for a in (argv if argv is not None else sys.argv[1:]) if a != "--progress"]
        Path(args.markdown).write_text(results_section(text, _without_option(shown, "--markdown")))
    return status


def _without_option(args: list[str], option: str) -> list[str]:
    """`args` without `option` and its value (the section names its own file)."""
    out: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg == option:
            skip = True
        elif not arg.startswith(f"{option}="):
            out.append(arg)
    return out


def _source_version(source: Path) -> str:
    version = source / "VERSION"
    return version.read_text().strip() if version.exists() else "?"


if __name__ == "__main__":
    sys.exit(main())
