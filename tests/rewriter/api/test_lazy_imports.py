"""A plain rewrite loads neither the quantization nor the verification package, nor the loop
rolling machinery.

They bring in onnxruntime sessions, metrics and the budget's machinery, which only a measured
run (a preset, an accuracy budget, a speed check) uses, and the chain search and Loop builder,
which only loop passes and `match repeat` rules use; their names stay reachable from
`rewriter.api` and `rewriter.loops`, loaded on first use.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

# Rewrites argv[1] with the rule file argv[2] through the command line, then prints which
# of the two packages were loaded, then whether the API's lazy names are the packages' own.
_SCRIPT = """
import sys
from rewriter.cli import main

if main([sys.argv[1], "--rules", sys.argv[2], "-o", sys.argv[3], "--no-progress"]) != 0:
    raise SystemExit("rewrite failed")
heavy = ("rewriter.quantize", "rewriter.verification", "rewriter.loops._roll", "rewriter.loops._repeat")
print(sorted(m for m in heavy if m in sys.modules))
import rewriter.api
import rewriter.quantize
print(rewriter.api.AccuracyBudget is rewriter.quantize.AccuracyBudget)
import rewriter.loops
import rewriter.loops._roll
print(rewriter.loops.roll_loops is rewriter.loops._roll.roll_loops)
"""

MODEL = """<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 3] x) => (float[2, 3] y) {
    one = Constant <value = float {1.0}> ()
    y = Mul (x, one)
}"""


def test_a_plain_rewrite_loads_no_measuring_package_and_no_loop_machinery(tmp_path):
    import onnx.parser

    model = tmp_path / "mul_one.onnx"
    onnx.save(onnx.parser.parse_model(MODEL), model)
    rules = tmp_path / "mul_one.rw"
    rules.write_text("rule mul_one: y = Mul (x, 1) => y = x\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [str(model), str(rules), str(tmp_path / "out.onnx")]
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, *argv], capture_output=True, text=True, env=env, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-3:] == ["[]", "True", "True"]
    assert (tmp_path / "out.onnx").exists()
