"""Saving and loading counterexamples: one `.npz` file, one array per model input.

The file is written atomically (a temporary file beside it, then a rename) and is readable
with a plain `numpy.load(path)`. Arrays are written entry by entry rather than through
`numpy.savez(**inputs)`, so an input may be called `file` or contain any character.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import zipfile
from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

import ir


def default_counterexample_path(rewritten_path: str | None) -> str:
    """`<rewritten stem>.counterexample.npz` beside the rewritten model, or in a temp dir."""
    if rewritten_path is None:
        folder = tempfile.mkdtemp(prefix="rewrite-verify-")
        return os.path.join(folder, "counterexample.npz")
    folder = os.path.dirname(os.path.abspath(rewritten_path))
    stem, _ = os.path.splitext(os.path.basename(rewritten_path))
    return os.path.join(folder, f"{stem}.counterexample.npz")


def save_counterexample(
    path: str | os.PathLike[str], inputs: Mapping[str, npt.NDArray[np.generic]]
) -> str:
    """Write `inputs` to `path` (an `.npz`) atomically; returns the absolute path written."""
    target = os.path.abspath(os.fspath(path))
    folder = os.path.dirname(target)
    # The folder must exist (a typo in it is reported, not silently created).
    try:
        fd, temp = tempfile.mkstemp(prefix=".counterexample.", suffix=".tmp", dir=folder)
    except OSError as exc:  # names the hidden temporary file: name the file asked for
        raise ir.cannot_write(exc, os.fspath(path)) from exc
    try:
        with os.fdopen(fd, "wb") as raw, zipfile.ZipFile(raw, "w") as archive:
            for name, array in inputs.items():
                data = np.asarray(array)
                if data.dtype == object:  # string inputs: stored as unicode, never pickled
                    data = data.astype(str)
                with archive.open(f"{name}.npy", "w", force_zip64=True) as entry:
                    np.lib.format.write_array(entry, data, allow_pickle=False)
        os.replace(temp, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
    return target


def load_counterexample(path: str | os.PathLike[str]) -> dict[str, npt.NDArray[np.generic]]:
    """Read a counterexample written by `save_counterexample` (never unpickles anything)."""
    with np.load(os.fspath(path), allow_pickle=False) as data:
        return {name: data[name] for name in data.files}
