"""What the checks are told, as small frozen values shared by every entry point.

`InputOptions` (which inputs run) and `RuntimeOptions` (how models run) serve the
equivalence check, the accuracy measurements and the accuracy budget alike; `VerifyOptions`
adds the equivalence criterion and where its counterexample goes. The command line builds
these values from its flags; the API takes them as they are.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from rewriter.verification._compare import Criterion

Array = npt.NDArray[np.generic]

VerifyProgress = Callable[[int, int], None]
"""Called as `progress(examples run, shrinking runs among them)`."""


@dataclasses.dataclass(frozen=True, slots=True)
class InputOptions:
    """The inputs a check runs: the caller's `samples` first, then `examples` generated.

    Attributes:
        examples: how many inputs hypothesis generates (shrinking runs come on top); 0 runs
            the samples only.
        seed: hypothesis seed; the same seed gives the same inputs.
        samples: the caller's own inputs: mappings from input name to array, each one sample
            or several stacked along a new first axis.
        ranges: `{input name: (lo, hi)}` closed ranges for the generated values of an input.
        shapes: `{input name: dims}`: that input's shape, and through its symbolic dims the
            size of those dims in every input.
        dims: `{symbol: size}`: a symbolic dim's size in every input.
        special_values: draw NaN, infinities and dtype extremes in some examples.
        float_extremes: with `special_values`, also draw the float dtypes' largest
            magnitudes (check-rules does; in a whole model a fold that scales weights
            overflows elsewhere and a later Clip hides the infinity).

    Raises:
        ValueError: `examples` below 0, or 0 without samples.
        TypeError: `examples` or `seed` not an int.
    """

    examples: int = 20
    seed: int = 0
    samples: Sequence[Mapping[str, Array]] = ()
    ranges: Mapping[str, tuple[float, float]] = dataclasses.field(default_factory=dict)
    shapes: Mapping[str, Sequence[int]] = dataclasses.field(default_factory=dict)
    dims: Mapping[str, int] = dataclasses.field(default_factory=dict)
    special_values: bool = True
    float_extremes: bool = False

    def __post_init__(self) -> None:
        for label, number in (("examples", self.examples), ("seed", self.seed)):
            if isinstance(number, bool) or not isinstance(number, int):
                raise TypeError(f"{label} must be an int, got {type(number).__name__}")
        if self.examples < 0 or (self.examples == 0 and not self.samples):
            need = "an int >= 0 (with samples)" if self.samples else "a positive int"
            raise ValueError(f"examples must be {need}, got {self.examples!r}")


@dataclasses.dataclass(frozen=True, slots=True)
class RuntimeOptions:
    """How the models run.

    Attributes:
        ort_enable_all: also run the rewritten model with onnxruntime's graph optimizations
            (`ORT_ENABLE_ALL`, the way models are deployed) and judge it the same way.
        providers: onnxruntime execution providers (None: CPU).
    """

    ort_enable_all: bool = True
    providers: Sequence[str] | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class VerifyOptions:
    """How `check_equivalence` checks two models (every field has a default).

    Attributes:
        inputs: which inputs run (`InputOptions`).
        criterion: how float outputs are judged (`Criterion`: accuracy against float64 with
            a factor, or direct with tolerances).
        runtime: how the models run (`RuntimeOptions`).
        counterexample_path: where to save the counterexample (`.npz`); default
            `<rewritten stem>.counterexample.npz` beside the rewritten model, or a temporary
            folder for in-memory models.
        save_counterexample: False to keep the counterexample in memory only.
        progress: called as `progress(runs, shrink_runs)` after each example the two models
            ran (shrinking runs are counted apart: they follow a disagreement).
    """

    inputs: InputOptions = dataclasses.field(default_factory=InputOptions)
    criterion: Criterion = dataclasses.field(default_factory=Criterion)
    runtime: RuntimeOptions = dataclasses.field(default_factory=RuntimeOptions)
    counterexample_path: str | os.PathLike[str] | None = None
    save_counterexample: bool = True
    progress: VerifyProgress | None = None
