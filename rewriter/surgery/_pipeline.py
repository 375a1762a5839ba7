"""`pipeline.json`: the manifest of `rewrite split`'s stages, written, validated and chained.

The manifest's schema:

    {"format": "onnx-rewrite pipeline 1",
     "stages": [{"model": "stage_0.onnx", "inputs": [NAME, ...], "outputs": [NAME, ...]}, ...],
     "outputs": [NAME, ...]}

`load_pipeline` checks a manifest against it field by field (a one-line error names the
field: ``stages[1].model: expected a file name (a string), found a number``), then against
the stage models it names: each a file beside the manifest (no absolute path, no `..`), listed
once, whose graph inputs and outputs are the ones the manifest lists; each stage's inputs are
the pipeline's inputs or earlier stages' outputs, and every final output is some stage's.
Only then are the stages chained into one model (each grafted onto the ones before by name),
which `rewrite verify MODEL pipeline.json` compares with the original.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

import ir
from rewriter._errors import RewriteError

if TYPE_CHECKING:
    from rewriter.surgery._split import Stage

PIPELINE_FORMAT = "onnx-rewrite pipeline 1"


@dataclasses.dataclass(frozen=True, slots=True)
class StageEntry:
    """One stage as the manifest lists it: its model file and the value names it takes, gives."""

    model: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class Manifest:
    """A manifest that matches the schema (the stage files are not read yet)."""

    stages: tuple[StageEntry, ...]
    outputs: tuple[str, ...]


def write_pipeline(
    stages: Sequence[Stage],
    folder: str | os.PathLike[str],
    model_outputs: Sequence[str],
    *,
    progress: Callable[[int], None] | None = None,
) -> Path:
    """Save the stages as `stage_K.onnx` in `folder` and `pipeline.json` listing them."""
    root = Path(folder)
    entries = []
    for index, stage in enumerate(stages):
        name = f"stage_{index}.onnx"
        ir.save(stage.model, root / name)
        entries.append(
            {"model": name, "inputs": list(stage.inputs), "outputs": list(stage.outputs)}
        )
        if progress is not None:
            progress(index + 1)
    manifest = {"format": PIPELINE_FORMAT, "stages": entries, "outputs": list(model_outputs)}
    path = root / "pipeline.json"
    path.write_text(json.dumps(manifest, indent=2) + "\n")
    return path


def read_manifest(path: str | os.PathLike[str]) -> Manifest:
    """The manifest at `path`, checked against the schema.

    Raises:
        RewriteError: the file cannot be read, is not JSON, or a field does not match the
            schema (the message names the field: `stages[1].outputs[0]`).
    """
    manifest_path = Path(path)
    try:
        data = json.loads(manifest_path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise RewriteError(f"{manifest_path}: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RewriteError(f"{manifest_path}: not a pipeline manifest (not JSON: {exc})") from None
    try:
        return _manifest(data)
    except _SchemaError as exc:
        raise RewriteError(f"{manifest_path}: {exc.field}: {exc.problem}") from None


class _SchemaError(Exception):
    """A field of the manifest does not match the schema."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


def _manifest(data: object) -> Manifest:
    document = _object(data, "the manifest", {"format", "stages", "outputs"})
    found = document.get("format")
    if found != PIPELINE_FORMAT:
        shown = json.dumps(found) if found is not None else "nothing"
        raise _SchemaError("format", f"expected {json.dumps(PIPELINE_FORMAT)}, found {shown}")
    stages = _list(document.get("stages"), "stages")
    if not stages:
        raise _SchemaError("stages", "expected at least one stage, found an empty list")
    entries = []
    for index, item in enumerate(stages):
        field = f"stages[{index}]"
        stage = _object(item, field, {"model", "inputs", "outputs"})
        entries.append(
            StageEntry(
                _string(stage.get("model"), f"{field}.model", "a file name"),
                _names(stage.get("inputs"), f"{field}.inputs"),
                _names(stage.get("outputs"), f"{field}.outputs"),
            )
        )
    return Manifest(tuple(entries), _names(document.get("outputs"), "outputs"))


def _object(value: object, field: str, keys: set[str]) -> dict[str, object]:
    if not isinstance(value, dict):
        raise _SchemaError(field, f"expected an object, found {_kind(value)}")
    for key in sorted(keys):
        if key not in value:
            raise _SchemaError(f"{field}.{key}" if field != "the manifest" else key, "missing")
    unknown = sorted(set(value) - keys)
    if unknown:
        where = f"{field}.{unknown[0]}" if field != "the manifest" else unknown[0]
        raise _SchemaError(
            where, f"not a field of a pipeline manifest (expected {', '.join(sorted(keys))})"
        )
    return value


def _list(value: object, field: str) -> list[object]:
    if not isinstance(value, list):
        raise _SchemaError(field, f"expected a list, found {_kind(value)}")
    return value


