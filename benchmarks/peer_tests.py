"""Peers' test suites as yardsticks: onnxoptimizer's, and onnxruntime's transformer fusions.

`--suite ort-fusion` runs onnxruntime's own transformer-fusion tests against its transformers
optimizer (`peer_ort_fusion.py` says how; it needs `--ort-source` or `$ORT_SOURCE`, else it
is skipped). `--suite onnxscript` runs the models onnxscript's rewriter tests rewrite
(`peer_onnxscript.py` says how, and takes the options that follow; `--suite onnxscript
--help` lists them); it is not part of `all`. The rest of this text is about onnxoptimizer's
suite.

onnxoptimizer's `onnxoptimizer/test/optimizer_test.py` builds about 500 small models with
onnx.helper, one or more per test, each to exercise one of its passes. This script runs that
file's tests unchanged (its builders, its checks), records every model a test hands to
`onnxoptimizer.optimize`, and then for each model:

* this project's default library (`rewriter.rewrite(model)`),
* onnxoptimizer's default passes (`onnxoptimizer.optimize(model)`), and the passes the test
  itself asked for (`onnxoptimizer.optimize(model, passes, fixed_point)`),

counts the nodes each leaves (subgraphs included) and checks each result against the
original with `rewriter.verify` (onnxruntime; generated inputs with NaN, infinities and
extremes in some examples). It lists the models where this project ends with more nodes than
the smaller of onnxoptimizer's two results whose outputs are equal, with the op types that
differ.

Some of onnxoptimizer's rewrites are not exact, and this project does not make them on
purpose: a model where onnxoptimizer without one of those passes (`INEXACT`) has no fewer
nodes than this project is listed apart, as is a model onnx's strict shape inference refuses
(its declared output types contradict the graph).

The test file is not part of this repository (Apache-2.0, onnx/optimizer): give it with
`--test-file`, or let the script fetch the file of the installed onnxoptimizer's release tag
into `benchmarks/.cache/onnxoptimizer/`.

    python benchmarks/peer_tests.py                          # all models, markdown on stdout
    python benchmarks/peer_tests.py --only 'test_fuse_pad*' --examples 20
    python benchmarks/peer_tests.py --test-file ~/optimizer/onnxoptimizer/test/optimizer_test.py
    python benchmarks/peer_tests.py --json out.json          # every model's figures
    python benchmarks/peer_tests.py --suite ort-fusion --ort-source ~/onnxruntime \\
        --torch-python ~/torchvenv/bin/python --ort-markdown benchmarks/results/peer_ort_fusion.md
    python benchmarks/peer_tests.py --suite onnxscript --onnxscript-src ~/onnxscript

Exit code 1 when some model ends with more nodes here than with an exact onnxoptimizer
result, or when a result of this project computes something else.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import fnmatch
import importlib.util
import io
import json
import os
import sys
import time
import unittest
import urllib.request
from pathlib import Path
from types import ModuleType
from typing import Any

import onnx
import onnxoptimizer
import peer_ort_fusion

import rewriter
from rewriter.verification import InputOptions, RuntimeOptions, VerifyError, VerifyOptions

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / "benchmarks" / ".cache" / "onnxoptimizer"
TEST_PATH = "onnxoptimizer/test/optimizer_test.py"
RAW_URL = "https://raw.githubusercontent.com/onnx/optimizer/v{version}/" + TEST_PATH

# onnxoptimizer passes that make rewrites which change results on some inputs, and what goes
# wrong. A model where onnxoptimizer without one of them has no fewer nodes than this project
# owes its gap to that pass: reported apart, not as a loss (this project implements the exact
# rewrites of those passes: x * 1, x - 0, Pad into AveragePool).
INEXACT: dict[str, str] = {
    "eliminate_nop_monotone_argmax": "drops Exp/Softmax/LogSoftmax before ArgMax: float "
    "overflow (exp of large inputs is inf) and rounding create ties the original breaks "
    "differently",
    "fuse_pad_into_pool": "folds a zero Pad into MaxPool's pads: MaxPool pads with -inf, so "
    "negative inputs at the border give another maximum",
    "eliminate_nop_with_unit": "drops x + 0.0, which turns -0.0 into +0.0 (1/y tells them apart)",
}


# ----------------------------------------------------------------------------- harvesting


@dataclasses.dataclass
class Case:
    """One model a test of onnxoptimizer's suite built, and the passes it ran on it."""

    name: str
    model: onnx.ModelProto
    passes: list[str] | None
    fixed_point: bool


