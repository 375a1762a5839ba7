"""The language server: pygls wiring of the analysis, hover, completion and formatting.

Every change to an open `.rw` buffer is analyzed at once (a parse and the checks take
milliseconds) and its diagnostics published; the last parse that succeeded is kept, so that
completion still knows the rule being typed. Positions are converted between the spans'
1-based characters and the client's position encoding by the document's codec.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from lsprotocol import types
from pygls import uris
from pygls.lsp.server import LanguageServer
from pygls.workspace import TextDocument
from pygls.workspace.position_codec import PositionCodec, ServerTextPosition, ServerTextRange

from rewriter import dsl
from rewriter._errors import Diagnostic, RuleError, Span
from rewriter.lsp._analysis import Analysis, Reader, analyze
from rewriter.lsp._completion import Completion, complete_at
from rewriter.lsp._hover import definition_at, hover_at

logger = logging.getLogger(__name__)

_SEVERITIES = {
    "error": types.DiagnosticSeverity.Error,
    "warning": types.DiagnosticSeverity.Warning,
    "note": types.DiagnosticSeverity.Information,
}
_KINDS = {
    "op": types.CompletionItemKind.Class,
    "attribute": types.CompletionItemKind.Property,
    "function": types.CompletionItemKind.Function,
    "constraint": types.CompletionItemKind.Interface,
    "value": types.CompletionItemKind.Variable,
    "keyword": types.CompletionItemKind.Keyword,
}


class RuleLanguageServer(LanguageServer):
    """A pygls server that remembers each open buffer's analysis and last good parse."""

    def __init__(self, version: str) -> None:
        super().__init__("rewrite-lsp", version)
        self.analyses: dict[str, Analysis] = {}
        self.parsed: dict[str, dsl.File] = {}
        self.shut_down = False  # the protocol's exit code: 0 after `shutdown`, else 1

    def analyze(self, uri: str) -> Analysis:
        """Analyze the open buffer `uri` and publish its diagnostics."""
        document = self.workspace.get_text_document(uri)
        analysis = analyze(_path(uri), document.source, self.read)
        self.analyses[uri] = analysis
        if analysis.file is not None:
            self.parsed[uri] = analysis.file
        diagnostics = [_diagnostic(d, document, self.read) for d in analysis.diagnostics]
        params = types.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics)
        self.text_document_publish_diagnostics(params)
        return analysis

    def read(self, path: Path) -> str:
        """A file's text: the open buffer's when the editor has it, else the disk's."""
        uri = uris.from_fs_path(str(path))
        if uri is not None and uri in self.workspace.text_documents:
            return self.workspace.get_text_document(uri).source
        return path.read_text(encoding="utf-8").removeprefix("\ufeff")

    def analysis(self, uri: str) -> Analysis:
        """The buffer's analysis (made now if the buffer was never analyzed)."""
        found = self.analyses.get(uri)
        return found if found is not None else self.analyze(uri)


