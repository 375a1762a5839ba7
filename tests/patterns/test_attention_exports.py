"""Slow: the attention and rotary fusions on real transformer exports (issue 18's acceptance).

The exports are made by tests/models/make_attention_exports.py, which needs torch and
transformers; /work/venv has neither, so this test skips there unless ATTENTION_EXPORTS names
a folder the script already filled (`--out DIR`). Each export is rewritten as a user would
(`--rules patterns/ --target-opset 23`) by benchmarks/attention_exports.py's `measure`: no
Softmax may be left, one Attention per attention layer, one RotaryEmbedding per rotated tensor,
outputs equal to the original's on onnxruntime and close to the framework's.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

import pytest

import rewriter

ROOT = Path(__file__).resolve().parents[2]
FUSED = [
    "bert_ts_sdpa",
    "bert_ts_eager",
    "bert_dynamo",
    "bert_dynamo_opt",
    "bert_dynamo_eager",
    "gpt2_ts_sdpa",
    "gpt2_ts_eager",
    "gpt2_dynamo",
    "vit_ts_sdpa",
    "vit_dynamo",
    "whisper_encoder_ts",
    "whisper_encoder_dynamo",
    "whisper_dynamo",
    "wav2vec2_ts",
    "llama_ts_eager",
    "llama_ts_sdpa",
    "llama_dynamo",
    "llama_dynamo_opt",
    "phi_partial_rotary_ts",
]


def _load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def exports(tmp_path_factory) -> Path:
    given = os.environ.get("ATTENTION_EXPORTS")
    if given:
        return Path(given)
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    out = tmp_path_factory.mktemp("attention_exports")
    maker = _load(ROOT / "tests" / "models" / "make_attention_exports.py")
    maker.main(["--out", str(out), "--only", ",".join(FUSED)])
    return out


@pytest.mark.slow
@pytest.mark.parametrize("name", FUSED)
def test_every_attention_and_rotation_of_the_export_is_fused(exports, name):
    path = exports / f"{name}.onnx"
    if not path.exists():
        pytest.skip(f"{path} was not made (the exporter failed on this torch version)")
    bench = _load(ROOT / "benchmarks" / "attention_exports.py")
    row = bench.measure(path, [str(rewriter.library_path())])
    assert row.softmax_after == 0, row
    assert row.attention == row.layers, row
    assert row.rotary == row.rotations, row
    assert row.diff_original <= 1e-5, row
    assert row.diff_framework <= 1e-4, row
