"""The HTML of the rewrite report: sections, escaping, collapsing, skips, pictures, fallback."""

from __future__ import annotations

import dataclasses
import importlib.util
import re
import shutil
import sys

import pytest

import rewriter
from rewriter import SkipEntry
from rewriter.engine._trace import SnapshotNode, TraceEntry
from rewriter.report import ReportOptions, render_rewrite_report, write_rewrite_report
from rewriter.report._dot import short_name, snapshot_dot
from rewriter.report._html import esc, slug
from rewriter.report._rule_sections import application_kind, rule_kind
from rewriter.report._rule_source import find_rule_source
from tests.rewriter.report import _models as models

HAS_GRAPHVIZ = shutil.which("dot") is not None and importlib.util.find_spec("graphviz") is not None
needs_graphviz = pytest.mark.skipif(
    not HAS_GRAPHVIZ, reason="needs Graphviz: apt-get install graphviz; pip install graphviz"
)


@pytest.fixture(scope="module")
def chain_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("chain")
    source = models.save_chain(folder, layers=5)
    rules = models.write_rules(folder)
    result = rewriter.rewrite(source, [rules], rewriter.RewriteOptions(record_subgraphs=True))
    return source, result


def _applications(html: str) -> tuple[int, int]:
    """(open, collapsed) application blocks."""
    return html.count('<details class="app" open>'), html.count('<details class="app">')


def test_rewrite_runs_the_expected_rules(chain_run):
    _, result = chain_run
    assert result.trace.counts()["fuse_linear"] == 5
    assert result.trace.counts()["mul_one"] == 1
    assert result.ops_after == {"Gemm": 5}


def test_report_has_every_section(chain_run):
    source, result = chain_run
    html = render_rewrite_report(result, source=source)
    for section_id in ("summary", "timings", "ops", "rules", "skipped"):
        assert f'<section id="{section_id}">' in html
    assert 'id="rule-fuse_linear"' in html
    assert 'id="rule-mul_one"' in html
    # No verification ran, so there is no verification section.
    assert 'id="verification"' not in html
    # Node and parameter counts before and after.
    assert '<td>nodes</td><td class="num">11</td><td class="num">5</td>' in html


def test_report_shows_rule_source_with_its_location(chain_run):
    _, result = chain_run
    html = render_rewrite_report(result)
    location = next(e.location for e in result.trace.entries if e.rule == "fuse_linear")
    assert location.endswith("report_rules.rw:2")
    assert esc(location) in html
    assert "rule fuse_linear {" in html
    assert "# MatMul(a, B) + c -&gt; Gemm(a, B, c)" in html


def test_rule_source_includes_the_comment_above_and_ends_at_the_rule(chain_run):
    _, result = chain_run
    source = find_rule_source(result.ruleset, "fuse_linear")
    assert source is not None
    assert source.first_line == 1
    lines = source.text.splitlines()
    assert lines[0].startswith("# MatMul")
    assert lines[-1] == "}"
    one_line = find_rule_source(result.ruleset, "mul_one")
    assert one_line is not None
    assert one_line.text.splitlines() == [
        "# x * 1 -> x",
        models.RULES.splitlines()[-1],
    ]


def test_names_are_escaped_everywhere(chain_run):
    source, result = chain_run
    html = render_rewrite_report(result, source=source)
    assert models.NASTY not in html
    assert "&lt;b&gt;x&amp;y&lt;/b&gt;" in html


