"""onnxruntime's transformer-fusion test models against onnxruntime's transformers optimizer.

onnxruntime's own tests of its transformers optimizer (`onnxruntime/test/python/transformers/
test_attention_fusion.py`, `test_embedlayer_fusion.py`, ...) build small BERT and GPT-2 blocks
with their generators (`bert_model_generator.py`, `gpt2_model_generator.py`, models under
`test_data/models`, PyTorch Gelu variants) and hand them to
`onnxruntime.transformers.optimizer.optimize_model`. This suite runs those tests unchanged from
a copy of onnxruntime's sources in a scratch folder (`peer_ort_fusion_harvest.py`), records
every model and the optimizer's result for the test's own arguments, and then for each model:
(the generators' weights are drawn at random instead of all ones: with all-ones projections
the LayerNormalization after an attention cancels its output, and no comparison could tell
a right attention fusion from a wrong one)

* the peer: onnxruntime's optimizer as the test called it (fused ops, nodes);
* `contrib`: this project with its onnxruntime contrib rules
  (`rewrite --rules patterns/ --rules patterns/ort --add-opset com.microsoft=1`);
* `opset 23`: this project's default library at `--target-opset 23` (standard `Attention`).

Each result is checked against the original with `rewriter.verify` (onnxruntime, generated
inputs with NaN, infinities and extremes in some examples; integer inputs also drawn from
0..3, beyond a mask's 0 and 1, and from -3..-1, ids that Gather reads from the end of a
table). A model counts against this
project when its contrib result computes something else or fails, leaves fewer of an op the
peer fused (the op types the peer's result has more of than the original, among the
`com.microsoft` ops and the standard composite ops) or more nodes, where the peer's result is
exact; or when its opset-23 result has fewer standard `Attention` than the peer fused
attention ops. A gap where the peer's own result computes something else is listed apart.

onnxruntime's sources are not part of this repository (MIT, microsoft/onnxruntime): give
`--ort-source` as a checkout, a bare git directory of a snapshot (read at `--ort-revision`),
or the `onnxruntime/test/python/transformers` folder itself. The tests import torch, so the
harvest runs with `--torch-python` (or `$TORCH_PYTHON`, or this interpreter when it has torch):
an interpreter with torch, onnx and onnxruntime. Without either the suite is skipped.

    python benchmarks/peer_tests.py --suite ort-fusion --ort-source ~/onnxruntime \\
        --torch-python ~/torchvenv/bin/python
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx.numpy_helper
import onnxruntime as ort

import ir
import rewriter
from rewriter.verification import InputOptions, RuntimeOptions, VerifyError, VerifyOptions

ROOT = Path(__file__).resolve().parent.parent
TESTS_PATH = "onnxruntime/test/python/transformers"
HARVEST = Path(__file__).resolve().parent / "peer_ort_fusion_harvest.py"
# Why onnxruntime's fusions on these models are not exact (written by hand, checked by the
# commands it gives); appended to the measured section.
WHY_MD = Path(__file__).resolve().parent / "results" / "peer_ort_fusion_why.md"

# The test files of onnxruntime's BERT/GPT-2 fusions (model generators, Gelu variants).
DEFAULT_TESTS = (
    "test_attention_fusion",
    "test_embedlayer_fusion",
    "test_skip_layer_norm_fusion",
    "test_simplified_layernorm_fusion",
    "test_gelu_fusions",
)

# Standard-domain ops that a fusion writes (onnxruntime writes LayerNormalization and
# SimplifiedLayerNormalization in the default domain); every com.microsoft op is one too.
STANDARD_FUSED = frozenset(
    {
        "LayerNormalization",
        "SimplifiedLayerNormalization",
        "RMSNormalization",
        "Gelu",
        "Attention",
        "RotaryEmbedding",
    }
)
ATTENTION_OPS = frozenset(
    {
        "com.microsoft:Attention",
        "com.microsoft:MultiHeadAttention",
        "com.microsoft:GroupQueryAttention",
        "com.microsoft:PackedAttention",
        "com.microsoft:PackedMultiHeadAttention",
        "com.microsoft:DecoderMaskedMultiHeadAttention",
    }
)
# One function in two domains: a fusion into either counts as the other.
SAME_OP = {"com.microsoft:Gelu": "Gelu"}
# Ops that fuse strictly more than another (the projections, the residual Add, the bias):
# one of them makes up for a missing op of the other kind.
COVERS = {
    "com.microsoft:MultiHeadAttention": ("com.microsoft:Attention",),
    "LayerNormalization": ("com.microsoft:SkipLayerNormalization",),
    "SimplifiedLayerNormalization": ("com.microsoft:SkipSimplifiedLayerNormalization",),
    "Gelu": ("com.microsoft:BiasGelu",),
}
CONTRIB_RULES = (ROOT / "patterns", ROOT / "patterns" / "ort")
# Integer inputs are also drawn from this range: the verifier's default draws masks as 0 and
# 1 only, where a rewrite into a 0/1 mask index (onnxruntime's raw mask) looks exact.
WIDE_INTEGERS = (0.0, 3.0)
# Negative integers too: Gather reads a negative id from the end of its table, where
# onnxruntime's EmbedLayerNormalization refuses it ("input index out of range").
NEGATIVE_INTEGERS = (-3.0, -1.0)


class SuiteUnavailableError(Exception):
    """The suite cannot run here (no sources, no interpreter with torch): skip it."""


# ----------------------------------------------------------------------------- sources


def copy_sources(source: str, revision: str, into: Path) -> Path:
    """Copy onnxruntime's transformers test folder from `source` into `into`; the copy.

    Raises:
        SuiteUnavailableError: `source` is none of a checkout, a git directory or the folder.
    """
    path = Path(source).expanduser()
    target = into / "transformers"
    if (path / "bert_model_generator.py").is_file():
        shutil.copytree(path, target)
        return target
    if (path / TESTS_PATH / "bert_model_generator.py").is_file():
        shutil.copytree(path / TESTS_PATH, target)
        return target
    git_dir = path / ".git" if (path / ".git").exists() else path
    if (git_dir / "HEAD").is_file() and (git_dir / "objects").is_dir():
        _copy_from_git(git_dir, revision, target)
        if (target / "bert_model_generator.py").is_file():
            return target
    raise SuiteUnavailableError(
        f"--ort-source {source}: no {TESTS_PATH}/bert_model_generator.py there (give a "
        "checkout of microsoft/onnxruntime, its git directory, or that folder)"
    )


def _copy_from_git(git_dir: Path, revision: str, target: Path) -> None:
    """Write the test folder's files at `revision`; blobs a snapshot lacks are left out."""
    listing = subprocess.run(
        ["git", f"--git-dir={git_dir}", "ls-tree", "-r", revision, TESTS_PATH],
        capture_output=True,
        text=True,
    )
    if listing.returncode != 0:
        problem = listing.stderr.strip()
        raise SuiteUnavailableError(f"git ls-tree {revision} in {git_dir}: {problem}")
    for line in listing.stdout.splitlines():
        meta, path = line.split("\t", 1)
        _mode, kind, sha = meta.split()
        if kind != "blob":
            continue
        blob = subprocess.run(
            ["git", f"--git-dir={git_dir}", "cat-file", "blob", sha], capture_output=True
        )
        if blob.returncode != 0:
            continue  # large files are absent from snapshots; a test that needs one fails
        destination = target / Path(path).relative_to(TESTS_PATH)
        destination.parent.mkdir(parents=True, exist_ok=True)
        destination.write_bytes(blob.stdout)


