"""The files a command reads and writes: the input model, the output, side files.

Side files (`--json`, `--report`, ...) are written atomically (a temporary file beside the
target, then a rename) and only after `refuse_unsafe_targets` has checked that they name no
file the run reads or writes: the model files, their external data, the rules in use.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TextIO

import ir
from rewriter._errors import RewriteError

# Side files are reports (JSON, HTML, inputs): a name like these is a slip of the keyboard
# that would replace a model or a rules file, --force or not.
_REFUSED_SUFFIXES = {".onnx": "a model", ".rw": "a rules file"}


def input_model_path(text: str) -> Path:
    """The model path given on the command line, refused when it is not a file.

    Raises:
        RewriteError: the path is a directory or does not exist.
    """
    path = Path(text)
    if path.is_dir():
        raise RewriteError(f"{path}: is a directory, not a model file")
    if not path.is_file():
        raise RewriteError(f"{path}: no such model file")
    return path


def check_output_folder(option: str, path: Path) -> None:
    """Refuse an output path whose folder is missing, or that is itself a folder.

    Raises:
        RewriteError: naming the option, the path and the missing folder.
    """
    folder = path.parent
    if not folder.is_dir():
        what = "is not a folder" if folder.exists() else "does not exist"
        raise RewriteError(f"{option} {path}: the folder {folder} {what}")
    if path.is_dir():
        raise RewriteError(f"{option} {path}: is a directory, not a regular file")
    _probe_folder(path)


def _probe_folder(path: Path) -> None:
    """Refuse now, not after the work, a folder where no file can be created.

    /proc, /sys or a read-only mount: a temporary file is made there and removed at once.
    """
    try:
        handle, probe = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".probe", dir=path.parent)
    except OSError as exc:
        raise ir.cannot_write(exc, str(path)) from exc
    os.close(handle)
    os.unlink(probe)


def refuse_unsafe_targets(
    targets: Mapping[str, str | None],
    *,
    protected: Mapping[Path, str],
    models: Sequence[Path] = (),
    force: bool,
) -> None:
    """Check side files before anything is written.

    Args:
        targets: option name -> path given (None when the option was not used).
        protected: files never to overwrite -> what they are ("the input model").
        models: models whose external data files are protected too (read only when a target
            exists below a model's folder, so the usual run loads nothing extra).
        force: whether an existing file may be replaced.

    Raises:
        RewriteError: a target's folder is missing, it is a folder, it names another target,
            it may not be overwritten (see `refuse_overwriting`), or it exists and `force`
            is not set.
    """
    seen: dict[str, str] = {}
    for option, value in targets.items():
        if not value or (option == "--json" and value == STDOUT):
            continue
        path = Path(value)
        check_output_folder(option, path)
        real = os.path.realpath(path)
        if real in seen:
            raise RewriteError(f"{option} {value} is also given to {seen[real]}")
        seen[real] = option
        refuse_overwriting(option, path, protected=protected, models=models)
        if path.exists() and not force:
            raise RewriteError(f"{value} exists; pass --force to overwrite it")


def refuse_overwriting(
    option: str, path: Path, *, protected: Mapping[Path, str], models: Sequence[Path] = ()
) -> None:
    """Refuse a side file that would replace a protected file or a model's external data.

    Raises:
        RewriteError: the path is named like a model or rules file (`.onnx`, `.rw`), is one
            of `protected`, or is an external data file of one of `models`.
    """
    real = os.path.realpath(path)
    for other, role in protected.items():
        if _same_file(real, other):
            raise RewriteError(f"{option} {path} would overwrite {role}")
    kind = _REFUSED_SUFFIXES.get(path.suffix.lower())
    if kind is not None:
        raise RewriteError(f"{option} {path}: a {path.suffix} name is for {kind}; choose another")
    if not path.exists():
        return  # data files exist (loading checks it): a new file is none of them
    for model in models:
        if _is_below(real, model) and real in external_data_files(model):
            raise RewriteError(f"{option} {path} would overwrite external data of {model}")


def _same_file(real: str, other: Path) -> bool:
    if os.path.realpath(other) == real:
        return True
    return os.path.exists(real) and other.exists() and os.path.samefile(real, other)


def _is_below(real: str, model: Path) -> bool:
    folder = os.path.dirname(os.path.realpath(model))
    return os.path.commonpath([folder, real]) == folder


def external_data_files(model_path: Path) -> dict[str, None]:
    """The real paths of the external data files a model reads (loads the model, no data)."""
    model = ir.load(model_path)
    files: dict[str, None] = {}
    for graph in model.graphs():
        tensors: list[object] = [value.const_value for value in graph.initializers.values()]
        for node in graph:
            for attr in node.attributes.values():
                value = attr.value
                tensors.extend(value if isinstance(value, tuple) else (value,))
        for tensor in tensors:
            if isinstance(tensor, ir.ExternalTensor):
                files[os.path.realpath(tensor.path())] = None
    return files


STDOUT = "-"
"""The path that means standard output, for `--json` of every command."""


def write_json(path: str, payload: object) -> None:
    """`--json PATH`: the payload as indented JSON, atomically, or on stdout for `-`."""
    text = json.dumps(payload, indent=2) + "\n"
    if path == STDOUT:
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        write_text_atomically(path, text)


def human_stream(json_path: str | None) -> TextIO:
    """Where a command prints for people: stderr when `--json -` takes stdout, else stdout."""
    return sys.stderr if json_path == STDOUT else sys.stdout


def write_text_atomically(path: str | os.PathLike[str], text: str) -> None:
    """Write `text` to `path` through a temporary file beside it and a rename."""
    target = Path(path)
    try:
        handle, temporary = tempfile.mkstemp(
            prefix=f".{target.name}.", suffix=".tmp", dir=target.parent
        )
    except OSError as exc:  # names the hidden temporary file: name the file asked for
        raise ir.cannot_write(exc, os.fspath(path)) from exc
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
        # mkstemp makes the file private; a report is an ordinary file.
        umask = os.umask(0o022)
        os.umask(umask)
        Path(temporary).chmod(0o666 & ~umask)
        os.replace(temporary, target)
    except OSError as exc:
        Path(temporary).unlink(missing_ok=True)
        if exc.filename is None or exc.filename == temporary:
            raise ir.cannot_write(exc, os.fspath(path)) from exc
        raise
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
