"""`rewrite verify`: table output and exit codes 0 (agree), 1 (mismatch), 2 (bad usage/model)."""

from __future__ import annotations

import os

import numpy as np
import onnx
import pytest

from rewriter.cli import main
from tests.rewriter.verification import _models as models


@pytest.fixture
def files(tmp_path):
    paths = {}
    for name, model in {
        "relu": models.unary("Relu"),
        "abs": models.unary("Abs"),
        "add0": models.add_zero(),
        "ident": models.unary("Identity"),
        "scaled": models.times(1.001),
        "other_names": models.parse("(float[N, 4] z) => (float[N, 4] y)", "y = Relu(z)"),
    }.items():
        path = tmp_path / f"{name}.onnx"
        onnx.save(model, str(path))
        paths[name] = str(path)
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"this is not a model")
    paths["garbage"] = str(garbage)
    return paths


def test_equivalent_models_exit_0_with_a_table(files, capsys):
    assert main(["verify", files["add0"], files["ident"]]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].split() == [
        "output",
        "dtype",
        "shape",
        "ORT",
        "opt.",
        "original",
        "err",
        "rewritten",
        "err",
        "ratio",
        "criterion",
        "status",
    ]
    assert lines[2].split()[0] == "y"
    assert lines[2].split()[-1] == "ok"
    assert lines[3].split()[3] == "ORT_ENABLE_ALL"
    assert "equivalent (20 examples; seed 0" in out


def test_mismatch_exits_1_names_the_output_and_saves_the_counterexample(files, capsys):
    assert main(["verify", files["relu"], files["abs"]]) == 1
    out = capsys.readouterr().out
    assert "MISMATCH in `y`" in out
    saved = os.path.join(os.path.dirname(files["abs"]), "abs.counterexample.npz")
    assert f"counterexample saved to {saved}" in out
    with np.load(saved) as data:
        assert np.any(data["x"] < 0)


def test_counterexample_path_option(files, tmp_path, capsys):
    target = tmp_path / "ce.npz"
    code = main(["verify", files["relu"], files["abs"], "--counterexample", str(target)])
    assert code == 1
    assert target.exists()
    assert str(target) in capsys.readouterr().out


def test_counterexample_in_a_missing_folder_is_refused_before_comparing(files, tmp_path, capsys):
    target = tmp_path / "sub" / "ce.npz"
    assert main(["verify", files["relu"], files["abs"], "--counterexample", str(target)]) == 2
    assert f"the folder {tmp_path / 'sub'} does not exist" in capsys.readouterr().err
    assert not (tmp_path / "sub").exists()


def test_an_existing_file_is_replaced_by_a_counterexample_only_with_force(files, tmp_path, capsys):
    target = tmp_path / "notes.txt"
    target.write_text("keep me")
    args = ["verify", files["relu"], files["abs"], "--counterexample", str(target)]
    assert main(args) == 2
    assert "exists; pass --force" in capsys.readouterr().err
    assert target.read_text() == "keep me"
    assert main([*args, "--force"]) == 1
    with np.load(target) as data:
        assert np.any(data["x"] < 0)


def test_the_default_counterexample_replaces_only_an_earlier_one(files, capsys):
    saved = os.path.join(os.path.dirname(files["abs"]), "abs.counterexample.npz")
    assert main(["verify", files["relu"], files["abs"]]) == 1
    assert main(["verify", files["relu"], files["abs"]]) == 1  # replaces its own
    with open(saved, "w") as stream:
        stream.write("not a counterexample")
    capsys.readouterr()
    assert main(["verify", files["relu"], files["abs"]]) == 2
    assert "is not an earlier counterexample" in capsys.readouterr().err


@pytest.mark.parametrize("seed", range(5))
def test_special_values_expose_a_difference_only_nan_shows(tmp_path, capsys, seed):
    # Where(IsNaN(x), 0, x) equals x on every finite input.
    zero_nans = models.parse(
        "(float[N, 4] x) => (float[N, 4] y)",
        "n = IsNaN(x)\n zero = Constant <value = float {0}> ()\n y = Where(n, zero, x)",
    )
    paths = []
    for name, model in {"zero_nans": zero_nans, "ident": models.unary("Identity")}.items():
        paths.append(str(tmp_path / f"{name}.onnx"))
        onnx.save(model, paths[-1])
    assert main(["verify", *paths, "--seed", str(seed), "--no-special-values"]) == 0
    assert main(["verify", *paths, "--seed", str(seed)]) == 1


