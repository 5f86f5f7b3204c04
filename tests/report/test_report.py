"""Findings sentences (numbers checked on crafted data) and the Markdown/HTML reports."""

from __future__ import annotations

import base64
import re

import pandas as pd
import pytest
from synthetic import build_summary, make_synthetic, render_synthetic_report, summary_row

from distbench.comm.analysis.findings import compute_findings, human_bytes, human_time_us
from distbench.core.section import ReportInputs
from distbench.report.render import render_report
from tests.conftest import REPO

MiB = 1 << 20
NO_NCCL_PLAN = {"backends_run": ["gloo"], "world_sizes": {"gloo": [2, 4]}, "gpus": 0, "gpus_source": "detected",
                "skipped": [{"what": "backend nccl", "why": "no GPU detected (gpus: auto found 0)"}]}


def _df(*rows):
    return pd.DataFrame([summary_row(**r) for r in rows])


# ---------------------------------------------------------------- findings
@pytest.mark.parametrize("n,text", [(0, "0 B"), (8, "8 B"), (1023, "1023 B"), (1024, "1 KiB"), (1536, "1.5 KiB"),
                                    (MiB, "1 MiB"), (128 * MiB, "128 MiB"), (1 << 30, "1 GiB"), (10**8, "95.4 MiB")])
def test_human_bytes(n, text):
    assert human_bytes(n) == text


@pytest.mark.parametrize("us,text", [(4.123, "4.12 µs"), (412.0, "412 µs"), (15300.0, "15.3 ms"),
                                     (999.9, "1.00 ms"), (2.05e6, "2.05 s")])
def test_human_time(us, text):
    assert human_time_us(us) == text


def test_backend_ratio_sentence():
    df = _df(dict(backend="gloo", timing="host", size_bytes=128 * MiB, time_us_median=1000.0),
             dict(backend="nccl", timing="events", size_bytes=128 * MiB, time_us_median=100.0))
    found = compute_findings(df, {})
    assert "NCCL is 10.0× faster than Gloo for all_reduce at 128 MiB (world size 2: 100 µs vs 1.00 ms)." in found


def test_backend_ratio_absent_with_one_backend():
    df = _df(dict(backend="gloo", timing="host", size_bytes=128 * MiB, time_us_median=1000.0))
    found = compute_findings(df, NO_NCCL_PLAN)
    assert not any("faster than" in f for f in found)
    assert "Not measured: backend nccl — no GPU detected (gpus: auto found 0)." in found


def test_scaling_graph_and_host_sentences():
    df = _df(dict(backend="gloo", timing="host", world_size=2, size_bytes=16 * MiB, time_us_median=100.0),
             dict(backend="gloo", timing="host", world_size=6, size_bytes=16 * MiB, time_us_median=210.0),
             dict(backend="nccl", timing="events", size_bytes=8, time_us_median=12.0),
             dict(backend="nccl", timing="graph", size_bytes=8, time_us_median=8.0),
             dict(backend="nccl", timing="host", size_bytes=8, time_us_median=30.0))
    found = "\n".join(compute_findings(df, {}))
    assert "Gloo all_reduce time grows 2.1× from 2 to 6 ranks at 16 MiB (100 µs vs 210 µs)." in found
    assert "CUDA-graph timing removes 4.00 µs of launch overhead at 8 B (events 12.0 µs vs graph 8.00 µs" in found
    assert "Host-clock timing adds 18.0 µs per op at 8 B" in found


def test_peak_busbw_with_link_peak():
    df = _df(dict(size_bytes=1 << 30, time_us_median=6484.0, busbw_gbps_median=331.2),
             dict(size_bytes=MiB, time_us_median=20.0, busbw_gbps_median=52.0))
    found = compute_findings(df, {}, peak={"peak_gbps": 450, "link": "NVLink"})
    assert ("Peak busbw at the largest size (1 GiB): all_reduce 331.2 GB/s on NCCL, world size 2 (events timing), "
            "74% of the 450 GB/s NVLink peak.") in found


def test_problem_counts_and_loud_wrong_line():
    df = _df(dict(size_bytes=1 << 30, status="oom", time_us_median=None),
             dict(size_bytes=2 << 30, status="oom", time_us_median=None),
             dict(size_bytes=4 << 30, status="oom", time_us_median=None),
             dict(size_bytes=MiB, status="wrong", correct=False))
    found = compute_findings(df, {})
    assert found[0].startswith("⚠ CORRECTNESS FAILURE: 1 measurement returned WRONG results: all_reduce NCCL ws 2")
    assert any(f.startswith("3 measurements ran out of memory: all_reduce NCCL ws 2 float32 events at 1 GiB")
               for f in found)
    assert not any("faster" in f or "Peak busbw" in f for f in found)  # no ok rows, no speed claims


