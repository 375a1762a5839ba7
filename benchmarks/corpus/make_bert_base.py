"""A BERT-base-sized export with random weights, for benchmarks/quantize.py (`--bert`).

Run with the Python that has torch and transformers (see benchmarks/corpus/README.md):

    python benchmarks/corpus/make_bert_base.py OUT_FOLDER [--layers 12] [--opset 17]

Writes OUT_FOLDER/bert_base.onnx (TorchScript exporter, opset 17; inputs `input_ids` and
`attention_mask`, dims `batch` and `sequence`; with another `--opset N`, the file is
bert_base_tsN.onnx, as benchmarks/target_opset_memory.py uses with N = 14) and
OUT_FOLDER/bert_base.npz (calibration
samples `calibration_<name>` stacked along a new first axis, and one evaluation sample
`input_<name>`). The weights are random (hidden 768, intermediate 3072, 12 heads), except that
a few output rows of every Linear are 20x larger, as trained transformers have outlier
channels (what makes per-tensor int8 scales lose precision).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch
from transformers import BertConfig, BertModel

OUTLIER_ROWS = 4
OUTLIER_SCALE = 20.0


class Wrapper(torch.nn.Module):
    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--opset", type=int, default=17, help="the exporter's opset")
    args = parser.parse_args()
    torch.manual_seed(0)
    config = BertConfig(
        hidden_size=768,
        num_hidden_layers=args.layers,
        num_attention_heads=12,
        intermediate_size=3072,
        attn_implementation="eager",
    )
    model = BertModel(config).eval()
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.Linear):
                rows = torch.randperm(module.out_features, generator=generator)[:OUTLIER_ROWS]
                module.weight[rows] *= OUTLIER_SCALE
    wrapper = Wrapper(model).eval()
    rng = np.random.default_rng(2)
    ids = torch.tensor(rng.integers(0, config.vocab_size, (2, 64)), dtype=torch.int64)
    mask = torch.ones_like(ids)
    args.out.mkdir(parents=True, exist_ok=True)
    name = "bert_base.onnx" if args.opset == 17 else f"bert_base_ts{args.opset}.onnx"
    torch.onnx.export(
        wrapper,
        (ids, mask),
        str(args.out / name),
        input_names=["input_ids", "attention_mask"],
        output_names=["last_hidden_state"],
        dynamic_axes={
            "input_ids": {0: "batch", 1: "sequence"},
            "attention_mask": {0: "batch", 1: "sequence"},
            "last_hidden_state": {0: "batch", 1: "sequence"},
        },
        opset_version=args.opset,
        dynamo=False,
    )
    calibration_ids = rng.integers(0, config.vocab_size, (8, 2, 64))
    np.savez(
        args.out / "bert_base.npz",
        calibration_input_ids=calibration_ids.astype(np.int64),
        calibration_attention_mask=np.ones_like(calibration_ids, dtype=np.int64),
        input_input_ids=ids.numpy(),
        input_attention_mask=mask.numpy(),
    )


if __name__ == "__main__":
    main()