def test_main_command_saves_the_counterexample_beside_the_output(files, tmp_path, capsys):
    rules = tmp_path / "wrong.rw"
    rules.write_text(
        "# wrong on purpose: relu(x) -> abs(x)\nrule bad: y = Relu (x) => y = Abs (x)\n"
    )
    out = tmp_path / "out.onnx"
    code = main([files["relu"], "--rules", str(rules), "-o", str(out), "--verify"])
    assert code == 1
    saved = tmp_path / "out.counterexample.npz"
    assert f"counterexample saved to {saved}" in capsys.readouterr().out
    assert not out.exists()
    with np.load(saved) as data:
        assert np.any(data["x"] < 0)


def test_main_command_takes_the_comparison_options(files, tmp_path, capsys):
    rules = tmp_path / "wrong.rw"
    rules.write_text(
        "# wrong off x >= 0: relu(x) -> abs(x)\nrule bad: y = Relu (x) => y = Abs (x)\n"
    )
    out = tmp_path / "out.onnx"
    args = [files["relu"], "--rules", str(rules), "-o", str(out), "--verify", "--input", "x=0:5"]
    assert main([*args, "--compare", "direct", "--rtol", "1e-3", "--no-special-values"]) == 0
    assert out.exists()


@pytest.mark.parametrize(
    ("extra", "option"),
    [
        (["--rtol", "1e-3"], "--rtol"),
        (["--factor", "20"], "--factor"),
        (["--compare", "direct"], "--compare"),
        (["--dim", "N=3"], "--dim"),
        (["--no-special-values"], "--special-values/--no-special-values"),
        (["--no-ort-enable-all"], "--ort-enable-all/--no-ort-enable-all"),
    ],
)
def test_main_command_refuses_comparison_options_without_verify(
    files, tmp_path, capsys, extra, option
):
    out = tmp_path / "out.onnx"
    assert main([files["relu"], "-o", str(out), *extra]) == 2
    assert f"{option} applies to --verify" in capsys.readouterr().err
    assert not out.exists()


def test_examples_and_seed_options(files, capsys):
    assert main(["verify", files["relu"], files["relu"], "--examples", "3", "--seed", "9"]) == 0
    assert "(3 examples; seed 9;" in capsys.readouterr().out


def test_a_mismatch_names_the_option_that_would_accept_it(files, capsys):
    # x * 1.001 for x: 0.1% off, thousands of times the original's error (which is 0).
    assert main(["verify", files["ident"], files["scaled"]]) == 1
    out = capsys.readouterr().out
    assert "less accurate than allowed" in out
    assert "A larger --factor (factor=) would accept it" in out
    assert "--compare direct" in out


def test_tolerance_options_loosen_the_direct_comparison(files, capsys):
    direct = ["verify", files["ident"], files["scaled"], "--compare", "direct"]
    assert main(direct) == 1
    assert "--rtol/--atol loosen or tighten that" in capsys.readouterr().out
    assert main([*direct, "--rtol", "1e-2", "--atol", "1e-3"]) == 0
    assert "rtol=0.01 atol=1e-3" in capsys.readouterr().out


def test_factor_option_loosens_the_accuracy_criterion(files, capsys):
    assert main(["verify", files["ident"], files["scaled"], "--factor", "1e6"]) == 0
    assert "<= 1e6x original" in capsys.readouterr().out


def test_input_ranges_option(files, capsys):
    # On x >= 0, Relu and Abs agree.
    assert main(["verify", files["relu"], files["abs"], "--input", "x=0:5"]) == 0


def test_special_values_option(files):
    assert main(["verify", files["relu"], files["relu"], "--special-values"]) == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["missing.onnx", "ident"], "missing.onnx: cannot read"),
        (["garbage", "ident"], "not an ONNX model"),
        (["relu", "other_names"], "different inputs"),
        (["relu", "relu", "--input", "nope=0:1"], "unknown input(s) 'nope'"),
        (["relu", "relu", "--input", "x=0:1", "--input", "x=1:2"], "--input x given twice"),
    ],
)
def test_bad_models_and_inputs_exit_2_with_one_line(files, capsys, args, message):
    argv = ["verify", *(files.get(a, a) for a in args)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith("rewrite: error: ")
    assert message in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    "extra",
    [
        ["--input", "x"],
        ["--input", "x=1"],
        ["--input", "x=a:b"],
        ["--input", "x=2:1"],
        ["--rtol", "-1"],
        ["--factor", "0.5"],
        ["--compare", "loose"],
        ["--input-shape", "x=2xq"],
        ["--dim", "N=0"],
        ["--seed", "one"],
    ],
)
def test_bad_usage_exits_2(files, capsys, extra):
    assert main(["verify", files["relu"], files["relu"], *extra]) == 2
    err = capsys.readouterr().err
    assert "rewrite verify: error:" in err
    assert "Traceback" not in err