# ---------------------------------------------------------------- reports
@pytest.fixture(scope="module")
def report(tmp_path_factory):
    r = render_synthetic_report(tmp_path_factory.mktemp("report"))
    return dict(r, md=r["out_md"].read_text(), html=r["out_html"].read_text())


def test_markdown_content(report):
    md = report["md"]
    assert "backend mpi: skipped — not built into this torch" in md
    assert "nccl world sizes [6, 8]: skipped — above gpus=4" in md
    for f in report["findings"]:
        assert f"- {f}" in md
    assert "```yaml\nbackends:\n- nccl\n- gloo\n" in md and "trials: 5" in md
    # the verdict comes first; the full largest-size table is in the HTML (collapsed), the CSV linked here
    assert md.index("## Verdict") < md.index("## Findings") < md.index("## Communication")
    tables = report["summary_csv"].parent  # named where the run's tables are (results/<label>/tables in a run)
    assert f"from `{tables}/`" in md
    # ... and linked as copies beside the report, so report/ stays portable
    assert "[comm_largest.csv](tables/comm_largest.csv) (each series at its largest size)" in md
    assert "[comm_summary.csv](tables/comm_summary.csv) (every point, with % of the link peak" in md
    copied = report["out_md"].parent / "tables"
    assert (copied / "comm_largest.csv").read_bytes() == (tables / "comm_largest.csv").read_bytes()
    assert "| all_reduce | nccl | 2 | float32 | events | 1 GiB | 7.17 ms | 150 | 33% |" in report["html"].replace(
        "</td><td>", " | ").replace("<tr><td>", "| ").replace("</td></tr>", " |")
    assert "| oom | all_gather | nccl | 4 | float32 | default | events | 1 GiB | CUDA out of memory." in md
    assert "| hostname | node-01 |" in md and "NVIDIA H100 80GB HBM3" in md
    assert "| warning | GPU 0 and 1 talk over PCIe, not NVLink | path=PHB, busbw_gbps=21.3 |" in md
    assert "## GPU topology" in md and "```\n\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV18" in md
    assert "| transport_counts | P2P/CUMEM=24 |" in md and "| rings | 2 entries (see the probe JSON) |" in md
    assert "| 1 | node-01 | cuda:1 |" in md
    for p in report["figures"]:  # linked as copies beside the report, not into the results tree
        assert f"(figures/{p.name})" in md and "../" not in md
        assert (report["out_md"].parent / "figures" / p.name).read_bytes() == p.read_bytes()


def test_html_self_contained_and_escaped(report):
    html = report["html"]
    assert 'src="http' not in html and "<link" not in html and "<script src" not in html
    assert "url(" not in html and "@import" not in html
    pngs = [p for p in report["figures"] if p.suffix == ".png"]
    uris = re.findall(r'src="data:image/png;base64,([^"]+)"', html)
    assert len(uris) == len(pngs) and set(uris) == {base64.b64encode(p.read_bytes()).decode() for p in pngs}
    assert "&lt;b&gt;lab &amp; co&lt;/b&gt;" in html and "<b>lab" not in html
    assert "backend mpi: skipped — not built into this torch" in html
    assert "<td>all_reduce</td><td>nccl</td><td>2</td>" in html
    assert len(html) < 5_000_000


def test_gloo_only_report_without_figures(tmp_path):
    data = make_synthetic(tmp_path, build_summary(backends=("gloo",), oom=False))
    out_md, out_html = tmp_path / "r.md", tmp_path / "r.html"
    render_report(ReportInputs({"comm_summary": data["summary_csv"], "comm_largest": data["largest_csv"]}, tmp_path / "missing.json", [], {"a": 1},
                               NO_NCCL_PLAN),
                  out_md, out_html)
    md = out_md.read_text()
    assert "backend nccl: skipped — no GPU detected (gpus: auto found 0)" in md
    assert "faster than" not in md and "_No figures._" in md
    assert "## Advice" not in md and "## GPU topology" not in md  # no extra: no extra sections
    assert "data:image" not in out_html.read_text()