def test_names_are_escaped_in_text_fallback(chain_run, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    source, result = chain_run
    html = render_rewrite_report(result, source=source)
    assert models.NASTY not in html
    assert "&lt;b&gt;x&amp;y&lt;/b&gt;" in html


def test_applications_beyond_three_are_collapsed(chain_run):
    _, result = chain_run
    html = render_rewrite_report(result)
    # fuse_linear: 3 open + 2 collapsed; mul_one: 1 open.
    assert _applications(html) == (4, 2)
    section = html[html.index('id="rule-fuse_linear"') : html.index('id="rule-mul_one"')]
    assert _applications(section) == (3, 2)
    assert "#4 in" in section
    assert "#5 in" in section


def test_open_applications_option(chain_run):
    _, result = chain_run
    html = render_rewrite_report(result, options=ReportOptions(open_applications=1))
    assert _applications(html) == (2, 4)


def test_skipped_rules_are_listed_once_with_counts(chain_run):
    _, result = chain_run
    skips = (
        SkipEntry("fuse_attention", "attention.rw:3", "requires opset >= 23", "a"),
        SkipEntry("fuse_attention", "attention.rw:3", "requires opset >= 23", "b"),
        SkipEntry("fuse_attention", "attention.rw:3", "requires opset >= 23", "c"),
        SkipEntry("bad_rule", "bad.rw:1", "rolled back: <invalid> & broken", ""),
    )
    trace = dataclasses.replace(result.trace, skips=skips)
    html = render_rewrite_report(dataclasses.replace(result, trace=trace))
    skipped = html[html.index('<section id="skipped">') :]
    assert skipped.count("<td>fuse_attention</td>") == 1
    assert '<td class="num">3</td>' in skipped
    assert "<td>a, b, c</td>" in skipped
    assert "rolled back: &lt;invalid&gt; &amp; broken" in skipped


def test_report_without_skips_says_so(chain_run):
    _, result = chain_run
    html = render_rewrite_report(result)
    assert "no rule was skipped" in html


def test_op_chart_lists_ops_before_and_after(chain_run):
    _, result = chain_run
    html = render_rewrite_report(result)
    ops = html[html.index('<section id="ops">') :]
    assert '<svg class="chart"' in ops
    for op in ("MatMul", "Add", "Mul", "Gemm"):
        assert f">{op}</text>" in ops


def test_page_is_self_contained(chain_run):
    source, result = chain_run
    html = render_rewrite_report(result, source=source)
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", html)
    assert "<link" not in html
    assert "@import" not in html
    assert "<script src" not in html


@needs_graphviz
def test_pictures_are_inline_svg(chain_run):
    _, result = chain_run
    html = render_rewrite_report(result)
    # Five fusions (before and after) and one alias rewrite of a graph output (before only:
    # no node is left after it).
    assert html.count('<svg class="subgraph"') == 11
    assert "no nodes left" in html
    assert 'id="no-pictures"' not in html
    assert "<?xml" not in html
    assert "<!DOCTYPE svg" not in html


@needs_graphviz
def test_pictures_per_rule_cap_lists_the_rest_as_text(chain_run):
    _, result = chain_run
    html = render_rewrite_report(result, options=ReportOptions(pictures_per_rule=2))
    # fuse_linear: 2 drawn (before and after), 3 as text; mul_one: 1 drawn (before only).
    assert html.count('<svg class="subgraph"') == 5
    assert html.count("this one is listed as text") == 3


def test_missing_dot_falls_back_to_text_with_a_note(chain_run, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no `dot` on PATH
    _, result = chain_run
    html = render_rewrite_report(result)
    assert '<svg class="subgraph"' not in html
    assert 'id="no-pictures"' in html
    assert "apt-get install graphviz" in html
    assert html.count('<pre class="listing">') == 11
    # The listing is in ONNX text style with the role marked.
    assert '<span class="matched">- z1 = Add (h1, b1)    # layer1/Add</span>' in html
    gemm = "+ z1/fuse_linear = Gemm (z0/fuse_linear, w1, b1)    # fuse_linear/layer1/Add"
    assert f'<span class="created">{gemm}</span>' in html


def test_missing_binding_falls_back_to_text(chain_run, monkeypatch):
    monkeypatch.setitem(sys.modules, "graphviz", None)  # import graphviz raises ImportError
    _, result = chain_run
    html = render_rewrite_report(result)
    assert '<svg class="subgraph"' not in html
    assert "the Python package `graphviz` is not installed" in html
    assert "pip install &#x27;onnx-rewrite[report]&#x27;" in html


def test_run_without_recorded_subgraphs_says_so(tmp_path):
    source = models.save_chain(tmp_path, layers=1)
    result = rewriter.rewrite(source, rules=[models.write_rules(tmp_path)])
    html = render_rewrite_report(result)
    assert "no subgraph was recorded" in html


def test_no_rule_fired(tmp_path):
    source = models.save_chain(tmp_path, layers=1)
    empty = tmp_path / "empty.rw"
    empty.write_text("# nothing\n")
    result = rewriter.rewrite(source, [empty], rewriter.RewriteOptions(record_subgraphs=True))
    html = render_rewrite_report(result)
    assert "no rule fired" in html


def test_write_is_atomic_and_readable(chain_run, tmp_path):
    _, result = chain_run
    path = tmp_path / "report.html"
    write_rewrite_report(path, result)
    assert path.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert path.stat().st_mode & 0o044  # not private to its owner
    assert [p.name for p in tmp_path.iterdir()] == ["report.html"]


def test_dot_source_quotes_names():
    nodes = (
        SnapshotNode('a"b\\c', "Add", ("x",), ("y",), "matched"),
        SnapshotNode("n", "Relu", ("y",), ("z",), "context"),
    )
    source = snapshot_dot(nodes, 'title "quoted"')
    assert 'digraph "title \\"quoted\\""' in source
    assert 'a\\"b\\\\c' in source
    assert "v0 -> n0" in source  # x comes from outside the picture
    assert "n0 -> n1" in source


def test_short_names_and_slugs():
    name = "/model/encoder/layer.0/attention/self/query/MatMul"
    assert short_name(name) == "attention/self/query/MatMul"
    assert short_name(name, limit=20) == "self/query/MatMul"
    assert short_name("plain") == "plain"
    assert short_name("x" * 40).startswith("…")
    assert slug("fuse <a> & b") == "fuse--a----b"


def _snap(*ops: str, role: str) -> tuple[SnapshotNode, ...]:
    return tuple(SnapshotNode(f"n{i}", op, (), (), role) for i, op in enumerate(ops))


@pytest.mark.parametrize(
    ("matched", "created", "kind"),
    [
        (
            ("ReduceMean", "Sub", "Pow", "ReduceMean", "Add", "Sqrt", "Div"),
            ("LayerNormalization",),
            "fusion",
        ),
        (("LayerNormalization", "Mul"), ("LayerNormalization",), "folding"),
        (("Conv", "BatchNormalization"), ("Conv",), "folding"),
        (("MatMul", "Add"), ("Gemm",), "fusion"),
        (("com.microsoft.ExtractImagePatches",), ("Pad", "Slice", "Concat"), "decomposition"),
        (("Unsqueeze", "Unsqueeze"), ("Unsqueeze",), "folding"),
        (("Relu",), ("Max",), "rewrite"),
        (("Reshape", "Constant"), ("Reshape",), "rewrite"),
        (("Constant",), (), "cleanup"),
        (("Reshape",), (), "cleanup"),
        (("Shape",), ("Constant",), "cleanup"),
        (("Identity",), ("Identity",), "cleanup"),
        # the guarded SDPA fusion writes more nodes than it matches; Softmax (a composite op)
        # goes into the newer Attention: a fusion, and the reverse a decomposition
        (
            ("MatMul", "Mul", "Add", "Softmax", "IsNaN", "Where", "MatMul"),
            ("Transpose", "Attention", "IsNaN", "Where", "Mul", "ReduceSum", "Where", "Mul"),
            "fusion",
        ),
        (("Attention",), ("Transpose", "MatMul", "Mul", "Softmax", "MatMul"), "decomposition"),
    ],
)
def test_application_kind_compares_the_op_types_matched_and_created(matched, created, kind):
    # Pictures are not needed: every trace entry names the op types it matched and created.
    entry = TraceEntry("r", "r.rw:1", "", (), (), matched_ops=matched, created_ops=created)
    assert application_kind(entry) == kind


def test_fusions_come_first_whatever_fired_first(chain_run):
    _, result = chain_run
    # mul_one (a cleanup: no node is created) now fires before every fuse_linear.
    trace = dataclasses.replace(result.trace, entries=result.trace.entries[::-1])
    assert trace.entries[0].rule == "mul_one"
    html = render_rewrite_report(dataclasses.replace(result, trace=trace))
    fusion = html.index('<section class="rule" id="rule-fuse_linear" data-kind="fusion">')
    cleanup = html.index('<section class="rule" id="rule-mul_one" data-kind="cleanup">')
    assert fusion < cleanup


def test_contents_link_every_section_with_counts(chain_run):
    source, result = chain_run
    html = render_rewrite_report(result, source=source)
    contents = html[html.index('<nav id="contents"') : html.index("</nav>")]
    # The contents come first, before the summary.
    assert html.index('<nav id="contents"') < html.index('<section id="summary">')
    for anchor in ("summary", "timings", "ops", "rules", "skipped"):
        assert f'href="#{anchor}"' in contents
    assert "6 rewrites by 2 rules" in contents
    fusions = contents[contents.index(">fusions<") : contents.index(">cleanups<")]
    assert '<a href="#rule-fuse_linear">fuse_linear</a> &times; 5' in fusions
    cleanups = contents[contents.index(">cleanups<") :]
    assert '<a href="#rule-mul_one">mul_one</a> &times; 1' in cleanups


def test_rule_kind_is_the_most_telling_kind_of_its_applications():
    cleanup = TraceEntry("r", "r.rw:1", "", (), (), matched_ops=("Mul",))
    fusion = TraceEntry(
        "r", "r.rw:1", "", (), (), matched_ops=("Mul", "Add"), created_ops=("Gemm",)
    )
    assert rule_kind([cleanup, fusion]) == "fusion"
    assert rule_kind([cleanup]) == "cleanup"


def test_a_rolled_chain_has_pictures_of_its_first_blocks_and_the_loop(tmp_path):
    import onnx

    from tests.rewriter.loops.loop_models import dense_chain

    source = tmp_path / "dense.onnx"
    onnx.save(dense_chain(4), source)
    rules = tmp_path / "roll.rw"
    rules.write_text(
        "# roll y_k = relu(y_{k-1} @ W_k + b_k)\n"
        "rule roll_dense {\n"
        "  match repeat (n >= 3) from h to out {\n"
        "    m = MatMul (h, w)\n"
        "    a = Add (m, b)\n"
        "    out = Relu (a)\n"
        "  }\n"
        "  rewrite loop\n"
        "}\n"
    )
    result = rewriter.rewrite(source, [rules], rewriter.RewriteOptions(record_subgraphs=True))
    (entry,) = [e for e in result.trace.entries if e.rule == "roll_dense"]
    matched = [n for n in entry.before if n.role == "matched"]
    assert [n.op for n in matched] == ["MatMul", "Add", "Relu"] * 2  # the first two blocks
    assert [n.op for n in entry.after if n.role == "created"] == ["Loop"]
    html = render_rewrite_report(result, source=source)
    section = html[html.index('id="rule-roll_dense"') :]
    assert "no subgraph was recorded" not in section
    if HAS_GRAPHVIZ:
        assert section.count('<svg class="subgraph"') == 2


def test_each_fired_rule_shows_its_proof_as_rewrite_prove_last_found_it(
    chain_run, tmp_path, monkeypatch
):
    from rewriter.cli import main

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    source, result = chain_run
    mul_one = result.ruleset.rule("mul_one")
    html = render_rewrite_report(result, source=source)
    never = '<span class="proof meta" title="no proof on record for this rule as written'
    assert html.count(never) == 2  # fuse_linear and mul_one
    assert f"rewrite prove {mul_one.span.path} --rule mul_one" in html
    assert main(["prove", mul_one.span.path, "--rule", "mul_one", "--timeout", "20"]) == 0
    html = render_rewrite_report(result, source=source)
    assert html.count(never) == 1
    heading = html[html.index('id="rule-mul_one"') :].split("</h3>")[0]
    assert '<span class="proof ok" title="proved (' in heading
    assert ">proved</span>" in heading
