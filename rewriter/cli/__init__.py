"""The `rewrite` command line: the main job (`_rewrite`) and one module per subcommand.

Each command is two modules: `_arguments/<name>.py` declares its arguments
(`add_arguments(parser)`, argparse only) and `_<name>.py` runs it (`run(args) -> int`), imported
once the arguments have parsed; so `--help`, `--version` and usage errors never load onnx,
numpy or onnxruntime (`_main.Command`). Shared by the commands: `_status` (the live status line
and warnings), `_files` (input and output paths, atomic writes, files that must not be
replaced), `_arguments` (value parsers), `_summary` (the one-line summary of a rewrite).
"""

from __future__ import annotations

from rewriter.cli._main import main

__all__ = ["main"]
