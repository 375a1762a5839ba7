"""`rewrite check-rules PATH...`: verify every rule on small models it matches.

For each rule, instances (small models the rule's match and where accept) are generated,
rewritten by the rule alone and compared with the originals on generated inputs. Prints one
table row per rule (verified, failed, not instantiable), then each failure's counterexample.
Exit codes: 0 no rule failed, 1 some rule failed (with `--strict`, or could not be
instantiated), 2 bad usage or rules that do not load.
"""

from __future__ import annotations

import argparse
import io
import random
import sys
import time
from pathlib import Path

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


def _progress(report: object) -> None:
    from rewriter.checkrules import RuleReport

    assert isinstance(report, RuleReport), "progress receives rule reports"
    sys.stderr.write(f"  {report.status.value:17} {report.name} ({report.seconds:.1f}s)\n")


def _sampled(names: list[str], count: int | None, seed: int) -> list[str]:
    if count is None or count >= len(names):
        return []
    return sorted(random.Random(seed).sample(names, count), key=names.index)


def _proofs(ruleset: object, names: list[str], args: argparse.Namespace) -> dict[str, str]:
    """`--prove`: each checked rule's `rewrite prove` status, by rule name."""
    from rewriter.dsl import user_cache
    from rewriter.prove import ProveOptions, prove_rules, remember_all
    from rewriter.rules import RuleSet

    assert isinstance(ruleset, RuleSet), "check-rules loads a rule set"
    selected = [rule for rule in ruleset.rules if not names or rule.name in names]
    options = ProveOptions(timeout=args.prove_timeout)
    proofs = prove_rules(selected, options, jobs=args.jobs)
    remember_all(selected, proofs, options, user_cache())
    return {proof.name: proof.status.value for proof in proofs}


def run(args: argparse.Namespace) -> int:
    """Check the rules; 0 when none failed, 1 when some failed, 2 on bad usage."""
    from rich.console import Console

    from rewriter.api import load_rules, rule_files
    from rewriter.checkrules import (
        CheckOptions,
        Status,
        check_passes,
        check_rules,
        check_rules_in_processes,
        report,
    )
    from rewriter.cli._files import (
        STDOUT,
        human_stream,
        refuse_unsafe_targets,
        write_text_atomically,
    )

    if args.json:
        # Checked before the (long) run, like the main command's side files.
        protected = {Path(path): "a rules path" for path in args.paths}
        refuse_unsafe_targets({"--json": args.json}, protected=protected, force=args.force)
    # A folder means what it means to `rewrite --rules`: its files without the opt-in
    # subfolders (loops/, ort/), which are checked when named directly.
    paths = [
        str(file)
        for path in args.paths
        for file in (rule_files(path) if Path(path).is_dir() else [Path(path)])
    ]
    ruleset = load_rules(*paths, allow_python=args.allow_python)
    known = [rule.name for rule in ruleset.rules]
    unknown = [name for name in args.rules if name not in known]
    if unknown:
        sys.stderr.write(f"rewrite check-rules: error: no rule named {', '.join(unknown)}\n")
        return EXIT_USAGE
    names = list(args.rules) or _sampled(known, args.sample, args.seed)
    from rewriter.engine import DEFAULT_PIPELINE

    options = CheckOptions(
        instances=args.instances,
        examples=args.examples,
        seed=args.seed,
        attempts=args.attempts,
        pipeline=DEFAULT_PIPELINE if args.passes == "default" else (),
    )
    start = time.perf_counter()
    progress = _progress if args.verbose else None
    if args.jobs > 1:
        selected = names or known
        reports = check_rules_in_processes(
            paths,
            selected,
            options,
            jobs=args.jobs,
            allow_python=args.allow_python,
            progress=progress,
        )
        if not names:
            reports.extend(check_passes(ruleset, reports, options))
    else:
        reports = check_rules(ruleset, options, names=names, progress=progress)
    proofs = _proofs(ruleset, names, args) if args.prove else None
    seconds = time.perf_counter() - start
    out = human_stream(args.json)
    console = Console(file=out, highlight=False, width=None if out.isatty() else 200)
    console.print(report.table(reports, proofs))
    console.print(report.summary(reports, seconds), markup=False)
    details = report.failures(reports)
    if details:
        out.write("\n" + details + "\n")
    if args.json:
        stream = io.StringIO()
        report.write_json(reports, stream, seed=args.seed, proofs=proofs)
        if args.json == STDOUT:
            sys.stdout.write(stream.getvalue())
        else:
            write_text_atomically(args.json, stream.getvalue())
    failed = any(r.status is Status.FAILED for r in reports)
    if args.strict:
        unchecked = [
            r.name
            for r in reports
            if r.status is Status.NOT_INSTANTIABLE and r.kind == "rule" and not r.by_tests
        ]
        if unchecked:
            sys.stderr.write(
                f"rewrite check-rules: --strict: not instantiated: {', '.join(unchecked)}\n"
            )
            failed = True
    return EXIT_FAILED if failed else EXIT_OK