def harvest_python(torch_python: str | None) -> str:
    """The interpreter that runs onnxruntime's tests (they import torch).

    Raises:
        SuiteUnavailableError: no interpreter with torch, onnx and onnxruntime.
    """
    candidates = [torch_python, os.environ.get("TORCH_PYTHON"), sys.executable]
    for python in filter(None, candidates):
        probe = subprocess.run(
            [python, "-c", "import torch, onnx, onnxruntime.transformers.optimizer"],
            capture_output=True,
        )
        if probe.returncode == 0:
            return python
    raise SuiteUnavailableError(
        "onnxruntime's tests import torch: give --torch-python (an interpreter with torch, "
        "onnx and onnxruntime; `pip install torch==2.13.0 onnx onnxruntime`)"
    )


@dataclasses.dataclass
class Case:
    """One model a test built, and what onnxruntime's optimizer made of it."""

    name: str
    model: onnx.ModelProto
    peer: onnx.ModelProto
    call: str  # the optimizer's arguments as the test gave them


def harvest(folder: Path, python: str, tests: list[str], out: Path) -> tuple[list[Case], dict]:
    """Run the tests in `python`; the models they optimized, and the tests that failed."""
    completed = subprocess.run(
        [python, str(HARVEST), "--source", str(folder), "--out", str(out), *tests],
        capture_output=True,
        text=True,
    )
    manifest = out / "cases.json"
    if completed.returncode != 0 or not manifest.is_file():
        raise SuiteUnavailableError(f"harvest failed: {completed.stderr.strip()[-600:]}")
    data = json.loads(manifest.read_text())
    # the scratch folder's path is this machine's: messages name it by what it holds
    data["failed"] = {
        test: text.replace(str(folder), "<onnxruntime tests>")
        for test, text in data["failed"].items()
    }
    per_test: Counter[str] = Counter(c["test"] for c in data["cases"])
    seen: Counter[str] = Counter()
    cases = []
    for entry in data["cases"]:
        test = entry["test"]
        label = test if per_test[test] == 1 else f"{test}#{seen[test]}"
        seen[test] += 1
        call = f"{entry['model_type']}"
        if entry["num_heads"] or entry["hidden_size"]:
            call += f", heads {entry['num_heads']}, hidden {entry['hidden_size']}"
        if entry["options"]:
            call += f", {entry['options']}"
        cases.append(
            Case(
                label.removeprefix("test_"),
                onnx.load(str(out / f"{entry['index']}.onnx")),
                onnx.load(str(out / f"{entry['index']}.peer.onnx")),
                call,
            )
        )
    return cases, data["failed"]


