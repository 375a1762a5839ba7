"""The same model and rules give the same bytes and trace in every process.

Both runs of each model happen in separate interpreters with different `PYTHONHASHSEED`s,
so an output that depends on the iteration order of a `set` of strings, or on `hash()` of a
name, shows up as a difference here (two runs in one process share one seed and could not
tell).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

MODELS = Path(__file__).resolve().parents[2] / "models"

# (model, extra CLI arguments): transformer exports through the default library, one of them
# converted to opset 23 (attention fusions and the version converter), and a CNN whose
# BatchNorms fold into convolutions.
CASES = (
    ("bert_ts14", ("--target-opset", "23")),
    ("gpt2_ts14", ()),
    ("cnn_bn_ts14", ()),
)

# Rewrites every case in one interpreter: argv[1] holds the models, argv[2] the outputs.
_SCRIPT = """
import sys
from rewriter.cli import main

models, out = sys.argv[1], sys.argv[2]
for name, *extra in (case.split(",") for case in sys.argv[3:]):
    model = f"{models}/{name}.onnx"
    argv = [model, "-o", f"{out}/{name}.onnx", "--json", f"{out}/{name}.json", *extra]
    if main(argv) != 0:
        raise SystemExit(f"rewrite failed on {name}")
"""


def _rewrite_all(out: Path, hash_seed: str) -> str:
    """Rewrite every case in a fresh interpreter; returns what it printed (`out` as OUT)."""
    out.mkdir()
    cases = [",".join((name, *extra)) for name, extra in CASES]
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(MODELS), str(out), *cases],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.replace(str(out), "OUT")


def _trace(path: Path) -> object:
    """The JSON report without its timings (the only part that may differ)."""
    report = json.loads(path.read_text())
    report.pop("timings_seconds")
    return report


def test_outputs_and_traces_do_not_depend_on_the_hash_seed(tmp_path):
    first = tmp_path / "seed_1"
    second = tmp_path / "seed_2"
    printed = _rewrite_all(first, "1")
    assert _rewrite_all(second, "2") == printed
    for name, _ in CASES:
        assert (first / f"{name}.onnx").read_bytes() == (second / f"{name}.onnx").read_bytes()
        assert _trace(first / f"{name}.json") == _trace(second / f"{name}.json")
        assert _trace(first / f"{name}.json")["trace"]["applied"], "nothing was rewritten"
