"""`rewrite lsp` in a real session: a JSON-RPC client talking to the server over pipes.

The client speaks the Language Server Protocol as an editor does (Content-Length framed
JSON-RPC on the server's stdin and stdout): initialize, open a document, ask for hover,
completion, definition, formatting and symbols, read the published diagnostics, then
shutdown and exit, and checks that the server process ends by itself with exit code 0.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from queue import Empty, Queue
from typing import Any

import pytest

TIMEOUT = 60.0


class Client:
    """A minimal LSP client over a `rewrite lsp` subprocess's pipes."""

    def __init__(self, root: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "rewriter", "lsp"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.messages: Queue[dict[str, Any]] = Queue()
        self.next_id = 0
        threading.Thread(target=self._read, daemon=True).start()
        result = self.request(
            "initialize",
            {"processId": None, "rootUri": root.as_uri(), "capabilities": {}},
        )
        self.capabilities = result["capabilities"]
        self.notify("initialized", {})

    def _read(self) -> None:
        stream = self.process.stdout
        assert stream is not None
        while True:
            headers: dict[str, str] = {}
            while True:
                line = stream.readline()
                if not line:
                    return
                if line in (b"\r\n", b"\n"):
                    break
                name, _, value = line.decode("ascii").partition(":")
                headers[name.strip().lower()] = value.strip()
            body = stream.read(int(headers["content-length"]))
            self.messages.put(json.loads(body))

    def _send(self, message: dict[str, Any]) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode("utf-8")
        assert self.process.stdin is not None
        self.process.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.process.stdin.flush()

    def notify(self, method: str, params: dict[str, Any]) -> None:
        self._send({"method": method, "params": params})

    def request(self, method: str, params: dict[str, Any] | None) -> Any:
        self.next_id += 1
        self._send({"id": self.next_id, "method": method, "params": params})
        while True:
            message = self._next()
            if message.get("id") == self.next_id and "method" not in message:
                assert "error" not in message, message
                return message.get("result")
            self._answer_server_request(message)

    def diagnostics(self, uri: str) -> list[dict[str, Any]]:
        """The next diagnostics published for `uri`."""
        while True:
            message = self._next()
            if message.get("method") == "textDocument/publishDiagnostics":
                if message["params"]["uri"] == uri:
                    return list(message["params"]["diagnostics"])
            else:
                self._answer_server_request(message)

    def _answer_server_request(self, message: dict[str, Any]) -> None:
        if "id" in message and "method" in message:  # e.g. client/registerCapability
            self._send({"id": message["id"], "result": None})

    def _next(self) -> dict[str, Any]:
        try:
            return self.messages.get(timeout=TIMEOUT)
        except Empty:
            stderr = self.process.stderr.read1(20000) if self.process.stderr else b""  # type: ignore[union-attr]
            raise AssertionError(f"no message from the server: {stderr!r}") from None

    def open(self, path: Path, text: str) -> str:
        uri = path.as_uri()
        self.notify(
            "textDocument/didOpen",
            {"textDocument": {"uri": uri, "languageId": "rw", "version": 1, "text": text}},
        )
        return uri

    def change(self, uri: str, text: str, version: int) -> None:
        self.notify(
            "textDocument/didChange",
            {"textDocument": {"uri": uri, "version": version}, "contentChanges": [{"text": text}]},
        )

    def at(self, uri: str, line: int, character: int) -> dict[str, Any]:
        return {"textDocument": {"uri": uri}, "position": {"line": line, "character": character}}

    def close(self) -> int:
        assert self.request("shutdown", None) is None
        self.notify("exit", None)  # type: ignore[arg-type]
        return self.process.wait(timeout=TIMEOUT)


@pytest.fixture
def client(tmp_path):
    started = Client(tmp_path)
    yield started
    if started.process.poll() is None:
        started.process.kill()
        started.process.wait()


def _position_of(text: str, needle: str, offset: int = 0) -> tuple[int, int]:
    """0-based (line, character) of `needle` in `text`, plus `offset` characters."""
    index = text.index(needle) + offset
    line = text.count("\n", 0, index)
    return line, index - (text.rfind("\n", 0, index) + 1)


RULES = """\
include "shared.rw"

# Fold y = LayerNorm into its parts... (a test file)
rule fuse_ln requires opset >= 17 {
  match {
    y = LayerNormalization <epsilon = eps> (x, s, b)
  }
  where {
    is_small(eps)
  }
  rewrite {
    y = LayerNormalization <epsilon = eps> (x, s, b)
  }
}

rule unknown_op: y = MatMull (a, _) => y = a
"""

SHARED = """\
# Epsilons the fusions accept.
constraint is_small(e) {
  e < 0.001
}
"""


def test_a_session_gives_diagnostics_hover_completion_definition_and_formatting(client, tmp_path):
    assert client.capabilities["hoverProvider"]
    (tmp_path / "shared.rw").write_text(SHARED)
    path = tmp_path / "rules.rw"
    path.write_text(RULES)
    uri = client.open(path, RULES)

    # Diagnostics: the unknown op on its own line, with the did-you-mean.
    (diagnostic,) = client.diagnostics(uri)
    line, character = _position_of(RULES, "MatMull")
    assert diagnostic["range"]["start"] == {"line": line, "character": character}
    assert diagnostic["range"]["end"] == {"line": line, "character": character + len("MatMull")}
    assert diagnostic["message"] == "unknown op `MatMull`; did you mean `MatMul`?"
    assert diagnostic["severity"] == 1

    # Hover on LayerNormalization: the opset-17 schema, its attributes and defaults.
    hover = client.request(
        "textDocument/hover", client.at(uri, *_position_of(RULES, "= LayerNormalization", 5))
    )
    text = hover["contents"]["value"]
    assert text.startswith("**LayerNormalization** (ai.onnx) — LayerNormalization-17")
    assert "- `epsilon` (float, default `1e-05`)" in text
    assert "this rule: opset >= 17" in text

    # Hover on the constraint call: its definition, from the included file.
    hover = client.request(
        "textDocument/hover", client.at(uri, *_position_of(RULES, "is_small", 2))
    )
    assert "constraint is_small(e) {\n  e < 0.001\n}" in hover["contents"]["value"]

    # Go to definition: from the constraint's use to its definition in the included file.
    location = client.request(
        "textDocument/definition", client.at(uri, *_position_of(RULES, "is_small(eps)", 1))
    )
    assert location["uri"] == (tmp_path / "shared.rw").resolve().as_uri()
    assert location["range"]["start"] == {"line": 1, "character": len("constraint ")}

    # Go to definition of the include: the file itself.
    location = client.request(
        "textDocument/definition", client.at(uri, *_position_of(RULES, "shared.rw"))
    )
    assert location["uri"] == (tmp_path / "shared.rw").resolve().as_uri()

    # Completion where an op goes, while the line is half typed (the file does not parse).
    typing = RULES.replace(
        "    y = LayerNormalization <epsilon = eps> (x, s, b)\n  }\n  where",
        "    y = Ma\n  }\n  where",
        1,
    )
    client.change(uri, typing, 2)
    assert client.diagnostics(uri)  # a syntax error now
    line, character = _position_of(typing, "y = Ma", len("y = Ma"))
    completion = client.request("textDocument/completion", client.at(uri, line, character))
    labels = {item["label"]: item for item in completion["items"]}
    assert "MatMul" in labels
    assert "LayerNormalization" in labels  # at opset >= 17
    assert "is_small" not in {i["label"] for i in completion["items"] if i["kind"] == 7}

    # Completion of attribute names inside `< >`.
    typing = RULES.replace("<epsilon = eps> (x, s, b)\n  }\n  where", "<ep", 1)
    client.change(uri, typing, 3)
    client.diagnostics(uri)
    line, character = _position_of(typing, "<ep", 3)
    completion = client.request("textDocument/completion", client.at(uri, line, character))
    assert {item["label"] for item in completion["items"]} == {"axis", "epsilon", "stash_type"}

    # Completion in a where line: built-ins, the included constraint, the rule's names.
    client.change(uri, RULES, 4)
    client.diagnostics(uri)
    line, character = _position_of(RULES, "    is_small(eps)", 4)
    completion = client.request("textDocument/completion", client.at(uri, line, character))
    labels = {item["label"] for item in completion["items"]}
    assert {"is_small", "is_const", "rank", "eps", "x"} <= labels
    assert "MatMul" not in labels

    # Document symbols: one per rule.
    symbols = client.request("textDocument/documentSymbol", {"textDocument": {"uri": uri}})
    assert [(s["name"], s["detail"]) for s in symbols] == [
        ("fuse_ln", "rule"),
        ("unknown_op", "rule"),
    ]

    assert client.close() == 0


def test_formatting_returns_the_layout_of_rewrite_fmt(client, tmp_path):
    messy = "# x*1 -> x\nrule   mul_one :y=Mul(x,1)=>y=x   where shape( y )==shape(x)\n"
    path = tmp_path / "messy.rw"
    uri = client.open(path, messy)
    assert client.diagnostics(uri) == []
    edits = client.request(
        "textDocument/formatting",
        {"textDocument": {"uri": uri}, "options": {"tabSize": 2, "insertSpaces": True}},
    )
    (edit,) = edits
    assert edit["range"]["start"] == {"line": 0, "character": 0}
    assert edit["newText"] == (
        "# x*1 -> x\nrule mul_one: y = Mul (x, 1) => y = x where shape(y) == shape(x)\n"
    )
    completed = subprocess.run(
        [sys.executable, "-m", "rewriter", "fmt", "--check", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert (
        completed.returncode == 2
    )  # the file on disk does not exist: nothing written by the server
    path.write_text(edit["newText"])
    completed = subprocess.run(
        [sys.executable, "-m", "rewriter", "fmt", "--check", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert client.close() == 0


def test_diagnostics_follow_the_text_as_it_is_typed(client, tmp_path):
    uri = client.open(tmp_path / "typing.rw", "rule r: y = Relu (x) => y = x\n")
    assert client.diagnostics(uri) == []
    client.change(uri, "rule r: y = Relu (x) => y = x +\n", 2)
    (syntax,) = client.diagnostics(uri)
    assert syntax["range"]["start"]["line"] == 0
    assert syntax["message"].startswith("expected an expression after `+`")
    client.change(uri, "rule r requires opset >= 7: y = Mul <axis = 1> (x, 1) => y = x\n", 3)
    (attribute,) = client.diagnostics(uri)
    assert attribute["message"].startswith("`Mul` has no attribute `axis` at opset >= 7")
    client.change(uri, "rule r: y = Relu (x) => y = x\nrule r: y = Relu (x) => y = x\n", 4)
    (duplicate,) = client.diagnostics(uri)
    assert duplicate["message"] == "duplicate rule name `r`"
    (note,) = duplicate["relatedInformation"]
    assert note["message"] == "`r` is first defined here"
    assert note["location"]["range"]["start"] == {"line": 0, "character": 5}
    assert client.close() == 0


def test_the_server_exits_with_1_on_exit_without_shutdown(tmp_path):
    started = Client(tmp_path)
    started.notify("exit", None)  # type: ignore[arg-type]
    assert started.process.wait(timeout=TIMEOUT) == 1
