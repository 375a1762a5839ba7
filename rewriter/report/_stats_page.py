"""The model statistics report (`rewrite stats MODEL --report FILE`).

Sections: overview (IR version, producer, inputs, outputs, counts), opsets, nodes by op
type (chart), FLOPs by op type and weight histograms (when given a profile, which reads the
weights), parameters by dtype, parameters by initializer (top N table with shares), and the
largest tensors (chart; initializers and the tensors of Constant nodes).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import ir
from rewriter.api import Profile
from rewriter.api import collect_stats as collect
from rewriter.report._chart import Series, bar_chart, histogram
from rewriter.report._html import Html, esc, human_bytes, page, section, table


def _overview(stats: Mapping[str, object]) -> Html:
    parameters = int(str(stats["parameters"]))
    rows: list[tuple[str, object]] = [
        ("IR version", stats["ir_version"]),
        ("producer", stats["producer"] or "?"),
        ("nodes", stats["nodes"]),
        ("initializers", stats["initializers"]),
        ("parameters", f"{parameters:,}"),
        ("parameter bytes", human_bytes(int(str(stats["parameter_bytes"])))),
        ("external tensors", stats["external_tensors"]),
        ("inputs", Html("<br>".join(esc(x) for x in _strings(stats["inputs"])) or "-")),
        ("outputs", Html("<br>".join(esc(x) for x in _strings(stats["outputs"])) or "-")),
        ("functions", ", ".join(_strings(stats["functions"])) or "-"),
    ]
    return section("overview", "Overview", table(None, rows))


def _strings(value: object) -> list[str]:
    assert isinstance(value, list), "collect() returns lists of strings"
    return [str(v) for v in value]


def _opsets(stats: Mapping[str, object]) -> Html:
    opsets = stats["opsets"]
    assert isinstance(opsets, dict), "collect() returns opsets as a dict"
    rows = [(domain or "ai.onnx", version) for domain, version in opsets.items()]
    return section("opsets", "Opsets", table(("domain", "version"), rows, numeric=(1,)))


def _ops(stats: Mapping[str, object]) -> Html:
    ops = stats["ops"]
    assert isinstance(ops, dict), "collect() returns op counts as a dict"
    ordered = sorted(ops.items(), key=lambda kv: (-kv[1], kv[0]))
    chart = bar_chart(
        [op for op, _ in ordered],
        [Series("nodes", tuple(float(n) for _, n in ordered))],
        title="nodes by op type",
    )
    return section("ops", "Nodes by op type", chart)


def _by_dtype(stats: Mapping[str, object]) -> Html:
    by_dtype = stats["parameters_by_dtype"]
    assert isinstance(by_dtype, dict), "collect() returns parameters by dtype as a dict"
    rows = [(dtype, f"{count:,}") for dtype, count in by_dtype.items()]
    return section(
        "dtypes", "Parameters by dtype", table(("dtype", "parameters"), rows, numeric=(1,))
    )


def _by_initializer(stats: Mapping[str, object], top: int) -> Html:
    largest = stats["largest_tensors"]
    assert isinstance(largest, list), "collect() returns the largest tensors as a list"
    total = int(str(stats["parameters"])) or 1
    rows = []
    running = 0
    for item in largest:
        count = math.prod(item["shape"])
        running += count
        rows.append(
            (
                item["name"],
                item["dtype"],
                "x".join(map(str, item["shape"])) or "scalar",
                f"{count:,}",
                human_bytes(item["bytes"]),
                f"{count / total:.1%}",
                f"{running / total:.1%}",
                "external file" if item["external"] else "in the model",
            )
        )
    header = (
        "initializer",
        "dtype",
        "shape",
        "parameters",
        "bytes",
        "share",
        "cumulative",
        "stored in",
    )
    body = table(header, rows, numeric=(3, 4, 5, 6))
    return section("initializers", f"Parameters by initializer (top {top})", body)


def _tensor_sizes(model: ir.Model) -> list[tuple[str, int]]:
    """(name, bytes) of every initializer and every Constant node's tensor."""
    sizes: list[tuple[str, int]] = []
    for graph in model.graphs():
        for name, value in graph.initializers.items():
            tensor = value.const_value
            if tensor is not None:
                sizes.append((name, tensor.nbytes))
    for node in model.graph.all_nodes():
        if node.op_type != "Constant" or node.domain not in ("", "ai.onnx"):
            continue
        attribute = node.attribute("value")
        if isinstance(attribute, ir.Tensor):
            label = node.outputs[0].name if node.outputs else node.name
            sizes.append((f"{label} (Constant)", attribute.nbytes))
    return sizes


