"""The accuracy budget: the engine's excluded sites, sensitivity, greedy float fallback,
the final check, and the same answer serially, on local processes and on Ray."""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx
import pytest

import ir
from rewriter.api import AccuracyBudget, RewriteOptions, rewrite
from rewriter.verification import InputOptions, check_accuracy, measure, pessimistic_bound
from tests.budget_models import FP16_RULE, LEAKY_RULE, ROUNDED_RULE, outlier_mlp
from tests.helpers import assert_same_outputs

RULE = "matmul_weight_rounded"
# The stand-in rule's rounding is arithmetic on a constant: constant folding would fold it into
# a weight the rule matches again. These tests measure the budget on the rule alone.
ALONE = RewriteOptions(passes=())


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("budget")
    model = folder / "mlp.onnx"
    onnx.save(outlier_mlp(), model)
    rules = folder / "rounded.rw"
    rules.write_text(ROUNDED_RULE)
    return model, rules


def _matmul_weights(model: ir.Model) -> dict[str, str]:
    """`mm0`, ... (the layer's MatMul, found through its bias Add) -> what its weight reads."""
    weights = {}
    for node in model.graph:
        if node.name.startswith("bias"):
            matmul = node.inputs[0].producer()
            assert matmul is not None
            assert matmul.op_type == "MatMul"
            weights[f"mm{node.name[4:]}"] = matmul.inputs[1].name
    return weights


def test_excluded_sites_leave_that_rewrite_out_and_say_why(files):
    model, rules = files
    everything = rewrite(model, [str(rules)], ALONE)
    assert everything.trace.approximate_sites() == tuple((RULE, f"mm{i}") for i in range(4))
    assert {e.approximate for e in everything.trace.entries} == {"snr >= 30"}
    options = RewriteOptions(excluded_sites={(RULE, "mm1"): "kept float for the test"}, passes=())
    result = rewrite(model, [str(rules)], options)
    assert result.trace.approximate_sites() == ((RULE, "mm0"), (RULE, "mm2"), (RULE, "mm3"))
    weights = _matmul_weights(result.model)
    assert weights["mm1"] == "w1"  # the float weight, read directly
    assert all(weights[f"mm{i}"] != f"w{i}" for i in (0, 2, 3))
    skips = [s for s in result.trace.skips if s.node == "mm1"]
    assert [(s.rule, s.reason) for s in skips] == [(RULE, "kept float for the test")]


def _budget(files, **fields):
    model, rules = files
    budget = AccuracyBudget(("snr>=30",), **{"examples": 8, "jobs": 1, **fields})
    return rewrite(model, [str(rules)], RewriteOptions(budget=budget, passes=()))


def test_greedy_keeps_the_outlier_layer_float_and_quantizes_the_rest(files):
    model, _ = files
    result = _budget(files)
    budget = result.budget
    assert budget is not None
    assert budget.ok
    # The outlier layer is the most sensitive, and alone it breaks the budget.
    first = budget.sites[0]
    assert (first.rule, first.anchor, first.nodes) == (RULE, "mm1", ("layer1",))
    assert first.kept_float
    assert first.value("snr") < 30
    assert [s.anchor for s in budget.approximate] == [s.anchor for s in budget.sites[1:]]
    assert [s.rank for s in budget.sites] == [1, 2, 3, 4]
    alone = [s.value("snr") for s in budget.sites]
    assert alone == sorted(alone)
    # Every approximate rewrite at once misses the budget; one layer in float meets it.
    assert [(step.left_out, step.met) for step in budget.steps] == [(0, False), (1, True)]
    assert budget.summary().startswith(
        "accuracy budget snr>=30 met: 3 of 4 layers approximate, 1 kept float; final snr"
    )
    weights = _matmul_weights(result.model)
    assert weights["mm1"] == "w1"
    assert weights["mm0"] != "w0"
    assert "left out by the accuracy budget (sensitive site 1 of 4): snr " in next(
        s.reason for s in result.trace.skips if s.node == "mm1"
    )
    # The final check ran on other inputs than tuning (seed + 1) and agrees with a fresh one.
    assert budget.final.seed == 1
    assert budget.final.ok
    again = check_accuracy(
        model, result.model, ["snr>=30"], inputs=InputOptions(examples=8, seed=1)
    )
    assert again.overall("snr") == pytest.approx(budget.final.overall("snr"))
    payload = result.to_json()["budget"]
    assert payload["sites"][0]["kept"] == "float"
    assert payload["sites"][1]["kept"] == "approximate"


