"""Files are never lost: outputs are written atomically, the input is never modified unless
`--in-place`, an existing output is replaced only with `--force`, and on any failure (a write
that breaks half-way, a read-only or full disk, Ctrl-C) no partial or temporary file remains
and an existing output keeps its old content."""

from __future__ import annotations

import builtins
import errno
import hashlib
import os
import re
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx.helper
import pytest

import ir
from rewriter.cli import main
from tests.robustness.bad_models import MODELS, external_tensor, good_model


def _digests(folder: Path) -> dict[str, tuple[str, int]]:
    """Name -> (sha256, mtime) of every file in `folder`."""
    return {
        p.name: (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
        for p in sorted(folder.iterdir())
        if p.is_file()
    }


def _write_external_model(folder: Path) -> Path:
    """y = Relu(Identity(x + w)) with `w` (float[64]) in `folder/w.bin`."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "w.bin").write_bytes(np.arange(64, dtype=np.float32).tobytes())
    model = good_model([external_tensor("w", [64], "w.bin")])
    for info in (*model.graph.input, *model.graph.output):
        info.type.tensor_type.shape.dim[0].dim_value = 64
    model.graph.node[1].input[0] = "i"
    model.graph.node.insert(1, onnx.helper.make_node("Identity", ["t"], ["i"], name="id"))
    path = folder / "model.onnx"
    path.write_bytes(model.SerializeToString())
    return path


@pytest.fixture
def source(tmp_path: Path) -> Path:
    """A model with an Identity for the shipped rules to remove, and external data."""
    return _write_external_model(tmp_path / "src")


@pytest.fixture
def dest(tmp_path: Path) -> Path:
    folder = tmp_path / "dst"
    folder.mkdir()
    return folder


Run = Callable[..., int]


@pytest.fixture
def run(tmp_path: Path) -> Run:
    """`rewrite SOURCE -o OUT EXTRA...` with one rule (the shipped library is only slower)."""
    rules = tmp_path / "rules.rw"
    rules.write_text("# Identity(x) -> x\nrule drop_identity: y = Identity (x) => y = x\n")

    def run_cli(source: Path, out: Path | None, *extra: str) -> int:
        target = ["-o", str(out)] if out is not None else []
        return main([str(source), *target, "--rules", str(rules), "--no-progress", *extra])

    return run_cli


# ---------------------------------------------------------------------------------------------
# The input, existing outputs


def test_a_run_leaves_the_input_and_its_data_untouched(run: Run, source: Path, dest: Path) -> None:
    before = _digests(source.parent)
    assert run(source, dest / "out.onnx") == 0
    assert _digests(source.parent) == before
    assert sorted(p.name for p in dest.iterdir()) == ["out.onnx", "out.onnx.data"]


def test_existing_output_and_data_are_kept_without_force(
    run: Run, source: Path, dest: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (dest / "out.onnx").write_bytes(b"old model")
    (dest / "out.onnx.data").write_bytes(b"old data")
    assert run(source, dest / "out.onnx") == 2
    assert "exists; pass --force" in capsys.readouterr().err
    assert (dest / "out.onnx").read_bytes() == b"old model"
    assert (dest / "out.onnx.data").read_bytes() == b"old data"


def test_output_over_the_inputs_data_file_is_refused(
    run: Run, source: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = _digests(source.parent)
    assert run(source, source.parent / "w.bin", "--force") == 2
    err = capsys.readouterr().err
    assert "w.bin holds external data of the model being saved" in err
    assert _digests(source.parent) == before


@pytest.mark.parametrize("option", ["--json", "--report"])
def test_side_files_over_the_input_are_refused(
    run: Run, source: Path, dest: Path, option: str, capsys: pytest.CaptureFixture[str]
) -> None:
    before = _digests(source.parent)
    assert run(source, dest / "out.onnx", option, str(source)) == 2
    assert f"{option} {source} would overwrite the input model" in capsys.readouterr().err
    assert _digests(source.parent) == before
    assert list(dest.iterdir()) == []


def test_special_files_are_not_replaced(
    run: Run, source: Path, dest: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fifo = dest / "pipe.onnx"
    os.mkfifo(fifo)
    folder = dest / "folder.onnx"
    folder.mkdir()
    for target in (fifo, folder):
        assert run(source, target, "--force") == 2
        assert "not a regular file" in capsys.readouterr().err
    assert fifo.is_fifo()
    assert folder.is_dir()
    assert sorted(p.name for p in dest.iterdir()) == ["folder.onnx", "pipe.onnx"]


# ---------------------------------------------------------------------------------------------
# Failures while saving


class _BrokenWrites:
    """Replaces `open` in ir._serde_io: files whose name contains `which` accept half of the
    first large write, then raise `error` (what a full disk or Ctrl-C does half-way)."""

    def __init__(self, which: str, error: BaseException) -> None:
        self.which = which
        self.error = error
        self.triggered = False

    def open(self, file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        handle = builtins.open(file, mode, *args, **kwargs)  # noqa: SIM115 (closed by the caller)
        if "w" not in mode or self.which not in os.path.basename(os.fspath(file)):
            return handle
        broken = self

        class Writer:
            def __enter__(self) -> Writer:
                return self

            def __exit__(self, *exc: object) -> None:
                handle.close()

            def write(self, data: bytes) -> int:
                if len(data) >= 16:
                    handle.write(bytes(data[: len(data) // 2]))
                    handle.flush()
                    broken.triggered = True
                    raise broken.error
                return int(handle.write(data))

            def tell(self) -> int:
                return int(handle.tell())

        return Writer()


FAILURES: dict[str, Callable[[], BaseException]] = {
    "disk_full": lambda: OSError(errno.ENOSPC, "No space left on device"),
    "interrupt": KeyboardInterrupt,
}


@pytest.mark.parametrize("which", [".out.onnx.data.", ".out.onnx."])
@pytest.mark.parametrize("failure", list(FAILURES))
@pytest.mark.parametrize("existing", [False, True])
def test_a_failure_half_way_through_saving_leaves_nothing_behind(
    run: Run,
    source: Path,
    dest: Path,
    which: str,
    failure: str,
    existing: bool,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    if existing:
        (dest / "out.onnx").write_bytes(b"old model")
        (dest / "out.onnx.data").write_bytes(b"old data")
    before_dest = _digests(dest)
    before_source = _digests(source.parent)
    broken = _BrokenWrites(which, FAILURES[failure]())
    monkeypatch.setattr("ir._serde_io.open", broken.open, raising=False)
    code = run(source, dest / "out.onnx", "--force")
    assert broken.triggered
    err = capsys.readouterr().err
    if failure == "interrupt":
        assert code == 130
        assert err.strip() == "rewrite: interrupted"
    else:
        assert code == 2
        assert err.strip().splitlines() == [f"rewrite: error: {err.strip()[16:]}"]
        # The file being written when the disk filled: the data file is written first.
        assert re.search(
            re.escape(str(dest / "out.onnx")) + r"(\.data)?: cannot write: No space left", err
        )
    assert _digests(dest) == before_dest  # no temporary file, old content kept
    assert _digests(source.parent) == before_source


def test_a_failed_rename_of_the_model_puts_the_old_data_file_back(
    source: Path, dest: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (dest / "out.onnx").write_bytes(b"old model")
    (dest / "out.onnx.data").write_bytes(b"old data")
    model = ir.load(source)
    real_replace = os.replace

    def replace(src: str, dst: str) -> None:
        if os.fspath(dst).endswith("out.onnx"):
            raise OSError(errno.EIO, "Input/output error", dst)
        real_replace(src, dst)

    monkeypatch.setattr("ir._serde_io.os.replace", replace)
    with pytest.raises(OSError, match="Input/output error"):
        ir.save(model, dest / "out.onnx")
    assert sorted(p.name for p in dest.iterdir()) == ["out.onnx", "out.onnx.data"]
    assert (dest / "out.onnx").read_bytes() == b"old model"
    assert (dest / "out.onnx.data").read_bytes() == b"old data"


def test_an_output_folder_that_does_not_exist_is_reported(
    run: Run, source: Path, dest: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(source, dest / "missing" / "out.onnx") == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert f"the folder {dest / 'missing'} does not exist" in err
    assert ".tmp" not in err
    assert list(dest.iterdir()) == []


# ---------------------------------------------------------------------------------------------
# Real file systems: read-only and full (a tmpfs, when this process may mount one)


@pytest.fixture
def mount(tmp_path: Path) -> Iterator[Callable[[str], Path]]:
    mounted: list[Path] = []

    def make(options: str) -> Path:
        point = tmp_path / f"mnt{len(mounted)}"
        point.mkdir()
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(point)],
            capture_output=True,
            check=False,
        )
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
        mounted.append(point)
        return point

    yield make
    for point in mounted:
        subprocess.run(["umount", str(point)], check=False)


def test_a_read_only_output_folder_is_reported(
    run: Run, source: Path, mount: Callable[[str], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    folder = mount("size=1m,ro")
    assert run(source, folder / "out.onnx") == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert "Read-only file system" in err
    assert list(folder.iterdir()) == []


@pytest.mark.parametrize("external", [False, True])
def test_a_full_disk_is_reported_and_cleaned_up(
    run: Run,
    tmp_path: Path,
    external: bool,
    mount: Callable[[str], Path],
    capsys: pytest.CaptureFixture[str],
) -> None:
    folder = mount("size=64k")
    if external:
        source = tmp_path / "big"
        source.mkdir()
        (source / "w.bin").write_bytes(np.ones(1 << 16, np.float32).tobytes())  # 256 KiB
        model = good_model([external_tensor("w", [1 << 16], "w.bin")])
        path = source / "model.onnx"
        path.write_bytes(model.SerializeToString())
    else:
        path = MODELS / "conv1d_ln_gelu_x6_ts14.onnx"  # 93 KiB
    (folder / "keep.txt").write_bytes(b"unrelated")
    free = os.statvfs(folder).f_bfree
    assert run(path, folder / "out.onnx") == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    written = "out.onnx.data" if external else "out.onnx"
    assert f"{folder / written}: cannot write: No space left on device" in err
    assert sorted(p.name for p in folder.iterdir()) == ["keep.txt"]
    assert os.statvfs(folder).f_bfree == free


def test_in_place_replaces_the_model_and_keeps_its_data(run: Run, source: Path) -> None:
    data_before = (source.parent / "w.bin").read_bytes()
    model_before = source.read_bytes()
    assert run(source, None, "--in-place") == 0
    assert source.read_bytes() != model_before
    assert (source.parent / "w.bin").read_bytes() == data_before
    assert sorted(p.name for p in source.parent.iterdir()) == ["model.onnx", "w.bin"]
    saved = onnx.load(source, load_external_data=False)
    assert saved.graph.initializer[0].external_data[0].value == "w.bin"
    assert [n.op_type for n in saved.graph.node] == ["Add", "Relu"]


def test_outputs_get_ordinary_permissions_and_in_place_keeps_them(
    run: Run, source: Path, dest: Path
) -> None:
    umask = os.umask(0o027)
    try:
        assert run(source, dest / "out.onnx") == 0
    finally:
        os.umask(umask)
    for name in ("out.onnx", "out.onnx.data"):
        assert (dest / name).stat().st_mode & 0o777 == 0o640
    source.chmod(0o604)
    assert run(source, None, "--in-place") == 0
    assert source.stat().st_mode & 0o777 == 0o604


@pytest.mark.parametrize("delay", [0.4, 0.9])
def test_ctrl_c_while_the_command_starts_is_one_line(tmp_path: Path, delay: float) -> None:
    # The interrupt lands while onnx and numpy are still being imported (or just after;
    # the interpreter's own start, before the command is running, is not covered):
    # "rewrite: interrupted" and exit 130, never a KeyboardInterrupt traceback.
    import signal
    import subprocess
    import sys
    import time

    model = MODELS / "bert_ts14.onnx"
    code = "from rewriter.cli import main; raise SystemExit(main())"
    child = subprocess.Popen(
        [sys.executable, "-c", code, str(model), "-o", str(tmp_path / "out.onnx")],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    time.sleep(delay)
    child.send_signal(signal.SIGINT)
    _, err = child.communicate(timeout=60)
    assert "Traceback" not in err
    if child.returncode != 0:  # a very fast machine may have finished already
        assert child.returncode == 130
        assert err.strip().endswith("rewrite: interrupted")
    assert not [p for p in tmp_path.iterdir() if p.name != "out.onnx"]