class _RecordingOptimizer:
    """Stands in for the `onnxoptimizer` module inside the test file: records, then runs."""

    def __init__(self, real: ModuleType) -> None:
        self._real = real
        self.calls: list[tuple[onnx.ModelProto, list[str] | None, bool]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def optimize(
        self, model: onnx.ModelProto, passes: list[str] | None = None, fixed_point: bool = False
    ) -> onnx.ModelProto:
        copy = onnx.ModelProto()
        copy.CopyFrom(model)
        self.calls.append((copy, None if passes is None else list(passes), bool(fixed_point)))
        return self._real.optimize(model, passes, fixed_point)


def suite_file(path: str | None) -> Path:
    """The suite to run: `path`, or the installed release's file (fetched once, cached)."""
    if path:
        found = Path(path).expanduser()
        if not found.is_file():
            raise SystemExit(f"--test-file {path}: no such file")
        return found
    version = onnxoptimizer.__version__
    cached = CACHE / f"optimizer_test-v{version}.py"
    if not cached.exists():
        url = RAW_URL.format(version=version)
        try:
            with urllib.request.urlopen(url, timeout=60) as response:
                text = response.read()
        except OSError as exc:
            raise SystemExit(
                f"cannot fetch {url} ({exc}); clone https://github.com/onnx/optimizer at tag "
                f"v{version} and pass --test-file <clone>/{TEST_PATH}"
            ) from exc
        CACHE.mkdir(parents=True, exist_ok=True)
        cached.write_bytes(text)
    return cached


def load_suite(path: Path) -> ModuleType:
    """Import onnxoptimizer's test file as a module (it defines `TestOptimizer`)."""
    spec = importlib.util.spec_from_file_location("onnxoptimizer_peer_tests", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"{path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if not hasattr(module, "TestOptimizer"):
        raise SystemExit(f"{path}: no TestOptimizer class (not onnxoptimizer's optimizer_test.py)")
    return module


def harvest(module: ModuleType, only: list[str] | None) -> tuple[list[Case], dict[str, str]]:
    """Run every test of the suite; the models they optimized, and the tests that failed."""
    recorder = _RecordingOptimizer(onnxoptimizer)
    module.onnxoptimizer = recorder  # the test file calls `onnxoptimizer.optimize(...)`
    loader = unittest.TestLoader()
    names = loader.getTestCaseNames(module.TestOptimizer)
    if only:
        names = [n for n in names if any(fnmatch.fnmatch(n, p) for p in only)]
    cases: list[Case] = []
    failed: dict[str, str] = {}
    for name in names:
        recorder.calls.clear()
        result = unittest.TestResult()
        # The suite prints its own progress and diffs; keep them out of the report.
        with contextlib.redirect_stdout(io.StringIO()):
            module.TestOptimizer(name).run(result)
        for _test, text in result.errors + result.failures:
            failed[name] = text.strip().splitlines()[-1][:200]
        calls = list(recorder.calls)
        for k, (model, passes, fixed_point) in enumerate(calls):
            label = name if len(calls) == 1 else f"{name}#{k}"
            cases.append(Case(label, model, passes, fixed_point))
    return cases, failed


# ----------------------------------------------------------------------------- measuring


@dataclasses.dataclass
class Outcome:
    """One tool's result on one model."""

    nodes: int | None = None
    ops: dict[str, int] = dataclasses.field(default_factory=dict)
    equal: bool | None = None  # None: not compared (the original does not run)
    note: str = ""


def _checked(original: onnx.ModelProto, result: onnx.ModelProto, examples: int) -> Outcome:
    ops = peer_ort_fusion.op_counts(result)
    outcome = Outcome(sum(ops.values()), dict(ops))
    try:
        verdict = rewriter.verify(
            original,
            result,
            VerifyOptions(
                inputs=InputOptions(examples=examples, seed=0),
                runtime=RuntimeOptions(ort_enable_all=False),
                save_counterexample=False,
            ),
        )
    except VerifyError as exc:
        outcome.note = str(exc).splitlines()[0][:160]
        return outcome
    outcome.equal = verdict.ok
    if not verdict.ok:
        outcome.note = (verdict.message or "outputs differ").splitlines()[0][:160]
    return outcome


def run_ours(case: Case, examples: int) -> Outcome:
    """This project's default library on the case's model."""
    try:
        result = rewriter.rewrite(case.model).proto
    except Exception as exc:
        return Outcome(note=f"rewrite failed: {type(exc).__name__}: {exc}"[:200])
    return _checked(case.model, result, examples)


def run_peer(case: Case, passes: list[str] | None, fixed_point: bool, examples: int) -> Outcome:
    """onnxoptimizer with `passes` (None: its default fuse-and-elimination passes)."""
    try:
        if passes is None:
            result = onnxoptimizer.optimize(case.model)
        else:
            result = onnxoptimizer.optimize(case.model, passes, fixed_point)
        onnx.checker.check_model(result)
    except Exception as exc:
        return Outcome(note=f"onnxoptimizer failed: {type(exc).__name__}: {exc}"[:200])
    return _checked(case.model, result, examples)


@dataclasses.dataclass
class Row:
    """Everything measured on one model."""

    name: str
    passes: list[str] | None
    original: int
    ours: Outcome
    default: Outcome
    own: Outcome | None  # the test's own passes, when they differ from the default set
    invalid: str = ""  # why the original is not a valid model (onnx's strict inference)
    inexact: str = ""  # the inexact onnxoptimizer pass a node gap comes from

    def best_peer(self) -> Outcome | None:
        """onnxoptimizer's smaller result among those whose outputs are equal."""
        exact = [o for o in (self.default, self.own) if o and o.nodes is not None and o.equal]
        return min(exact, key=lambda o: o.nodes or 0) if exact else None


def _strict_inference_error(model: onnx.ModelProto) -> str:
    """Why onnx's strict shape inference refuses the model ('' when it accepts it)."""
    try:
        onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
    except Exception as exc:
        return str(exc).strip().splitlines()[-1][:160]
    return ""


def _gap_from_inexact_pass(case: Case, ours: int) -> str:
    """The inexact onnxoptimizer pass without which it leaves no fewer nodes than `ours`."""
    default = onnxoptimizer.get_fuse_and_elimination_passes()
    for name, reason in INEXACT.items():
        counts = []
        for passes, fixed_point in ((default, False), (case.passes or [], case.fixed_point)):
            if name not in passes:
                continue
            try:
                kept = [p for p in passes if p != name]
                result = onnxoptimizer.optimize(case.model, kept, fixed_point)
            except Exception:
                continue
            counts.append(sum(peer_ort_fusion.op_counts(result).values()))
        if counts and min(counts) >= ours:
            return f"{name}: {reason}"
    return ""


def measure(cases: list[Case], examples: int, progress: bool) -> list[Row]:
    """Run both tools on every case."""
    default_passes = set(onnxoptimizer.get_fuse_and_elimination_passes())
    rows = []
    for i, case in enumerate(cases):
        if progress:
            print(f"[{i + 1}/{len(cases)}] {case.name}", file=sys.stderr, flush=True)
        own = None
        if case.passes is not None and set(case.passes) <= default_passes:
            own = run_peer(case, case.passes, case.fixed_point, examples)
        row = Row(
            case.name,
            case.passes,
            sum(peer_ort_fusion.op_counts(case.model).values()),
            run_ours(case, examples),
            run_peer(case, None, False, examples),
            own,
        )
        peer = row.best_peer()
        if row.ours.nodes is not None and peer is not None and row.ours.nodes > (peer.nodes or 0):
            row.invalid = _strict_inference_error(case.model)
            row.inexact = _gap_from_inexact_pass(case, row.ours.nodes)
        rows.append(row)
    return rows


# ----------------------------------------------------------------------------- report


def _op_diff(ours: dict[str, int], theirs: dict[str, int]) -> str:
    keys = sorted(set(ours) | set(theirs), key=lambda k: -abs(ours.get(k, 0) - theirs.get(k, 0)))
    return ", ".join(
        f"{k} {ours.get(k, 0)}/{theirs.get(k, 0)}"
        for k in keys
        if ours.get(k, 0) != theirs.get(k, 0)
    )


def report(rows: list[Row], failed: dict[str, str], suite: Path, seconds: float) -> tuple[str, int]:
    """The markdown report and the exit code."""
    losses, inexact, invalid, wins, ties, wrong, not_compared, peer_wrong = (
        [],
        [],
        [],
        0,
        0,
        [],
        0,
        0,
    )
    for row in rows:
        if row.ours.nodes is None or row.ours.equal is False:
            wrong.append(row)
            continue
        if row.ours.equal is None:
            not_compared += 1
        if any(o is not None and o.equal is False for o in (row.default, row.own)):
            peer_wrong += 1
        peer = row.best_peer()
        if peer is None or peer.nodes is None:
            continue
        assert row.ours.nodes is not None
        if row.ours.nodes > peer.nodes:
            if row.invalid:
                invalid.append((row, peer, row.invalid))
            elif row.inexact:
                inexact.append((row, peer, row.inexact))
            else:
                losses.append((row, peer, ""))
        elif row.ours.nodes < peer.nodes:
            wins += 1
        else:
            ties += 1
    compared = [r for r in rows if r.best_peer() is not None and r.ours.nodes is not None]
    ours_total = sum(r.ours.nodes or 0 for r in compared)
    peer_total = sum((r.best_peer() or Outcome(nodes=0)).nodes or 0 for r in compared)
    lines = [
        f"onnxoptimizer {onnxoptimizer.__version__}'s test models ({suite.name}): "
        f"{len(rows)} models from {len({r.name.split('#')[0] for r in rows})} tests, "
        f"{seconds:.0f} s",
        "",
        "| | models |",
        "|---|---:|",
        f"| fewer nodes here | {wins} |",
        f"| as many nodes | {ties} |",
        f"| more nodes here (onnxoptimizer exact) | {len(losses)} |",
        f"| more nodes here, only by onnxoptimizer's inexact rewrites | {len(inexact)} |",
        f"| more nodes here, the original an invalid model (declared types wrong) | "
        f"{len(invalid)} |",
        f"| our result computes something else, or rewrite failed | {len(wrong)} |",
        f"| outputs not compared (onnxruntime cannot run the original) | {not_compared} |",
        f"| an onnxoptimizer result differs from the original | {peer_wrong} |",
        "",
        f"Nodes over the {len(compared)} models both tools handle exactly: {ours_total} here, "
        f"{peer_total} with onnxoptimizer (the smaller of its default passes and the test's "
        "own passes).",
        "",
    ]
    if losses:
        lines += [
            "## More nodes here than onnxoptimizer",
            "",
            "| model | original | ours | onnxoptimizer | op types ours/theirs |",
            "|---|---:|---:|---:|---|",
        ]
        lines += [
            f"| {r.name} | {r.original} | {r.ours.nodes} | {p.nodes} | "
            f"{_op_diff(r.ours.ops, p.ops)} |"
            for r, p, _ in losses
        ]
        lines.append("")
    if inexact:
        lines += [
            "## More nodes here by onnxoptimizer's inexact rewrites (not made here)",
            "",
            "| model | ours | onnxoptimizer | why not |",
            "|---|---:|---:|---|",
        ]
        lines += [f"| {r.name} | {r.ours.nodes} | {p.nodes} | {why} |" for r, p, why in inexact]
        lines.append("")
    if invalid:
        lines += [
            "## More nodes here on invalid models",
            "",
            "Their declared output types contradict the graph (onnx's strict shape inference "
            "refuses them); this project keeps a node where removing it would change a "
            "declared type.",
            "",
            "| model | ours | onnxoptimizer | op types ours/theirs | onnx's inference says |",
            "|---|---:|---:|---|---|",
        ]
        lines += [
            f"| {r.name} | {r.ours.nodes} | {p.nodes} | {_op_diff(r.ours.ops, p.ops)} | "
            f"{why.replace('|', '/')} |"
            for r, p, why in invalid
        ]
        lines.append("")
    if wrong:
        lines += ["## Our result differs or failed", ""]
        lines += [f"- {r.name}: {r.ours.note}" for r in wrong]
        lines.append("")
    differing = [
        (r, label, o)
        for r in rows
        for label, o in (("default passes", r.default), ("test's passes", r.own))
        if o is not None and o.equal is False
    ]
    if differing:
        lines += ["## onnxoptimizer results that differ from the original", ""]
        lines += [f"- {r.name} ({label}): {o.note}" for r, label, o in differing]
        lines.append("")
    if failed:
        lines += ["## Tests of the suite that failed here (their models are still measured)", ""]
        lines += [f"- {name}: {text}" for name, text in sorted(failed.items())]
        lines.append("")
    return "\n".join(lines), 1 if losses or wrong else 0


def to_json(rows: list[Row]) -> list[dict[str, Any]]:
    """Every model's figures."""
    return [dataclasses.asdict(r) for r in rows]


def main(argv: list[str] | None = None) -> int:
    """Command line: harvest, measure, report (each suite in turn)."""
    chooser = argparse.ArgumentParser(add_help=False)
    chooser.add_argument("--suite")
    chosen, rest = chooser.parse_known_args(argv)
    if chosen.suite == "onnxscript":  # its own script, its own options
        import peer_onnxscript

        return peer_onnxscript.main(rest)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--suite",
        choices=("all", "onnxoptimizer", "ort-fusion", "onnxscript"),
        default="all",
        help="which peer's tests (default: all but onnxscript; a suite whose sources are "
        "missing is skipped)",
    )
    parser.add_argument("--test-file", help=f"onnxoptimizer's {TEST_PATH}")
    parser.add_argument("--only", nargs="+", metavar="GLOB", help="tests whose name matches")
    parser.add_argument("--examples", type=int, default=10, help="verification examples")
    parser.add_argument("--json", metavar="FILE", help="write every model's figures here")
    parser.add_argument("--progress", action="store_true", help="name each model on stderr")
    parser.add_argument(
        "--ort-source",
        metavar="PATH",
        default=os.environ.get("ORT_SOURCE"),
        help="onnxruntime's sources: a checkout, its git directory, or "
        "onnxruntime/test/python/transformers (ort-fusion suite; default $ORT_SOURCE)",
    )
    parser.add_argument("--ort-revision", default="HEAD", help="revision of a git --ort-source")
    parser.add_argument(
        "--ort-tests",
        nargs="+",
        metavar="MODULE",
        help="onnxruntime test modules to run (default: the BERT/GPT-2 fusion tests)",
    )
    parser.add_argument(
        "--ort-markdown",
        metavar="FILE",
        help="also write the ort-fusion report here, when that suite runs (RESULTS.md splices "
        "benchmarks/results/peer_ort_fusion.md)",
    )
    parser.add_argument(
        "--torch-python",
        help="interpreter with torch, onnx and onnxruntime for onnxruntime's tests "
        "(default: $TORCH_PYTHON, or this one)",
    )
    args = parser.parse_args(argv)
    code = 0
    figures: dict[str, Any] = {}
    if args.suite in ("all", "onnxoptimizer"):
        start = time.perf_counter()
        suite = suite_file(args.test_file)
        cases, failed = harvest(load_suite(suite), args.only)
        if not cases:
            raise SystemExit("no models: no test matched --only, or the suite optimized nothing")
        rows = measure(cases, args.examples, args.progress)
        text, code = report(rows, failed, suite, time.perf_counter() - start)
        print(text)
        figures["onnxoptimizer"] = to_json(rows)
    if args.suite in ("all", "ort-fusion"):
        start = time.perf_counter()
        text, ort_code, ort_rows = peer_ort_fusion.run(
            args.ort_source,
            args.ort_revision,
            args.torch_python,
            args.ort_tests,
            args.examples,
            args.progress,
        )
        print(text if not ort_rows else f"{text}\n\n{time.perf_counter() - start:.0f} s")
        figures["ort-fusion"] = [dataclasses.asdict(r) for r in ort_rows]
        if ort_rows and args.ort_markdown:
            Path(args.ort_markdown).write_text(peer_ort_fusion.results_section(text, argv))
        code = max(code, ort_code)
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1))
    return code


if __name__ == "__main__":
    sys.exit(main())