# ----------------------------------------------------------------------------- measuring


def op_counts(model: onnx.ModelProto) -> Counter[str]:
    """Node count per op type (`domain:op` outside the default domain), subgraphs included."""
    counts: Counter[str] = Counter()

    def visit(graph: onnx.GraphProto) -> None:
        for node in graph.node:
            domain = node.domain if node.domain not in ("", "ai.onnx") else ""
            counts[f"{domain}:{node.op_type}" if domain else node.op_type] += 1
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.GRAPH:
                    visit(attr.g)
                for sub in attr.graphs:
                    visit(sub)

    visit(model.graph)
    return counts


def canonical(counts: Counter[str] | dict[str, int]) -> Counter[str]:
    """`counts` with the ops that compute one function in two domains counted as one."""
    merged: Counter[str] = Counter()
    for op, count in counts.items():
        merged[SAME_OP.get(op, op)] += count
    return merged


def fused_ops(result: Counter[str], original: Counter[str]) -> dict[str, int]:
    """The fused op types `result` has more of than `original`, and how many it has."""
    result, original = canonical(result), canonical(original)
    return {
        op: count
        for op, count in sorted(result.items())
        if count > original.get(op, 0) and (op.startswith("com.microsoft:") or op in STANDARD_FUSED)
    }


@dataclasses.dataclass
class Outcome:
    """One tool's result on one model."""

    nodes: int | None = None
    ops: dict[str, int] = dataclasses.field(default_factory=dict)
    equal: bool | None = None  # None: not compared
    note: str = ""


def _integer_inputs(model: onnx.ModelProto) -> list[str]:
    initializers = {t.name for t in model.graph.initializer}
    integer = {onnx.TensorProto.INT64, onnx.TensorProto.INT32}
    return [
        i.name
        for i in model.graph.input
        if i.name not in initializers and i.type.tensor_type.elem_type in integer
    ]


def _consistent_dims(model: onnx.ModelProto) -> dict[str, int]:
    """Sizes for the symbolic dims when some input's dim is an expression of others.

    onnxruntime's GPT-2 generators name a mask dim `past_sequence_length + sequence_length`;
    the verifier draws each name on its own, the model then rejects every draw, and its search
    for sizes that run ends at a batch of thousands (gigabytes of inputs). Each plain name gets
    a small size of its own (2, 3, ...) and each expression its value. Empty otherwise.
    """
    names: dict[str, None] = {}
    for value in model.graph.input:
        for dim in value.type.tensor_type.shape.dim:
            if dim.HasField("dim_param"):
                names[dim.dim_param] = None
    expressions = [n for n in names if not n.isidentifier()]
    if not expressions:
        return {}
    plain = [n for n in names if n.isidentifier()]
    sizes = {name: 2 + i for i, name in enumerate(plain)}
    for expression in expressions:
        terms = expression.replace(" ", "").split("+")
        if all(t in sizes for t in terms):
            sizes[expression] = sum(sizes[t] for t in terms)
    return sizes


