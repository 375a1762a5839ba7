"""Harvest worker for the onnxruntime transformer-fusion suite (`peer_ort_fusion.py`).

Runs onnxruntime's own fusion tests (`onnxruntime/test/python/transformers/test_*.py`, from
a copy of onnxruntime's sources in a scratch folder) unchanged and records every model a test
hands to onnxruntime's transformers optimizer (`optimize_model`, `optimize_by_fusion`), with
the optimizer's result for the test's own arguments. Each model is saved to `--out` as
`<n>.onnx` (what the test built) and `<n>.peer.onnx` (what the optimizer made of it), and
`cases.json` lists them.

It imports only onnx, onnxruntime and what the tests themselves import (numpy, packaging,
torch for the tests that export from PyTorch), so it can run in another interpreter than the
suite: `peer_ort_fusion.py` runs it with `--torch-python` for the tests that need torch.

    python benchmarks/peer_ort_fusion_harvest.py --source SCRATCH/transformers --out DIR \\
        test_attention_fusion test_skip_layer_norm_fusion
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import json
import os
import sys
import unittest
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx.numpy_helper
import onnxruntime.transformers.optimizer as ort_optimizer
from onnxruntime.transformers.fusion_options import FusionOptions


def _options_summary(model_type: str, options: Any) -> str:
    """The FusionOptions fields that differ from the defaults of `model_type`."""
    if options is None:
        return ""
    try:
        defaults = vars(FusionOptions(model_type))
    except Exception:  # an unknown model type: list every field
        defaults = {}
    changed = {k: v for k, v in vars(options).items() if defaults.get(k, object()) != v}
    return ", ".join(f"{k}={v}" for k, v in sorted(changed.items()))


class Recorder:
    """Stands in for the optimizer's entry points: records the model, then runs the real one."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.test = ""
        self.cases: list[dict[str, Any]] = []
        self.depth = 0  # optimize_model calls optimize_by_fusion: record the outer call only

    def _record(self, model: onnx.ModelProto, call: dict[str, Any], result: Any) -> None:
        index = len(self.cases)
        onnx.save(model, str(self.out / f"{index}.onnx"))
        onnx.save(result.model, str(self.out / f"{index}.peer.onnx"))
        self.cases.append({"index": index, "test": self.test, **call})

    def optimize_model(
        self, input: Any, model_type: str = "bert", *args: Any, **kwargs: Any
    ) -> Any:
        """`onnxruntime.transformers.optimizer.optimize_model`, recorded."""
        if self.depth:
            return _REAL_OPTIMIZE_MODEL(input, model_type, *args, **kwargs)
        model = onnx.load(input) if isinstance(input, str) else _copy(input)
        self.depth += 1
        try:
            result = _REAL_OPTIMIZE_MODEL(input, model_type, *args, **kwargs)
        finally:
            self.depth -= 1
        names = ("num_heads", "hidden_size", "optimization_options", "opt_level")
        given = dict(zip(names, args, strict=False)) | kwargs
        call = {
            "entry": "optimize_model",
            "model_type": model_type,
            "num_heads": given.get("num_heads", 0),
            "hidden_size": given.get("hidden_size", 0),
            "opt_level": given.get("opt_level"),
            "options": _options_summary(model_type, given.get("optimization_options")),
        }
        self._record(model, call, result)
        return result

    def optimize_by_fusion(
        self, model: Any, model_type: str = "bert", *args: Any, **kwargs: Any
    ) -> Any:
        """`onnxruntime.transformers.optimizer.optimize_by_fusion`, recorded."""
        if self.depth:
            return _REAL_OPTIMIZE_BY_FUSION(model, model_type, *args, **kwargs)
        original = _copy(model)
        self.depth += 1
        try:
            result = _REAL_OPTIMIZE_BY_FUSION(model, model_type, *args, **kwargs)
        finally:
            self.depth -= 1
        names = ("num_heads", "hidden_size", "optimization_options")
        given = dict(zip(names, args, strict=False)) | kwargs
        call = {
            "entry": "optimize_by_fusion",
            "model_type": model_type,
            "num_heads": given.get("num_heads", 0),
            "hidden_size": given.get("hidden_size", 0),
            "opt_level": None,
            "options": _options_summary(model_type, given.get("optimization_options")),
        }
        self._record(original, call, result)
        return result


_REAL_OPTIMIZE_MODEL = ort_optimizer.optimize_model
_REAL_OPTIMIZE_BY_FUSION = ort_optimizer.optimize_by_fusion


def _copy(model: onnx.ModelProto) -> onnx.ModelProto:
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    return copy


