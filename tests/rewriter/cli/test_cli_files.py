"""The `rewrite` command's files: side files never replace models, data or rules; messages
name the real culprit (a missing output folder, a directory given as the model)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnx.numpy_helper
import onnx.parser
import pytest

from rewriter.cli import main
from tests.helpers import model_from_text

MODEL_TEXT = """<ir_version: 8, opset_import: ["" : 17]>
g (float[N, 4] x) => (float[N, 4] y) {
    t = Identity (x)
    y = Relu (t)
}"""
RULES = "# Identity(x) -> x\nrule identity: y = Identity (x) => y = x\n"


@pytest.fixture
def model_path(tmp_path: Path) -> Path:
    path = tmp_path / "model.onnx"
    onnx.save(model_from_text(MODEL_TEXT), path)
    return path


@pytest.fixture
def rules_path(tmp_path: Path) -> Path:
    path = tmp_path / "rules.txt"
    path.write_text(RULES)
    return path


@pytest.fixture
def external_model(tmp_path: Path) -> Path:
    """`ext.onnx` whose weight lives in `weights.bin` beside it."""
    text = """<ir_version: 8, opset_import: ["" : 17]>
    g (float[4] x, float[4] w) => (float[4] y) {
        t = Identity (x)
        y = Add (t, w)
    }"""
    model = model_from_text(text)
    del model.graph.input[1]
    model.graph.initializer.append(
        onnx.numpy_helper.from_array(np.arange(4, dtype=np.float32), "w")
    )
    path = tmp_path / "ext.onnx"
    onnx.save(
        model,
        path,
        save_as_external_data=True,
        location="weights.bin",
        size_threshold=0,
    )
    return path


def _one_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("rewrite: error: "), err
    assert "Traceback" not in err
    return lines[0]


def _rewrite(model: Path, out: Path, rules: Path, *extra: str) -> int:
    return main([str(model), "-o", str(out), "--rules", str(rules), "--no-progress", *extra])


@pytest.mark.parametrize("option", ["--json", "--report"])
def test_side_file_never_replaces_the_input_model(option, model_path, rules_path, tmp_path):
    before = model_path.read_bytes()
    code = _rewrite(model_path, tmp_path / "o.txt", rules_path, "--force", option, str(model_path))
    assert code == 2
    assert model_path.read_bytes() == before


@pytest.mark.parametrize("option", ["--json", "--report"])
def test_side_file_never_replaces_a_model_even_with_force(
    option, model_path, rules_path, tmp_path, capsys
):
    other = tmp_path / "gpt2.onnx"
    other.write_bytes(b"another model")
    code = _rewrite(model_path, tmp_path / "o.onnx", rules_path, "--force", option, str(other))
    assert code == 2
    assert f"{option} {other}: a .onnx name is for a model" in _one_error(capsys)
    assert other.read_bytes() == b"another model"
    assert not (tmp_path / "o.onnx").exists()


def test_json_never_replaces_a_rules_file_in_use(model_path, rules_path, tmp_path, capsys):
    code = _rewrite(
        model_path, tmp_path / "o.onnx", rules_path, "--force", "--json", str(rules_path)
    )
    assert code == 2
    assert f"would overwrite the rules file {rules_path}" in _one_error(capsys)
    assert rules_path.read_text() == RULES


def test_json_named_like_a_rules_file_is_refused(model_path, rules_path, tmp_path, capsys):
    target = tmp_path / "mine.rw"
    code = _rewrite(model_path, tmp_path / "o.onnx", rules_path, "--json", str(target))
    assert code == 2
    assert "a .rw name is for a rules file" in _one_error(capsys)
    assert not target.exists()


def test_json_never_replaces_the_output_model(model_path, rules_path, tmp_path, capsys):
    out = tmp_path / "out.data"
    out.write_bytes(b"old output")
    code = _rewrite(model_path, out, rules_path, "--force", "--json", str(out))
    assert code == 2
    assert "would overwrite the output model" in _one_error(capsys)
    assert out.read_bytes() == b"old output"


def test_json_never_replaces_external_data_of_the_input(
    external_model, rules_path, tmp_path, capsys
):
    data = tmp_path / "weights.bin"
    before = data.read_bytes()
    code = _rewrite(external_model, tmp_path / "o.onnx", rules_path, "--force", "--json", str(data))
    assert code == 2
    assert f"would overwrite external data of {external_model}" in _one_error(capsys)
    assert data.read_bytes() == before


def test_existing_json_needs_force_and_is_replaced_atomically(
    model_path, rules_path, tmp_path, capsys
):
    report = tmp_path / "report.json"
    report.write_text("keep me")
    out = tmp_path / "o.onnx"
    assert _rewrite(model_path, out, rules_path, "--json", str(report)) == 2
    assert f"{report} exists; pass --force" in _one_error(capsys)
    assert report.read_text() == "keep me"
    assert not out.exists()
    assert _rewrite(model_path, out, rules_path, "--json", str(report), "--force") == 0
    assert json.loads(report.read_text())["ops_after"] == {"Relu": 1}
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_json_and_report_cannot_share_a_file(model_path, rules_path, tmp_path, capsys):
    target = tmp_path / "same.out"
    code = _rewrite(
        model_path, tmp_path / "o.onnx", rules_path, "--json", str(target), "--report", str(target)
    )
    assert code == 2
    assert "is also given to --json" in _one_error(capsys)


def test_missing_output_folder_is_named(model_path, rules_path, tmp_path, capsys):
    out = tmp_path / "nodir" / "x.onnx"
    assert _rewrite(model_path, out, rules_path) == 2
    line = _one_error(capsys)
    assert f"the folder {tmp_path / 'nodir'} does not exist" in line
    assert ".tmp" not in line


def test_missing_json_folder_is_named(model_path, rules_path, tmp_path, capsys):
    target = tmp_path / "nodir" / "r.json"
    assert _rewrite(model_path, tmp_path / "o.onnx", rules_path, "--json", str(target)) == 2
    assert f"--json {target}: the folder {tmp_path / 'nodir'} does not exist" in _one_error(capsys)
    assert not (tmp_path / "o.onnx").exists()


def test_missing_folder_is_named_by_the_error_handler():
    from rewriter._errors import describe_error

    error = FileNotFoundError(2, "No such file or directory", "/no/such/dir/.x.onnx.1234.tmp")
    assert describe_error(error) == ("/no/such/dir: no such folder", 2)


def test_a_directory_given_as_the_model_is_named_as_one(tmp_path, capsys):
    folder = tmp_path / "models"
    folder.mkdir()
    assert main([str(folder)]) == 2
    assert _one_error(capsys) == f"rewrite: error: {folder}: is a directory, not a model file"
    assert main(["stats", str(folder)]) == 2
    assert "is a directory" in _one_error(capsys)


def test_rule_errors_print_the_diagnostic_as_is(model_path, tmp_path, capsys):
    rules = tmp_path / "bad.rw"
    rules.write_text("# x -> Foo(x)\nrule r: y = Relu (x) => y = Foo (x)\n")
    assert _rewrite(model_path, tmp_path / "o.onnx", rules) == 2
    err = capsys.readouterr().err
    first = err.splitlines()[0]
    assert first.startswith(f"{rules}:2:"), err
    assert first.count("error:") == 1
    assert "rewrite: error:" not in err


def test_stats_side_files_are_protected_and_need_force(external_model, tmp_path, capsys):
    data = tmp_path / "weights.bin"
    before = data.read_bytes()
    assert main(["stats", str(external_model), "--json", str(data), "--force"]) == 2
    assert "would overwrite external data" in _one_error(capsys)
    assert data.read_bytes() == before
    target = tmp_path / "stats.json"
    target.write_text("keep me")
    assert main(["stats", str(external_model), "--json", str(target)]) == 2
    assert "exists; pass --force" in _one_error(capsys)
    assert main(["stats", str(external_model), "--json", str(target), "--force"]) == 0
    assert json.loads(target.read_text())["parameters"] == 4


def test_verify_counterexample_never_replaces_a_model_or_its_data(
    external_model, model_path, tmp_path, capsys
):
    data = tmp_path / "weights.bin"
    before = data.read_bytes()
    for target in (data, model_path):
        code = main(
            ["verify", str(external_model), str(model_path), "--counterexample", str(target)]
        )
        assert code == 2
        assert "--counterexample" in _one_error(capsys)
    assert data.read_bytes() == before


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc")
@pytest.mark.parametrize("option", ["-o", "--json", "--report"])
def test_a_folder_that_takes_no_new_files_is_refused_up_front_by_the_given_path(
    model_path, rules_path, tmp_path, capsys, option
):
    target = "/proc/out.onnx" if option == "-o" else "/proc/side.out"
    out = target if option == "-o" else str(tmp_path / "o.onnx")
    extra = [] if option == "-o" else [option, target]
    assert _rewrite(model_path, Path(out), rules_path, *extra) == 2
    assert _one_error(capsys) == (
        f"rewrite: error: {target}: cannot write: the folder /proc does not accept new files"
    )
    assert not (tmp_path / "o.onnx").exists()


def test_an_unwritable_model_path_names_the_path_not_a_temporary_file(tmp_path, monkeypatch):
    import errno
    import os

    import ir

    model = ir.from_onnx(
        onnx.parser.parse_model(
            '<ir_version: 8, opset_import: ["" : 17]>\ng (float[2] x) => (float[2] y) {\n  y = Relu (x)\n}\n'
        )
    )

    def refuse(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied", str(tmp_path / ".out.onnx.x.tmp"))

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(PermissionError) as caught:
        ir.save(model, tmp_path / "out.onnx")
    assert caught.value.filename == str(tmp_path / "out.onnx")
    assert caught.value.strerror == f"cannot write: permission denied to create files in {tmp_path}"
    assert list(tmp_path.iterdir()) == []
