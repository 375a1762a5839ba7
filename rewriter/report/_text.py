"""The text rendering of a recorded subgraph, used when Graphviz is not available.

One line per node in ONNX's text style, `outputs = Op (inputs)`, with the node name as a
comment and a diff-like mark in front: `-` matched (replaced by the rule), `+` created by
the rule, a space for a neighbour. Lines are wrapped in spans whose class is the role, so
the page colours them like the pictures.
"""

from __future__ import annotations

from collections.abc import Sequence

from rewriter.engine import SnapshotNode
from rewriter.report._html import Html, esc

_MARK = {"matched": "-", "created": "+", "context": " "}


def node_line(node: SnapshotNode) -> str:
    """`- y = Add (a, b)    # name` (plain text)."""
    outputs = ", ".join(node.outputs)
    inputs = ", ".join(node.inputs)
    return f"{_MARK.get(node.role, ' ')} {outputs} = {node.op} ({inputs})    # {node.name}"


def listing(nodes: Sequence[SnapshotNode]) -> Html:
    """A `<pre>` listing of the nodes, one escaped line each, coloured by role."""
    if not nodes:
        return Html('<p class="meta">(no nodes left: the matched nodes were removed)</p>')
    lines = [f'<span class="{esc(node.role)}">{esc(node_line(node))}</span>' for node in nodes]
    return Html('<pre class="listing">' + "\n".join(lines) + "</pre>")