def test_a_loose_budget_keeps_every_site_approximate(files):
    model, rules = files
    loose = AccuracyBudget(("snr>=10",), examples=8, jobs=1)
    result = rewrite(model, [str(rules)], RewriteOptions(budget=loose, passes=()))
    assert result.budget is not None
    assert result.budget.ok
    assert not result.budget.kept_float
    assert len(result.budget.approximate) == 4
    assert [step.left_out for step in result.budget.steps] == [0]


def test_a_tight_budget_keeps_everything_float(files):
    model, rules = files
    tight = AccuracyBudget(("snr>=80",), examples=8, jobs=1)
    result = rewrite(model, [str(rules)], RewriteOptions(budget=tight, passes=()))
    assert result.budget is not None
    assert result.budget.ok
    assert len(result.budget.kept_float) == 4
    assert_same_outputs(onnx.load(model), result.proto)


def test_a_budget_even_float_misses_is_reported_not_met(files, tmp_path):
    model, rules = files
    leaky = tmp_path / "leaky.rw"
    leaky.write_text(LEAKY_RULE)
    budget = AccuracyBudget(("snr>=30",), examples=8, jobs=1)
    result = rewrite(model, [str(rules), str(leaky)], RewriteOptions(budget=budget, passes=()))
    assert result.budget is not None
    assert not result.budget.ok
    assert "even with every approximate rewrite left out the model reaches only snr" in " ".join(
        result.budget.notes
    )
    assert not result.budget.final.ok
    assert result.budget.summary().startswith("accuracy budget snr>=30 NOT met")


def test_no_approximate_rule_fired_still_checks_the_result(files, tmp_path):
    model, _ = files
    budget = AccuracyBudget(("cosine>=0.999",), examples=4, jobs=1)
    rules = tmp_path / "none.rw"
    rules.write_text("rule r: y = Sigmoid (x) => y = Sigmoid (x)\n")
    result = rewrite(model, [str(rules)], RewriteOptions(budget=budget, passes=()))
    assert result.budget is not None
    assert result.budget.ok
    assert not result.budget.sites
    assert result.budget.final.examples_run == 4


def test_held_out_samples_check_the_result(files):
    rng = np.random.default_rng(5)
    samples = ({"x": rng.standard_normal((16, 4, 16)).astype(np.float32)},)
    result = _budget(files, samples=samples, examples=0)
    assert result.budget is not None
    assert result.budget.ok
    assert result.budget.final.examples_run == 8  # every second of the 16 samples
    assert result.budget.sites[0].anchor == "mm1"
    assert result.budget.sites[0].kept_float


def test_the_final_check_catches_a_choice_tuned_on_too_few_samples(files):
    # Three tuning samples happen to give every layer approximate 30.8 dB; the held-out
    # three, less. Judged by the measured value the greedy stops there and the final check
    # fails; judged by the pessimistic bound (the default) it keeps the outlier layer float.
    rng = np.random.default_rng(5)
    samples = ({"x": rng.standard_normal((6, 2, 16)).astype(np.float32)},)
    naive = _budget(files, samples=samples, examples=0, confidence=None).budget
    assert naive is not None
    assert naive.met
    assert not naive.final.ok
    assert not naive.ok
    assert not naive.kept_float
    assert (
        "met on the tuning inputs (snr 30.8 dB) but not on the independent ones"
        in (naive.notes[-1])
    )
    careful = _budget(files, samples=samples, examples=0).budget
    assert careful is not None
    assert careful.ok
    assert [s.anchor for s in careful.kept_float] == ["mm1"]
    first_step = careful.steps[0]
    assert dict(first_step.values)["snr"] == pytest.approx(30.8, abs=0.05)
    assert dict(first_step.bounds)["snr"] < 30
    assert not first_step.met