def _verdict_of(
    original: onnx.ModelProto,
    result: onnx.ModelProto,
    examples: int,
    ranges: dict[str, tuple[float, float]] | None = None,
) -> tuple[bool | None, str]:
    """(outputs equal, why not); None when they cannot be compared."""
    inputs = InputOptions(examples, 0, ranges=ranges or {}, dims=_consistent_dims(original))
    options = VerifyOptions(
        inputs, runtime=RuntimeOptions(ort_enable_all=False), save_counterexample=False
    )
    try:
        verdict = rewriter.verify(original, result, options)
    except (VerifyError, ir.IRError) as exc:  # IRError: a model the IR refuses to read
        return None, str(exc).splitlines()[0][:200]
    if verdict.ok:
        return True, ""
    return False, (verdict.message or "outputs differ").splitlines()[0][:200]


def _checked(original: onnx.ModelProto, result: onnx.ModelProto, examples: int) -> Outcome:
    """Node counts, and whether `result` computes what `original` does.

    Checked on the verifier's inputs, then again with integer inputs drawn from
    `WIDE_INTEGERS` (not only 0 and 1 for masks), unless the original fails on those; the
    note is the second check's when it fails. Where both pass, once more with integer inputs
    from `NEGATIVE_INTEGERS` (ids counted from the end of a table), unless the original fails.
    """
    ops = op_counts(result)
    outcome = Outcome(sum(ops.values()), dict(ops))
    outcome.equal, outcome.note = _verdict_of(original, result, examples)
    wide = _integer_inputs(original)
    # Also after a failure: a wrong mask (0 and 1 only) says more than rounding does.
    if wide and outcome.equal is not None:
        _recheck_with_integers(outcome, original, result, examples, wide, WIDE_INTEGERS)
    if wide and outcome.equal:
        _recheck_with_integers(outcome, original, result, examples, wide, NEGATIVE_INTEGERS)
    return outcome


def _recheck_with_integers(
    outcome: Outcome,
    original: onnx.ModelProto,
    result: onnx.ModelProto,
    examples: int,
    inputs: Sequence[str],
    bounds: tuple[float, float],
) -> None:
    """Compare again with the integer `inputs` drawn in `bounds`; a difference is the verdict."""
    equal, note = _verdict_of(original, result, examples, dict.fromkeys(inputs, bounds))
    if equal is False:
        outcome.equal = False
        low, high = bounds
        outcome.note = f"with integer inputs in {low:g}..{high:g}: {note}"


def _ours(model: onnx.ModelProto, rules: Any, options: rewriter.RewriteOptions) -> Any:
    try:
        return rewriter.rewrite(model, rules, options).proto
    except Exception as exc:
        return f"rewrite failed: {type(exc).__name__}: {exc}".splitlines()[0][:200]


def runs_on_onnxruntime(model: onnx.ModelProto) -> str:
    """Why onnxruntime cannot load the model ('' when it can)."""
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    try:
        ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    except Exception as exc:
        return str(exc).strip().splitlines()[0][:200]
    return ""


