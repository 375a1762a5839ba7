"""Subgraph pictures with Graphviz: DOT sources from trace snapshots, SVG from `dot`.

`snapshot_dot` turns the nodes a trace entry recorded (matched / created / context) into a
DOT digraph: matched nodes red, created nodes green, neighbours greyed and dashed, values
that come from or go to nodes outside the picture drawn as small grey ellipses. Node ids are
generated (`n0`, `v0`, ...); names appear only in labels and tooltips, escaped, so any node
name is safe.

`render_svgs` lays out many digraphs with one `dot -Tsvg` process (dot accepts a stream of
graphs and writes one SVG document per graph), which keeps a report with a hundred pictures
well under a second. It raises `GraphvizUnavailableError` when the Python binding or the `dot`
program is missing, so the caller can fall back to text.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Sequence

from rewriter.engine import SnapshotNode

INSTALL_HINT = (
    "`apt-get install graphviz` (the `dot` program) and "
    "`pip install 'onnx-rewrite[report]'` (its Python binding)"
)

_STYLE = {
    "matched": 'fillcolor="#fde0dc" color="#c62828" fontcolor="#000000"',
    "created": 'fillcolor="#e3f4e4" color="#2e7d32" fontcolor="#000000"',
    "context": (
        'fillcolor="#f5f5f5" color="#b0b0b0" fontcolor="#9a9a9a" style="rounded,filled,dashed"'
    ),
}
_EDGE_FOCUS = 'color="#555555"'
_EDGE_CONTEXT = 'color="#c8c8c8"'
_HEADER = (
    'graph [rankdir=TB nodesep=0.25 ranksep=0.3 bgcolor="transparent" fontsize=10 '
    'fontname="Helvetica,Arial,sans-serif"];\n'
    'node [shape=box style="rounded,filled" fontname="Helvetica,Arial,sans-serif" '
    'fontsize=10 height=0.3 margin="0.08,0.04"];\n'
    'edge [arrowsize=0.6 fontname="Helvetica,Arial,sans-serif" fontsize=8];\n'
)
_VALUE_STYLE = (
    'shape=ellipse style=filled fillcolor="#ffffff" color="#cccccc" fontcolor="#666666" '
    'fontsize=8 height=0.22 margin="0.04,0.02"'
)
_NAME_LIMIT = 30


class GraphvizUnavailableError(Exception):
    """Pictures cannot be drawn: the binding or `dot` is missing, or `dot` failed."""


def short_name(name: str, limit: int = _NAME_LIMIT) -> str:
    """The trailing `/`-separated parts of a name that fit in `limit` characters.

    `/model/encoder/layer.0/attention/self/query/MatMul` -> `attention/self/query/MatMul`.
    """
    parts = [p for p in name.split("/") if p]
    if not parts:
        return name
    kept = parts[-1]
    for part in reversed(parts[:-1]):
        candidate = f"{part}/{kept}"
        if len(candidate) > limit:
            break
        kept = candidate
    if len(kept) > limit:
        kept = "…" + kept[-(limit - 1) :]
    return kept


def _escape(text: str) -> str:
    """`text` for the inside of a DOT string, shown literally (no escString expansion)."""
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ")


def _quote(text: str) -> str:
    """A DOT double-quoted string showing `text` literally."""
    return f'"{_escape(text)}"'


def _label(*lines: str) -> str:
    """A multi-line DOT label, each line shown literally."""
    return '"' + "\\n".join(_escape(line) for line in lines) + '"'


class _Drawing:
    """The statements of one DOT digraph, with a node id per snapshot node and per value."""

    def __init__(self, nodes: Sequence[SnapshotNode]) -> None:
        self.nodes = nodes
        self.statements: list[str] = []
        self.values: dict[str, str] = {}
        self.producer = {out: f"n{i}" for i, n in enumerate(nodes) for out in n.outputs if out}
        self.consumed = dict.fromkeys(name for n in nodes for name in n.inputs if name)
        # With no matched or created node (a rewrite that only rewired users), the
        # neighbours' inputs are drawn: they show what the users read now.
        self.has_focus = any(n.role != "context" for n in nodes)

    def value_id(self, name: str) -> str:
        """The id of a value drawn on its own (it comes from or goes outside the picture)."""
        if name not in self.values:
            self.values[name] = f"v{len(self.values)}"
            self.statements.append(
                f"{self.values[name]} [label={_label(short_name(name))} "
                f"tooltip={_quote(name)} {_VALUE_STYLE}];\n"
            )
        return self.values[name]

    def add_node(self, index: int, node: SnapshotNode) -> None:
        """The node, its input edges and, for a matched or created node, its loose outputs."""
        focus = node.role != "context"
        style = _STYLE.get(node.role, _STYLE["context"])
        self.statements.append(
            f"n{index} [label={_label(node.op, short_name(node.name))} "
            f"tooltip={_quote(f'{node.op} {node.name}')} {style}];\n"
        )
        edge_style = _EDGE_FOCUS if focus else _EDGE_CONTEXT
        for name in node.inputs:
            source = self.producer.get(name) if name else None
            if name and source is None and (focus or not self.has_focus):
                source = self.value_id(name)
            if source is not None:
                self.statements.append(
                    f"{source} -> n{index} [tooltip={_quote(name)} {edge_style}];\n"
                )
        for name in node.outputs if focus else ():
            if name and name not in self.consumed:
                self.statements.append(f"n{index} -> {self.value_id(name)} [{_EDGE_FOCUS}];\n")


def snapshot_dot(nodes: Sequence[SnapshotNode], title: str) -> str:
    """A DOT digraph for a recorded subgraph (see the module docstring for the drawing)."""
    drawing = _Drawing(nodes)
    for index, node in enumerate(nodes):
        drawing.add_node(index, node)
    return f"digraph {_quote(title)} {{\n{_HEADER}{''.join(drawing.statements)}}}\n"


_SVG = re.compile(r"<svg\b.*?</svg>", re.DOTALL)
_ID = re.compile(r'\bid="([^"]*)"')


def graphviz_missing() -> str | None:
    """Why pictures cannot be drawn here (the binding or `dot` is missing), or None."""
    try:
        import graphviz  # noqa: F401  (only whether it imports)
    except ImportError:
        return "the Python package `graphviz` is not installed"
    if shutil.which("dot") is None:
        return "the Graphviz program `dot` was not found on PATH"
    return None


def render_svgs(sources: Sequence[str]) -> list[str]:
    """Lay out every DOT source with one `dot -Tsvg` run; one inline `<svg>` per source.

    Raises:
        GraphvizUnavailableError: the `graphviz` package or the `dot` program is missing, or
            `dot` failed on the input.
    """
    if not sources:
        return []
    try:
        import graphviz
    except ImportError as exc:
        raise GraphvizUnavailableError("the Python package `graphviz` is not installed") from exc
    data = "".join(sources).encode("utf-8")
    try:
        output = graphviz.pipe("dot", "svg", data, quiet=True)
    except graphviz.ExecutableNotFound as exc:
        raise GraphvizUnavailableError("the Graphviz program `dot` was not found on PATH") from exc
    except graphviz.CalledProcessError as exc:
        raise GraphvizUnavailableError(f"`dot` failed: {exc}") from exc
    svgs = _SVG.findall(output.decode("utf-8", errors="replace"))
    if len(svgs) != len(sources):
        raise GraphvizUnavailableError(f"`dot` drew {len(svgs)} pictures for {len(sources)} graphs")
    return [
        _unique_ids(svg, f"g{index}-").replace("<svg ", '<svg class="subgraph" ', 1)
        for index, svg in enumerate(svgs)
    ]


def _unique_ids(svg: str, prefix: str) -> str:
    """Prefix the ids dot writes (`graph0`, `node1`, ...) so many SVGs can share a page."""
    return _ID.sub(lambda m: f'id="{prefix}{m.group(1)}"', svg)