def _largest(model: ir.Model, top: int) -> Html:
    sizes = sorted(_tensor_sizes(model), key=lambda item: (-item[1], item[0]))[:top]
    if not sizes:
        return section("largest", "Largest tensors", '<p class="meta">no tensors</p>')
    chart = bar_chart(
        [name for name, _ in sizes],
        [Series("bytes", tuple(float(b) for _, b in sizes))],
        title="largest tensors",
        fmt=lambda v: human_bytes(int(v)),
    )
    note = '<p class="meta">Initializers and the tensors of Constant nodes, by size.</p>'
    return section("largest", f"Largest tensors (top {top})", note + chart)


def _flops(profile: Profile, top: int) -> Html:
    rows = [row for row in profile.by_op() if row[2]][:top]
    chart = bar_chart(
        [op for op, *_ in rows],
        [Series("FLOPs", tuple(float(flops) for _, _, flops, _ in rows))],
        title="FLOPs by op type",
        fmt=lambda v: f"{v:,.0f}",
    )
    note = (
        f'<p class="meta">Estimated for one run: {profile.flops:,} FLOPs in total, '
        f"{esc(human_bytes(profile.bytes_moved))} moved. MatMul counts 2·M·K·N, Conv "
        "2·outputs·taps, other ops one per output element; symbolic dims count as 1 unless "
        "<code>--input-shape</code> fixes them.</p>"
    )
    return section("flops", "FLOPs by op type", note + chart)


def _weights(profile: Profile, top: int) -> Html:
    """Histograms of the weights that stand out, else of the largest ones."""
    flagged = [w for w in profile.weights if w.flags]
    shown = flagged or sorted(profile.weights, key=lambda w: -w.elements)[: min(top, 6)]
    if not shown:
        return section("weights", "Weight distributions", "<p>No float weights.</p>")
    what = (
        f"{len(flagged)} of {len(profile.weights)} float weights stand out (NaN, inf, "
        "subnormal values, values beyond 8 robust standard deviations, or two modes)"
        if flagged
        else f"none of {len(profile.weights)} float weights stands out; the largest:"
    )
    items = []
    for weight in shown[:top]:
        flags = ", ".join(weight.flags) or "nothing unusual"
        items.append(
            f"<figure><figcaption><code>{esc(weight.name)}</code>: {esc(flags)}; "
            f"mean {weight.mean:.4g}, std {weight.std:.4g}, range [{weight.minimum:.4g}, "
            f"{weight.maximum:.4g}]</figcaption>"
            + histogram(weight.histogram, weight.edges, title=f"values of {weight.name}")
            + "</figure>"
        )
    return section("weights", "Weight distributions", f"<p>{esc(what)}</p>" + "".join(items))


def render_stats_report(
    model: ir.Model, *, name: str = "model", top: int = 20, profile: Profile | None = None
) -> str:
    """The statistics report of `model` as one self-contained HTML page.

    With a `profile` (`rewriter.api.profile`), also FLOPs by op type and the histograms of
    the weights.
    """
    stats = collect(model, top)
    parts: Sequence[str] = (
        _overview(stats),
        _opsets(stats),
        _ops(stats),
        *((_flops(profile, top), _weights(profile, top)) if profile is not None else ()),
        _by_dtype(stats),
        _by_initializer(stats, top),
        _largest(model, top),
    )
    subtitle = (
        f"{stats['nodes']} nodes, {int(str(stats['parameters'])):,} parameters "
        f"({human_bytes(int(str(stats['parameter_bytes'])))})"
    )
    return page(f"Model statistics: {name}", subtitle, "".join(parts))