@dataclasses.dataclass
class Row:
    """Everything measured on one model."""

    name: str
    call: str
    original: int
    original_ops: dict[str, int]
    ort_refuses: str
    peer: Outcome
    contrib: Outcome
    opset23: Outcome
    peer_approximates: str = ""  # a constant the peer's fusion took for another

    def peer_fused(self) -> dict[str, int]:
        """The ops onnxruntime's optimizer fused."""
        return fused_ops(Counter(self.peer.ops), Counter(self.original_ops))

    def contrib_fused(self) -> dict[str, int]:
        """The ops this project's contrib rules fused."""
        return fused_ops(Counter(self.contrib.ops), Counter(self.original_ops))

    def fused_shortfall(self) -> dict[str, tuple[int, int]]:
        """Op types the peer fused more of than the contrib run: (ours, theirs).

        An op of ours that fuses strictly more (`COVERS`) makes up for one of the peer's,
        as far as ours has more of it than the peer.
        """
        ours = canonical(self.contrib.ops)
        theirs = self.peer_fused()
        spare = {op: ours.get(op, 0) - theirs.get(op, 0) for op in ours}
        missing = {}
        for op, count in theirs.items():
            have = ours.get(op, 0)
            for bigger in COVERS.get(op, ()):
                used = min(max(spare.get(bigger, 0), 0), count - have)
                have += used
                spare[bigger] = spare.get(bigger, 0) - used
            if have < count:
                missing[op] = (have, count)
        return missing

    def peer_exact(self) -> bool:
        """The peer's result equals the original, and takes no constant for another."""
        return bool(self.peer.equal) and not self.peer_approximates

    def peer_attention(self) -> int:
        """Attention ops of any kind onnxruntime's optimizer fused."""
        return sum(n for op, n in self.peer_fused().items() if op in ATTENTION_OPS)

    def attention23(self) -> int:
        """Standard Attention in the opset-23 result."""
        return self.opset23.ops.get("Attention", 0) - self.original_ops.get("Attention", 0)


def measure(case: Case, examples: int) -> Row:
    """Both tools on one model."""
    contrib_options = rewriter.RewriteOptions(add_opsets={"com.microsoft": 1})
    opset23_options = rewriter.RewriteOptions(target_opset=23)
    results = []
    for rules, options in (
        ([str(p) for p in CONTRIB_RULES], contrib_options),
        (None, opset23_options),
    ):
        result = _ours(case.model, rules, options)
        if isinstance(result, str):
            results.append(Outcome(note=result))
        else:
            results.append(_checked(case.model, result, examples))
    ops = op_counts(case.model)
    peer = _checked(case.model, case.peer, examples)
    return Row(
        case.name,
        case.call,
        sum(ops.values()),
        dict(ops),
        runs_on_onnxruntime(case.model),
        peer,
        results[0],
        results[1],
        approximated_constants(case.model, case.peer),
    )


def approximated_constants(original: onnx.ModelProto, peer: onnx.ModelProto) -> str:
    """Why the peer's Gelu fusion is not exact, when it fused an erf of x / c with c not sqrt 2.

    onnxruntime's FusionGelu accepts Megatron's `x / 1.41421` (and `x * 0.7071`) for
    `x / sqrt(2)`: the fused Gelu then computes another function, off by a few ulps, which
    an accuracy comparison with a factor of 8 does not flag. '' when there is no such erf.
    """
    fused = op_counts(peer)
    if not (
        fused.get("Gelu") or fused.get("com.microsoft:Gelu") or fused.get("com.microsoft:BiasGelu")
    ):
        return ""
    constants = {t.name: onnx.numpy_helper.to_array(t) for t in original.graph.initializer}
    for node in original.graph.node:
        if (
            node.op_type == "Constant"
            and node.attribute
            and node.attribute[0].type == onnx.AttributeProto.TENSOR
        ):
            constants[node.output[0]] = onnx.numpy_helper.to_array(node.attribute[0].t)
    producers = {out: node for node in original.graph.node for out in node.output}
    exact = {"Div": np.float32(np.sqrt(2.0)), "Mul": np.float32(1 / np.sqrt(2.0))}
    for node in original.graph.node:
        argument = producers.get(node.input[0]) if node.op_type == "Erf" else None
        if argument is None or argument.op_type not in exact:
            continue
        values = [constants[name] for name in argument.input if name in constants]
        if len(values) == 1 and values[0].size == 1:
            c = np.float32(values[0].reshape(-1)[0])
            if c != exact[argument.op_type]:
                sign = "/" if argument.op_type == "Div" else "*"
                meant = exact[argument.op_type]
                return f"fuses erf(x {sign} {c:.9g}) as Gelu's erf(x {sign} {meant:.9g})"
    return ""


# ----------------------------------------------------------------------------- report


def _fused_text(fused: dict[str, int]) -> str:
    return ", ".join(f"{op.removeprefix('com.microsoft:')} {n}" for op, n in fused.items()) or "-"


def _verdict(outcome: Outcome) -> str:
    if outcome.nodes is None:
        return "failed"
    return {True: "equal", False: "differs", None: "not compared"}[outcome.equal]


