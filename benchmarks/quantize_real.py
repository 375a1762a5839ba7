"""Benchmark: `--quantize` on trained models (OCR, voice activity) against onnxruntime's quantizers.

Run: ``python benchmarks/fetch_quantize_models.py`` once, then
``python benchmarks/quantize_real.py [--models ocr vad] [--rounds 20]`` (espeak-ng and sox from
Debian synthesize the speech signals: ``apt-get install espeak-ng sox``).

Models (trained, shipped inside wheels; see fetch_quantize_models.py): the PP-OCRv4 text
detector and recognizer of rapidocr-onnxruntime, and Silero VAD (16 kHz, opset 15).

Per model, side by side: the float32 original; this project's ``--quantize int8`` with
``--calibration`` (and, for the VAD, with ``--accept``); onnxruntime's ``quantize_dynamic``
(QInt8 weights) and ``quantize_static`` (QDQ, QUInt8 activations, QInt8 weights, MinMax)
calibrated on the same samples, both after onnxruntime's ``quant_pre_process`` (what it
recommends, and what its quantizers need on these models). Columns: file size, latency on
onnxruntime with ORT_ENABLE_ALL on one intra-op thread (CPU time of the calling thread) and
on all cores (wall time), medians of interleaved runs, and the task's own accuracy:

* OCR: the text the package's own pipeline (RapidOCR) reads from images the calibration never
  saw, with this variant's detector and recognizer (whole images and lines the same as
  float's); the recognizer's argmax per CTC frame against float; the detector's probability
  map thresholded at 0.3 against float (pixels). The images are rendered text pages (1000 px
  wide, 6-8 lines at 22-28 px in DejaVu and Liberation fonts: the pipeline reads them at
  their own size), calibration and evaluation pages from different sentences; the text is
  also read from the small three-line images of the earlier runs (about 550 x 200 px, which
  the pipeline scales up about 4x).
* VAD: the speech segments the Silero pipeline (512-sample chunks with 64 samples of context,
  threshold 0.5, its minimum speech and silence durations) detects on a spoken signal
  (espeak-ng) the calibration never saw, against float; the largest change of a speech
  probability.

Prints a markdown section (the quantization part of benchmarks/RESULTS.md).
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np
import onnxruntime as ort
from fetch_quantize_models import CACHE, fetch  # beside this script

import rewriter
import rewriter.api

ROOT = Path(__file__).resolve().parent.parent

# Text pages as a scanner or a screenshot gives them: several lines of body text at 22-28 px on
# a page whose short side is at least the pipeline's 736 px, so that RapidOCR's detector reads
# it at its own size (limit_type "min"). (font file, size in px, lines)
CALIBRATION_PAGES = [
    (
        "dejavu/DejaVuSans.ttf",
        24,
        [
            "Minutes of the planning meeting",
            "Present: A. Novak, B. Ortiz, C. Lindqvist",
            "1. The budget for 2027 was approved.",
            "2. Room B-214 is booked every Tuesday at 10:30.",
            "3. Please bring the signed forms by Friday.",
            "Next meeting: 14 January, 09:00",
            "Contact: info@example.org",
        ],
    ),
    (
        "liberation/LiberationSerif-Regular.ttf",
        28,
        [
            "Lorem ipsum dolor sit amet, consectetur",
            "adipiscing elit, sed do eiusmod tempor",
            "incididunt ut labore et dolore magna",
            "aliqua. Ut enim ad minim veniam, quis",
            "nostrud exercitation ullamco laboris.",
            "Order #77341 shipped on 1998-03-12",
        ],
    ),
    (
        "liberation/LiberationSans-Regular.ttf",
        22,
        [
            "WARNING: high voltage area",
            "Authorized personnel only beyond this point.",
            "The weather is 23.5 C today with light wind.",
            "Shipping address: 14 Elm St., Springfield",
            "Invoice total 89.00 EUR, due in 30 days",
            "Phone: +44 20 7946 0958",
            "Calibration sample three of four",
            "Thank you for your order!",
        ],
    ),
    (
        "dejavu/DejaVuSerif.ttf",
        26,
        [
            "Chapter 4: Rivers and mountains",
            "The valley was quiet in the early morning.",
            "Fog lay over the water until nine o'clock,",
            "when the first boats left the harbour.",
            "Tickets cost 12.50 per adult and 6.00",
            "per child; groups of 10 or more pay less.",
        ],
    ),
]
EVALUATION_PAGES = [
    (
        "liberation/LiberationSans-Regular.ttf",
        26,
        [
            "Quantized models run faster",
            "The quick brown fox jumps over the lazy dog.",
            "INVOICE No. 58213",
            "Date: 2026-11-30   Customer ID: 4471",
            "Total due: $412.75 by May 3",
            "Payment by bank transfer only.",
        ],
    ),
    (
        "dejavu/DejaVuSans.ttf",
        22,
        [
            "Temperature 23.5 C, humidity 41%",
            "Version 3.14.159 build 2718",
            "onnx runtime speech recognition",
            "Release notes: faster start-up, fewer copies",
            "Known issue: the log rotates at midnight",
            "Support: help@example.com",
            "Updated on Monday at 08:15",
        ],
    ),
    (
        "liberation/LiberationSerif-Regular.ttf",
        28,
        [
            "Flight LH 402 departs at 18:45",
            "Gate B12, boarding now",
            "Passengers are kindly asked",
            "to have their boarding pass ready.",
            "Seat 23F, window, economy class",
            "Baggage allowance: 1 x 23 kg",
        ],
    ),
    (
        "dejavu/DejaVuSerif.ttf",
        24,
        [
            "Keep this door closed",
            "Emergency exit on the left",
            "Room capacity: 120 people",
            "In case of fire, do not use the lifts.",
            "Assembly point: north car park",
            "Fire warden: extension 3301",
            "Floor plan revised March 2026",
        ],
    ),
]
# The images of the earlier runs: three short lines on a small image (about 550 x 200 px), which
# the pipeline scales up about 4x (short side to 736 px); the float detector splits some of their
# lines in odd places there. Read with the page-calibrated models for comparison.
SMALL_IMAGE_TEXTS = [
    ["Quantized models run faster", "The quick brown fox jumps over", "INVOICE No. 58213"],
    ["Temperature 23.5 C humidity 41%", "Version 3.14.159 build 2718", "onnx runtime speech"],
    ["Total due: $412.75 by May 3", "Flight LH 402 departs 18:45", "Gate B12 boarding now"],
    ["Keep this door closed", "Emergency exit on the left", "Room capacity: 120 people"],
]
CALIBRATION_SPEECH = (
    "The speech activity detector listens to short chunks of audio. It marks where somebody "
    "talks, and where the signal holds only silence or noise."
)
EVALUATION_SPEECH = [
    "Hello, this is a test of the voice activity detector.",
    "It should find three separate stretches of speech in this recording.",
    "Quantized models must still hear every word.",
]
SAMPLE_RATE = 16000
CHUNK = 512
CONTEXT = 64


# ---------------------------------------------------------------------------------------- tools

Tool = Callable[[Path, Path, list[dict[str, np.ndarray]]], None]
"""Writes the quantized model of a model file, given calibration samples."""


def ours(accept: str | None = None) -> Tool:
    """`rewrite MODEL --quantize int8 --calibration SAMPLES [--accept ...]` through the API."""

    def run(source: Path, target: Path, samples: list[dict[str, np.ndarray]]) -> None:
        budget = None
        if accept is not None:
            budget = rewriter.api.AccuracyBudget(
                (accept,), examples=0, samples=tuple(samples), jobs=1
            )
        options = rewriter.RewriteOptions(
            quantize="int8",
            calibration_samples=rewriter.api.CalibrationSamples(tuple(samples)),
            budget=budget,
        )
        result = rewriter.rewrite(source, options=options)
        if result.budget is not None and not result.budget.ok:
            raise RuntimeError(f"{source.name}: {result.budget.summary()}")
        rewriter_model = result.proto
        target.write_bytes(rewriter_model.SerializeToString())
        if result.speed is not None:
            print(f"  {source.name}: {result.speed.summary()}")
        for note in result.notes:
            print(f"  {source.name}: {note}")

    return run


def preprocessed(source: Path, target: Path) -> Path:
    """onnxruntime's recommended pre-processing before its quantizers (`quant_pre_process`:
    onnx shape inference and its graph optimizations, BatchNorm folded; its symbolic shape
    inference is skipped, as it does not finish on these models)."""
    from onnxruntime.quantization.shape_inference import quant_pre_process

    path = target.with_suffix(".pre.onnx")
    quant_pre_process(str(source), str(path), skip_symbolic_shape=True)
    return path


def their_dynamic(source: Path, target: Path, samples: list[dict[str, np.ndarray]]) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(preprocessed(source, target), target, weight_type=QuantType.QInt8)


def their_static(source: Path, target: Path, samples: list[dict[str, np.ndarray]]) -> None:
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.samples = iter(samples)

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.samples, None)

    quantize_static(
        preprocessed(source, target),
        target,
        Reader(),
        quant_format=QuantFormat.QDQ,
        activation_type=QuantType.QUInt8,
        weight_type=QuantType.QInt8,
    )


# ------------------------------------------------------------------------------------ timing


def session(path: Path, threads: int) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = threads
    options.log_severity_level = 3
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def latencies(
    paths: Mapping[str, Path], feeds: Mapping[str, np.ndarray], threads: int, rounds: int
) -> dict[str, float]:
    """Median milliseconds per run of each model, the models' runs interleaved.

    One thread: CPU time of the calling thread (onnxruntime runs the graph on it), which leaves
    out waiting for a core on a shared machine; more threads: wall time.
    """
    clock = time.thread_time if threads == 1 else time.perf_counter
    sessions = {name: session(path, threads) for name, path in paths.items()}
    for s in sessions.values():
        s.run(None, dict(feeds))
    times: dict[str, list[float]] = {name: [] for name in sessions}
    for _ in range(rounds):
        for name, s in sessions.items():
            start = clock()
            s.run(None, dict(feeds))
            times[name].append(clock() - start)
    return {name: 1000 * statistics.median(t) for name, t in times.items()}


@dataclasses.dataclass
class Row:
    """One model through one tool."""

    model: str
    tool: str
    path: Path
    seconds: float = 0.0
    size: int = 0
    one_thread: float = 0.0
    all_threads: float = 0.0
    task: dict[str, str] = dataclasses.field(default_factory=dict)


def build(
    name: str,
    source: Path,
    folder: Path,
    samples: list[dict[str, np.ndarray]],
    tools: Mapping[str, Tool],
) -> list[Row]:
    rows = [Row(name, "float32", source)]
    for tool, run in tools.items():
        target = folder / f"{name}.{tool.replace(' ', '_')}.onnx"
        start = time.perf_counter()
        run(source, target, samples)
        rows.append(Row(name, tool, target, time.perf_counter() - start))
    return rows


def time_rows(rows: list[Row], feeds: Mapping[str, np.ndarray], rounds: int) -> None:
    paths = {row.tool: row.path for row in rows}
    one = latencies(paths, feeds, 1, rounds)
    every = latencies(paths, feeds, os.cpu_count() or 1, rounds)
    for row in rows:
        row.size = row.path.stat().st_size
        row.one_thread, row.all_threads = one[row.tool], every[row.tool]


# --------------------------------------------------------------------------------------- OCR


def render(lines: Sequence[str], path: Path, size: int) -> None:
    """Black text on white, one line per entry (DejaVu Sans when installed)."""
    from PIL import Image, ImageDraw, ImageFont

    font_path = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")
    font = (
        ImageFont.truetype(str(font_path), size)
        if font_path.exists()
        else ImageFont.load_default(size)
    )
    width = 40 + int(size * 0.62 * max(map(len, lines)))
    height = 30 + int(size * 1.9) * len(lines)
    image = Image.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(image)
    for index, line in enumerate(lines):
        draw.text((20, 15 + int(size * 1.9) * index), line, fill="black", font=font)
    image.save(path)


def render_page(lines: Sequence[str], path: Path, font: str, size: int) -> None:
    """A text page: black lines on white, 1000 px wide, at least 780 px high (`font` under
    /usr/share/fonts/truetype, Debian's fonts-dejavu and fonts-liberation; DejaVu Sans or
    Pillow's own font when missing)."""
    from PIL import Image, ImageDraw, ImageFont

    fonts = Path("/usr/share/fonts/truetype")
    found = next((p for p in (fonts / font, fonts / "dejavu/DejaVuSans.ttf") if p.exists()), None)
    face = ImageFont.truetype(str(found), size) if found else ImageFont.load_default(size)
    step = int(size * 1.7)
    image = Image.new("RGB", (1000, max(780, 120 + step * len(lines))), "white")
    draw = ImageDraw.Draw(image)
    for index, line in enumerate(lines):
        draw.text((60, 60 + step * index), line, fill="black", font=face)
    image.save(path)


def ocr_engine(det: Path, rec: Path) -> object:
    from rapidocr_onnxruntime import RapidOCR

    return RapidOCR(det_model_path=str(det), rec_model_path=str(rec), intra_op_num_threads=1)


def read_text(engine: object, images: Sequence[Path]) -> list[list[str]]:
    found = []
    for image in images:
        result, _ = engine(str(image))  # type: ignore[operator]
        found.append([entry[1] for entry in result] if result else [])
    return found


@dataclasses.dataclass
class Captured:
    det: list[np.ndarray]
    rec: list[np.ndarray]


def capture_inputs(det: Path, rec: Path, images: Sequence[Path]) -> Captured:
    """The arrays RapidOCR feeds its detector and recognizer on these images.

    Recorded by wrapping the sessions' call (rapidocr_onnxruntime.utils.OrtInferSession), the
    only place the pipeline hands arrays to onnxruntime.
    """
    from rapidocr_onnxruntime.utils import infer_engine

    captured = Captured([], [])
    original = infer_engine.OrtInferSession.__call__

    def recording(self: object, array: np.ndarray) -> object:
        path = str(getattr(self, "session")._model_path)  # noqa: B009 - onnxruntime's own attribute
        if path == str(det):
            captured.det.append(array.copy())
        elif path == str(rec):
            captured.rec.append(array.copy())
        return original(self, array)

    infer_engine.OrtInferSession.__call__ = recording  # type: ignore[method-assign]
    try:
        read_text(ocr_engine(det, rec), images)
    finally:
        infer_engine.OrtInferSession.__call__ = original  # type: ignore[method-assign]
    return captured


def run_model(path: Path, array: np.ndarray) -> np.ndarray:
    options = ort.SessionOptions()
    options.log_severity_level = 3
    return ort.InferenceSession(str(path), options).run(None, {"x": array})[0]


def bench_ocr(models: Mapping[str, Path], folder: Path, rounds: int) -> list[Row]:
    det, rec = models["ocr_det.onnx"], models["ocr_rec.onnx"]
    calibration_pages, evaluation_pages, small_images = [], [], []
    for index, (font, size, lines) in enumerate(CALIBRATION_PAGES):
        calibration_pages.append(folder / f"calibration{index}.png")
        render_page(lines, calibration_pages[-1], font, size)
    for index, (font, size, lines) in enumerate(EVALUATION_PAGES):
        evaluation_pages.append(folder / f"evaluation{index}.png")
        render_page(lines, evaluation_pages[-1], font, size)
    for index, lines in enumerate(SMALL_IMAGE_TEXTS):
        small_images.append(folder / f"small{index}.png")
        render(lines, small_images[-1], 26 + 3 * index)
    calibration = capture_inputs(det, rec, calibration_pages)
    evaluation = capture_inputs(det, rec, evaluation_pages)
    tools = {"ours": ours(), "quantize_dynamic": their_dynamic, "quantize_static": their_static}
    det_rows = build("ocr det", det, folder, [{"x": x} for x in calibration.det], tools)
    rec_rows = build("ocr rec", rec, folder, [{"x": x} for x in calibration.rec], tools)
    time_rows(det_rows, {"x": evaluation.det[0]}, rounds)
    time_rows(rec_rows, {"x": evaluation.rec[0]}, rounds)
    references = {
        "pages": (evaluation_pages, read_text(ocr_engine(det, rec), evaluation_pages)),
        "small images": (small_images, read_text(ocr_engine(det, rec), small_images)),
    }
    det_reference = [run_model(det, x) > 0.3 for x in evaluation.det]
    rec_reference = [run_model(rec, x).argmax(-1) for x in evaluation.rec]
    for det_row, rec_row in zip(det_rows[1:], rec_rows[1:], strict=True):
        engine = ocr_engine(det_row.path, rec_row.path)
        for label, (images, reference) in references.items():
            text = read_text(engine, images)
            same = sum(a == b for a, b in zip(reference, text, strict=True))
            # Lines in reading order; a line split or joined shifts the rest (they count as read
            # differently).
            lines = sum(
                a == b
                for ref, got in zip(reference, text, strict=True)
                for a, b in zip(ref, got, strict=False)
            )
            total = sum(map(len, reference))
            column = f"OCR text, {label} (both models)"
            det_row.task[column] = f"{same}/{len(reference)} same ({lines}/{total} lines)"
            rec_row.task[column] = det_row.task[column]
            for ref, got in zip(reference, text, strict=True):
                if ref != got:
                    print(
                        f"  {det_row.tool}, {label}: float {ref}\n  {' ' * len(det_row.tool)}"
                        f"{' ' * len(label)}  reads {got}"
                    )
        maps = [
            float(np.mean((run_model(det_row.path, x) > 0.3) == ref))
            for x, ref in zip(evaluation.det, det_reference, strict=True)
        ]
        det_row.task["map@0.3 agrees (pages)"] = f"{100 * min(maps):.2f}% (worst page)"
        frames = [
            float(np.mean(run_model(rec_row.path, x).argmax(-1) == ref))
            for x, ref in zip(evaluation.rec, rec_reference, strict=True)
        ]
        rec_row.task["CTC argmax agrees (pages)"] = f"{100 * float(np.mean(frames)):.2f}% of frames"
    return det_rows + rec_rows


# --------------------------------------------------------------------------------------- VAD


def speak(texts: Sequence[str], path: Path, gaps: Sequence[float]) -> np.ndarray:
    """16 kHz float32 speech (espeak-ng, resampled by sox) with silences of `gaps` seconds."""
    if shutil.which("espeak-ng") is None or shutil.which("sox") is None:
        raise SystemExit("the VAD benchmark needs espeak-ng and sox: apt-get install espeak-ng sox")
    pieces = [np.zeros(int(gaps[0] * SAMPLE_RATE), np.float32)]
    for index, text in enumerate(texts):
        raw = path.with_suffix(f".{index}.wav")
        resampled = path.with_suffix(f".{index}.raw")
        subprocess.run(["espeak-ng", "-w", str(raw), text], check=True)
        subprocess.run(
            [
                "sox",
                str(raw),
                "-r",
                str(SAMPLE_RATE),
                "-c",
                "1",
                "-b",
                "16",
                "-e",
                "signed",
                "-t",
                "raw",
                str(resampled),
            ],
            check=True,
        )
        pieces.append(np.fromfile(resampled, np.int16).astype(np.float32) / 32768.0)
        pieces.append(np.zeros(int(gaps[min(index + 1, len(gaps) - 1)] * SAMPLE_RATE), np.float32))
    signal = np.concatenate(pieces)
    noise = np.random.default_rng(0).standard_normal(signal.shape).astype(np.float32)
    return signal + 0.003 * noise


def vad_feeds(signal: np.ndarray) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(input [1, 576], state [2, 1, 128]) per chunk, the state to be filled in by the caller."""
    context = np.zeros(CONTEXT, np.float32)
    for start in range(0, len(signal), CHUNK):
        chunk = signal[start : start + CHUNK]
        if len(chunk) < CHUNK:
            chunk = np.pad(chunk, (0, CHUNK - len(chunk)))
        window = np.concatenate([context, chunk])[None, :]
        context = window[0, -CONTEXT:]
        yield window, chunk


def vad_probabilities(
    path: Path, signal: np.ndarray, record: list[dict[str, np.ndarray]] | None = None
) -> np.ndarray:
    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.intra_op_num_threads = 1
    model = ort.InferenceSession(str(path), options)
    state = np.zeros((2, 1, 128), np.float32)
    rate = np.array(SAMPLE_RATE, np.int64)
    found = []
    for window, _ in vad_feeds(signal):
        feeds = {"input": window, "state": state, "sr": rate}
        if record is not None:
            record.append({k: v.copy() for k, v in feeds.items()})
        out, state = model.run(None, feeds)
        found.append(float(out[0, 0]))
    return np.asarray(found)


def speech_segments(probabilities: np.ndarray, samples: int) -> list[tuple[int, int]]:
    """Silero's get_speech_timestamps: threshold 0.5, min speech 250 ms, min silence 100 ms,
    30 ms padding (in samples)."""
    threshold, negative = 0.5, 0.35
    min_speech, min_silence, pad = 250 * 16, 100 * 16, 30 * 16
    segments: list[list[int]] = []
    triggered, start, temp_end = False, 0, 0
    for index, probability in enumerate(probabilities):
        position = index * CHUNK
        if probability >= threshold and temp_end:
            temp_end = 0
        if probability >= threshold and not triggered:
            triggered, start = True, position
            continue
        if probability < negative and triggered:
            temp_end = temp_end or position
            if position - temp_end < min_silence:
                continue
            if temp_end - start > min_speech:
                segments.append([start, temp_end])
            triggered, temp_end = False, 0
    if triggered and samples - start > min_speech:
        segments.append([start, samples])
    for index, segment in enumerate(segments):
        segment[0] = max(0, segment[0] - pad)
        segment[1] = min(samples, segment[1] + pad)
        if index and segments[index - 1][1] > segment[0]:
            middle = (segments[index - 1][1] + segment[0]) // 2
            segments[index - 1][1], segment[0] = middle, middle
    return [(a, b) for a, b in segments]


def bench_vad(models: Mapping[str, Path], folder: Path, rounds: int) -> list[Row]:
    vad = models["vad.onnx"]
    calibration_signal = speak([CALIBRATION_SPEECH], folder / "calibration_speech", [0.6, 0.8])
    evaluation_signal = speak(EVALUATION_SPEECH, folder / "evaluation_speech", [1.0, 1.2, 0.9, 1.0])
    recorded: list[dict[str, np.ndarray]] = []
    vad_probabilities(vad, calibration_signal, recorded)
    samples = recorded[::4]
    tools = {
        "ours": ours(),
        "ours --accept snr>=40": ours("snr>=40"),
        "ours --accept snr>=45": ours("snr>=45"),
        "quantize_dynamic": their_dynamic,
        "quantize_static": their_static,
    }
    rows = build("vad", vad, folder, samples, tools)
    time_rows(rows, recorded[len(recorded) // 2], rounds)
    reference = vad_probabilities(vad, evaluation_signal)
    expected = speech_segments(reference, len(evaluation_signal))
    rows[0].task["speech segments"] = f"{len(expected)} segments"
    for row in rows[1:]:
        probabilities = vad_probabilities(row.path, evaluation_signal)
        found = speech_segments(probabilities, len(evaluation_signal))
        verdict = "identical" if found == expected else f"DIFFERENT ({found})"
        row.task["speech segments"] = f"{len(found)} segments, {verdict}"
        row.task["largest probability change"] = (
            f"{float(np.abs(probabilities - reference).max()):.3f}"
        )
    return rows


# ---------------------------------------------------------------------------------------- main


def table(rows: list[Row]) -> list[str]:
    keys = list(dict.fromkeys(key for row in rows for key in row.task))
    header = [
        "model",
        "tool",
        "size (MB)",
        "latency 1 thread (ms)",
        "/ float",
        "latency all threads (ms)",
        "/ float",
        *keys,
        "tool time (s)",
    ]
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    base = {row.model: row for row in rows if row.tool == "float32"}
    for row in rows:
        first = base[row.model]
        cells = [
            row.model,
            row.tool,
            f"{row.size / 1e6:.2f}",
            f"{row.one_thread:.2f}",
            f"{row.one_thread / first.one_thread:.2f}",
            f"{row.all_threads:.2f}",
            f"{row.all_threads / first.all_threads:.2f}",
            *(row.task.get(key, "") for key in keys),
            f"{row.seconds:.1f}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["ocr", "vad"], choices=["ocr", "vad"])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--folder", type=Path, default=CACHE)
    parser.add_argument("--section", type=Path, help="also write the markdown section here")
    args = parser.parse_args()
    logging.disable(logging.WARNING)  # onnxruntime.quantization logs every layer
    models = fetch(args.folder)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="quantize-real-") as work:
        if "ocr" in args.models:
            rows += bench_ocr(models, Path(work), args.rounds)
        if "vad" in args.models:
            rows += bench_vad(models, Path(work), args.rounds)
        command = f"python benchmarks/quantize_real.py --models {' '.join(args.models)}"
        lines = [
            f"`{command} --rounds {args.rounds}`; onnxruntime {ort.__version__}, "
            f"{os.cpu_count()} cores (shared: medians of interleaved runs; one thread: CPU "
            "time of the calling thread, all threads: wall time).",
            "",
            *table(rows),
        ]
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if args.section is not None:
        args.section.write_text(text)


if __name__ == "__main__":
    main()
