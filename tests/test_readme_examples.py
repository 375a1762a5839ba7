"""Every example in the README and the command reference runs on the files the repository
ships.

The shell blocks of `README.md` and `rewriter/cli/README.md` are read as a user would copy
them: a command spans lines while a quote is open or a line ends with `\\`, `&&` chains
commands, `#` starts a comment. The `rewrite ...` and `python -c ...` commands run; set-up
commands (`pip`, `apt-get`, `cd`, `ln`, `npm`), the test suite and the benchmarks do not. Each block runs in a
folder of its own that sees the repository's `tests/` and `patterns/`, so its outputs land
there, and a block's commands run in order (a later one may read an earlier one's output).

Running them takes minutes, so the blocks are slow tests (CI runs a daily slice of those);
the default run checks that every example names files that exist and parses as the command
line parses it.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from rewriter.cli import _main as cli

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = (ROOT / "README.md", ROOT / "rewriter" / "cli" / "README.md")
SETUP = {"pip", "apt-get", "cd", "ln", "npm", "pytest"}
_BLOCK = re.compile(r"^```sh\n(.*?)^```", re.MULTILINE | re.DOTALL)


def _commands(block: str) -> list[list[str]]:
    """The commands of a shell block, each as its words, set-up and benchmarks left out."""
    commands: list[list[str]] = []
    pending = ""
    for line in block.splitlines():
        pending = f"{pending}\n{line}" if pending else line
        if pending.endswith("\\"):
            pending = pending[:-1]
            continue
        try:
            words = shlex.split(pending, comments=True)
        except ValueError:  # a quote still open: the command goes on
            continue
        pending = ""
        command: list[str] = []
        for word in [*words, "&&"]:
            if word != "&&":
                command.append(word)
                continue
            if command and _runs(command):
                commands.append(command)
            command = []
    assert not pending, f"an unterminated command: {pending!r}"
    return commands


def _runs(command: list[str]) -> bool:
    if command[0] in SETUP:
        return False
    if command[0] == "python" and command[1:2] != ["-c"]:
        return False  # the benchmarks
    assert command[0] in ("rewrite", "python"), f"an example of an unknown program: {command}"
    return True


def _blocks() -> list[tuple[str, list[list[str]]]]:
    found = []
    for document in DOCUMENTS:
        text = document.read_text(encoding="utf-8")
        for match in _BLOCK.finditer(text):
            commands = _commands(match.group(1))
            if commands:
                line = text.count("\n", 0, match.start()) + 1
                found.append((f"{document.relative_to(ROOT)}:{line}", commands))
    return found


BLOCKS = _blocks()


def test_the_documents_have_examples():
    assert len(BLOCKS) >= 6
    first = BLOCKS[0][1][0]
    assert first[:3] == ["rewrite", "--rules", "patterns/"]  # the README's first command


@pytest.mark.parametrize(("where", "commands"), BLOCKS, ids=[w for w, _ in BLOCKS])
def test_every_example_parses_and_names_shipped_files(where, commands):
    made: set[str] = set()
    for command in commands:
        if command[0] != "rewrite":
            made.update(re.findall(r"'([\w.]+\.npz)'", " ".join(command)))
            continue
        args = command[1:]
        name = args[0] if args and args[0] in cli.SUBCOMMANDS else None
        parser, _ = cli._build_parser(name)
        parsed = parser.parse_args(args[1:] if name else args)
        for word in args:
            if word.startswith(("tests/", "patterns/")):
                assert (ROOT / word).exists(), f"{where}: {word} is not shipped"
        for option in ("output", "json", "report"):
            value = getattr(parsed, option, None)
            if isinstance(value, str):
                made.add(value.rstrip("/"))
        for word in args:
            if word.endswith((".onnx", ".npz", ".json")) and not word.startswith(("tests/", "-")):
                stem = word.split("/")[0]
                assert word in made or stem in made, f"{where}: {word} is read before it is made"


@pytest.mark.slow
@pytest.mark.parametrize(("where", "commands"), BLOCKS, ids=[w for w, _ in BLOCKS])
def test_every_example_runs(where, commands, tmp_path):
    (tmp_path / "tests").symlink_to(ROOT / "tests")
    (tmp_path / "patterns").symlink_to(ROOT / "patterns")
    for command in commands:
        if command[0] == "rewrite":
            argv = [sys.executable, "-m", "rewriter", *command[1:]]
        else:
            argv = [sys.executable, *command[1:]]
        completed = subprocess.run(
            argv, cwd=tmp_path, capture_output=True, text=True, timeout=1800, check=False
        )
        assert completed.returncode == 0, (
            f"{where}: {shlex.join(command)} exited {completed.returncode}:\n"
            f"{completed.stdout[-2000:]}\n{completed.stderr[-2000:]}"
        )
