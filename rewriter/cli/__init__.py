"""The `rewrite` command line: the main job (`_rewrite`) and one module per subcommand.

Each command module exposes `add_arguments(parser)` and `run(args) -> int`. Shared by the
commands: `_status` (the live status line and warnings), `_files` (input and output paths,
atomic writes, files that must not be replaced), `_arguments` (value parsers), `_summary`
(the one-line summary of a rewrite). Importing this package is cheap (argparse only), so the
command answers Ctrl-C while onnx and numpy are still loading.
"""

from __future__ import annotations

from rewriter.cli._main import main

__all__ = ["main"]
