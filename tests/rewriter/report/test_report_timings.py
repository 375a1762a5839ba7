"""Time per phase: measured where each phase runs, in the report and in `--json`."""

from __future__ import annotations

import json
import re

import pytest

import rewriter
from rewriter import cli
from rewriter.report import render_rewrite_report
from rewriter.report._html import seconds
from tests.rewriter.report import _models as models

CLI_PHASES = ["load_rules", "load_model", "convert", "rewrite", "check", "verify", "save", "report"]


def _report_phases(html: str) -> list[str]:
    """The phase names of the report's timing table, in order (the total row excluded)."""
    start = html.index('<section id="timings">')
    timings = html[start : html.index("</section>", start)]
    return re.findall(r'<td><span title="[^"]*">(\w+)</span></td>', timings)


def test_rewrite_times_the_phases_it_runs(tmp_path):
    source = models.save_chain(tmp_path, layers=2)
    rules = models.write_rules(tmp_path)
    result = rewriter.rewrite(source, [rules], rewriter.RewriteOptions(target_opset=18))
    assert list(result.timings) == ["load_rules", "load_model", "convert", "rewrite", "check"]
    assert all(seconds >= 0 for seconds in result.timings.values())
    assert result.timings["load_rules"] > 0


def test_rewrite_leaves_out_phases_it_did_not_run(tmp_path):
    source = models.save_chain(tmp_path, layers=2)
    ruleset = rewriter.load_rules(models.write_rules(tmp_path))
    result = rewriter.rewrite(source, rules=ruleset)
    # The caller loaded the rules, and the opset stayed as it was.
    assert list(result.timings) == ["load_model", "rewrite", "check"]


def test_report_lists_phases_in_run_order_and_adds_its_own(tmp_path):
    source = models.save_chain(tmp_path, layers=2)
    ruleset = rewriter.load_rules(models.write_rules(tmp_path))
    result = rewriter.rewrite(source, rules=ruleset)
    html = render_rewrite_report(result, timings={"verify": 0.5, "load_rules": 0.25})
    assert _report_phases(html) == [
        "load_rules",
        "load_model",
        "rewrite",
        "check",
        "verify",
        "report",
    ]
    assert '<td class="num">250.0 ms</td>' in html
    assert "<b>total</b>" in html


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cli_timings")
    source = models.save_chain(folder, layers=3)
    argv = [
        str(source),
        "--rules",
        str(models.write_rules(folder)),
        "-o",
        str(folder / "out.onnx"),
        "--target-opset",
        "18",
        "--verify",
        "--examples",
        "2",
        "--no-progress",
        "--json",
        str(folder / "run.json"),
        "--report",
        str(folder / "report.html"),
    ]
    assert cli.main(argv) == 0
    payload = json.loads((folder / "run.json").read_text())
    return payload, (folder / "report.html").read_text(encoding="utf-8")


def test_cli_json_times_every_phase_of_the_command(cli_run):
    payload, _ = cli_run
    timings = payload["timings_seconds"]
    assert list(timings) == CLI_PHASES
    # The CLI loads the rules before calling rewrite(); that time is measured there.
    assert timings["load_rules"] > 0
    assert timings["verify"] > 0


def test_cli_report_shows_every_phase_before_it(cli_run):
    payload, html = cli_run
    assert _report_phases(html) == CLI_PHASES
    # The same measurements as --json (which also counts writing the report, so not that one).
    for phase in CLI_PHASES[:-1]:
        shown = re.search(rf'{phase}</span></td><td class="num">([^<]*)<', html)
        assert shown is not None, phase
        # --json rounds to microseconds: the page shows the value on one side of that.
        rounded = payload["timings_seconds"][phase]
        assert shown.group(1) in {seconds(rounded - 1e-6), seconds(rounded + 1e-6)}, phase
