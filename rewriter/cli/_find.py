"""`rewrite find MODEL -e 'MATCH_LINES' | --rules FILE`: list where rules match, rewrite nothing.

Model archaeology in the rule language: count the attention blocks
(`-e 'y = Softmax (x)' --count`), find every Conv with some padding
(`-e 'y = Conv <pads = [3, 3, 3, 3]> (x, w, b?)'`), every Reshape that feeds a Transpose
(`-e 'r = Reshape (x, s)' -e ...` or two lines in one `-e`). Each match is listed with its
rule and `file:line`, the matched nodes, and the bound values with their types.
"""

from __future__ import annotations

import argparse
import json

from rewriter._errors import RewriteError
from rewriter.cli import _files
from rewriter.surgery import find


def run(args: argparse.Namespace) -> int:
    """List (or count) the matches."""
    if not args.queries and not args.rules:
        raise RewriteError("give what to find with -e TEXT or --rules PATH")
    source = _files.input_model_path(args.model)
    if args.json and args.json != "-":
        _files.refuse_unsafe_targets(
            {"--json": args.json},
            protected={source: "the model"},
            models=[source],
            force=args.force,
        )
    found = find(source, args.rules or None, queries=args.queries, allow_python=args.allow_python)
    if args.json == "-":
        print(json.dumps([f.as_json() for f in found], indent=2))
        return 0
    if args.json:
        _files.write_text_atomically(
            args.json, json.dumps([f.as_json() for f in found], indent=2) + "\n"
        )
    if args.count:
        print(len(found))
        return 0
    for match in found:
        where = f" in {match.graph}" if match.graph else ""
        print(f"{match.rule} ({match.location}){where}: {', '.join(match.nodes)}")
        for binding in match.bindings:
            print(f"    {binding.render()}")
    print(f"{len(found)} match{'es' if len(found) != 1 else ''}")
    return 0