def test_the_pessimistic_bound_is_a_low_quantile_of_resampled_inputs():
    rng = np.random.default_rng(0)
    reference = [[rng.standard_normal((4, 8))] for _ in range(12)]
    # Noise grows with the input's index: the metric depends on which inputs are drawn.
    actual = [
        [r[0] + 0.01 * (i + 1) * rng.standard_normal((4, 8))] for i, r in enumerate(reference)
    ]
    point = check_snr(reference, actual)
    low = pessimistic_bound("snr", reference, actual, confidence=0.9)
    high_max_rel = pessimistic_bound("max_rel", reference, actual, confidence=0.9)
    assert low < point
    assert high_max_rel >= measure("max_rel", [r[0] for r in reference], [a[0] for a in actual])
    assert pessimistic_bound("snr", reference[:1], actual[:1]) == check_snr(
        reference[:1], actual[:1]
    )
    again = pessimistic_bound("snr", reference, actual, confidence=0.9)
    assert again == low  # seeded: the same inputs give the same bound
    with pytest.raises(ValueError, match="confidence must be between 0 and 1"):
        pessimistic_bound("snr", reference, actual, confidence=1.0)


def check_snr(reference, actual):
    return measure("snr", [r[0] for r in reference], [a[0] for a in actual])


def test_bad_budgets_are_value_errors():
    with pytest.raises(ValueError, match="unknown accuracy metric"):
        AccuracyBudget(("psnr>=3",))
    with pytest.raises(ValueError, match="jobs must be at least 1"):
        AccuracyBudget(("snr>=3",), jobs=0)
    with pytest.raises(ValueError, match="confidence must be between 0 and 1"):
        AccuracyBudget(("snr>=3",), confidence=1.5)
    with pytest.raises(ValueError, match="needs examples > 0 or samples"):
        AccuracyBudget(("snr>=3",), examples=0)
    with pytest.raises(TypeError, match="a sequence of"):
        AccuracyBudget(("snr>=3",), samples={"x": np.zeros(3)})  # type: ignore[arg-type]


def _comparable(result):
    payload = result.budget.to_json()
    payload.pop("runner")
    # Parallel runs measure a few greedy steps ahead (and discard them): more evaluations.
    payload.pop("evaluations")
    return payload, ir.to_onnx(result.model).SerializeToString()


def test_local_processes_give_the_serial_answer(files):
    serial = _budget(files)
    parallel = _budget(files, jobs=2)
    assert parallel.budget.runner == "on 2 local processes"
    assert _comparable(parallel) == _comparable(serial)


@pytest.fixture(scope="module")
def ray_instance():
    ray = pytest.importorskip("ray")
    context = ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    yield context.address_info["gcs_address"]
    ray.shutdown()


def test_ray_gives_the_serial_answer(files, ray_instance):
    serial = _budget(files)
    on_ray = _budget(files, ray_address=ray_instance)
    assert on_ray.budget.runner == f"on Ray at {ray_instance}"
    assert _comparable(on_ray) == _comparable(serial)


def test_options_with_a_budget_are_frozen_values():
    budget = AccuracyBudget(("snr>=35",))
    options = RewriteOptions(budget=budget, passes=())
    assert options.budget.accept[0].metric == "snr"
    assert options.budget.accept[0].bound == 35
    with pytest.raises(dataclasses.FrozenInstanceError):
        budget.seed = 3  # type: ignore[misc]


def test_a_milder_rule_takes_the_place_of_a_left_out_one(files, tmp_path):
    # Rounding first (priority 1), float16 weights where rounding is left out: mixed precision.
    model, _ = files
    rules = tmp_path / "mixed.rw"
    rounded = ROUNDED_RULE.replace(
        f"rule {RULE} approximate", f"rule {RULE} priority 1 approximate"
    )
    rules.write_text(rounded + FP16_RULE)
    budget = AccuracyBudget(("snr>=30",), examples=8, jobs=1)
    result = rewrite(model, [str(rules)], RewriteOptions(budget=budget, passes=()))
    assert result.budget is not None
    assert result.budget.ok
    first = result.budget.sites[0]
    assert (first.rule, first.anchor, first.applied) == (RULE, "mm1", "matmul_weight_fp16")
    assert first.alternatives == (("matmul_weight_fp16", "mm1"),)
    assert not first.kept_float
    assert first.rule_text == f"{RULE} -> matmul_weight_fp16"
    assert not result.budget.kept_float
    assert [e.rule for e in result.trace.entries] == [
        RULE,
        "matmul_weight_fp16",
        RULE,
        RULE,
    ]
    assert result.budget.summary().startswith(
        "accuracy budget snr>=30 met: 4 of 4 layers approximate, 0 kept float"
    )
