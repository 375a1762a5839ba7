"""`rewrite verify ORIGINAL REWRITTEN`: compare two models on generated inputs.

Prints the per-output table (with `rich` on a terminal, plain text otherwise) and the
verdict. With `--accept METRIC>=VALUE` (repeatable) the models are measured instead
(`check_accuracy`: snr, cosine, max_rel, ... per output and over all outputs) and judged by
that budget; exit 1 then means outside the budget. The comparison options (criterion,
inputs, special values, optimization levels) are shared with `rewrite MODEL --verify`
(`add_comparison_options`, `verify_options`). `--counterexample` may not name either
model or their external data files. Exit
codes: 0 the models agree, 1 they disagree (the shrunk counterexample is saved and its path
printed), 2 bad usage or a model that cannot be loaded or compared (one line on stderr, from
the CLI's error handler). An existing `--counterexample` file is replaced only with `--force`;
the default `<rewritten>.counterexample.npz` replaces only an earlier counterexample.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, TextIO, TypeVar

import ir
from rewriter._errors import RewriteError
from rewriter.cli import _files, _status

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from rewriter.verification import (
        AccuracyResult,
        InputOptions,
        RuntimeOptions,
        VerifyOptions,
        VerifyProgress,
        VerifyResult,
    )

    Array = npt.NDArray[np.generic]

_V = TypeVar("_V")

EXIT_OK = 0
EXIT_MISMATCH = 1


# Options of the equivalence check that mean nothing for an accuracy budget (--accept).
_EQUIVALENCE_ONLY = {
    "rtol": "--rtol",
    "atol": "--atol",
    "counterexample": "--counterexample",
}
_EQUIVALENCE_DEFAULTS = {
    "compare": ("--compare", "accuracy"),
    "factor": ("--factor", 8.0),
    "special_values": ("--special-values/--no-special-values", True),
}


def refuse_equivalence_options(args: argparse.Namespace) -> None:
    """With --accept, options of the equivalence criterion are errors, not silently ignored.

    Raises:
        RewriteError: naming the first such option given.
    """
    given = [option for attribute, option in _EQUIVALENCE_ONLY.items() if getattr(args, attribute)]
    given += [
        option
        for attribute, (option, default) in _EQUIVALENCE_DEFAULTS.items()
        if getattr(args, attribute) != default
    ]
    if given:
        raise RewriteError(
            f"{given[0]} applies to the equivalence check; with --accept the result is "
            "measured against the accuracy budget instead"
        )


def input_options(args: argparse.Namespace) -> InputOptions:
    """The inputs the comparison options ask for (`--examples`, `--seed`, `--inputs`, ...).

    Raises:
        VerifyError: an input, shape or dim given twice, or an unreadable `--inputs` file.
    """
    from rewriter.verification import InputOptions

    return InputOptions(
        examples=args.examples,
        seed=args.seed,
        samples=tuple(load_samples(args.samples)),
        ranges=_once("--input", args.input_ranges),
        shapes=_once("--input-shape", args.input_shapes),
        dims=_once("--dim", args.dims),
        special_values=args.special_values,
    )


def runtime_options(args: argparse.Namespace) -> RuntimeOptions:
    """How the models run (`--no-ort-enable-all`)."""
    from rewriter.verification import RuntimeOptions

    return RuntimeOptions(ort_enable_all=args.ort_enable_all)


def verify_options(
    args: argparse.Namespace,
    *,
    counterexample: Path | None,
    progress: VerifyProgress | None = None,
) -> VerifyOptions:
    """The equivalence check the comparison options ask for.

    The counterexample goes to `counterexample` (kept in memory when None).

    Raises:
        VerifyError: an input, shape or dim given twice, or an unreadable `--inputs` file.
    """
    from rewriter.verification import Criterion, VerifyOptions

    return VerifyOptions(
        input_options(args),
        Criterion(args.compare, args.factor, args.rtol, args.atol),
        runtime_options(args),
        counterexample_path=counterexample,
        save_counterexample=counterexample is not None,
        progress=progress,
    )


def _once(option: str, pairs: list[tuple[str, _V]]) -> dict[str, _V]:
    from rewriter.verification import VerifyError

    found: dict[str, _V] = {}
    for name, value in pairs:
        if name in found:
            raise VerifyError(f"{option} {name} given twice")
        found[name] = value
    return found


def sample_files(paths: list[str], option: str = "--inputs") -> list[str]:
    """The .npz files `paths` name: a folder stands for the .npz files in it, sorted by name."""
    from rewriter.verification import VerifyError

    files: list[str] = []
    for path in paths:
        given = Path(path)
        if not given.is_dir():
            files.append(path)
            continue
        found = sorted(given.glob("*.npz"))
        if not found:
            raise VerifyError(f"{option} {path}: the folder holds no .npz file")
        files.extend(str(f) for f in found)
    return files


def load_samples(paths: list[str], option: str = "--inputs") -> list[dict[str, Array]]:
    """The arrays of `--inputs` (or `--calibration`), one mapping per file (never unpickled).

    Each path is an .npz file or a folder of them (`sample_files`).
    """
    import zipfile

    import numpy as np

    from rewriter.verification import VerifyError

    samples: list[dict[str, Array]] = []
    for path in sample_files(paths, option):
        try:
            loaded = np.load(path, allow_pickle=False)
            if not isinstance(loaded, np.lib.npyio.NpzFile):
                # A .npy file holds one unnamed array; the inputs need their names.
                raise VerifyError(
                    f"{option} {path}: not an .npz file (a .npy array has no input name; "
                    "save with numpy.savez(path, input_name=array))"
                )
            with loaded as data:
                samples.append({name: data[name] for name in data.files})
        except FileNotFoundError:
            raise VerifyError(f"{option} {path}: no such file") from None
        except (OSError, ValueError, zipfile.BadZipFile) as exc:
            raise VerifyError(f"{option} {path}: not a readable .npz file ({exc})") from None
    return samples


def counterexample_target(
    explicit: str | None,
    default: Path,
    *,
    force: bool,
    protected: dict[Path, str],
    models: list[Path],
) -> Path:
    """Where a counterexample goes: `explicit` (checked like every side file) or `default`.

    An explicit path never replaces a model, its data or an existing file without `force`,
    and its folder must exist. The default, named after the model, replaces only an earlier
    counterexample (an `.npz` archive).

    Raises:
        RewriteError: the path is refused, naming the option and the reason.
    """
    import zipfile

    if explicit is not None:
        path = Path(explicit)
        _files.refuse_unsafe_targets(
            {"--counterexample": explicit}, protected=protected, models=models, force=force
        )
        return path
    if default.exists() and not (default.is_file() and zipfile.is_zipfile(default)):
        raise RewriteError(
            f"{default} exists and is not an earlier counterexample; name another file with "
            "--counterexample"
        )
    return default


def print_result(result: VerifyResult | AccuracyResult, out: TextIO | None = None) -> None:
    """The table, its notes and the verdict: with `rich` on a terminal, plain text otherwise."""
    out = out or sys.stdout
    if out.isatty():
        from rich.console import Console

        console = Console(file=out, highlight=False)
        console.print(result.rich_table())
        for line in (*result.notes(), result.summary()):
            console.print(line, markup=False)
    else:
        out.write(result.render_table() + "\n")


def _run_accuracy(args: argparse.Namespace) -> int:
    """`--accept`: measure the rewritten model; 0 within the budget, 1 outside it."""
    from rewriter.verification import check_accuracy

    refuse_equivalence_options(args)
    if args.examples == 0 and not args.samples:
        raise RewriteError("--examples 0 measures nothing without --inputs")
    candidate: str | ir.Model = args.rewritten
    if Path(args.rewritten).suffix == ".json":
        from rewriter.surgery import load_pipeline

        candidate = load_pipeline(Path(args.rewritten))
    result = check_accuracy(
        args.original, candidate, args.accept, input_options(args), runtime_options(args)
    )
    print_result(result)
    return EXIT_OK if result.ok else EXIT_MISMATCH


def run(args: argparse.Namespace) -> int:
    """Compare the models; 0 when they agree, 1 when they do not."""
    from rewriter.verification import check_equivalence

    if args.accept:
        return _run_accuracy(args)
    from rewriter.verification import default_counterexample_path

    original, rewritten = Path(args.original), Path(args.rewritten)
    target = counterexample_target(
        args.counterexample,
        Path(default_counterexample_path(args.rewritten)),
        force=args.force,
        protected={original: "the original model", rewritten: "the rewritten model"},
        models=[original, rewritten],
    )
    if args.examples == 0 and not args.samples:
        raise RewriteError("--examples 0 checks nothing without --inputs")
    candidate: str | ir.Model = args.rewritten
    if rewritten.suffix == ".json":
        from rewriter.surgery import load_pipeline

        candidate = load_pipeline(rewritten)  # the stages chained into one model
    with _status.verify_progress(True, args.examples) as on_progress:
        options = verify_options(args, counterexample=target, progress=on_progress)
        result = check_equivalence(args.original, candidate, options)
    print_result(result)
    if result.ok:
        return EXIT_OK
    if result.counterexample_path is not None:
        sys.stdout.write(f"counterexample saved to {result.counterexample_path}\n")
    return EXIT_MISMATCH