def test_prediction_section_from_the_4x_h200_check(tmp_path):
    """The report's "Larger clusters" section, from the committed 4x H200 check of the model:
    the check first, the 8-GPU comparison with published figures, training at scale."""
    from distbench.predict.section import build as prediction_section

    section = prediction_section(ReportInputs(
        {"prediction_validation": REPO / "benchmarks/results/comm-predict-h200x4-2026-11-26/predict/prediction_validation.csv"}))
    first, eight = section["findings"][:2]
    assert first.startswith("The model, fitted on the smallest world size") and "at >= 1 MiB" in first
    assert eight.startswith("8 GPUs on NVLink, all_reduce at 1024 MiB")
    # a published figure names its public source
    assert "the published 360-370 GB/s for 8x H100 (https://github.com/NVIDIA/nccl-tests/issues/212), NVLS off" in eight
    ops = {r[0] for r in section["tables"]["validation"]["rows"]}
    assert {"all_reduce", "all_gather", "send_recv"} <= ops
    assert section["tables"]["training"]["headers"][-1] == "1024 GPUs"
    assert "Preset nvlink4-ib400" in section["note"] and "protocol switches" in section["note"]
    assert prediction_section(ReportInputs({"prediction_validation": tmp_path / "missing.csv"})) is None


def test_all_to_all_v_and_multi_node_sections(tmp_path):
    """all_to_all_v per traffic matrix (busiest rank, its rate, time against uniform) and the
    within-one-node / across-nodes table, only when such rows exist."""
    base = build_summary(backends=("nccl",), world_sizes=(4,), oom=False)
    extra = [
        summary_row(op="all_to_all_v", traffic="uniform", world_size=4, size_bytes=1 << 30, time_us_median=4000.0,
                    busiest_rank=0, busiest_rank_bytes=3 << 28, busiest_rank_time_us_median=4000.0),
        summary_row(op="all_to_all_v", traffic="zipf:1.2", world_size=4, size_bytes=1 << 30, time_us_median=9000.0,
                    busiest_rank=0, busiest_rank_bytes=2 << 30, busiest_rank_time_us_median=8900.0),
        summary_row(op="all_reduce", world_size=8, nodes=2, size_bytes=1 << 30, time_us_median=50000.0),
    ]
    summary = pd.concat([base, pd.DataFrame(extra)], ignore_index=True)
    data = make_synthetic(tmp_path, summary)
    out_md, out_html = tmp_path / "r.md", tmp_path / "r.html"
    render_report(ReportInputs({"comm_summary": data["summary_csv"], "comm_largest": data["largest_csv"]}, data["env_json"], [], data["config"],
                               data["plan"]),
                  out_md, out_html)
    md = out_md.read_text()
    section = md.split("## all_to_all_v by traffic matrix")[1].split("\n## ")[0]
    zipf = next(line for line in section.splitlines() if line.startswith("| zipf:1.2"))
    # 2 GiB in 8900 µs = 241 GB/s for the busiest rank; 9000 / 4000 = 2.25x the uniform time
    assert "| 0 | 2 GiB | 8.90 ms | 241 | 2.25× |" in zipf and "2.25×" in zipf, zipf
    # and a finding: 9000 / 4000 µs; 2 GiB / 768 MiB = 2.67x the bytes; 241.3 / 201.3 GB/s = 120%
    assert ("all_to_all_v under zipf:1.2 (NCCL, 4 ranks, 1 GiB): 2.25x the uniform matrix's time; its busiest rank (0) "
            "moves 2.67x a uniform rank's bytes at 241 GB/s, 120% of the uniform rate.") in md
    nodes = md.split("## Within one node and across nodes")[1].split("\n## ")[0]
    assert "| all_reduce | nccl | 8 | 2 × 4 | inter-node (network) |" in nodes
    assert "| all_reduce | nccl | 4 | 1 × 4 | intra-node |" in nodes
    assert "nccl ws8 on 2 nodes (events)" in md  # the compact table keeps the 2-node job apart
    assert 'id="traffic"' in out_html.read_text() and 'id="nodes"' in out_html.read_text()
    # without such rows, neither section
    plain = make_synthetic(tmp_path / "plain", base)
    render_report(ReportInputs({"comm_summary": plain["summary_csv"], "comm_largest": plain["largest_csv"]}, plain["env_json"], [], {}, plain["plan"]),
                  tmp_path / "p.md", tmp_path / "p.html")
    assert "all_to_all_v by traffic" not in (tmp_path / "p.md").read_text()
    assert "across nodes" not in (tmp_path / "p.md").read_text()


def test_topology_matrix_as_a_coloured_table(report):
    md, html = report["md"], report["html"]
    section = md.split("## Topology\n")[1].split("\n## ")[0]
    assert "|  | GPU1 |" in section and "| GPU0 | NV18 |" in section  # the synthetic probe's one pair
    assert '<td class="link-nvlink">NV18</td>' in html
    from distbench.report.appendix import _link_class
    assert [_link_class(c) for c in ("NV4", "PIX", "PXB", "PHB", "NODE", "SYS", "X")] == [
        "nvlink", "pcie-switch", "pcie-switch", "pcie-host", "numa", "cross-socket", "self"]
