"""The `rewrite` command line: the main rewrite job plus subcommands.

`rewrite [--rules PATH]... MODEL [-o OUT] ...` runs the rewrite; `rewrite SUBCOMMAND ...`
runs one of the tools below. Every subcommand lives in its own module `rewriter.cli._<name>`
exposing `add_arguments(parser)` and `run(args) -> int`. Exit codes: 0 ok, 1 a verification
failure, 2 bad usage, bad rules or bad model. Errors are one line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence
from types import ModuleType

# Subcommand name -> (module, one-line help).
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "lint": ("rewriter.cli._lint", "check .rw rule files and report located errors"),
    "fmt": ("rewriter.cli._fmt", "format .rw rule files canonically"),
    "extract-rule": (
        "rewriter.cli._extract_rule",
        "print a rule skeleton for a subgraph of a model",
    ),
    "extract": (
        "rewriter.cli._extract",
        "write the subgraph between some values as a runnable model",
    ),
    "graft": ("rewriter.cli._graft", "feed one model with another's values, as one model"),
    "split": ("rewriter.cli._split", "cut a model into pipeline stages of balanced cost"),
    "find": ("rewriter.cli._find", "list where rules or match lines match, without rewriting"),
    "stats": ("rewriter.cli._stats", "summarize a model: opsets, op counts, parameters"),
    "verify": ("rewriter.cli._verify", "compare two models on generated inputs"),
    "check-rules": ("rewriter.cli._check_rules", "verify every rule on generated models"),
}
MAIN_MODULE = "rewriter.cli._rewrite"

EXIT_OK = 0
EXIT_MISMATCH = 1
EXIT_ERROR = 2


class _Parser(argparse.ArgumentParser):
    """argparse that reports usage errors with exit code 2 and one line (its default)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        raise SystemExit(EXIT_ERROR)


def _load(module_name: str) -> ModuleType:
    return importlib.import_module(module_name)


def _build_parser(name: str | None) -> tuple[argparse.ArgumentParser, ModuleType]:
    if name is None:
        module = _load(MAIN_MODULE)
        parser = _Parser(
            prog="rewrite",
            description="Apply .rw rewrite rules to an ONNX model. Subcommands: "
            + ", ".join(SUBCOMMANDS)
            + " (run `rewrite SUBCOMMAND --help`).",
        )
    else:
        module_name, help_text = SUBCOMMANDS[name]
        module = _load(module_name)
        parser = _Parser(prog=f"rewrite {name}", description=help_text)
    parser.add_argument(
        "-v", "--verbose", action="count", default=0, help="more logging (repeat for debug)"
    )
    parser.add_argument(
        "--version", action="version", version=f"%(prog)s {_version()}", help="print the version"
    )
    module.add_arguments(parser)
    return parser, module


def _version() -> str:
    """This package's version, and the onnx and onnxruntime it runs with."""
    from importlib import metadata

    def installed(name: str) -> str:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return "not installed"

    return (
        f"{installed('onnx-rewrite')} (onnx {installed('onnx')}, "
        f"onnxruntime {installed('onnxruntime')})"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `rewrite` console script; returns the process exit code."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    name = args_list[0] if args_list and args_list[0] in SUBCOMMANDS else None
    try:
        parser, module = _build_parser(name)  # imports onnx, numpy, ...: a second or so
    except KeyboardInterrupt:
        sys.stderr.write("rewrite: interrupted\n")
        return 130
    try:
        args = parser.parse_args(args_list[1:] if name else args_list)
    except SystemExit as exc:
        return int(exc.code) if isinstance(exc.code, int) else EXIT_ERROR
    level = logging.WARNING - 10 * min(args.verbose, 2)
    logging.basicConfig(level=level, format="%(levelname)s: %(message)s")
    try:
        return int(module.run(args))
    except KeyboardInterrupt:
        sys.stderr.write("rewrite: interrupted\n")
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except Exception as exc:  # the last line of defence: one line, never a traceback
        from rewriter._errors import RuleError, describe_error

        message, code = describe_error(exc)
        if isinstance(exc, RuleError):
            # Rendered diagnostics already read `path:line:col: error: ...`.
            sys.stderr.write(f"{message}\n")
        else:
            sys.stderr.write(f"rewrite: error: {message}\n")
        if args.verbose >= 2:
            raise
        return code


if __name__ == "__main__":
    raise SystemExit(main())
