// Starts `rewrite lsp` for .rw files (the command is the setting onnxRewrite.command).
const vscode = require("vscode");
const { LanguageClient } = require("vscode-languageclient/node");

let client;

function activate(context) {
  const [command, ...args] = vscode.workspace
    .getConfiguration("onnxRewrite")
    .get("command", ["rewrite", "lsp"]);
  client = new LanguageClient(
    "onnxRewrite",
    "onnx-rewrite rules",
    { command, args },
    { documentSelector: [{ scheme: "file", language: "rw" }] }
  );
  context.subscriptions.push(client);
  return client.start();
}

function deactivate() {
  return client ? client.stop() : undefined;
}

module.exports = { activate, deactivate };
