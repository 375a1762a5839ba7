"""Where onnxruntime's GPT-2 attention fusion computes something else, by kind of mask.

onnxruntime's transformer-fusion test `test_gpt2_attention_fusion` builds a GPT-2 block whose
scores are masked with `Where(causal, scores, -10000) + (1 - mask) * -10000` (a float
`input_mask` [batch, past + seq]); its optimizer writes `Attention(unidirectional = 1)` with
the mask cast to int32. This runs the model and the optimizer's result (both as the harvest
saved them) on random inputs of three kinds of mask and prints the largest difference per
kind:

* 0/1 masks where every query row sees an unpadded key (its own position or an earlier one);
* 0/1 masks where some row's visible keys are all padded;
* float masks in [0, 1].

    python benchmarks/peer_ort_fusion_harvest.py --source SCRATCH/transformers --out DIR \\
        test_attention_fusion
    python benchmarks/peer_ort_gpt2_masks.py DIR/6.onnx DIR/6.peer.onnx

(`cases.json` in DIR says which numbers are `test_gpt2_attention_fusion`.)
"""

from __future__ import annotations

import argparse
from collections import defaultdict

import numpy as np
import onnxruntime as ort

HIDDEN, HEADS = 64, 4


def _session(path: str) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])


def _kind(mask: np.ndarray, past: int, seq: int, binary: bool) -> str:
    if not binary:
        return "float masks in [0, 1]"
    padded_row = any(
        not mask[b, : past + i + 1].any() for b in range(mask.shape[0]) for i in range(seq)
    )
    if padded_row:
        return "0/1 masks, a row whose visible keys are all padded"
    return "0/1 masks, every row sees an unpadded key"


def probe(original: str, fused: str, trials: int, seed: int) -> dict[str, tuple[int, float]]:
    """Per kind of mask: inputs tried, largest |difference| of the first output."""
    a, b = _session(original), _session(fused)
    rng = np.random.default_rng(seed)
    worst: dict[str, tuple[int, float]] = defaultdict(lambda: (0, 0.0))
    for trial in range(trials):
        batch, seq, past = 2, int(rng.integers(1, 5)), int(rng.integers(0, 4))
        binary = trial % 2 == 0
        shape = (batch, past + seq)
        mask = rng.integers(0, 2, shape) if binary else rng.uniform(0, 1, shape)
        feeds = {
            "input_1": rng.standard_normal((batch, seq, HIDDEN)).astype(np.float32),
            "input_2": rng.standard_normal((batch, seq, HIDDEN)).astype(np.float32),
            "input_mask": mask.astype(np.float32),
            "past": rng.standard_normal((2, batch, HEADS, past, HIDDEN // HEADS)).astype(
                np.float32
            ),
        }
        difference = float(np.abs(a.run(None, feeds)[0] - b.run(None, feeds)[0]).max())
        kind = _kind(mask, past, seq, binary)
        count, largest = worst[kind]
        worst[kind] = (count + 1, max(largest, difference))
    return dict(worst)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("original", help="the test's model (N.onnx of the harvest)")
    parser.add_argument("fused", help="onnxruntime's optimizer's result (N.peer.onnx)")
    parser.add_argument("--trials", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    for kind, (count, largest) in probe(args.original, args.fused, args.trials, args.seed).items():
        print(f"{kind}: {count} inputs, largest |difference| {largest:.3g}")


if __name__ == "__main__":
    main()
