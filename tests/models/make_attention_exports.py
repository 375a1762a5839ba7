"""Export the transformer models issue 18's attention and rotary fusions are measured on.

Run with a venv that has torch and transformers (not /work/venv, which has no torch):

    HF_HUB_OFFLINE=1 /work/benchvenv/bin/python tests/models/make_attention_exports.py \
        [--out benchmarks/.cache/attention] [--only bert_ts_sdpa,llama_dynamo]

Every model is built from a small config with random weights (no hub downloads) and exported
the way a user would: TorchScript (`dynamo=False`) or dynamo (`dynamo=True`, with and without
the exporter's own optimizer), with transformers' SDPA and eager attention. Each export is
written as `<name>.onnx` with `<name>.npz` beside it: the framework's own inputs and outputs
(keys `input_<name>`, `output_<i>`), so `benchmarks/attention_exports.py` can compare the
rewritten model with PyTorch. `<name>.json` says how many attention layers and rotated tensors
the source model has. The exports are not committed (several MB); this script regenerates them.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import numpy as np
import torch
import transformers
from torch import nn

SEED = 1234
DEFAULT_OUT = Path(__file__).resolve().parents[2] / "benchmarks" / ".cache" / "attention"


class Keywords(nn.Module):
    """transformers 5 wants keyword arguments: forward(*inputs) -> the first output tensor."""

    def __init__(self, model: nn.Module, names: tuple[str, ...], extra: dict[str, Any]):
        super().__init__()
        self.model = model
        self.names = names
        self.extra = extra

    def forward(self, *inputs):
        out = self.model(**dict(zip(self.names, inputs, strict=True)), **self.extra)
        return out.last_hidden_state


class WhisperEncoderDecoder(nn.Module):
    """The Whisper model with its decoder: self-attention (causal) and cross-attention."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, input_features, decoder_input_ids):
        out = self.model(
            input_features=input_features, decoder_input_ids=decoder_input_ids, use_cache=False
        )
        return out.last_hidden_state, out.encoder_last_hidden_state


@dataclass
class Export:
    name: str
    build: Callable[[], nn.Module]
    inputs: Callable[[torch.Generator], dict[str, torch.Tensor]]
    dynamic: dict[str, dict[int, str]]
    exporter: str  # "torchscript" | "dynamo"
    attention_layers: int
    rotations: int = 0  # rotated tensors (q and k of every layer) for rotary models
    opset: int = 17
    optimize: bool = False


def with_noise(model: nn.Module) -> nn.Module:
    """LayerNorm weights 1 + noise, zero biases noise: random init hides bugs otherwise."""
    gen = torch.Generator().manual_seed(SEED)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias") and p.ndim == 1 and not p.any():
                p.copy_(0.02 * torch.randn(p.shape, generator=gen))
            elif name.endswith("weight") and p.ndim == 1 and bool((p == 1).all()):
                p.copy_(1 + 0.1 * torch.randn(p.shape, generator=gen))
    return model.eval()


def text_inputs(vocab: int, batch: int = 2, seq: int = 9, pad: bool = True):
    def make(gen):
        ids = torch.randint(0, vocab, (batch, seq), generator=gen)
        mask = torch.ones(batch, seq, dtype=torch.int64)
        if pad:
            mask[1, seq - 3 :] = 0  # a right-padded row
        return {"input_ids": ids, "attention_mask": mask}

    return make