@contextlib.contextmanager
def _recording(recorder: Recorder):  # type: ignore[no-untyped-def]
    """Route the optimizer's entry points through `recorder` while the tests run.

    The tests import them either at module level (rebound on the module below) or inside a
    test function (they read the optimizer module's attribute, set here).
    """
    ort_optimizer.optimize_model = recorder.optimize_model  # type: ignore[assignment]
    ort_optimizer.optimize_by_fusion = recorder.optimize_by_fusion  # type: ignore[assignment]
    try:
        yield
    finally:
        ort_optimizer.optimize_model = _REAL_OPTIMIZE_MODEL
        ort_optimizer.optimize_by_fusion = _REAL_OPTIMIZE_BY_FUSION


def random_float_tensor(name: str, shape: list[int], random: bool = False) -> onnx.TensorProto:
    """The generators' `float_tensor` with weights drawn from [-1, 1] (seeded by the name).

    The generators fill every weight with 1.0 unless asked for random ones. With all-ones
    projections every row of an attention output is constant, the LayerNormalization after
    it subtracts that constant, and no comparison of outputs can see what an attention fusion
    computes. The structure of the models is unchanged.
    """
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    values = rng.uniform(-1.0, 1.0, shape).astype(np.float32)
    return onnx.numpy_helper.from_array(values, name)


def _randomize_weights(source: Path) -> None:
    """Replace `float_tensor` in every loaded module of the test folder (see above)."""
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if path and Path(path).resolve().parent == source and hasattr(module, "float_tensor"):
            module.float_tensor = random_float_tensor


def run_tests(
    module_name: str, recorder: Recorder, source: Path, random_weights: bool
) -> dict[str, str]:
    """Run every test of one test module; the tests that failed, with their last error line."""
    failed: dict[str, str] = {}
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # a missing dependency (torch) or a broken file
        return {module_name: f"not imported: {type(exc).__name__}: {exc}"[:200]}
    if random_weights:
        _randomize_weights(source)
    for name in ("optimize_model", "optimize_by_fusion"):
        if hasattr(module, name):
            setattr(module, name, getattr(recorder, name))
    suite = unittest.defaultTestLoader.loadTestsFromModule(module)
    for test in _flatten(suite):
        recorder.test = f"{module_name}.{test.id().rsplit('.', 1)[-1]}"
        mismatches = _soften_checks(test)
        result = unittest.TestResult()
        # The tests print their own progress; keep them out of the report.
        with contextlib.redirect_stdout(io.StringIO()):
            test.run(result)
        for _test, text in result.errors + result.failures:
            failed[recorder.test] = text.strip().splitlines()[-1][:200]
        if mismatches and recorder.test not in failed:
            failed[recorder.test] = f"check failed: {mismatches[0]}"[:200]
    return failed


def _soften_checks(test: unittest.TestCase) -> list[str]:
    """Make the test's `assert*` checks record instead of stopping the test.

    The tests compare the optimizer's result with expected models of their own release; a
    test that loops over several models would stop at the first difference and hand the
    optimizer no more models. The checks are not what this suite measures.
    """
    mismatches: list[str] = []

    def soft(check: Any) -> Any:
        def checked(*args: Any, **kwargs: Any) -> Any:
            try:
                return check(*args, **kwargs)
            except test.failureException as exc:
                mismatches.append(str(exc).splitlines()[0] if str(exc) else "assertion")
                return None

        return checked

    for name in dir(test):
        if name.startswith("assert") and callable(getattr(test, name)):
            setattr(test, name, soft(getattr(test, name)))
    return mismatches


def _flatten(suite: unittest.TestSuite) -> list[unittest.TestCase]:
    tests: list[unittest.TestCase] = []
    for item in suite:
        if isinstance(item, unittest.TestSuite):
            tests.extend(_flatten(item))
        else:
            tests.append(item)
    return tests


def main(argv: list[str] | None = None) -> int:
    """Command line: run the named test modules of `--source`, write the models to `--out`."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", required=True, help="onnxruntime's transformers test folder")
    parser.add_argument("--out", required=True, help="where the models and cases.json go")
    parser.add_argument(
        "--ones",
        action="store_true",
        help="keep the generators' all-ones weights (default: random weights, see "
        "random_float_tensor)",
    )
    parser.add_argument("modules", nargs="+", help="test module names (test_attention_fusion)")
    args = parser.parse_args(argv)
    source = Path(args.source).resolve()
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    sys.path.insert(0, str(source))
    os.chdir(source)  # the tests save their models to the working directory
    recorder = Recorder(out)
    failed: dict[str, str] = {}
    with _recording(recorder):
        for module_name in args.modules:
            failed |= run_tests(module_name, recorder, source, not args.ones)
    (out / "cases.json").write_text(
        json.dumps({"cases": recorder.cases, "failed": failed}, indent=1)
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
