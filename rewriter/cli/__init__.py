"""The `rewrite` command line: the main rewrite job (`_rewrite`) and one module per subcommand.

Each command module exposes `add_arguments(parser)` and `run(args) -> int`; `_output` holds
what several commands print or write. Importing this package is cheap (argparse only), so the
command answers Ctrl-C while onnx and numpy are still loading.
"""

from __future__ import annotations

from rewriter.cli._main import main

__all__ = ["main"]
