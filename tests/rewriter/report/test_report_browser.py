"""The reports of a real exported model, opened in headless Chromium.

`rewrite tests/models/bert_ts14.onnx --target-opset 20 --verify --report FILE` with the
shipped library (LayerNormalization fusions fire at opset 20), then Chromium loads the page
from disk with the network switched off: the DOM after load must show every section, one
inline SVG per subgraph picture, the script must have run (it marks `<body>`), and no
console message may be logged. The layout is measured in the page itself (a copy with a
probe script that records bounding boxes): in the 1280x2000 window of the screenshot, the
first rule section must be a fusion whose before/after pictures lie inside the window. A
screenshot is kept under the test's tmp dir and, when the environment variable
REPORT_ARTIFACTS names a folder (`.ci/run` sets `.ci/artifacts`), copied there.

Skipped when Chromium or Graphviz is not installed (`apt-get install -y chromium graphviz`,
`pip install graphviz`).
"""

from __future__ import annotations

import html
import importlib.util
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from rewriter import cli
from rewriter.engine import KINDS

MODELS = Path(__file__).resolve().parents[2] / "models"
BERT = MODELS / "bert_ts14.onnx"
CHROMIUM = next(
    (p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None
)
HAS_GRAPHVIZ = shutil.which("dot") is not None and importlib.util.find_spec("graphviz") is not None

pytestmark = [
    pytest.mark.skipif(CHROMIUM is None, reason="needs Chromium: apt-get install -y chromium"),
    pytest.mark.skipif(
        not HAS_GRAPHVIZ,
        reason="needs Graphviz: apt-get install -y graphviz; pip install graphviz",
    ),
]

# Flags for a headless Chromium that makes no network connection of its own.
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--enable-logging=stderr",
    "--v=0",
)
WINDOW = (1280, 2000)

# Appended to a copy of the report: records the boxes (in page coordinates) of the first
# rule section and of its first before/after pictures as JSON on <body data-probe>.
PROBE = """<script>
(function () {
  function box(element) {
    var rect = element.getBoundingClientRect();
    return {top: rect.top + window.scrollY, bottom: rect.bottom + window.scrollY,
            left: rect.left, right: rect.right};
  }
  var first = document.querySelector("section.rule");
  var pair = first.querySelector("details.app[open] .pair");
  var pictures = Array.prototype.map.call(pair.querySelectorAll("svg.subgraph"), box);
  document.body.setAttribute("data-probe", JSON.stringify({
    id: first.id, kind: first.getAttribute("data-kind"), section: box(first),
    pictures: pictures, width: document.documentElement.clientWidth}));
})();
</script>"""


