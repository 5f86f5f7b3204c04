"""The report's environment table: the NCCL torch loaded is labelled as such; NCCL_VERSION and the other
recorded environment variables appear only as NAME=value in the environment-variable row."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from synthetic import ENV, make_synthetic

from distbench.core.section import ReportInputs
from distbench.report.render import render_report

REPO = Path(__file__).resolve().parents[2]
H200_ENV = REPO / "benchmarks/results/comm-fidelity-h200x2-2026-11-26/probe/env.json"  # a real GPU probe (read only)


def _render(tmp_path, env: dict) -> tuple[list[str], str]:
    """Render both reports with this env.json; the Markdown Environment table's rows and the HTML."""
    data = make_synthetic(tmp_path / "tables")
    env_json = tmp_path / "env.json"
    env_json.write_text(json.dumps(env))
    out_md, out_html = tmp_path / "report" / "report.md", tmp_path / "report" / "report.html"
    render_report(ReportInputs({"comm_summary": data["summary_csv"], "comm_largest": data["largest_csv"]}, env_json, [], data["config"], data["plan"]),
                  out_md, out_html)
    md = out_md.read_text()
    section = md.split("### Environment and versions\n", 1)[1].split("\n#", 1)[0]
    return [line for line in section.splitlines() if line.startswith("| ")], out_html.read_text()


def _row(rows: list[str], label_start: str) -> str:
    hits = [r for r in rows if r.startswith(f"| {label_start}")]
    assert len(hits) == 1, (label_start, rows)
    return hits[0]


def test_loaded_nccl_and_nccl_version_variable_are_told_apart(tmp_path):
    env = {**ENV, "cuda_available": True, "nccl_version": "2.28.9",
           "job_env": {"NCCL_VERSION": "2.28.3", "NCCL_NVLS_ENABLE": "0"}}
    rows, html = _render(tmp_path, env)
    assert _row(rows, "NCCL (loaded by torch)") == "| NCCL (loaded by torch) | 2.28.9 |"
    assert not any(r.startswith("| nccl_version") for r in rows)
    variables = _row(rows, "environment variables (")
    assert variables.startswith("| environment variables (NCCL_*, TORCH_NCCL*, NVSHMEM_*, TORCH_SYMM*) |")
    assert "NCCL_VERSION=2.28.3" in variables and "NCCL_NVLS_ENABLE=0" in variables
    assert [r for r in rows if "2.28.3" in r] == [variables]  # the image's variable only there, never a version
    assert [r for r in rows if "2.28.9" in r] == ["| NCCL (loaded by torch) | 2.28.9 |"]
    assert "<td>NCCL (loaded by torch)</td><td>2.28.9</td>" in html
    cells = re.findall(r"<tr><td>([^<]*)</td><td>([^<]*)</td></tr>", html)
    assert [label for label, value in cells if "2.28.3" in value] == [
        "environment variables (NCCL_*, TORCH_NCCL*, NVSHMEM_*, TORCH_SYMM*)"]


def test_real_h200_probe(tmp_path):
    env = json.loads(H200_ENV.read_text())
    assert env["job_env"]["NCCL_VERSION"] != env["nccl_version"]  # the case this table must not confuse
    rows, _ = _render(tmp_path, env)
    assert _row(rows, "NCCL (loaded by torch)") == f"| NCCL (loaded by torch) | {env['nccl_version']} |"
    variables = _row(rows, "environment variables (")
    assert f"NCCL_VERSION={env['job_env']['NCCL_VERSION']}" in variables
    assert all(f"{k}={v}" in variables for k, v in env["job_env"].items())
    assert [r for r in rows if env["job_env"]["NCCL_VERSION"] in r] == [variables]


@pytest.mark.parametrize("extra", [{"cuda_available": False}, {"cuda": None}])
def test_no_cuda(tmp_path, extra):
    env = {k: v for k, v in ENV.items() if k not in ("gpus", "cuda")}
    rows, _ = _render(tmp_path, {**env, "nccl_version": None, "gpu_count": 0, "job_env": {}, **extra})
    assert _row(rows, "NCCL (loaded by torch)") == "| NCCL (loaded by torch) | n/a (no CUDA) |"
    assert _row(rows, "environment variables (").endswith("| none set |")


def test_values_that_need_quoting_stay_one_variable(tmp_path):
    rows, _ = _render(tmp_path, {**ENV, "job_env": {"NCCL_SOCKET_IFNAME": "eth0,eth1", "NCCL_DEBUG_FILE": "a b"}})
    variables = _row(rows, "environment variables (")
    assert "NCCL_DEBUG_FILE='a b' NCCL_SOCKET_IFNAME=eth0,eth1" in variables