def test_zero_examples_need_given_inputs(files, capsys):
    assert main(["verify", files["relu"], files["relu"], "--examples", "0"]) == 2
    assert "--examples 0 checks nothing without --inputs" in capsys.readouterr().err


def test_inputs_option_checks_the_given_samples(files, tmp_path, capsys):
    positive = tmp_path / "positive.npz"
    np.savez(positive, x=np.abs(np.random.default_rng(0).standard_normal((3, 2, 4))).astype("f"))
    negative = tmp_path / "negative.npz"
    np.savez(negative, x=-np.ones((2, 4), dtype=np.float32))
    only = ["verify", files["relu"], files["abs"], "--examples", "0"]
    assert main([*only, "--inputs", str(positive)]) == 0
    assert "equivalent (3 examples" in capsys.readouterr().out
    assert main([*only, "--inputs", str(positive), "--inputs", str(negative)]) == 1
    assert main([*only, "--inputs", str(tmp_path / "missing.npz")]) == 2
    assert "--inputs" in capsys.readouterr().err


def test_inputs_option_takes_a_folder_of_samples(files, tmp_path, capsys):
    folder = tmp_path / "samples"
    folder.mkdir()
    np.savez(
        folder / "a.npz", x=np.abs(np.random.default_rng(1).standard_normal((2, 4))).astype("f")
    )
    np.savez(folder / "b.npz", x=-np.ones((2, 4), dtype=np.float32))
    only = ["verify", files["relu"], files["abs"], "--examples", "0"]
    # b.npz (negative inputs) tells Relu from Abs: the folder's files are all read.
    assert main([*only, "--inputs", str(folder)]) == 1
    capsys.readouterr()
    (folder / "b.npz").unlink()
    assert main([*only, "--inputs", str(folder)]) == 0
    assert "equivalent (1 example" in capsys.readouterr().out
    (folder / "a.npz").unlink()
    assert main([*only, "--inputs", str(folder)]) == 2
    assert f"--inputs {folder}: the folder holds no .npz file" in capsys.readouterr().err


def test_input_shape_and_dim_options_fix_sizes(files, capsys):
    args = ["verify", files["relu"], files["relu"], "--examples", "3"]
    assert main([*args, "--input-shape", "x=7x4"]) == 0
    assert main([*args, "--dim", "N=9"]) == 0
    assert main([*args, "--dim", "T=9"]) == 2
    assert "no input has that symbolic dim" in capsys.readouterr().err
    assert main([*args, "--input-shape", "x=7x5"]) == 2
    assert "dim 1 is 4 in the model" in capsys.readouterr().err


def test_missing_arguments_exit_2(capsys):
    assert main(["verify"]) == 2


def _refused_by_onnxruntime():
    import onnx.parser

    import ir

    # Mul of float and double: onnxruntime refuses to load it
    return ir.from_onnx(
        onnx.parser.parse_model("""
        <ir_version: 8, opset_import: ["" : 23]>
        g (float[2] x, double[2] z) => (float[2] y) { y = Mul (x, z) }
        """)
    )


def test_an_untouched_converted_model_onnxruntime_refuses_is_named_not_the_criterion():
    import argparse

    from rewriter.cli._rewrite import _untouched_disagrees

    args = argparse.Namespace(target_opset=23)
    message = _untouched_disagrees(args, _refused_by_onnxruntime(), "ORT_DISABLE_ALL")
    assert message.startswith(
        "onnxruntime cannot load the model converted to opset 23 before any rewrite: "
    )
    assert "Type parameter (T) of Optype (Mul) bound to different types" in message
    assert "rewrite without --target-opset" in message
    assert "--factor" not in message
    assert "--no-ort-enable-all" not in message  # it fails with optimizations off as well


def test_an_untouched_model_onnxruntime_loads_still_points_at_the_criterion():
    import argparse

    import ir
    from rewriter.cli._rewrite import _untouched_disagrees

    args = argparse.Namespace(target_opset=None)
    message = _untouched_disagrees(args, ir.from_onnx(models.times(1.0)), "ORT_DISABLE_ALL")
    assert "see --factor" in message