def _string(value: object, field: str, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise _SchemaError(field, f"expected {what} (a non-empty string), found {_kind(value)}")
    return value


def _names(value: object, field: str) -> tuple[str, ...]:
    items = _list(value, field)
    names = tuple(_string(item, f"{field}[{i}]", "a value name") for i, item in enumerate(items))
    for index, name in enumerate(names):
        if name in names[:index]:
            raise _SchemaError(f"{field}[{index}]", f"{name!r} is listed twice")
    return names


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "an empty string" if not value else "a string"
    if isinstance(value, list):
        return "a list"
    return "an object" if isinstance(value, dict) else type(value).__name__


def load_pipeline(path: str | os.PathLike[str]) -> ir.Model:
    """The stages of a `pipeline.json` chained into one model with the pipeline's outputs.

    Raises:
        RewriteError: the manifest does not match the schema, or does not match the stage
            models it names (see the module docstring); the message names the field.
    """
    manifest_path = Path(path)
    manifest = read_manifest(manifest_path)
    models = _stage_models(manifest_path, manifest)
    _check_flow(manifest_path, manifest)
    chained = models[0]
    for stage in models[1:]:
        available = {value.name for value in chained.graph.values()}
        # Inputs no earlier stage gives are the pipeline's inputs: they stay inputs.
        connections = [
            ir.Connection(value.name, value.name)
            for value in stage.graph.inputs
            if not value.is_initializer() and value.name in available
        ]
        # Every value given so far stays an output: a later stage may read it.
        given = [value.name for value in chained.graph.outputs]
        try:
            chained = ir.graft(chained, stage, connections, keep_outputs=given)
        except ir.GraftError as exc:
            raise RewriteError(f"{manifest_path}: cannot chain the stages: {exc}") from None
    graph = chained.graph
    by_name = {value.name: value for value in graph.outputs}
    for index in reversed(range(len(graph.outputs))):
        graph.remove_output(index)
    for name in manifest.outputs:
        graph.add_output(by_name[name])
    return chained


def _stage_models(manifest_path: Path, manifest: Manifest) -> list[ir.Model]:
    """Each stage's model, checked against its manifest entry."""
    folder = manifest_path.parent
    seen: dict[str, int] = {}
    models = []
    for index, entry in enumerate(manifest.stages):
        field = f"{manifest_path}: stages[{index}].model"
        relative = PurePosixPath(entry.model)
        if relative.is_absolute() or Path(entry.model).is_absolute() or ".." in relative.parts:
            raise RewriteError(
                f"{field}: {entry.model!r} is not a file beside the manifest (a pipeline's "
                "stages are named relative to its folder, without `..`)"
            )
        key = os.path.normpath(entry.model)
        if key in seen:
            raise RewriteError(f"{field}: {entry.model!r} is already stage {seen[key]}")
        seen[key] = index
        file = folder / entry.model
        if not file.is_file():
            raise RewriteError(f"{field}: there is no file {entry.model!r} beside the manifest")
        model = ir.load(file)
        _same_names(
            f"{manifest_path}: stages[{index}].inputs",
            entry.model,
            "inputs",
            entry.inputs,
            [v.name for v in model.graph.inputs if not v.is_initializer()],
        )
        _same_names(
            f"{manifest_path}: stages[{index}].outputs",
            entry.model,
            "outputs",
            entry.outputs,
            [v.name for v in model.graph.outputs],
        )
        models.append(model)
    return models


def _same_names(
    field: str, model: str, role: str, listed: Sequence[str], actual: Sequence[str]
) -> None:
    missing = [name for name in listed if name not in actual]
    if missing:
        raise RewriteError(f"{field}: {model} has no graph {role[:-1]} named {missing[0]!r}")
    unlisted = [name for name in actual if name not in listed]
    if unlisted:
        raise RewriteError(f"{field}: {model}'s graph {role[:-1]} {unlisted[0]!r} is not listed")


def _check_flow(manifest_path: Path, manifest: Manifest) -> None:
    """Each value a stage reads was given by an earlier stage or is the pipeline's input."""
    given: dict[str, int] = {}
    for index, entry in enumerate(manifest.stages):
        for name in entry.inputs:
            # Not given yet: a pipeline input, unless a later stage gives it.
            if name not in given and any(name in e.outputs for e in manifest.stages[index:]):
                raise RewriteError(
                    f"{manifest_path}: stages[{index}].inputs: {name!r} is given only by a "
                    "later stage"
                )
        for name in entry.outputs:
            if name in given:
                raise RewriteError(
                    f"{manifest_path}: stages[{index}].outputs: {name!r} is already given by "
                    f"stage {given[name]}"
                )
            given[name] = index
    for position, name in enumerate(manifest.outputs):
        if name not in given:
            raise RewriteError(f"{manifest_path}: outputs[{position}]: no stage gives {name!r}")
