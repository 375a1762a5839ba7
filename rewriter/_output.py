"""Console output of the CLI: progress display, summaries, warnings, verification reports."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from rewriter._api import RewriteResult, rewrite
from rewriter._errors import Diagnostic
from rewriter._manager import ProgressCallback
from rewriter.dsl import _ast as ast


@contextlib.contextmanager
def progress(enabled: bool = True) -> Iterator[ProgressCallback | None]:
    """A live progress line on stderr (only when stderr is a terminal)."""
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
        task = bar.add_task("rewriting", total=None)

        def update(applied: int, pending: int) -> None:
            bar.update(
                task, description=f"rewriting: {applied} rewrites applied, {pending} nodes queued"
            )

        yield update


def print_warnings(warnings: Sequence[Diagnostic]) -> None:
    """Rule-file warnings, rendered like compiler warnings."""
    for warning in warnings:
        print(warning.render(), file=sys.stderr)


def print_summary(result: RewriteResult, out_path: Path) -> None:
    """One line: node counts, rewrites, where the output went."""
    applied = sum(1 for e in result.trace.entries if e.kind == "rule")
    passes = sum(1 for e in result.trace.entries if e.kind == "pass")
    changes = f"{applied} rewrites" + (f", {passes} pass changes" if passes else "")
    print(
        f"{result.nodes_before} -> {result.nodes_after} nodes, {changes} "
        f"({result.trace.stop_reason.value}); wrote {out_path}"
    )


def verify_and_bisect(
    source: Path, result: RewriteResult, ruleset: ast.RuleSet, args: argparse.Namespace
) -> Any:
    """Check the result against the source; on a mismatch, name the first guilty rewrite."""
    from rewriter.verify import check_equivalence, find_first_bad

    verdict = check_equivalence(source, result.model, examples=args.examples, seed=args.seed)
    print(verdict.render_table())
    if verdict.ok:
        return verdict
    rule_entries = [e for e in result.trace.entries if e.kind == "rule"]
    if verdict.counterexample is None or not rule_entries:
        return verdict

    def prefix(k: int) -> Any:
        return rewrite(
            source,
            ruleset,
            replay_limit=k,
            exclude_rules=args.exclude_rule,
            target_opset=args.target_opset,
            add_opsets=getattr(args, "opsets_to_add", None),
        ).model

    bad = find_first_bad(len(rule_entries), prefix, source, verdict.counterexample)
    if bad is not None and 1 <= bad <= len(rule_entries):
        entry = rule_entries[bad - 1]
        print(
            f"first non-equivalent rewrite: #{bad} rule `{entry.rule}` ({entry.location}) "
            f"on {', '.join(entry.matched)}",
            file=sys.stderr,
        )
    return verdict
