"""Coverage-guided fuzzing of the model loader with atheris (libFuzzer for Python).

Run (atheris is optional: ``pip install atheris``)::

    python -m tests.robustness.atheris_loader -max_total_time=600 -rss_limit_mb=4096

The seed corpus is the fuzzers' seed models (helper-built and small real exports), written to
a temporary folder. Each input is written as a model file and loaded; a loaded model is
summarized and lowered. Anything but an `ir.IRError` is a crash, which libFuzzer saves as `crash-*` in the current folder. The number of executions and
any crash are printed by libFuzzer at the end.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import atheris  # type: ignore[import-untyped,import-not-found,unused-ignore]

with atheris.instrument_imports():
    import ir
    from rewriter.api._stats import collect

from tests.robustness.fuzz import seed_models

FOLDER = Path(tempfile.mkdtemp(prefix="atheris_loader_"))


def test_one_input(data: bytes) -> None:
    """Load `data` as a model file: only project errors may come out."""
    path = FOLDER / "model.onnx"
    path.write_bytes(data)
    try:
        model = ir.load(path)
    except ir.IRError:
        return
    try:
        collect(model)
        str(model.graph)
        ir.to_onnx(model)
    except ir.IRError:
        return  # lazily lifted parts (attributes of plain ops) are checked when first read


def main() -> None:
    """Write the seed corpus, then hand over to libFuzzer (its flags come from argv)."""
    corpus = FOLDER / "corpus"
    corpus.mkdir()
    for name, data in seed_models().items():
        if len(data) < 200_000:
            (corpus / f"{name}.onnx").write_bytes(data)
    atheris.Setup([*sys.argv, str(corpus)], test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