@dataclasses.dataclass
class Summary:
    """The suite's counts and the rows behind each loss."""

    losses: list[tuple[Row, str]] = dataclasses.field(default_factory=list)
    apart: list[tuple[Row, str]] = dataclasses.field(default_factory=list)
    wrong: list[tuple[Row, str, Outcome]] = dataclasses.field(default_factory=list)
    refused: list[Row] = dataclasses.field(default_factory=list)


def classify(rows: list[Row]) -> Summary:
    """Losses (peer exact), gaps owed to the peer's inexact results, wrong results."""
    summary = Summary()
    for row in rows:
        if row.ort_refuses:
            summary.refused.append(row)
            continue
        for label, outcome in (("contrib", row.contrib), ("opset 23", row.opset23)):
            if outcome.nodes is None or outcome.equal is not True:
                summary.wrong.append((row, label, outcome))
        gaps = []
        shortfall = row.fused_shortfall()
        if shortfall:
            gaps.append(
                "fused "
                + ", ".join(f"{op} {ours}/{theirs}" for op, (ours, theirs) in shortfall.items())
            )
        ours_nodes, peer_nodes = row.contrib.nodes, row.peer.nodes
        if ours_nodes is not None and peer_nodes is not None and ours_nodes > peer_nodes:
            gaps.append(f"nodes {row.contrib.nodes}/{row.peer.nodes}")
        if row.attention23() < row.peer_attention():
            gaps.append(
                f"standard Attention at opset 23 {row.attention23()}/{row.peer_attention()}"
            )
        if gaps:
            target = summary.losses if row.peer_exact() else summary.apart
            target.append((row, "; ".join(gaps)))
    return summary


def report(rows: list[Row], failed: dict[str, str], title: str) -> tuple[str, int]:
    """The markdown report and the exit code."""
    summary = classify(rows)
    lines = [
        title,
        "",
        "| model | optimizer call | nodes | onnxruntime fused | nodes | contrib fused | nodes | "
        "Attention at 23 | outputs: onnxruntime / contrib / opset 23 |",
        "|---|---|---:|---|---:|---|---:|---:|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row.name} | {row.call} | {row.original} | {_fused_text(row.peer_fused())} | "
            f"{row.peer.nodes} | {_fused_text(row.contrib_fused())} | {row.contrib.nodes} | "
            f"{row.attention23()} / {row.peer_attention()} | {_verdict(row.peer)} / "
            f"{_verdict(row.contrib)} / {_verdict(row.opset23)} |"
        )
    peer_totals: Counter[str] = Counter()
    ours_totals: Counter[str] = Counter()
    for row in rows:
        peer_totals.update(row.peer_fused())
        ours_totals.update({op: canonical(row.contrib.ops)[op] for op in row.peer_fused()})
    lines += [
        "",
        "Fused ops over the models (ours / onnxruntime's optimizer, the op types it fused): "
        + ", ".join(
            f"{op.removeprefix('com.microsoft:')} {ours_totals[op]}/{n}"
            for op, n in sorted(peer_totals.items())
        )
        + f"; standard Attention at opset 23 {sum(r.attention23() for r in rows)}/"
        f"{sum(r.peer_attention() for r in rows)}.",
        "",
        "| | models |",
        "|---|---:|",
        f"| fewer fused ops or more nodes here (onnxruntime's result exact) | "
        f"{len({r.name for r, _ in summary.losses})} |",
        "| fewer fused ops or more nodes here, onnxruntime's result differs | "
        f"{len(summary.apart)} |",
        f"| our result computes something else, or rewrite failed | {len(summary.wrong)} |",
        f"| onnxruntime cannot run the original | {len(summary.refused)} |",
        f"| onnxruntime's result differs from the original | "
        f"{sum(1 for r in rows if not r.peer_exact())} |",
        "",
    ]
    if summary.losses:
        lines += ["## Behind onnxruntime's optimizer", ""]
        lines += [f"- {row.name}: {why}" for row, why in summary.losses]
        lines.append("")
    if summary.apart:
        lines += [
            "## Behind onnxruntime's optimizer where its result differs from the original",
            "",
        ]
        lines += [
            f"- {row.name}: {why} ({row.peer_approximates or row.peer.note})"
            for row, why in summary.apart
        ]
        lines.append("")
    if summary.wrong:
        lines += ["## Our result differs or failed", ""]
        lines += [
            f"- {row.name} ({label}): {o.note or _verdict(o)}" for row, label, o in summary.wrong
        ]
        lines.append("")
    if summary.refused:
        lines += ["## onnxruntime cannot run the original (not compared)", ""]
        lines += [f"- {row.name}: {row.ort_refuses}" for row in summary.refused]
        lines.append("")
    differing = [r for r in rows if not r.peer_exact()]
    if differing:
        lines += ["## onnxruntime's optimizer results that differ from the original", ""]
        lines += [
            f"- {r.name}: {r.peer_approximates or r.peer.note or _verdict(r.peer)}"
            for r in differing
        ]
        lines.append("")
    if failed:
        lines += [
            "## onnxruntime's tests that failed here (their checks compare with expected models "
            "of their own release; the models they built are still measured)",
            "",
        ]
        lines += [f"- {name}: {text}" for name, text in sorted(failed.items())]
        lines.append("")
    code = 1 if summary.losses or summary.wrong else 0
    return "\n".join(lines), code


