"""The report is a list of registered sections (distbench.report.sections.SECTIONS): each renders its
heading; a section added at runtime (one module plus one registry entry) shows up in both reports,
in the Verdict and in the Findings, without touching render.py or the main templates; and the
report's own modules hold no family's sentences."""

import json
import re
import shutil
from datetime import datetime, timezone

import pandas as pd
import pytest
from synthetic import make_synthetic

from distbench.core.section import Headline, ReportInputs, Section
from distbench.health.readings import HealthRow
from distbench.health.table import differences, write_diff, write_health
from distbench.report.render import build_context, render_report
from distbench.report.sections import SECTIONS
from tests.conftest import REPO

BENCH = REPO / "benchmarks/results"


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> ReportInputs:
    """Every section's inputs: synthetic comm tables, the committed runs' training, memory, pair,
    straggler, trace and prediction tables, a job's provenance, and a second run as the baseline."""
    tmp = tmp_path_factory.mktemp("sections")
    data = make_synthetic(tmp / "results/lab/tables")
    tables = tmp / "results/lab/tables"
    for src in (BENCH / "report-h100x4-2026-11-26/run-h100x4/tables/training_summary.csv",
                BENCH / "report-h100x4-2026-11-26/run-h100x4/tables/memory_summary.csv",
                BENCH / "comm-pairs-h100x4-2026-11-26/comm_stragglers.csv", BENCH / "comm-pairs-h100x4-2026-11-26/comm_pairs.csv",
                BENCH / "traces-h100x4-2026-11-26/trace_overlap.csv"):
        shutil.copy(src, tables / src.name)
    shutil.copytree(BENCH / "comm-predict-h200x4-2026-11-26/predict", tables / "predict")
    # node-pair rounds: 4 nodes, node2 slow (synthetic rounds, tests/nodes/test_nodes.py)
    from distbench.nodes.analysis.summary import summarize
    from tests.nodes.test_nodes import synthetic

    node_table, pair_table = summarize(synthetic(4, slow_node=2))
    node_table.to_csv(tables / "nodes_scores.csv", index=False)
    pair_table.to_csv(tables / "nodes_pairs.csv", index=False)
    placement = tmp / "results/lab/comm/nccl/ws2/placement.json"
    placement.parent.mkdir(parents=True)
    placement.write_text(json.dumps({"provenance": {"commit": "abc", "host": "h", "started": "2026-11-26T10:00:00+00:00",
                                                    "outcome": "ok", "commands": ["python -m distbench.comm"]}}))
    hung = tmp / "results/lab/comm/gloo/float32/ws2/default/placement.json"  # a hung job (distbench.report.hangs)
    hung.parent.mkdir(parents=True)
    hung.write_text(json.dumps({"hang": {"message": "hung: rank 1 never joined collective #16", "group": {
        "process_group": "0", "seq": 16, "op": "gloo:all_reduce", "never_joined": [1], "waiting": [0]}}}))
    other = tmp / "results/other"
    (other / "tables").mkdir(parents=True)
    shutil.copy(BENCH / "report-h100x4-2026-11-26/run-h100x4/run.json", other / "run.json")
    slower = pd.read_csv(data["summary_csv"]).assign(time_us_median=lambda d: d["time_us_median"] * 0.7)
    slower.to_csv(other / "tables/comm_summary.csv", index=False)
    health_dir = tmp / "results/lab/health"
    readings = [HealthRow("h", "0", "pcie_link", "gen5 x16", "gen5 x16", "ok", "at its maximum"),
                HealthRow("h", "0", "nvlink_replay_errors", "0", "", "ok", "none on 18 link(s)")]
    write_health(health_dir / "health_before.csv", readings)
    write_health(health_dir / "health_after.csv", readings)
    write_diff(health_dir / "health_diff.csv", differences(readings, readings))
    named = {"training_summary": "training_summary.csv", "memory_summary": "memory_summary.csv",
             "prediction_validation": "predict/prediction_validation.csv", "comm_stragglers": "comm_stragglers.csv",
             "comm_pairs": "comm_pairs.csv", "trace_overlap": "trace_overlap.csv", "nodes_scores": "nodes_scores.csv"}
    return ReportInputs({"comm_summary": data["summary_csv"], "comm_largest": data["largest_csv"],
                         **{name: tables / f for name, f in named.items()},
                         "health_diff": health_dir / "health_diff.csv"}, data["env_json"], [],
                        dict(data["config"], report={"baseline": str(other)}), data["plan"], extra=data["extra"],
                        placements=[placement, hung],
                        run_started=datetime(2026, 11, 26, 12, tzinfo=timezone.utc), results_dir=tmp / "results",
                        run_label="lab")


def test_every_registered_section_renders_its_heading_in_order(inputs, tmp_path):
    out_md, out_html = tmp_path / "r.md", tmp_path / "r.html"
    render_report(inputs, out_md, out_html)
    md, html = out_md.read_text(), out_html.read_text()
    ctx = build_context(inputs, out_md)
    assert ctx["sections"] == [s.name for s in SECTIONS]  # every section has something to show here
    # the bad node is the Verdict's first line, before any family's failing headline (issue 27)
    assert ctx["gathered"]["headlines"][0]["headline"].startswith("node node2 is slow")
    assert "node2" in md[md.index("## Node-pair rounds"):]
    # the probes' results (extras) are one heading per probe, named by the probe
    shown = [s for s in SECTIONS if s.name != "extras"]
    md_at = [md.index(f"\n## {s.title}\n") for s in shown]
    html_at = [html.index(f'">{s.title}</h2>') for s in shown]
    assert md_at == sorted(md_at) and html_at == sorted(html_at)
    assert md.index("\n## Topology\n") < md.index("\n## Advice\n") < md.index("\n## Appendix\n")


