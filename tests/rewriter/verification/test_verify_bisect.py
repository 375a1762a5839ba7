"""find_first_bad: binary search over models built from rewrite-trace prefixes."""

from __future__ import annotations

import numpy as np
import onnx.parser
import pytest

import ir
from rewriter.verification import (
    VerifyError,
    VerifyOptions,
    check_equivalence,
    find_first_bad,
    load_failure,
)
from tests.rewriter.verification import _models as models

X = {"x": np.array([[1.0, -2.0, 3.0, 0.5]], dtype=np.float32)}


def history(n_steps: int, first_bad: int | None, *, recovers_at: int | None = None):
    """Prefix k of a synthetic rewrite history: `x * 1` while fine, `x * 2` once broken."""
    calls: list[int] = []

    def build(k: int) -> ir.Model:
        calls.append(k)
        broken = first_bad is not None and k >= first_bad
        if recovers_at is not None and k >= recovers_at:
            broken = False
        return ir.from_onnx(models.times(2.0 if broken else 1.0))

    return build, calls


@pytest.mark.parametrize(("n_steps", "first_bad"), [(1, 1), (7, 3), (16, 16), (16, 1), (100, 37)])
def test_finds_the_first_bad_prefix(n_steps, first_bad):
    build, calls = history(n_steps, first_bad)
    original = models.times(1.0)
    assert find_first_bad(n_steps, build, original, X) == first_bad
    # Logarithmic: the final model, prefix 0 and about log2(n) probes, each built once.
    assert len(calls) == len(set(calls))
    assert len(calls) <= 3 + (n_steps - 1).bit_length()
    # The answer comes with its good neighbour checked.
    assert first_bad - 1 in calls


def test_returns_none_when_the_final_model_agrees():
    build, calls = history(10, None)
    assert find_first_bad(10, build, models.times(1.0), X) is None
    assert calls == [10]


def test_returns_zero_when_even_the_untouched_model_disagrees():
    build, _ = history(5, 0)
    assert find_first_bad(5, build, models.times(1.0), X) == 0


def test_with_a_recovering_history_it_still_returns_a_good_to_bad_transition():
    original = models.times(1.0)
    build, _ = history(20, 4, recovers_at=12)
    # The final model agrees again, so there is nothing to blame at the end.
    assert find_first_bad(20, build, original, X) is None
    build, _ = history(20, 4, recovers_at=12)
    # Up to 11 it is broken from 4 on.
    assert find_first_bad(11, build, original, X) == 4


def test_a_prefix_that_cannot_be_loaded_counts_as_bad(tmp_path):
    original = models.times(1.0)

    def build(k: int):
        if k >= 2:
            return str(tmp_path / "missing.onnx")
        return original

    assert find_first_bad(4, build, original, X) == 2


def test_accepts_protos_and_paths_from_the_builder(tmp_path):
    import onnx

    good = tmp_path / "good.onnx"
    onnx.save(models.times(1.0), str(good))

    def build(k: int):
        return str(good) if k < 2 else models.times(2.0)

    assert find_first_bad(3, build, str(good), X) == 2


def test_original_failing_on_the_inputs_is_an_error():
    with pytest.raises(VerifyError, match="fails on the given inputs"):
        find_first_bad(1, lambda k: models.times(1.0), models.times(1.0), {"x": X["x"][0]})


def test_negative_step_count_is_rejected():
    with pytest.raises(ValueError, match="n_steps"):
        find_first_bad(-1, lambda k: models.times(1.0), models.times(1.0), X)


def test_bisects_on_a_shrunk_counterexample():
    """The intended use: verify, then bisect the trace on the counterexample it found."""
    steps = [models.unary("Relu"), models.unary("Relu"), models.unary("Abs"), models.unary("Abs")]
    result = check_equivalence(steps[0], steps[-1], VerifyOptions(save_counterexample=False))
    assert not result.ok
    first = find_first_bad(3, lambda k: steps[k], steps[0], result.counterexample)
    assert first == 2


def test_load_failure_names_onnxruntime_s_error_for_a_model_it_refuses():
    # Mul of float and double: onnx's checker is not run here, onnxruntime refuses to load it
    refused = ir.from_onnx(
        onnx.parser.parse_model("""
        <ir_version: 8, opset_import: ["" : 18]>
        g (float[2] x, double[2] z) => (float[2] y) { y = Mul (x, z) }
        """)
    )
    failure = load_failure(refused)
    assert failure is not None
    assert "Type parameter (T) of Optype (Mul) bound to different types" in failure
    assert not failure.startswith("model:")


def test_load_failure_is_none_for_a_model_onnxruntime_loads():
    assert load_failure(ir.from_onnx(models.times(2.0))) is None