# Options whose values are paths on the machine that ran the suite: shown by what they are.
_PATH_OPTIONS = {"--ort-source": "ONNXRUNTIME", "--torch-python": "TORCH_PYTHON", "--json": "FILE"}


def _without_paths(argv: list[str] | None) -> list[str]:
    """The command's arguments with machine paths replaced by what they stand for."""
    words = list(argv if argv is not None else sys.argv[1:])
    for i, word in enumerate(words[:-1]):
        if word in _PATH_OPTIONS:
            words[i + 1] = _PATH_OPTIONS[word]
    return words


def results_section(report_text: str, argv: list[str] | None) -> str:
    """The report as a RESULTS.md section: the command, the commit and the date first."""
    command = " ".join(["python benchmarks/peer_tests.py", *_without_paths(argv)])
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    stamp = time.strftime("%Y-%m-%d %H:%M")
    lines = [
        "## onnxruntime's transformer-fusion tests against its transformers optimizer",
        "",
        f"`{command}`, run {stamp} at commit {commit}; the machine is shared "
        "(2 cores). Each model onnxruntime's own fusion tests build (random weights in place "
        "of the generators' ones) through onnxruntime's optimizer as the test calls it, this "
        "project's contrib rules (`--rules patterns/ --rules patterns/ort`) and its default "
        "library at `--target-opset 23`; fused ops are the op types a result has more of "
        "than the original (com.microsoft ops and standard composite ops); outputs are checked "
        "with `rewriter.verify` (integer inputs also from 0 to 3, and from -3 to -1: ids counted "
        "from the end of a table).",
        "",
        # the report's sections become subsections of this one
        "\n".join(
            "#" + line if line.startswith("## ") else line for line in report_text.splitlines()
        ).rstrip(),
        "",
    ]
    if WHY_MD.exists():
        # the written analysis of the peer's inexact fusions, kept beside the measured tables
        lines += [WHY_MD.read_text().rstrip(), ""]
    return "\n".join(lines)


def run(
    source: str | None,
    revision: str,
    torch_python: str | None,
    tests: list[str] | None,
    examples: int,
    progress: bool,
) -> tuple[str, int, list[Row]]:
    """Harvest, measure and report; a skip note (exit code 0) when the suite cannot run."""
    if not source:
        return (
            "onnxruntime transformer-fusion suite skipped: give --ort-source (a checkout of "
            "microsoft/onnxruntime or its git directory).",
            0,
            [],
        )
    with tempfile.TemporaryDirectory(prefix="ort-fusion-") as scratch:
        try:
            folder = copy_sources(source, revision, Path(scratch))
            python = harvest_python(torch_python)
            cases, failed = harvest(
                folder, python, list(tests or DEFAULT_TESTS), Path(scratch) / "models"
            )
        except SuiteUnavailableError as exc:
            return f"onnxruntime transformer-fusion suite skipped: {exc}", 0, []
        rows = []
        for i, case in enumerate(cases):
            if progress:
                print(f"[{i + 1}/{len(cases)}] {case.name}", file=sys.stderr, flush=True)
            rows.append(measure(case, examples))
    title = (
        f"onnxruntime {ort.__version__}'s transformers optimizer on its own fusion tests' models "
        f"({len(rows)} models from {len({r.name.split('#')[0] for r in rows})} tests)"
    )
    text, code = report(rows, failed, title)
    return text, code, rows
