"""The `rewrite` command line: the main rewrite job plus subcommands.

`rewrite [--rules PATH]... MODEL [-o OUT] ...` runs the rewrite; `rewrite SUBCOMMAND ...`
runs one of the tools below. Every subcommand lives in its own module `rewriter.cli._<name>`
exposing `add_arguments(parser)` and `run(args) -> int`. Exit codes: 0 ok, 1 a verification
failure, 2 bad usage, bad rules or bad model. Errors are one line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import logging
import sys
from collections.abc import Sequence


@dataclasses.dataclass(frozen=True, slots=True)
class Command:
    """One command: where its arguments are declared, where its job runs, its help line.

    The boundary that keeps start-up fast: `arguments` modules import argparse and the CLI's
    value parsers only, so `--help`, `--version` and usage errors never load onnx, numpy or
    onnxruntime; the `job` module (which does) is imported once the arguments have parsed.
    """

    arguments: str  # a module with `add_arguments(parser)`
    job: str  # a module with `run(args) -> int`
    help: str


def _command(name: str, help_text: str) -> Command:
    return Command(f"rewriter.cli._arguments.{name}", f"rewriter.cli._{name}", help_text)


# Subcommand name -> its command.
SUBCOMMANDS: dict[str, Command] = {
    "lint": _command("lint", "check .rw rule files and report located errors"),
    "fmt": _command("fmt", "format .rw rule files canonically"),
    "extract-rule": _command("extract_rule", "print a rule skeleton for a subgraph of a model"),
    "extract": _command("extract", "write the subgraph between some values as a runnable model"),
    "graft": _command("graft", "feed one model with another's values, as one model"),
    "split": _command("split", "cut a model into pipeline stages of balanced cost"),
    "find": _command("find", "list where rules or match lines match, without rewriting"),
    "stats": _command("stats", "summarize a model: opsets, op counts, parameters"),
    "verify": _command("verify", "compare two models on generated inputs"),
    "check-rules": _command("check_rules", "verify every rule on generated models"),
    "prove": _command("prove", "prove every rule for every input with an SMT solver"),
    "lsp": _command("lsp", "run the language server for .rw files (editors start it)"),
}
MAIN_COMMAND = _command("rewrite", "apply .rw rewrite rules to an ONNX model")

EXIT_OK = 0
EXIT_MISMATCH = 1
EXIT_ERROR = 2


class _Parser(argparse.ArgumentParser):
    """argparse that reports usage errors with exit code 2 and one line (its default)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        raise SystemExit(EXIT_ERROR)


def _build_parser(name: str | None) -> tuple[argparse.ArgumentParser, Command]:
    if name is None:
        command = MAIN_COMMAND
        parser = _Parser(
            prog="rewrite",
            description="Apply .rw rewrite rules to an ONNX model. Subcommands: "
            + ", ".join(SUBCOMMANDS)
            + " (run `rewrite SUBCOMMAND --help`).",
        )
    else:
        command = SUBCOMMANDS[name]
        parser = _Parser(prog=f"rewrite {name}", description=command.help)
    parser.add_argument(
        "-v", "--verbose", action="count", default=0, help="more logging (repeat for debug)"
    )
    parser.add_argument("--version", action=_VersionAction, help="print the version")
    importlib.import_module(command.arguments).add_arguments(parser)
    return parser, command


class _VersionAction(argparse.Action):
    """`--version`: print the versions and exit.

    The versions are looked up only when asked for: reading the installed packages' metadata
    would cost every other run tens of milliseconds.
    """

    def __init__(self, option_strings: Sequence[str], dest: str, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        sys.stdout.write(f"{parser.prog} {_version()}\n")  # on stdout, as argparse's own
        parser.exit()


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
        parser, command = _build_parser(name)
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
        job = importlib.import_module(command.job)  # onnx, numpy, ...: a second or so
        return int(job.run(args))
    except KeyboardInterrupt:
        sys.stderr.write("rewrite: interrupted\n")
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except Exception as exc:  # the last line of defence: one line, never a traceback
        from rewriter._errors import RuleError, describe_error
        from rewriter.cli._flags import FLAGS

        message, code = describe_error(exc, FLAGS)
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
