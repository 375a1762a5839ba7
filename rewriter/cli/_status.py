"""What the command line shows while it works: a live status line, and rule-file warnings.

The status line is drawn on stderr only when stderr is a terminal (with rich), so piped and
logged output stays clean.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator, Sequence

from rewriter._errors import Diagnostic
from rewriter.engine import ProgressCallback


@contextlib.contextmanager
def status_line(enabled: bool = True) -> Iterator[Callable[[str], None] | None]:
    """A live status line on stderr (only when stderr is a terminal): call it with a text."""
    if not enabled or not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    console = Console(file=sys.stderr)
    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task("", total=None)

        def show(text: str) -> None:
            bar.update(task, description=text)

        yield show


@contextlib.contextmanager
def progress(enabled: bool = True) -> Iterator[ProgressCallback | None]:
    """Rewriting progress on the status line: rewrites applied, nodes still queued."""
    with status_line(enabled) as show:
        if show is None:
            yield None
            return

        def update(applied: int, pending: int) -> None:
            show(f"rewriting: {applied} rewrites applied, {pending} nodes queued")

        yield update


@contextlib.contextmanager
def rewrite_and_budget_progress(
    enabled: bool = True,
) -> Iterator[tuple[ProgressCallback | None, Callable[[str], None] | None]]:
    """Rewriting progress and the accuracy budget's phases on one status line."""
    with status_line(enabled) as show:
        if show is None:
            yield None, None
            return

        def update(applied: int, pending: int) -> None:
            show(f"rewriting: {applied} rewrites applied, {pending} nodes queued")

        def budget(text: str) -> None:
            show(f"accuracy budget: {text}")

        yield update, budget


@contextlib.contextmanager
def verify_progress(enabled: bool, examples: int) -> Iterator[Callable[[int, int], None] | None]:
    """Verification progress on the status line: examples run, then shrinking runs."""
    with status_line(enabled) as show:
        if show is None:
            yield None
            return
        show(f"verifying: starting {examples} examples")

        def update(runs: int, shrink_runs: int) -> None:
            if shrink_runs:
                show(f"verifying: the models disagree; shrinking the inputs ({shrink_runs} runs)")
            else:
                show(f"verifying: {min(runs, examples)} of {examples} examples")

        yield update


def print_warnings(warnings: Sequence[Diagnostic]) -> None:
    """Rule-file warnings, rendered like compiler warnings."""
    for warning in warnings:
        print(warning.render(), file=sys.stderr)
