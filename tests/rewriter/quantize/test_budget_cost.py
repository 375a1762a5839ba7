"""The accuracy budget measures on one switchable model, in one session, without rewriting."""

from __future__ import annotations

import multiprocessing

import onnx
import pytest

from rewriter.api import AccuracyBudget, RewriteOptions, _precision, rewrite
from rewriter.quantize import _sensitivity
from tests.budget_models import ROUNDED_RULE, outlier_mlp


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("budget_cost")
    model = folder / "mlp.onnx"
    onnx.save(outlier_mlp(), model)
    rules = folder / "rounded.rw"
    rules.write_text(ROUNDED_RULE)
    return model, rules


def test_the_budget_rewrites_once_and_opens_one_session(files, monkeypatch):
    model, rules = files
    runs = []
    sessions = []
    approximate = _precision._Run.approximate
    open_session = _sensitivity.open_workload_session

    def counted_run(self, *args, **kwargs):
        runs.append(args)
        return approximate(self, *args, **kwargs)

    def counted_session(workload):
        sessions.append(workload.key)
        return open_session(workload)

    monkeypatch.setattr(_precision._Run, "approximate", counted_run)
    monkeypatch.setattr(_sensitivity, "open_workload_session", counted_session)
    budget = AccuracyBudget(("snr>=30",), examples=8, jobs=1)
    result = rewrite(model, [str(rules)], RewriteOptions(budget=budget))
    assert result.budget is not None
    assert result.budget.ok
    # Variant 0, and one run with its sites left out (nothing takes their place).
    assert len(runs) == 2
    assert len(sessions) == 1
    # Every layer alone, all approximate, all float, then the greedy steps.
    assert result.budget.evaluations >= 4 + 2


def test_progress_reports_measured_total_elapsed_and_estimate(files):
    model, rules = files
    lines: list[str] = []
    budget = AccuracyBudget(("snr>=30",), examples=4, jobs=1, progress=lines.append)
    rewrite(model, [str(rules)], RewriteOptions(budget=budget))
    first = next(line for line in lines if line.startswith("sensitivity of 4 candidates: "))
    assert first.startswith("sensitivity of 4 candidates: 1/6 measured, ")
    assert first.endswith(" s left")
    assert any("6/6 measured" in line for line in lines)


def test_an_interrupted_pool_leaves_no_worker_behind(files):
    model, _ = files
    workload = _sensitivity.Workload.of(onnx.load(model).SerializeToString(), _empty_data(), (), ())
    with (  # noqa: PT012 - the interrupt comes mid-block
        pytest.raises(KeyboardInterrupt),
        _sensitivity.Evaluator(workload, jobs=2) as evaluator,
    ):
        assert [e.failure for e in evaluator.map([{}, {}])] == ["", ""]
        assert multiprocessing.active_children()  # the workers are up
        raise KeyboardInterrupt
    assert multiprocessing.active_children() == []


def _empty_data():
    from rewriter.verification import AccuracyData

    return AccuracyData((), (), ())
