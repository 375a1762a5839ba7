"""`rewrite lsp`: the language server for `.rw` files over stdin and stdout.

Editors start it as a subprocess (see `rewriter/lsp/editors/`); it runs until the client
sends `shutdown` and `exit`. Logging goes to stderr, never to stdout (the protocol's channel).
"""

from __future__ import annotations

import argparse
from importlib import metadata


def run(args: argparse.Namespace) -> int:
    """Serve until the client exits; returns 0 after `shutdown`, 1 on `exit` without it."""
    del args  # stdio is the only transport
    from rewriter.lsp import serve

    try:
        version = metadata.version("onnx-rewrite")
    except metadata.PackageNotFoundError:
        version = ""
    return serve(version)