def build_server(version: str) -> RuleLanguageServer:
    """A server with every feature registered; `start_io()` runs it over stdin/stdout."""
    server = RuleLanguageServer(version)

    @server.feature(types.SHUTDOWN)
    def shutdown(ls: RuleLanguageServer, params: None) -> None:
        ls.shut_down = True

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: RuleLanguageServer, params: types.DidOpenTextDocumentParams) -> None:
        ls.analyze(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: RuleLanguageServer, params: types.DidChangeTextDocumentParams) -> None:
        ls.analyze(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: RuleLanguageServer, params: types.DidSaveTextDocumentParams) -> None:
        ls.analyze(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: RuleLanguageServer, params: types.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        ls.analyses.pop(uri, None)
        ls.parsed.pop(uri, None)
        ls.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=uri, diagnostics=[])
        )

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    def hover(ls: RuleLanguageServer, params: types.HoverParams) -> types.Hover | None:
        document = ls.workspace.get_text_document(params.text_document.uri)
        line, col = _position(document, params.position)
        found = hover_at(ls.analysis(params.text_document.uri), line, col)
        if found is None:
            return None
        content = types.MarkupContent(kind=types.MarkupKind.Markdown, value=found.markdown)
        return types.Hover(contents=content, range=_range(found.span, document))

    @server.feature(
        types.TEXT_DOCUMENT_COMPLETION,
        types.CompletionOptions(trigger_characters=["<", "|", "(", ",", "="]),
    )
    def completion(ls: RuleLanguageServer, params: types.CompletionParams) -> types.CompletionList:
        uri = params.text_document.uri
        document = ls.workspace.get_text_document(uri)
        line, col = _position(document, params.position)
        proposals = complete_at(ls.analysis(uri), ls.parsed.get(uri), line, col)
        return types.CompletionList(is_incomplete=False, items=[_item(p) for p in proposals])

    @server.feature(types.TEXT_DOCUMENT_DEFINITION)
    def definition(ls: RuleLanguageServer, params: types.DefinitionParams) -> types.Location | None:
        document = ls.workspace.get_text_document(params.text_document.uri)
        line, col = _position(document, params.position)
        span = definition_at(ls.analysis(params.text_document.uri), line, col)
        if span is None:
            return None
        return _location(span, ls.read)

    @server.feature(types.TEXT_DOCUMENT_FORMATTING)
    def formatting(
        ls: RuleLanguageServer, params: types.DocumentFormattingParams
    ) -> list[types.TextEdit] | None:
        uri = params.text_document.uri
        document = ls.workspace.get_text_document(uri)
        try:
            formatted = dsl.format_file(document.source, _path(uri))
        except RuleError:
            return None  # the diagnostics already say why it does not parse
        if formatted == document.source:
            return []
        return [types.TextEdit(range=_whole(document), new_text=formatted)]

    @server.feature(types.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
    def symbols(
        ls: RuleLanguageServer, params: types.DocumentSymbolParams
    ) -> list[types.DocumentSymbol]:
        uri = params.text_document.uri
        document = ls.workspace.get_text_document(uri)
        parsed = ls.parsed.get(uri) or ls.analysis(uri).file
        return [] if parsed is None else _symbols(parsed, document)

    return server


def _symbols(file: dsl.File, document: TextDocument) -> list[types.DocumentSymbol]:
    """One symbol per rule (its name, and its header as detail), then named constraints."""
    found = []
    for item in file.items:
        if isinstance(item, dsl.Rule):
            kind, name_span = types.SymbolKind.Function, item.name_span
            detail = "rule" + (f" priority {item.priority}" if item.priority else "")
        elif isinstance(item, dsl.Constraint):
            kind, name_span = types.SymbolKind.Interface, item.name_span
            detail = "constraint"
        else:
            continue
        found.append(
            types.DocumentSymbol(
                name=item.name,
                kind=kind,
                detail=detail,
                range=_range(item.span, document),
                selection_range=_range(name_span, document),
            )
        )
    return found


def _item(proposal: Completion) -> types.CompletionItem:
    return types.CompletionItem(
        label=proposal.label, kind=_KINDS[proposal.kind], detail=proposal.detail or None
    )


def _path(uri: str) -> str:
    return uris.to_fs_path(uri) or uri


def _position(document: TextDocument, position: types.Position) -> tuple[int, int]:
    """The client's position as the spans' 1-based line and character column."""
    server = document.position_from_client_units(position)
    return server.line + 1, server.character + 1


def _range(span: Span, document: TextDocument) -> types.Range:
    return _convert(span, document.lines, document.position_codec)


def _convert(span: Span, lines: Sequence[str], codec: PositionCodec) -> types.Range:
    end_col = (
        span.end_col if (span.end_line, span.end_col) > (span.line, span.col) else span.col + 1
    )
    server_range = ServerTextRange(
        start=ServerTextPosition(span.line - 1, span.col - 1),
        end=ServerTextPosition(span.end_line - 1, end_col - 1),
    )
    return codec.range_to_client_units(lines, server_range)


def _location(span: Span, read: Reader) -> types.Location:
    """A span of any file as a location (its text read from the editor's buffer or disk)."""
    path = Path(span.path)
    try:
        lines = read(path).splitlines(keepends=True)
    except OSError:
        lines = []
    return types.Location(
        uri=uris.from_fs_path(str(path.resolve())) or span.path,
        range=_convert(span, lines, PositionCodec()),
    )


def _whole(document: TextDocument) -> types.Range:
    lines = document.lines
    end = types.Position(line=len(lines), character=0)
    return types.Range(start=types.Position(line=0, character=0), end=end)


def _diagnostic(diagnostic: Diagnostic, document: TextDocument, read: Reader) -> types.Diagnostic:
    related = [
        types.DiagnosticRelatedInformation(
            location=_location(note.span, read), message=note.message
        )
        for note in diagnostic.notes
    ]
    return types.Diagnostic(
        range=_range(diagnostic.span, document),
        message=diagnostic.message,
        severity=_SEVERITIES.get(diagnostic.severity, types.DiagnosticSeverity.Error),
        source="rewrite",
        related_information=related or None,
    )
