"""A pytest plugin that saves every model onnxscript's rewriter rewrites during a test run.

`peer_onnxscript.py` runs onnxscript's own rewriter tests (from a checkout of onnxscript's
sources, outside this repository) with this plugin loaded:

    python -m pytest -p onnxscript_capture --save-rewrites DIR onnxscript/rewriter/...

Every call of `onnxscript.rewriter.RewriteRuleSet.apply_to_model` (the method every rule,
rule set, `onnxscript.rewriter.rewrite` and the `ort_fusions` fusers end in) that is not a
dry run (a `tracer` makes it only look) saves the model it was given and the model it
returned, as `DIR/<n>.before.onnx` and `DIR/<n>.after.onnx`. At the end of the session
`DIR/index.json` lists them with the test that made them, whether that test passed, the rule
names and the number of rewrites onnxscript reported. Nothing of onnxscript is changed but
that one method, wrapped for the session.

The disk is guarded: a pair already saved is not saved again (the index points at the first
copy); a model whose initializers hold more than `--max-model-mb` (onnxscript's LLM test
models carry 0.2-1.4 GB of random weights) is not serialized at all, and once the saved files
reach `--max-total-mb` nothing more is saved; the index lists what was left out and why.
"""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

MB = 1 << 20


def pytest_addoption(parser: pytest.Parser) -> None:
    """The folder to save into (without it the plugin does nothing) and the size limits."""
    parser.addoption(
        "--save-rewrites",
        metavar="DIR",
        help="save each model onnxscript's RewriteRuleSet.apply_to_model rewrites into DIR",
    )
    parser.addoption(
        "--max-model-mb",
        type=float,
        default=20.0,
        help="do not save a model whose initializers hold more (default 20)",
    )
    parser.addoption(
        "--max-total-mb",
        type=float,
        default=2000.0,
        help="stop saving once the saved files hold this much (default 2000)",
    )


def pytest_configure(config: pytest.Config) -> None:
    """Start recording when `--save-rewrites` is given."""
    folder = config.getoption("--save-rewrites")
    if folder:
        recorder = _Recorder(
            Path(folder),
            int(config.getoption("--max-model-mb") * MB),
            int(config.getoption("--max-total-mb") * MB),
        )
        config.pluginmanager.register(recorder, "onnxscript-rewrite-recorder")


def _initializer_bytes(model: Any) -> int:
    """What the model's main-graph initializers hold, without serializing anything."""
    total = 0
    for value in model.graph.initializers.values():
        tensor = value.const_value
        if tensor is not None:
            total += int(tensor.nbytes)
    return total


class _Recorder:
    """Wraps `RewriteRuleSet.apply_to_model` and keeps what each test handed it."""

    def __init__(self, folder: Path, max_model: int, max_total: int) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.max_model = max_model
        self.max_total = max_total
        self.saved_bytes = 0
        self.first_copy: dict[str, int] = {}  # content hash -> number of the saved pair
        self.test = ""
        self.records: list[dict[str, Any]] = []
        self.passed: set[str] = set()
        self.failed: set[str] = set()
        self._wrap()

    def _wrap(self) -> None:
        import onnx_ir
        from onnxscript.rewriter import RewriteRuleSet

        original = RewriteRuleSet.apply_to_model
        recorder = self

        @functools.wraps(original)
        def apply_to_model(rule_set: Any, model: Any, **kwargs: Any) -> Any:
            if kwargs.get("tracer") is not None:
                return original(rule_set, model, **kwargs)
            names = [str(getattr(r, "name", "") or type(r).__name__) for r in rule_set.rules]
            size = _initializer_bytes(model)
            if size > recorder.max_model:
                recorder.leave_out(names, f"initializers hold {size / MB:.0f} MB")
                return original(rule_set, model, **kwargs)
            try:
                before = onnx_ir.to_proto(model).SerializeToString()
            except Exception:  # a model the test made on purpose invalid: nothing to keep
                return original(rule_set, model, **kwargs)
            count = original(rule_set, model, **kwargs)
            try:
                after = onnx_ir.to_proto(model).SerializeToString()
            except Exception:
                return count
            recorder.save(before, after, names, count)
            return count

        RewriteRuleSet.apply_to_model = apply_to_model  # type: ignore[method-assign]

    def save(self, before: bytes, after: bytes, rules: list[str], count: Any) -> None:
        """Write one before/after pair (once) and note it under the running test."""
        key = hashlib.sha256(before).hexdigest() + hashlib.sha256(after).hexdigest()
        number = self.first_copy.get(key)
        if number is None:
            if self.saved_bytes + len(before) + len(after) > self.max_total:
                self.leave_out(rules, f"the saved models reached {self.max_total / MB:.0f} MB")
                return
            number = len(self.first_copy)
            self.first_copy[key] = number
            (self.folder / f"{number}.before.onnx").write_bytes(before)
            (self.folder / f"{number}.after.onnx").write_bytes(after)
            self.saved_bytes += len(before) + len(after)
        self.records.append(
            {
                "number": number,
                "test": self.test,
                "rules": rules,
                "count": count if isinstance(count, int) else None,
            }
        )

    def leave_out(self, rules: list[str], why: str) -> None:
        """Note a model that was not saved, and why."""
        self.records.append({"number": None, "test": self.test, "rules": rules, "why": why})

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        """Remember which test is running."""
        self.test = item.nodeid

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """A test passed when its call passed and neither its setup nor teardown failed."""
        if report.failed:
            self.failed.add(report.nodeid)
        elif report.when == "call" and report.passed:
            self.passed.add(report.nodeid)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """Write the index."""
        for record in self.records:
            record["passed"] = record["test"] in self.passed and record["test"] not in self.failed
        (self.folder / "index.json").write_text(json.dumps(self.records, indent=1))