def chromium(page: Path, profile: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """Run headless Chromium on a local file with a fresh profile."""
    assert CHROMIUM is not None, "skipped above when Chromium is missing"
    command = [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *extra, page.as_uri()]
    return subprocess.run(command, capture_output=True, text=True, timeout=180, check=False)


def console_messages(stderr: str) -> list[str]:
    """Lines Chromium logged for the page's console (errors, uncaught exceptions)."""
    return [line for line in stderr.splitlines() if ":CONSOLE" in line]


def keep_artifact(path: Path) -> None:
    """Copy `path` to $REPORT_ARTIFACTS when it is set."""
    folder = os.environ.get("REPORT_ARTIFACTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, Path(folder) / path.name)


@pytest.fixture(scope="module")
def bert_report(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bert_report")
    report = folder / "bert_report.html"
    argv = [
        str(BERT),
        "-o",
        str(folder / "bert.opt.onnx"),
        "--target-opset",
        "20",
        "--verify",
        "--examples",
        "5",
        "--no-progress",
        "--report",
        str(report),
    ]
    assert cli.main(argv) == 0
    keep_artifact(report)
    return report


@pytest.fixture(scope="module")
def bert_dom(bert_report, tmp_path_factory):
    profile = tmp_path_factory.mktemp("chromium_profile")
    run = chromium(bert_report, profile, "--dump-dom")
    assert run.returncode == 0, run.stderr[-2000:]
    return run.stdout, run.stderr


def test_page_loads_and_its_script_runs(bert_dom):
    dom, stderr = bert_dom
    assert 'data-report-ready="1"' in dom
    assert console_messages(stderr) == []


def test_page_shows_every_section(bert_dom):
    dom, _ = bert_dom
    for section_id in ("summary", "timings", "ops", "verification", "rules", "passes", "skipped"):
        assert f'id="{section_id}"' in dom, section_id
    assert "Rewrite report: bert_ts14.onnx" in dom
    assert "opset converted: opset 14 → opset 20" in dom
    assert '<nav id="contents"' in dom
    timings = dom[dom.index('id="timings"') : dom.index("</section>", dom.index('id="timings"'))]
    phases = re.findall(
        r'<td><span title="[^"]*">(\w+)</span></td><td class="num">([^<]*)<', timings
    )
    assert [phase for phase, _ in phases] == [
        "load_rules",
        "load_model",
        "convert",
        "rewrite",
        "check",
        "verify",
        "save",
        "report",
    ]
    # The CLI loads the shipped library itself: that takes time, and the report says so.
    assert dict(phases)["load_rules"] != "0.0 ms"
    verification = dom[dom.index('id="verification"') :]
    assert '<p class="ok">equivalent' in verification


def test_page_shows_fusions_with_pictures(bert_report, bert_dom):
    dom, _ = bert_dom
    pictures = dom.count('<svg class="subgraph"')
    # Every picture written is in the DOM after load, and there are many of them.
    assert pictures == bert_report.read_text(encoding="utf-8").count('<svg class="subgraph"')
    assert pictures >= 20
    assert 'id="no-pictures"' not in dom
    # A LayerNormalization fusion: its rule's section, source and a created node.
    section = re.search(
        r'<section class="rule" id="rule-fuse_layer_normalization" data-kind="fusion">.*?'
        r"</section>",
        dom,
        re.DOTALL,
    )
    assert section is not None
    assert "rule fuse_layer_normalization" in section.group(0)
    assert ">LayerNormalization</text>" in section.group(0)
    assert section.group(0).count('<details class="app" open="">') == 3


def test_rule_sections_come_fusions_first_and_are_all_in_the_contents(bert_dom):
    dom, _ = bert_dom
    kinds = re.findall(r'<section class="rule" id="rule-([^"]+)" data-kind="([^"]+)">', dom)
    assert kinds[0] == ("fuse_layer_normalization", "fusion")
    order = [kind for _, kind in kinds]
    assert order == sorted(order, key=KINDS.index)
    assert ("constant_to_initializer", "cleanup") in kinds
    contents = dom[dom.index('<nav id="contents"') : dom.index("</nav>")]
    for name, _ in kinds:
        assert f'href="#rule-{name}"' in contents, name
    assert "constant_to_initializer</a> \u00d7 224" in contents


def test_first_fusion_pictures_are_inside_the_screenshot(bert_report, tmp_path):
    probed = tmp_path / "probed.html"
    probed.write_text(bert_report.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>"))
    window = f"--window-size={WINDOW[0]},{WINDOW[1]}"
    run = chromium(probed, tmp_path / "profile", window, "--dump-dom")
    assert run.returncode == 0, run.stderr[-2000:]
    found = re.search(r'data-probe="([^"]*)"', run.stdout)
    assert found is not None, "the probe script did not run"
    probe = json.loads(html.unescape(found.group(1)))
    assert probe["width"] <= WINDOW[0]
    assert (probe["id"], probe["kind"]) == ("rule-fuse_layer_normalization", "fusion")
    # The first application's before and after pictures, whole, within the window's height
    # (the screenshot below is taken at the top of the page with the same window).
    assert len(probe["pictures"]) == 2
    for picture in probe["pictures"]:
        assert picture["bottom"] - picture["top"] > 100
        assert 0 < picture["top"] < picture["bottom"] <= WINDOW[1], picture
        assert 0 <= picture["left"] < picture["right"] <= WINDOW[0], picture


def test_page_fetches_nothing(bert_report):
    html = bert_report.read_text(encoding="utf-8")
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", html)
    assert "<link" not in html
    assert "<script src" not in html


def test_screenshot_shows_the_page(bert_report, tmp_path):
    shot = tmp_path / "bert_report.png"
    window = f"--window-size={WINDOW[0]},{WINDOW[1]}"
    run = chromium(bert_report, tmp_path / "profile", f"--screenshot={shot}", window)
    assert run.returncode == 0, run.stderr[-2000:]
    data = shot.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    width = int.from_bytes(data[16:20], "big")
    height = int.from_bytes(data[20:24], "big")
    # The window the layout was probed in (test_first_fusion_pictures_are_inside_the_screenshot).
    assert (width, height) == WINDOW
    # A blank page compresses to a few kilobytes; charts, tables and pictures do not.
    assert len(data) > 100_000
    keep_artifact(shot)


def test_stats_report_loads(tmp_path):
    report = tmp_path / "bert_stats.html"
    assert cli.main(["stats", str(BERT), "--top", "15", "--report", str(report)]) == 0
    run = chromium(report, tmp_path / "profile", "--dump-dom")
    assert run.returncode == 0, run.stderr[-2000:]
    dom = run.stdout
    assert 'data-report-ready="1"' in dom
    assert console_messages(run.stderr) == []
    sections = ("overview", "opsets", "ops", "flops", "weights", "dtypes", "initializers")
    for section_id in (*sections, "largest"):
        assert f'id="{section_id}"' in dom, section_id
    # Op counts, FLOPs by op, the largest tensors, and the weights' histograms.
    histograms = dom.count('aria-label="values of ')
    assert histograms >= 1
    assert dom.count('<svg class="chart"') == 3 + histograms
    shot = tmp_path / "bert_stats.png"
    run = chromium(report, tmp_path / "profile2", f"--screenshot={shot}", "--window-size=1280,2000")
    assert run.returncode == 0, run.stderr[-2000:]
    keep_artifact(shot)
