"""`--accept` on `rewrite MODEL` and `rewrite verify`: tables, verdicts, exit codes, errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import onnx
import pytest

from rewriter.cli import main
from tests.budget_models import LEAKY_RULE, ROUNDED_RULE, outlier_mlp

# The stand-in rule's rounding is arithmetic on a constant: constant folding would fold it into
# a weight the rule matches again. These runs apply the rule alone.
ALONE = ["--passes", "none"]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cli_budget")
    model = folder / "mlp.onnx"
    onnx.save(outlier_mlp(), model)
    rules = folder / "rounded.rw"
    rules.write_text(ROUNDED_RULE)
    return model, rules


def _run(files, tmp_path, *extra):
    model, rules = files
    out = tmp_path / "out.onnx"
    jobs = ["--jobs", "1"] if "--accept" in extra and "--ray" not in extra else []
    args = [str(model), "--rules", str(rules), "-o", str(out), *ALONE, *jobs, *extra]
    return main(args), out


def test_accept_keeps_the_outlier_layer_float_and_writes_the_rest_approximate(
    files, tmp_path, capsys
):
    code, out = _run(
        files,
        tmp_path,
        "--accept",
        "snr>=30",
        "--examples",
        "8",
        "--json",
        str(tmp_path / "run.json"),
        "--report",
        str(tmp_path / "run.html"),
    )
    printed = capsys.readouterr().out
    assert code == 0
    assert out.is_file()
    rows = [line.split() for line in printed.splitlines() if "matmul_weight_rounded" in line]
    assert [(row[0], row[1], row[5]) for row in rows] == [
        ("1", "layer1", "float"),
        ("2", "layer0", "approximate"),
        ("3", "layer3", "approximate"),
        ("4", "layer2", "approximate"),
    ]
    assert (
        "accuracy budget snr>=30 met: 3 of 4 layers approximate, 1 kept float; final snr" in printed
    )
    assert "(all outputs)" in printed
    assert "approximated 3 MatMul; wrote" in printed
    payload = json.loads((tmp_path / "run.json").read_text())
    assert payload["budget"]["sites"][0]["anchor"] == "mm1"
    assert payload["verification"]["ok"] is True
    assert payload["verification"]["accept"] == ["snr>=30"]
    page = (tmp_path / "run.html").read_text()
    assert '<section id="budget">' in page
    assert "kept float" in page
    assert "snr with only this site approximate" in page
    chart = page[page.index('<section id="budget">') :]
    chart = chart[chart.index("<svg") : chart.index("</svg>")]
    assert "<title>budget: 30.0 dB</title>" in chart  # the budget as a dashed line
    assert chart.count('fill="#f58518"><title>layer1: ') == 1  # kept float: marked


def test_a_missed_budget_exits_1_and_writes_nothing(files, tmp_path, capsys):
    leaky = tmp_path / "leaky.rw"
    leaky.write_text(LEAKY_RULE)
    code, out = _run(files, tmp_path, "--rules", str(leaky), "--accept", "snr>=30")
    captured = capsys.readouterr()
    assert code == 1
    assert not out.exists()
    assert "the rewritten model misses the accuracy budget" in captured.err
    assert "OUTSIDE the accuracy budget: snr>=30" in captured.out


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("snr=30", "expected METRIC>=VALUE or METRIC<=VALUE (e.g. snr>=35), got 'snr=30'"),
        ("psnr>=30", "unknown accuracy metric 'psnr'"),
        ("snr<=30", "snr takes >= (a bound to meet), not <="),
        ("snr>=x", "expected a number after >="),
        ("snr", "quote the budget, or the shell takes `>` for a redirection"),
    ],
)
def test_a_malformed_accept_is_a_usage_error(files, tmp_path, capsys, value, message):
    code, out = _run(files, tmp_path, "--accept", value)
    assert code == 2
    err = capsys.readouterr().err
    assert "argument --accept" in err
    assert message in err
    assert not out.exists()
    model, _ = files
    assert main(["verify", str(model), str(model), "--accept", value]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--accept", "snr>=30", "--factor", "3"], "--factor applies to the equivalence check"),
        (["--accept", "snr>=30", "--rtol", "0.1"], "--rtol applies to the equivalence check"),
        (["--jobs", "2"], "--jobs applies to --accept (the accuracy budget)"),
        (["--confidence", "0.5"], "--confidence applies to --accept (the accuracy budget)"),
        (["--accept", "snr>=30", "--confidence", "1"], "expected a number between 0 and 1"),
        (["--ray", "auto"], "--ray applies to --accept (the accuracy budget)"),
        (["--accept", "snr>=30", "--ray", "auto", "--jobs", "2"], "--jobs counts local processes"),
        (["--accept", "snr>=30", "--examples", "0"], "--examples 0 measures nothing"),
    ],
)
def test_options_that_do_not_fit_the_budget_are_errors(files, tmp_path, capsys, extra, message):
    model, rules = files
    out = tmp_path / "out.onnx"
    assert main([str(model), "--rules", str(rules), "-o", str(out), *extra]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_verify_with_accept_passes_and_fails_by_the_budget(files, tmp_path, capsys):
    model, rules = files
    rounded = tmp_path / "rounded.onnx"
    assert main([str(model), "--rules", str(rules), "-o", str(rounded), *ALONE]) == 0
    capsys.readouterr()
    assert main(["verify", str(model), str(rounded), "--accept", "snr>=15"]) == 0
    printed = capsys.readouterr().out
    assert "within the accuracy budget snr>=15" in printed
    code = main(["verify", str(model), str(rounded), "--accept", "cosine>=0.99999"])
    assert code == 1
    assert "OUTSIDE the accuracy budget: cosine>=0.99999" in capsys.readouterr().out


def test_ray_address_on_the_command_line(files, tmp_path):
    ray = pytest.importorskip("ray")
    context = ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        address = context.address_info["gcs_address"]
        model, rules = files
        out = tmp_path / "out.onnx"
        command = [sys.executable, "-m", "rewriter.cli", str(model), "--rules", str(rules)]
        command += ["-o", str(out), *ALONE, "--accept", "snr>=30", "--examples", "8"]
        command += ["--ray", address]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
    finally:
        ray.shutdown()
    assert done.returncode == 0, done.stderr
    assert "1 kept float" in done.stdout
    assert Path(out).is_file()


def test_an_unreachable_ray_address_is_a_quick_clear_error(files, tmp_path, capsys):
    pytest.importorskip("ray")
    code, out = _run(files, tmp_path, "--accept", "snr>=30", "--ray", "127.0.0.1:1")
    assert code == 2
    assert "--ray 127.0.0.1:1: cannot connect (" in capsys.readouterr().err
    assert not out.exists()


def test_verify_without_accept_points_at_accept_when_approximate_rules_fired(
    files, tmp_path, capsys
):
    code, out = _run(files, tmp_path, "--verify", "--examples", "3", "--no-special-values")
    assert code == 1
    assert not out.exists()
    assert "4 rewrites by `approximate` rules change numerics on purpose" in (
        capsys.readouterr().err
    )
