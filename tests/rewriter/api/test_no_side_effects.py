"""Rewriting writes nothing but the requested output (shape inference engines included)."""

from __future__ import annotations

from pathlib import Path

import rewriter

MODELS = Path(__file__).resolve().parents[2] / "models"


def test_rewrite_leaves_the_working_folder_untouched(tmp_path, monkeypatch):
    # bert_ts14 makes onnxruntime's symbolic inference give up (Min(128, sequence)), the case
    # in which its public entry point saves files into the working folder.
    monkeypatch.chdir(tmp_path)
    result = rewriter.rewrite(MODELS / "bert_ts14.onnx")
    assert result.nodes_after < result.nodes_before
    assert list(tmp_path.iterdir()) == []
