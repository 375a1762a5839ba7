"""`rewrite lsp`: the language server for `.rw` files over stdin and stdout.

Editors start it as a subprocess (see `rewriter/lsp/editors/`); it runs until the client
sends `shutdown` and `exit`. Logging goes to stderr, never to stdout (the protocol's channel).
"""

from __future__ import annotations

import argparse
import sys
from importlib import metadata

from rewriter._errors import RewriteError


def run(args: argparse.Namespace) -> int:
    """Serve until the client exits; returns 0 after `shutdown`, 1 on `exit` without it."""
    del args  # stdio is the only transport
    stdin = getattr(sys.stdin, "buffer", None)
    stdout = getattr(sys.stdout, "buffer", None)
    if stdin is None or stdout is None:
        raise RewriteError(
            "rewrite lsp talks to an editor over standard input and output, which are not "
            "byte streams here"
        )
    if sys.stdin.isatty():
        sys.stderr.write(
            "rewrite lsp: waiting for a language client on standard input (editors start "
            "this command; Ctrl-D ends it)\n"
        )
    from rewriter.lsp import serve

    try:
        version = metadata.version("onnx-rewrite")
    except metadata.PackageNotFoundError:
        version = ""
    return serve(version, stdin=stdin, stdout=stdout)