TEXT_DYN = {"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "sequence"}}

BERT = {
    "vocab_size": 256,
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "intermediate_size": 128,
    "max_position_embeddings": 64,
}
GPT2 = {
    "vocab_size": 256,
    "bos_token_id": 0,
    "eos_token_id": 0,
    "n_embd": 64,
    "n_layer": 2,
    "n_head": 4,
    "n_positions": 64,
}
VIT = {
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "intermediate_size": 128,
    "image_size": 32,
    "patch_size": 8,
}
WHISPER = {
    "vocab_size": 256,
    "pad_token_id": 0,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "decoder_start_token_id": 3,
    "d_model": 64,
    "encoder_layers": 2,
    "decoder_layers": 2,
    "encoder_attention_heads": 4,
    "decoder_attention_heads": 4,
    "encoder_ffn_dim": 128,
    "decoder_ffn_dim": 128,
    "num_mel_bins": 16,
    "max_source_positions": 16,
    "max_target_positions": 32,
}
WAV2VEC2 = {
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "intermediate_size": 128,
    "conv_dim": (32, 32),
    "conv_kernel": (10, 3),
    "conv_stride": (5, 2),
    "num_conv_pos_embeddings": 16,
    "num_conv_pos_embedding_groups": 4,
}
LLAMA = {
    "vocab_size": 128,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 64,
}


def bert(attn: str):
    return lambda: Keywords(
        with_noise(
            transformers.BertModel(transformers.BertConfig(**BERT, attn_implementation=attn))
        ),
        ("input_ids", "attention_mask"),
        {},
    )


def gpt2(attn: str):
    return lambda: Keywords(
        with_noise(
            transformers.GPT2Model(
                transformers.GPT2Config(**GPT2, use_cache=False, attn_implementation=attn)
            )
        ),
        ("input_ids", "attention_mask"),
        {},
    )


def vit(attn: str):
    return lambda: Keywords(
        with_noise(
            transformers.ViTModel(
                transformers.ViTConfig(**VIT, attn_implementation=attn), add_pooling_layer=False
            )
        ),
        ("pixel_values",),
        {},
    )


def whisper_encoder(attn: str):
    def build():
        model = transformers.WhisperModel(
            transformers.WhisperConfig(**WHISPER, attn_implementation=attn)
        )
        return Keywords(with_noise(model.get_encoder()), ("input_features",), {})

    return build


def whisper_full(attn: str):
    def build():
        model = transformers.WhisperModel(
            transformers.WhisperConfig(**WHISPER, attn_implementation=attn)
        )
        return WhisperEncoderDecoder(with_noise(model)).eval()

    return build


def wav2vec2(attn: str):
    return lambda: Keywords(
        with_noise(
            transformers.Wav2Vec2Model(
                transformers.Wav2Vec2Config(**WAV2VEC2, attn_implementation=attn)
            )
        ),
        ("input_values",),
        {},
    )


def llama(attn: str, **extra_cfg):
    return lambda: Keywords(
        with_noise(
            transformers.LlamaModel(
                transformers.LlamaConfig(**LLAMA, **extra_cfg, attn_implementation=attn)
            )
        ),
        ("input_ids", "attention_mask"),
        {"use_cache": False},
    )


def image_inputs(gen):
    return {"pixel_values": torch.randn(2, 3, 32, 32, generator=gen)}


def mel_inputs(gen):
    # Whisper's encoder wants exactly 2 * max_source_positions frames.
    return {"input_features": torch.randn(2, 16, 32, generator=gen)}


def mel_and_tokens(gen):
    return {**mel_inputs(gen), "decoder_input_ids": torch.randint(0, 256, (2, 5), generator=gen)}


def audio_inputs(gen):
    return {"input_values": torch.randn(2, 400, generator=gen)}


def exports() -> list[Export]:
    bert_text = text_inputs(BERT["vocab_size"])
    gpt2_text = text_inputs(GPT2["vocab_size"])
    llama_text = text_inputs(LLAMA["vocab_size"])
    n = 2
    out = [
        Export("bert_ts_sdpa", bert("sdpa"), bert_text, TEXT_DYN, "torchscript", n),
        Export("bert_ts_eager", bert("eager"), bert_text, TEXT_DYN, "torchscript", n),
        Export("bert_dynamo", bert("sdpa"), bert_text, TEXT_DYN, "dynamo", n, opset=18),
        Export(
            "bert_dynamo_opt",
            bert("sdpa"),
            bert_text,
            TEXT_DYN,
            "dynamo",
            n,
            opset=18,
            optimize=True,
        ),
        Export("bert_dynamo_eager", bert("eager"), bert_text, TEXT_DYN, "dynamo", n, opset=18),
        Export("gpt2_ts_sdpa", gpt2("sdpa"), gpt2_text, TEXT_DYN, "torchscript", n),
        Export("gpt2_ts_eager", gpt2("eager"), gpt2_text, TEXT_DYN, "torchscript", n),
        Export("gpt2_dynamo", gpt2("sdpa"), gpt2_text, TEXT_DYN, "dynamo", n, opset=18),
        Export(
            "vit_ts_sdpa",
            vit("sdpa"),
            image_inputs,
            {"pixel_values": {0: "batch"}},
            "torchscript",
            n,
        ),
        Export(
            "vit_dynamo",
            vit("sdpa"),
            image_inputs,
            {"pixel_values": {0: "batch"}},
            "dynamo",
            n,
            opset=18,
        ),
        Export(
            "whisper_encoder_ts",
            whisper_encoder("sdpa"),
            mel_inputs,
            {"input_features": {0: "batch"}},
            "torchscript",
            n,
        ),
        Export(
            "whisper_encoder_dynamo",
            whisper_encoder("sdpa"),
            mel_inputs,
            {"input_features": {0: "batch"}},
            "dynamo",
            n,
            opset=18,
        ),
        # The whole model: decoder self-attention (causal) and cross-attention too. The
        # TorchScript exporter has no aten::diff (the decoder's position ids): dynamo only.
        Export(
            "whisper_dynamo",
            whisper_full("sdpa"),
            mel_and_tokens,
            {"input_features": {0: "batch"}, "decoder_input_ids": {0: "batch", 1: "sequence"}},
            "dynamo",
            2 + 2 * 2,  # encoder self, decoder self and cross
            opset=18,
        ),
        Export(
            "wav2vec2_ts",
            wav2vec2("sdpa"),
            audio_inputs,
            {"input_values": {0: "batch", 1: "samples"}},
            "torchscript",
            n,
        ),
        Export(
            "llama_ts_eager",
            llama("eager"),
            llama_text,
            TEXT_DYN,
            "torchscript",
            n,
            rotations=2 * n,
        ),
        Export(
            "llama_ts_sdpa", llama("sdpa"), llama_text, TEXT_DYN, "torchscript", n, rotations=2 * n
        ),
        Export(
            "llama_dynamo",
            llama("sdpa"),
            llama_text,
            TEXT_DYN,
            "dynamo",
            n,
            rotations=2 * n,
            opset=18,
        ),
        Export(
            "llama_dynamo_opt",
            llama("sdpa"),
            llama_text,
            TEXT_DYN,
            "dynamo",
            n,
            rotations=2 * n,
            opset=18,
            optimize=True,
        ),
        Export(
            "phi_partial_rotary_ts",
            lambda: Keywords(
                with_noise(
                    transformers.PhiModel(
                        transformers.PhiConfig(
                            vocab_size=128,
                            hidden_size=64,
                            intermediate_size=128,
                            num_hidden_layers=2,
                            num_attention_heads=4,
                            max_position_embeddings=64,
                            partial_rotary_factor=0.5,
                            attn_implementation="eager",
                        )
                    )
                ),
                ("input_ids", "attention_mask"),
                {"use_cache": False},
            ),
            llama_text,
            TEXT_DYN,
            "torchscript",
            n,
            rotations=2 * n,
        ),
    ]
    return out


def export(spec: Export, model: nn.Module, args: dict[str, torch.Tensor], path: Path) -> None:
    names = list(args)
    values = tuple(args.values())
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        if spec.exporter == "torchscript":
            torch.onnx.export(
                model,
                values,
                str(path),
                dynamo=False,
                opset_version=spec.opset,
                input_names=names,
                dynamic_axes=spec.dynamic,
                do_constant_folding=True,
            )
            return
        dims: dict[str, torch.export.Dim] = {}
        shapes = []
        for name in names:
            axes = {}
            for axis, sym in spec.dynamic.get(name, {}).items():
                dims.setdefault(sym, torch.export.Dim(sym, max=64 if sym == "sequence" else 4096))
                axes[axis] = dims[sym]
            shapes.append(axes)
        torch.onnx.export(
            model,
            values,
            str(path),
            dynamo=True,
            opset_version=spec.opset,
            optimize=spec.optimize,
            input_names=names,
            external_data=False,
            # forward(*inputs) takes its inputs as one tuple: the shapes are nested once more
            dynamic_shapes=(tuple(shapes),) if isinstance(model, Keywords) else tuple(shapes),
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--only", default="", help="comma-separated export names")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    only = {s for s in args.only.split(",") if s}
    for spec in exports():
        if only and spec.name not in only:
            continue
        torch.manual_seed(SEED)
        model = spec.build().eval()
        inputs = spec.inputs(torch.Generator().manual_seed(SEED))
        with torch.no_grad():
            outputs = model(*inputs.values())
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        path = args.out / f"{spec.name}.onnx"
        try:
            export(spec, model, inputs, path)
        except Exception as exc:  # an exporter failure is reported, the others still run
            print(f"{spec.name}: export failed: {type(exc).__name__}: {str(exc)[:300]}")
            continue
        arrays = {f"input_{k}": v.numpy() for k, v in inputs.items()}
        arrays.update({f"output_{i}": o.numpy() for i, o in enumerate(outputs)})
        np.savez(args.out / f"{spec.name}.npz", **arrays)
        facts = {
            "exporter": spec.exporter,
            "opset": spec.opset,
            "optimize": spec.optimize,
            "attention_layers": spec.attention_layers,
            "rotations": spec.rotations,
        }
        (args.out / f"{spec.name}.json").write_text(json.dumps(facts, indent=1) + "\n")
        print(f"{spec.name}: {path} ({path.stat().st_size // 1024} KiB)")


if __name__ == "__main__":
    main()
