"""`rewrite prove PATH...`: prove every rule for every input, or find where it is wrong.

Each rule's match, where-conditions and rewrite become SMT queries (`rewriter.prove`); a
rule is `proved`, `refuted` (with a counterexample onnxruntime confirms) or `unsupported`
(with the reason). Prints one table row per rule, then each refuted rule's counterexample,
and keeps each status in the user's cache folder for reports (`rewriter.prove.recall`);
`--json FILE` writes `{"rules": [{"name", "file", "line", "status", "counterexample",
"reason", ...}]}`. Exit codes: 0 no rule refuted, 1 some rule refuted, 2 bad usage or rules
that do not load.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.table import Table

    from rewriter.prove import RuleProof

EXIT_OK = 0
EXIT_REFUTED = 1
EXIT_USAGE = 2

_STYLES = {"proved": "green", "refuted": "bold red", "unsupported": "yellow"}


def run(args: argparse.Namespace) -> int:
    """Prove the rules; 0 when none is refuted, 1 when some is, 2 on bad usage."""
    from rich.console import Console

    from rewriter.api import load_rules, rule_files
    from rewriter.cli._files import STDOUT, human_stream, refuse_unsafe_targets, write_json
    from rewriter.dsl import user_cache
    from rewriter.prove import ProofStatus, ProveOptions, prove_rules, remember_all

    if args.json:
        protected = {Path(path): "a rules path" for path in args.paths}
        refuse_unsafe_targets({"--json": args.json}, protected=protected, force=args.force)
    # A folder means what it means to `rewrite --rules` and check-rules: its files without
    # the opt-in subfolders, which are proved when named directly.
    paths = [
        str(file)
        for path in args.paths
        for file in (rule_files(path) if Path(path).is_dir() else [Path(path)])
    ]
    ruleset = load_rules(*paths, allow_python=args.allow_python)
    known = {rule.name for rule in ruleset.rules}
    unknown = [name for name in args.rules if name not in known]
    if unknown:
        sys.stderr.write(f"rewrite prove: error: no rule named {', '.join(unknown)}\n")
        return EXIT_USAGE
    selected = [rule for rule in ruleset.rules if not args.rules or rule.name in args.rules]
    options = ProveOptions(timeout=args.timeout, max_rank=args.max_rank)
    start = time.perf_counter()
    proofs = prove_rules(selected, options, jobs=args.jobs, progress=_progress(len(selected)))
    seconds = time.perf_counter() - start
    # On record for reports (`rewrite MODEL --report` shows each fired rule's status).
    remember_all(selected, proofs, options, user_cache())
    out = human_stream(args.json)
    console = Console(file=out, highlight=False, width=None if out.isatty() else 200)
    console.print(_table(proofs))
    console.print(_summary(proofs, seconds, args.jobs), markup=False)
    refuted = [proof for proof in proofs if proof.status is ProofStatus.REFUTED]
    for proof in refuted:
        out.write("\n" + _counterexample_text(proof) + "\n")
    if args.json:
        payload = {"rules": [proof.as_json() for proof in proofs], "seconds": round(seconds, 3)}
        if args.json == STDOUT:
            sys.stdout.write(json.dumps(payload, indent=2) + "\n")
        else:
            write_json(args.json, payload)
    return EXIT_REFUTED if refuted else EXIT_OK


def _progress(total: int) -> Callable[[RuleProof], None] | None:
    """One stderr line per rule as it is decided, when someone watches or the run is long."""
    if total < 2 and not sys.stderr.isatty():
        return None
    done = 0

    def report(proof: RuleProof) -> None:
        nonlocal done
        done += 1
        sys.stderr.write(
            f"  [{done}/{total}] {proof.status.value:11} {proof.name} ({proof.seconds:.1f}s)\n"
        )
        sys.stderr.flush()

    return report


def _table(proofs: Sequence[RuleProof]) -> Table:
    """One row per rule: name, file:line, status, instances, seconds, reason or coverage."""
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("rule")
    table.add_column("location")
    table.add_column("status")
    table.add_column("instances", justify="right")
    table.add_column("seconds", justify="right")
    table.add_column("detail", overflow="fold")
    for proof in proofs:
        status = proof.status.value
        detail = proof.reason if status != "proved" else proof.coverage
        table.add_row(
            escape(proof.name),
            escape(f"{proof.file}:{proof.line}"),
            f"[{_STYLES[status]}]{status}[/]",
            str(proof.instances),
            f"{proof.seconds:.1f}",
            escape(_short(detail)),
        )
    return table


def _short(text: str, limit: int = 160) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _summary(proofs: Sequence[RuleProof], seconds: float, jobs: int) -> str:
    counts = collections.Counter(proof.status.value for proof in proofs)
    parts = ", ".join(f"{counts[status]} {status}" for status in _STYLES)
    proved = [proof for proof in proofs if proof.status.value == "proved"]
    partial = sum(not proof.complete for proof in proved)
    rounded = sum(not proof.exact for proof in proved)
    notes = [f"{partial} of the proved only on their first instances"] if partial else []
    notes += [f"{rounded} up to rounding"] if rounded else []
    processes = f", {jobs} processes" if jobs > 1 else ""
    text = f"{len(proofs)} rules: {parts}"
    text += f" ({'; '.join(notes)})" if notes else ""
    return f"{text} ({seconds:.1f}s{processes})"


def _counterexample_text(proof: RuleProof) -> str:
    """A refuted rule's counterexample: where, the values, and both sides' results."""
    found = proof.counterexample
    lines = [f"{proof.file}:{proof.line}: rule `{proof.name}` is refuted"]
    if found is None:
        return "\n".join([*lines, f"  {proof.reason}"])
    lines.append(f"  instance: {found.instance}")
    for title, values in (
        ("input", found.inputs),
        ("constant", found.constants),
        ("attribute", found.attributes),
    ):
        for name, value in values.items():
            dtype = found.dtypes.get(name, "")
            shape = found.shapes.get(name)
            typed = f" ({dtype}{'' if shape is None else ', shape ' + str(list(shape))})"
            lines.append(f"  {title} {name}{typed} = {_compact(value)}")
    where = f" at {list(found.index)}" if found.index else ""
    lines.append(
        f"  output {found.output}{where}: the match gives {found.original!r}, "
        f"the rewrite {found.rewritten!r}"
    )
    lines.append(f"  {found.detail}")
    return "\n".join(lines)


def _compact(value: object, limit: int = 200) -> str:
    text = json.dumps(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
