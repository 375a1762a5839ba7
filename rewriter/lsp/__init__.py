"""The language server for `.rw` rule files (`rewrite lsp`), and the editor files beside it.

`serve()` runs a Language Server Protocol server over stdin and stdout, built on pygls. It
reads rule files as the author types: diagnostics from the parser, the checks and lint (the
messages `rewrite lint` prints, did-you-mean notes included), hover (an op's schema at the
opsets the rule applies at, a built-in's signature, a named constraint's definition),
completion (ops, the op's attributes, built-ins, constraints, names in scope),
go-to-definition (named constraints, included files, a name's binding), formatting (as
`rewrite fmt`) and document symbols (one per rule and constraint). It is a client of the rule
language: it parses, checks and formats through `rewriter.dsl` and the standard vocabulary.

`editors/` holds a TextMate grammar for `.rw` files and a minimal VS Code extension that
starts `rewrite lsp`.
"""

from __future__ import annotations

from typing import BinaryIO

from rewriter.lsp._server import RuleLanguageServer, build_server


def serve(
    version: str = "", *, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None
) -> int:
    """Run the language server over stdin and stdout until the client says `exit`.

    Args:
        version: the server's version, as `initialize` reports it.
        stdin: the byte stream the client writes to (default: the process's stdin).
        stdout: the byte stream the client reads (default: the process's stdout).

    Returns:
        The exit code the protocol asks for: 0 when `shutdown` came before `exit`, else 1.
    """
    server = build_server(version)
    server.start_io(stdin, stdout)
    return 0 if server.shut_down else 1


__all__ = ["RuleLanguageServer", "build_server", "serve"]