def test_a_section_registered_at_runtime_appears_everywhere(inputs, tmp_path):
    """The recipe "add a report section": one module (a Section and its two fragments) plus one
    registry entry; render.py and report.md.j2 / report.html.j2 are not edited."""
    fragments = tmp_path / "fake_templates"
    fragments.mkdir()
    (fragments / "fake.md.j2").write_text('{% from "macros.md.j2" import table with context %}\n'
                                          "## Fake family\n\n{{ fake.text | mdtext }}\n\n{{ table(fake.table) }}\n")
    (fragments / "fake.html.j2").write_text('{% from "macros.html.j2" import table with context %}\n'
                                            '<h2 id="fake">Fake family</h2>\n<p>{{ fake.text }}</p>\n'
                                            "{{ table(fake.table) }}\n")
    fake = Section("fake", "Fake family", fragments,
                   build=lambda i: {"text": "widgets <per> second",
                                    "table": {"headers": ["widgets"], "rows": [["42"]], "omitted": 0, "note": ""}},
                   headlines=lambda i: [Headline("fake", "42 widgets/s", "failing", "no widgets expected")],
                   findings=lambda i: ["A fake finding about widgets."],
                   skipped=lambda i: ["widgets at 0 B: skipped"])
    absent = Section("absent", "Absent family", fragments, build=lambda i: None)  # None: left out, no fragment read
    at = [s.name for s in SECTIONS].index("problems")
    registry = (*SECTIONS[:at], fake, absent, *SECTIONS[at:])
    out_md, out_html = tmp_path / "r.md", tmp_path / "r.html"
    render_report(inputs, out_md, out_html, sections=registry)
    md, html = out_md.read_text(), out_html.read_text()
    assert md.index("\n## Traces\n") < md.index("\n## Fake family\n") < md.index("\n## Measurements that did not")
    assert "widgets &lt;per&gt; second" in md and "| widgets |\n| --- |\n| 42 |" in md
    assert '<h2 id="fake">Fake family</h2>\n<p>widgets &lt;per&gt; second</p>' in html and "<td>42</td>" in html
    verdict = md.split("## Verdict")[1].split("\n## ")[0]
    assert verdict.index("| fake | 42 widgets/s | **failing** |") < verdict.index("| communication |")  # failing first
    assert "- A fake finding about widgets." in md.split("## Findings")[1].split("\n## ")[0]
    assert "- widgets at 0 B: skipped" in md.split("## Plan")[1].split("\n## ")[0]
    assert "Absent family" not in md and "Absent family" not in html
    # and the default registry still renders without it
    render_report(inputs, out_md, out_html)
    assert "Fake family" not in out_md.read_text()


# Words of the families' sentences and tables: none may be written by the report's own modules or
# templates (they belong in a family's section, measures, summary part or across-runs part).
FAMILY_WORDS = ("all_reduce", "all_to_all", "busbw", "tokens/s", "MFU", "scaling efficiency", "exposed comm",
                "activation", "largest batch", "Hockney", "perfetto", "Time per op", "every trial")


def test_the_report_holds_no_family_sentences():
    report = REPO / "distbench" / "report"
    texts = {p: p.read_text() for p in sorted(report.glob("*.py"))}
    texts.update({p: p.read_text() for p in sorted((report / "templates").rglob("*.j2"))})
    assert any(p.name == "render.py" for p in texts) and any(p.name == "report.md.j2" for p in texts)
    found = [f"{p.relative_to(REPO)}: {w}" for p, text in texts.items() for w in FAMILY_WORDS
             if re.search(re.escape(w), text, re.IGNORECASE)]
    assert not found, found
    # the families come in only through the registry
    for p, text in texts.items():
        families = re.findall(r"^\s*(?:from|import) distbench\.(comm|training|memory|predict|traces)\b", text, re.M)
        assert not families or p.name == "sections.py", (p, families)
        # nor by name: no branch of the report's code on one family
        branches = re.findall(r"""[=!]= ["'](comm|training|memory|nodes|predict|traces)["']""", text)
        assert not branches, (p, branches)


def test_report_path_functions_take_few_parameters():
    import ast

    # the report package and every section module the report renders (the families' and the analyses')
    report_path = sorted((REPO / "distbench" / "report").glob("*.py")) + sorted((REPO / "distbench").rglob("section.py"))
    assert len(report_path) > len(list((REPO / "distbench" / "report").glob("*.py")))
    for p in report_path:
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = len(node.args.args) + len(node.args.kwonlyargs) + len(node.args.posonlyargs)
                assert n <= 8, f"{p.relative_to(REPO)}:{node.name} takes {n} parameters"


def test_no_module_of_the_package_is_over_500_lines():
    long = {str(p.relative_to(REPO)): n for p in (REPO / "distbench").rglob("*.py")
            if (n := len(p.read_text().splitlines())) > 500}
    assert long == {}
