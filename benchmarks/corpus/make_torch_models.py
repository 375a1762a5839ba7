"""Export real PyTorch / transformers models to ONNX for tests and benchmarks.

Run with the torch venv (torch 2.13.0 CPU, transformers 5.x, onnx, onnxscript, onnxruntime):

    HF_HUB_OFFLINE=1 /work/venv-torch/bin/python benchmarks/corpus/make_torch_models.py \
        --size test            # -> tests/models/ (committed, small)
    ... --size bench           # -> benchmarks/.cache/corpus/bench/ (bigger, not committed)
    ... --only bert_ts14,gpt2_ts14   # a subset

Every model is built from a config with random weights (no hub downloads), made non-trivial
(LayerNorm weights/biases with noise, BatchNorm statistics calibrated on random batches),
exported, checked with onnx.checker + strict shape inference, run with onnxruntime on several
samples (including shapes other than the export shape, to exercise the dynamic axes) and
compared with PyTorch. The PyTorch inputs/outputs are saved as <name>.npz and the model is
described in manifest.json (and tests/models/README.md).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import math
import os
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import onnx
import onnxruntime as ort
import torch
import transformers
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
import corpus_common as cc

SEED = 1234


# ----------------------------------------------------------------------------- weights


def perturb_layernorms(model: nn.Module, gen: torch.Generator, scale: float = 0.1) -> int:
    """Give every LayerNorm a weight of 1 + noise and a bias of noise. Returns how many."""
    n = 0
    with torch.no_grad():
        for mod in model.modules():
            if isinstance(mod, nn.LayerNorm):
                if mod.weight is not None:
                    mod.weight.copy_(1 + scale * torch.randn(mod.weight.shape, generator=gen))
                if mod.bias is not None:
                    mod.bias.copy_(scale * torch.randn(mod.bias.shape, generator=gen))
                n += 1
    return n


def perturb_zero_biases(model: nn.Module, gen: torch.Generator, scale: float = 0.02) -> int:
    """Give all-zero biases (transformers initializes them so) small noise.

    Identical zero initializers are deduplicated by the TorchScript exporter into Identity
    nodes, which would make the graphs less realistic than those of trained models.
    """
    n = 0
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias") and p.ndim == 1 and not p.any():
                p.copy_(scale * torch.randn(p.shape, generator=gen))
                n += 1
    return n


def calibrate_batchnorm(
    model: nn.Module, make_batch: Callable[[], torch.Tensor], gen: torch.Generator, steps: int = 4
) -> int:
    """Randomize BN affine params, then set running stats from a few random batches."""
    bns = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    with torch.no_grad():
        for bn in bns:
            bn.weight.copy_(1 + 0.2 * torch.randn(bn.weight.shape, generator=gen))
            bn.bias.copy_(0.1 * torch.randn(bn.bias.shape, generator=gen))
            bn.reset_running_stats()
            bn.momentum = None  # cumulative average over the calibration batches
        model.train()
        for _ in range(steps):
            model(make_batch())
    model.eval()
    return len(bns)


# ----------------------------------------------------------------------------- models


class HFTextWrapper(nn.Module):
    """transformers 5 wants keywords: forward(input_ids, attention_mask) -> tensors."""

    def __init__(self, model: nn.Module, outputs: tuple[str, ...]):
        super().__init__()
        self.model = model
        self.outputs = outputs

    def forward(self, input_ids, attention_mask):
        out = self.model(input_ids=input_ids, attention_mask=attention_mask)
        return tuple(getattr(out, k) for k in self.outputs)


class HFImageWrapper(nn.Module):
    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, pixel_values):
        return self.model(pixel_values=pixel_values).last_hidden_state


class BasicBlock(nn.Module):
    """ResNet basic block: conv-bn-relu-conv-bn + shortcut, add, relu."""

    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU()
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)
            )

    def forward(self, x):
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return self.relu(y + self.shortcut(x))


class ResNet(nn.Module):
    def __init__(self, widths, blocks, num_classes: int, stem_stride: int, stem_pool: bool):
        super().__init__()
        c0 = widths[0]
        stem: list[nn.Module] = [
            nn.Conv2d(3, c0, 7 if stem_pool else 3, stem_stride, 3 if stem_pool else 1, bias=False),
            nn.BatchNorm2d(c0),
            nn.ReLU(),
        ]
        if stem_pool:
            stem.append(nn.MaxPool2d(3, 2, 1))
        self.stem = nn.Sequential(*stem)
        layers = []
        cin = c0
        for i, (w, n) in enumerate(zip(widths, blocks, strict=True)):
            for j in range(n):
                layers.append(BasicBlock(cin, w, 2 if (j == 0 and i > 0) else 1))
                cin = w
        self.layers = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, num_classes)

    def forward(self, x):
        x = self.layers(self.stem(x))
        return self.fc(torch.flatten(self.pool(x), 1))


def _make_divisible(v: float, divisor: int = 8) -> int:
    new_v = max(divisor, int(v + divisor / 2) // divisor * divisor)
    if new_v < 0.9 * v:
        new_v += divisor
    return new_v


class ConvBNReLU6(nn.Sequential):
    def __init__(self, cin, cout, k=3, stride=1, groups=1):
        super().__init__(
            nn.Conv2d(cin, cout, k, stride, (k - 1) // 2, groups=groups, bias=False),
            nn.BatchNorm2d(cout),
            nn.ReLU6(),
        )


class InvertedResidual(nn.Module):
    def __init__(self, cin, cout, stride, expand):
        super().__init__()
        hidden = round(cin * expand)
        self.use_res = stride == 1 and cin == cout
        layers: list[nn.Module] = []
        if expand != 1:
            layers.append(ConvBNReLU6(cin, hidden, 1))
        layers += [
            ConvBNReLU6(hidden, hidden, 3, stride, groups=hidden),  # depthwise
            nn.Conv2d(hidden, cout, 1, bias=False),
            nn.BatchNorm2d(cout),
        ]
        self.conv = nn.Sequential(*layers)

    def forward(self, x):
        return x + self.conv(x) if self.use_res else self.conv(x)


class MobileNetV2(nn.Module):
    FULL = (
        (1, 16, 1, 1),
        (6, 24, 2, 2),
        (6, 32, 3, 2),
        (6, 64, 4, 2),
        (6, 96, 3, 1),
        (6, 160, 3, 2),
        (6, 320, 1, 1),
    )

    def __init__(self, width: float, settings, last: int, num_classes: int, first_stride=2):
        super().__init__()
        cin = _make_divisible(32 * width)
        self.last = _make_divisible(last * max(1.0, width))
        feats: list[nn.Module] = [ConvBNReLU6(3, cin, 3, first_stride)]
        for t, c, n, s in settings:
            cout = _make_divisible(c * width)
            for i in range(n):
                feats.append(InvertedResidual(cin, cout, s if i == 0 else 1, t))
                cin = cout
        feats.append(ConvBNReLU6(cin, self.last, 1))
        self.features = nn.Sequential(*feats)
        self.classifier = nn.Linear(self.last, num_classes)

    def forward(self, x):
        x = self.features(x)
        x = nn.functional.adaptive_avg_pool2d(x, 1)
        return self.classifier(torch.flatten(x, 1))


class Conv1dLNGelu(nn.Module):
    """Conv1d -> LayerNorm over channels (via transposes) -> GELU (erf)."""

    def __init__(self, channels: int, stride: int):
        super().__init__()
        self.conv = nn.Conv1d(channels, channels, 3, stride, 1)
        self.norm = nn.LayerNorm(channels, eps=1e-5)
        self.act = nn.GELU()

    def forward(self, x):  # x: (batch, channels, time)
        x = self.conv(x)
        x = self.norm(x.transpose(1, 2)).transpose(1, 2)
        return self.act(x)


class Conv1dStack(nn.Module):
    def __init__(self, channels: int, strides):
        super().__init__()
        self.blocks = nn.Sequential(*[Conv1dLNGelu(channels, s) for s in strides])

    def forward(self, x):
        return self.blocks(x)


# ----------------------------------------------------------------------------- specs


@dataclass
class Spec:
    name: str
    what: str
    family: str
    exporter: str  # "torchscript" | "dynamo"
    opset: int
    build: Callable[[torch.Generator], nn.Module]
    input_names: list[str]
    output_names: list[str]
    dynamic: dict[str, dict[int, str]]  # input/output name -> {axis: symbolic name}
    samples: list[dict[str, Any]]  # each {"inputs": {name: tensor}, "note": str}
    layers: int
    expected: dict[str, int] = field(default_factory=dict)
    optimize: bool = False
    strip_stack_traces: bool = False
    training_preserve: bool = False
    atol: float = 1e-4
    rtol: float = 1e-3
    dim_max: dict[str, int] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)


def text_samples(gen, vocab: int, shapes) -> list[dict[str, Any]]:
    out = []
    for i, (b, s) in enumerate(shapes):
        ids = torch.randint(0, vocab, (b, s), generator=gen)
        mask = torch.ones(b, s, dtype=torch.int64)
        if b > 1:  # right padding on one row so the mask matters
            mask[i % b, max(1, s - s // 3) :] = 0
        note = f"batch {b}, seq {s}" + (", one row right-padded" if b > 1 else "")
        out.append({"inputs": {"input_ids": ids, "attention_mask": mask}, "note": note})
    return out


def image_samples(gen, shapes) -> list[dict[str, Any]]:
    return [
        {"inputs": {name: torch.randn(shape, generator=gen)}, "note": f"shape {list(shape)}"}
        for name, shape in shapes
    ]


TEXT_DYN = {
    "input_ids": {0: "batch", 1: "sequence"},
    "attention_mask": {0: "batch", 1: "sequence"},
    "last_hidden_state": {0: "batch", 1: "sequence"},
    "pooler_output": {0: "batch"},
}


def bert_specs(size: str, gen) -> list[Spec]:
    if size == "test":
        cfg = {
            "vocab_size": 512,
            "hidden_size": 64,
            "num_hidden_layers": 6,
            "num_attention_heads": 4,
            "intermediate_size": 128,
            "max_position_embeddings": 128,
        }
        shapes = [(2, 16), (3, 11), (1, 7)]
    else:
        cfg = {
            "vocab_size": 30522,
            "hidden_size": 256,
            "num_hidden_layers": 12,
            "num_attention_heads": 4,
            "intermediate_size": 1024,
            "max_position_embeddings": 512,
        }
        shapes = [(2, 128), (1, 64)]
    n_layers = cfg["num_hidden_layers"]

    def builder(attn: str):
        def build(g):
            m = transformers.BertModel(transformers.BertConfig(**cfg, attn_implementation=attn))
            perturb_layernorms(m, g)
            perturb_zero_biases(m, g)
            return HFTextWrapper(m.eval(), ("last_hidden_state", "pooler_output")).eval()

        return build

    expected = {"layernorm": 1 + 2 * n_layers, "gelu": n_layers, "attention": n_layers}
    desc = (
        f"BertModel {n_layers}L h{cfg['hidden_size']} {cfg['num_attention_heads']}heads "
        f"ffn{cfg['intermediate_size']} vocab{cfg['vocab_size']}"
    )
    samples = text_samples(gen, cfg["vocab_size"], shapes)
    common = {
        "family": "bert",
        "input_names": ["input_ids", "attention_mask"],
        "output_names": ["last_hidden_state", "pooler_output"],
        "dynamic": TEXT_DYN,
        "samples": samples,
        "layers": n_layers,
        "expected": expected,
        "config": cfg,
    }
    return [
        Spec(
            "bert_ts14",
            f"{desc}, eager attention",
            exporter="torchscript",
            opset=14,
            build=builder("eager"),
            **common,
        ),
        Spec(
            "bert_sdpa_ts14",
            f"{desc}, default SDPA attention",
            exporter="torchscript",
            opset=14,
            build=builder("sdpa"),
            **common,
        ),
        Spec(
            "bert_ts17",
            f"{desc}, eager attention",
            exporter="torchscript",
            opset=17,
            build=builder("eager"),
            **common,
        ),
        Spec(
            "bert_dynamo18",
            f"{desc}, eager attention, raw graph",
            exporter="dynamo",
            opset=18,
            build=builder("eager"),
            optimize=False,
            strip_stack_traces=True,
            dim_max={"sequence": cfg["max_position_embeddings"]},
            **common,
        ),
    ] + (
        [
            # Benchmarks only: what `torch.onnx.export(dynamo=True)` writes by default (the
            # exporter already ran onnxscript's optimizer on it).
            Spec(
                "bert_dynamo18_opt",
                f"{desc}, eager attention, exporter's default optimize=True",
                exporter="dynamo",
                opset=18,
                build=builder("eager"),
                optimize=True,
                strip_stack_traces=True,
                dim_max={"sequence": cfg["max_position_embeddings"]},
                **common,
            ),
        ]
        if size == "bench"
        else []
    )


def gpt2_specs(size: str, gen) -> list[Spec]:
    if size == "test":
        cfg = {
            "vocab_size": 1000,
            "n_positions": 128,
            "n_embd": 64,
            "n_layer": 4,
            "n_head": 4,
            "bos_token_id": 999,
            "eos_token_id": 999,
        }
        shapes = [(2, 16), (3, 11), (1, 7)]
    else:
        cfg = {"vocab_size": 50257, "n_positions": 1024, "n_embd": 256, "n_layer": 12, "n_head": 4}
        shapes = [(2, 128), (1, 64)]
    n_layers = cfg["n_layer"]

    def build(g):
        c = transformers.GPT2Config(
            **cfg, activation_function="gelu_new", use_cache=False, attn_implementation="eager"
        )
        m = transformers.GPT2Model(c)
        perturb_layernorms(m, g)
        perturb_zero_biases(m, g)
        return HFTextWrapper(m.eval(), ("last_hidden_state",)).eval()

    desc = (
        f"GPT2Model {n_layers}L n_embd{cfg['n_embd']} {cfg['n_head']}heads "
        f"vocab{cfg['vocab_size']}, eager attention, gelu_new, use_cache=False"
    )
    common = {
        "family": "gpt2",
        "build": build,
        "input_names": ["input_ids", "attention_mask"],
        "output_names": ["last_hidden_state"],
        "dynamic": TEXT_DYN,
        "samples": text_samples(gen, cfg["vocab_size"], shapes),
        "layers": n_layers,
        "expected": {"layernorm": 2 * n_layers + 1, "gelu": n_layers, "attention": n_layers},
        "config": cfg,
    }
    specs = [
        Spec("gpt2_ts14", desc, exporter="torchscript", opset=14, **common),
        Spec("gpt2_ts17", desc, exporter="torchscript", opset=17, **common),
    ]
    if size == "bench":  # benchmarks only: both exporters for GPT-2 too
        specs.append(
            Spec(
                "gpt2_dynamo18",
                f"{desc}, raw graph",
                exporter="dynamo",
                opset=18,
                optimize=False,
                strip_stack_traces=True,
                dim_max={"sequence": cfg["n_positions"]},
                **common,
            )
        )
    return specs


def vit_specs(size: str, gen) -> list[Spec]:
    if size == "test":
        cfg = {
            "image_size": 32,
            "patch_size": 8,
            "num_channels": 3,
            "hidden_size": 64,
            "num_hidden_layers": 4,
            "num_attention_heads": 4,
            "intermediate_size": 128,
        }
    else:  # ViT-tiny
        cfg = {
            "image_size": 224,
            "patch_size": 16,
            "num_channels": 3,
            "hidden_size": 192,
            "num_hidden_layers": 12,
            "num_attention_heads": 3,
            "intermediate_size": 768,
        }
    n = cfg["num_hidden_layers"]
    hw = cfg["image_size"]

    def build(g):
        m = transformers.ViTModel(transformers.ViTConfig(**cfg), add_pooling_layer=False)
        perturb_layernorms(m, g)
        perturb_zero_biases(m, g)
        return HFImageWrapper(m.eval()).eval()

    return [
        Spec(
            "vit_ts14",
            f"ViTModel {n}L h{cfg['hidden_size']} image{hw} patch{cfg['patch_size']}, "
            "default SDPA attention, no pooler",
            family="vit",
            exporter="torchscript",
            opset=14,
            build=build,
            input_names=["pixel_values"],
            output_names=["last_hidden_state"],
            dynamic={"pixel_values": {0: "batch"}, "last_hidden_state": {0: "batch"}},
            samples=image_samples(
                gen, [("pixel_values", (2, 3, hw, hw)), ("pixel_values", (3, 3, hw, hw))]
            ),
            layers=n,
            expected={"layernorm": 2 * n + 1, "gelu": n, "attention": n},
            config=cfg,
        )
    ]


def cnn_specs(size: str, gen) -> list[Spec]:
    if size == "test":
        rcfg = {
            "widths": (16, 32, 64),
            "blocks": (2, 2, 2),
            "num_classes": 10,
            "stem_stride": 1,
            "stem_pool": False,
        }
        mcfg = {
            "width": 0.5,
            "settings": ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 2, 2), (6, 64, 2, 2), (6, 96, 1, 1)),
            "last": 256,
            "num_classes": 10,
            "first_stride": 1,
        }
        hw = 32
    else:
        rcfg = {
            "widths": (64, 128, 256, 512),
            "blocks": (2, 2, 2, 2),
            "num_classes": 1000,
            "stem_stride": 2,
            "stem_pool": True,
        }
        mcfg = {
            "width": 1.0,
            "settings": MobileNetV2.FULL,
            "last": 1280,
            "num_classes": 1000,
            "first_stride": 2,
        }
        hw = 224

    def calib(model, g):
        calibrate_batchnorm(model, lambda: torch.randn(8, 3, hw, hw, generator=g), g)
        return model

    def build_resnet(g):
        return calib(ResNet(**rcfg), g)

    def build_mbv2(g):
        return calib(MobileNetV2(**mcfg), g)

    n_blocks = sum(rcfg["blocks"])
    common = {
        "exporter": "torchscript",
        "opset": 14,
        "input_names": ["input"],
        "output_names": ["logits"],
        "dynamic": {"input": {0: "batch"}, "logits": {0: "batch"}},
        "samples": image_samples(gen, [("input", (2, 3, hw, hw)), ("input", (3, 3, hw, hw))]),
        "training_preserve": True,
    }
    n_ir = sum(n for _, _, n, _ in mcfg["settings"])
    return [
        Spec(
            "cnn_bn_ts14",
            f"ResNet-style CNN, stages {list(rcfg['widths'])} x {list(rcfg['blocks'])} basic "
            f"blocks, input {hw}x{hw}, BatchNorm kept (TrainingMode.PRESERVE, eval)",
            family="resnet",
            build=build_resnet,
            layers=n_blocks,
            expected={},
            config={k: list(v) if isinstance(v, tuple) else v for k, v in rcfg.items()},
            **common,
        ),
        Spec(
            "cnn_bn_dynamo18",
            "the cnn_bn_ts14 network through the dynamo exporter, raw graph (BatchNorm "
            "kept by optimize=False)",
            family="resnet",
            build=build_resnet,
            layers=n_blocks,
            expected={},
            config={k: list(v) if isinstance(v, tuple) else v for k, v in rcfg.items()},
            **{
                **common,
                "exporter": "dynamo",
                "opset": 18,
                "training_preserve": False,
                "strip_stack_traces": True,
            },
        ),
        Spec(
            "mobilenetv2_ts14",
            f"MobileNetV2 width {mcfg['width']}, {n_ir} inverted-residual blocks, input "
            f"{hw}x{hw}, depthwise conv, ReLU6 -> Clip, BatchNorm kept",
            family="mobilenetv2",
            build=build_mbv2,
            layers=n_ir,
            expected={},
            config={
                "width": mcfg["width"],
                "settings": [list(s) for s in mcfg["settings"]],
                "last": mcfg["last"],
            },
            **common,
        ),
    ]


def conv1d_specs(size: str, gen) -> list[Spec]:
    strides = (1, 2, 1, 2, 1, 2)
    ch, t = (32, 64) if size == "test" else (256, 1024)

    def build(g):
        m = Conv1dStack(ch, strides)
        perturb_layernorms(m, g)
        return m.eval()

    specs = []
    for opset in (17, 14):
        specs.append(
            Spec(
                f"conv1d_ln_gelu_x6_ts{opset}",
                f"6 x [Conv1d(k3, stride {'/'.join(map(str, strides))}) -> LayerNorm over "
                f"{ch} channels (transposes) -> GELU(erf)], identical weight shapes",
                family="conv1d",
                exporter="torchscript",
                opset=opset,
                build=build,
                input_names=["input"],
                output_names=["output"],
                dynamic={"input": {0: "batch", 2: "time"}, "output": {0: "batch", 2: "time_out"}},
                samples=image_samples(gen, [("input", (2, ch, t)), ("input", (3, ch, t // 2 + 3))]),
                layers=len(strides),
                expected={"layernorm": len(strides), "gelu": len(strides)},
                config={"channels": ch, "strides": list(strides), "kernel": 3},
            )
        )
    return specs


FAMILIES = (bert_specs, gpt2_specs, vit_specs, cnn_specs, conv1d_specs)


# ----------------------------------------------------------------------------- export


def export(spec: Spec, model: nn.Module, path: Path) -> str:
    args = tuple(spec.samples[0]["inputs"][n] for n in spec.input_names)
    log = io.StringIO()
    with warnings.catch_warnings(), contextlib.redirect_stdout(log):
        warnings.simplefilter("ignore")
        if spec.exporter == "torchscript":
            kw: dict[str, Any] = {}
            if spec.training_preserve:
                kw["training"] = torch.onnx.TrainingMode.PRESERVE
            torch.onnx.export(
                model,
                args,
                str(path),
                dynamo=False,
                opset_version=spec.opset,
                input_names=spec.input_names,
                output_names=spec.output_names,
                dynamic_axes={
                    k: v
                    for k, v in spec.dynamic.items()
                    if k in spec.input_names + spec.output_names
                },
                do_constant_folding=True,
                **kw,
            )
            return (
                f"torch.onnx.export(dynamo=False, opset_version={spec.opset}"
                + (", training=TrainingMode.PRESERVE" if spec.training_preserve else "")
                + ")"
            )
        dims: dict[str, torch.export.Dim] = {}
        shapes: dict[str, dict[int, Any]] = {}
        for name in spec.input_names:
            shapes[name] = {}
            for axis, sym in spec.dynamic.get(name, {}).items():
                if sym not in dims:
                    dims[sym] = torch.export.Dim(sym, max=spec.dim_max.get(sym, 2**31 - 2))
                shapes[name][axis] = dims[sym]
        torch.onnx.export(
            model,
            args,
            str(path),
            dynamo=True,
            opset_version=spec.opset,
            optimize=spec.optimize,
            input_names=spec.input_names,
            output_names=spec.output_names,
            external_data=False,
            dynamic_shapes=tuple(shapes[n] for n in spec.input_names),
        )
        if spec.strip_stack_traces:
            strip_node_metadata(path, "pkg.torch.onnx.stack_trace")
        return (
            f"torch.onnx.export(dynamo=True, opset_version={spec.opset}, optimize={spec.optimize})"
        )


def strip_node_metadata(path: Path, key: str) -> None:
    """Drop one metadata_props key from every node (dynamo's stack traces: ~40% of the file,
    absolute paths of this machine). Everything else the exporter wrote is kept."""
    model = onnx.load(str(path))
    for node in cc.all_nodes(model.graph):
        keep = [p for p in node.metadata_props if p.key != key]
        if len(keep) != len(node.metadata_props):
            del node.metadata_props[:]
            node.metadata_props.extend(keep)
    onnx.save(model, str(path))


def run_spec(spec: Spec, out_dir: Path, gen: torch.Generator) -> dict[str, Any]:
    t0 = time.time()
    torch.manual_seed(SEED)
    model = spec.build(gen)
    path = out_dir / f"{spec.name}.onnx"
    n_ln = sum(isinstance(m, nn.LayerNorm) for m in model.modules())
    n_bn = sum(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in model.modules())
    if "layernorm" in spec.expected:
        assert spec.expected["layernorm"] == n_ln, (spec.name, spec.expected, n_ln)
    if n_bn:
        spec.expected["batchnorm"] = n_bn
    exporter_call = export(spec, model, path)
    t_export = time.time() - t0

    proto = cc.check_and_infer(path)
    desc = cc.describe(path, proto)

    sess_opts = ort.SessionOptions()
    sess_opts.intra_op_num_threads = 2
    sess = ort.InferenceSession(str(path), sess_opts, providers=["CPUExecutionProvider"])
    ort_inputs = [i.name for i in sess.get_inputs()]
    assert ort_inputs == spec.input_names, ort_inputs
    samples = []
    worst = 0.0
    out_std = math.inf
    for s in spec.samples:
        args = [s["inputs"][n] for n in spec.input_names]
        with torch.no_grad():
            ref = model(*args)
        ref = [ref] if isinstance(ref, torch.Tensor) else list(ref)
        ref_np = [r.detach().numpy() for r in ref]
        got = sess.run(
            spec.output_names, {n: a.numpy() for n, a in zip(spec.input_names, args, strict=True)}
        )
        cc.assert_close(got, ref_np, atol=spec.atol, rtol=spec.rtol, what=spec.name)
        worst = max(worst, cc.max_abs_err(got, ref_np))
        out_std = min(out_std, *(float(r.std()) for r in ref_np))
        samples.append(
            {
                "inputs": {n: a.numpy() for n, a in zip(spec.input_names, args, strict=True)},
                "outputs": dict(zip(spec.output_names, ref_np, strict=True)),
                "note": s.get("note", ""),
            }
        )
    assert out_std > 1e-3, f"{spec.name}: outputs nearly constant (std {out_std})"
    layout = cc.save_samples(out_dir / f"{spec.name}.npz", samples)

    hist = desc["op_histogram"]
    if spec.training_preserve or spec.exporter == "dynamo":
        assert hist.get("BatchNormalization", 0) == n_bn, f"{spec.name}: BatchNorm was folded"
    entry = {
        **desc,
        "what": spec.what,
        "source": "torch",
        "family": spec.family,
        "exporter": exporter_call,
        "exporter_short": {"torchscript": "TorchScript", "dynamo": "dynamo"}[spec.exporter]
        + (" PRESERVE" if spec.training_preserve else "")
        + (" optimize=False" if spec.exporter == "dynamo" and not spec.optimize else ""),
        "generator": f"torch {torch.__version__}, transformers {transformers.__version__}, "
        f"onnx {onnx.__version__}, onnxruntime {ort.__version__}",
        "script": "benchmarks/corpus/make_torch_models.py",
        "layers": spec.layers,
        "config": spec.config,
        "expected": spec.expected,
        "npz": f"{spec.name}.npz",
        "samples": layout,
        "max_abs_err": worst,
        "tolerance": {"atol": spec.atol, "rtol": spec.rtol},
        "min_output_std": out_std,
    }
    print(
        f"{spec.name}: {desc['node_count']} nodes, {desc['size_bytes'] / 1024:.0f} KiB, "
        f"max abs err {worst:.2e}, {time.time() - t0:.1f}s (export {t_export:.1f}s)",
        flush=True,
    )
    return entry


NOTES = [
    "Torch models: `torch.onnx.export` on torch 2.13.0 CPU with transformers 5; BERT/GPT-2 "
    "take `input_ids` + `attention_mask` (int64, dims `batch`, `sequence`); the npz samples "
    "include right-padded rows and shapes other than the export shape.",
    "`bert_dynamo18.onnx` (dynamo, opset 18, optimize=False) already contains "
    "LayerNormalization nodes (opset 18 has the op), GELU as Erf arithmetic and many Identity "
    "nodes; `bert_ts14`/`gpt2_ts14`/`vit_ts14`/`conv1d_ln_gelu_x6_ts14` have LayerNorm "
    "decomposed (ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div/Mul/Add); the `_ts17` ones have "
    "LayerNormalization.",
    "Dynamo models (`*_dynamo18.onnx`): the per-node `pkg.torch.onnx.stack_trace` metadata "
    "(absolute paths of the exporting machine, ~40% of the file) was removed to stay under "
    "2 MB; all other node metadata_props (namespace, class_hierarchy, fx_node, name_scopes) "
    "and the graph metadata_props are as the exporter wrote them.",
    "All-zero Linear biases of the transformers models (their init) got small noise: "
    "otherwise the TorchScript exporter deduplicates the identical initializers into "
    "dozens of Identity nodes.",
    "`cnn_bn_dynamo18.onnx`: dynamo with optimize=False keeps BatchNormalization (15) but "
    "writes each Conv without bias through Shape/Expand/CastLike of a zero bias; the default "
    "optimize=True folds every BatchNorm into its Conv (checked, not committed).",
    "`cnn_bn_ts14`/`mobilenetv2_ts14` were exported with `training=TrainingMode.PRESERVE` "
    "(module in eval mode) so BatchNormalization nodes remain; the script asserts they do.",
]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", choices=("test", "bench"), default="test")
    ap.add_argument(
        "--out",
        type=Path,
        default=None,
        help="output folder (default tests/models for test, "
        "benchmarks/.cache/corpus/bench for bench)",
    )
    ap.add_argument("--only", default="", help="comma-separated model names")
    ap.add_argument("--list", action="store_true", help="list model names and exit")
    args = ap.parse_args(argv)
    out = args.out or (cc.TEST_MODELS if args.size == "test" else cc.BENCH_CACHE / "bench")
    out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(2)

    gen = torch.Generator().manual_seed(SEED)
    specs = [s for fam in FAMILIES for s in fam(args.size, gen)]
    if args.list:
        print("\n".join(s.name for s in specs))
        return 0
    only = {x for x in args.only.split(",") if x}
    unknown = only - {s.name for s in specs}
    if unknown:
        ap.error(f"unknown models: {sorted(unknown)}")
    entries = []
    failures = []
    for spec in specs:
        if only and spec.name not in only:
            continue
        try:
            entries.append(run_spec(spec, out, torch.Generator().manual_seed(SEED)))
        except Exception as e:  # keep going; report at the end
            failures.append((spec.name, f"{type(e).__name__}: {e}"))
            print(f"{spec.name}: FAILED {type(e).__name__}: {e}", flush=True)
    cc.set_notes(out, "torch", NOTES)
    cc.update_manifest(out, entries)
    for name, err in failures:
        print(f"FAILED {name}: {err[:2000]}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
