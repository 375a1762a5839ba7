"""The Proofs table of patterns/README.md, from what `rewrite prove --json` wrote.

    rewrite prove patterns/ --jobs 2 --timeout 10 --json prove.json
    python benchmarks/proofs_table.py prove.json --readme patterns/README.md

One row per rule file: the rules proved (¹ where only the first instances were, ² where only
up to rounding) and the unsupported ones counted by why. `--readme` replaces the table and
the counts line of the README's Proofs section; without it the section is printed.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import sys
from pathlib import Path

SECTION = "## Proofs (`rewrite prove patterns/`)"

_REASONS = [
    (re.compile(r"op `(?:[\w.]+\.)?(\w+)` has no semantics"), "no semantics for {0}"),
    (re.compile(r"needs what (.+?) computes?\b"), "needs what {0} compute"),
    (re.compile(r"decided no instance within the time"), "solver timeout"),
    (re.compile(r"could not decide"), "solver timeout"),
    (re.compile(r"no instance to prove up to rank (\d+)"), "no instance up to rank {0}"),
    (re.compile(r"built-in `(\w+)` on symbolic arguments"), "built-in `{0}` on symbolic values"),
    (re.compile(r"built-in `(\w+)` of"), "built-in `{0}` of a computed value"),
    (re.compile(r"too large to replay"), "counterexample too large to replay"),
]


def reason_class(reason: str) -> str:
    """A short name for why a rule is unsupported, to count rules by."""
    for pattern, text in _REASONS:
        found = pattern.search(reason)
        if found:
            return text.format(*(g.replace("`", "") for g in found.groups()))
    return reason.split(":")[0][:60]


def table(rules: list[dict[str, object]]) -> list[str]:
    """The markdown rows, files in name order."""
    by_file: dict[str, list[dict[str, object]]] = collections.defaultdict(list)
    for rule in rules:
        by_file[str(rule["file"])].append(rule)
    rows = ["| file | proved | unsupported (why) |", "| --- | --- | --- |"]
    for file in sorted(by_file):
        proved: list[str] = []
        why: collections.Counter[str] = collections.Counter()
        for rule in by_file[file]:
            if rule["status"] == "proved":
                marks = ("" if rule.get("complete", True) else "¹") + (
                    "" if rule.get("exact", True) else "²"
                )
                proved.append(f"`{rule['name']}`{marks}")
            elif rule["status"] == "unsupported":
                why[reason_class(str(rule["reason"]))] += 1
            else:
                proved.append(f"**`{rule['name']}` {rule['status']}**")
        unsupported = sum(why.values())
        detail = "; ".join(f"{n} {text}" for text, n in why.most_common())
        name = file.split("patterns/", 1)[-1]
        rows.append(
            f"| `{name}` | {', '.join(proved) or 'none'} | "
            f"{unsupported}{': ' + detail if detail else ''} |"
        )
    return rows


def counts(rules: list[dict[str, object]], seconds: float) -> str:
    status = collections.Counter(str(r["status"]) for r in rules)
    return (
        f"{len(rules)} rules: {status['proved']} proved, {status['refuted']} refuted, "
        f"{status['unsupported']} unsupported ({seconds:.0f} s)"
    )


def splice(readme: str, rows: list[str], summary: str) -> str:
    """`readme` with its Proofs table replaced and the counts line set to `summary`."""
    start = readme.index(SECTION)
    lines = readme[start:].split("\n")
    first = next(i for i, line in enumerate(lines) if line.startswith("| file | proved"))
    last = first
    while last < len(lines) and lines[last].startswith("|"):
        last += 1
    marker = next(
        (i for i, line in enumerate(lines[:first]) if line.startswith("Measured: ")), None
    )
    head = lines[:first]
    if marker is None:
        head = [*head[:-1], f"Measured: {summary}.", ""]
    else:
        head[marker] = f"Measured: {summary}."
    return readme[:start] + "\n".join([*head, *rows, *lines[last:]])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("json", type=Path, help="what `rewrite prove --json` wrote")
    parser.add_argument("--readme", type=Path, help="README whose Proofs table to replace")
    args = parser.parse_args(argv)
    report = json.loads(args.json.read_text())
    rules, seconds = report["rules"], float(report.get("seconds", 0.0))
    rows = table(rules)
    summary = counts(rules, seconds)
    if args.readme is None:
        sys.stdout.write("\n".join([summary, "", *rows]) + "\n")
        return 0
    args.readme.write_text(splice(args.readme.read_text(), rows, summary))
    print(f"{args.readme}: {summary}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
