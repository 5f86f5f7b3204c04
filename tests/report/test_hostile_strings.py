"""Hostile strings in probe data (<script>, quotes, pipes: a host name, a GPU name, environment
variables, an unknown probe key) are inert in both reports: escaped in the HTML, kept inside their
Markdown table cells, and nothing from them runs in a real browser."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess

import pytest
from synthetic import ENV, make_synthetic

from distbench.core.section import ReportInputs
from distbench.report.render import render_report

HOSTNAME = "<script>alert(1)</script>"
GPU_NAME = "\"x\" 'y' | z"
MARKER_SCRIPT = "<script>document.body.dataset.pwned='script'</script>"
MARKER_IMG = "<img src=x onerror=\"document.body.dataset.pwned='img'\">"


def _hostile_env() -> dict:
    env = json.loads(json.dumps(ENV))
    env["hostname"] = HOSTNAME
    env["gpus"][0]["name"] = GPU_NAME
    env["job_env"] = {"NCCL_DEBUG": "<b>", "NCCL_SOCKET_IFNAME": "a|b\\|c"}
    env["note"] = MARKER_SCRIPT + MARKER_IMG  # an unknown probe key: shown as an extra row
    return env


def _gfm_cells(line: str) -> list[str]:
    """A GFM table row split as cmark-gfm splits it: on each `|` not escaped by a backslash (a backslash
    escapes the next character, a backslash included)."""
    cells, cur, i = [], "", 0
    body = line.strip()
    assert body.startswith("|") and body.endswith("|"), line
    body = body[1:]
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body):
            cur += body[i:i + 2]
            i += 2
            continue
        if c == "|":
            cells.append(cur.strip())
            cur = ""
        else:
            cur += c
        i += 1
    assert not cur.strip(), line  # the row ends with a delimiter
    return cells


@pytest.fixture(scope="module")
def hostile_report(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hostile")
    data = make_synthetic(tmp / "tables")
    env_json = tmp / "env.json"
    env_json.write_text(json.dumps(_hostile_env()))
    extra = {**data["extra"], "placement": [{"rank": 0, "hostname": HOSTNAME, "device": "cpu"}]}
    out_md, out_html = tmp / "report" / "report.md", tmp / "report" / "report.html"
    render_report(ReportInputs({"comm_summary": data["summary_csv"], "comm_largest": data["largest_csv"]}, env_json, [], data["config"], data["plan"],
                               extra=extra),
                  out_md, out_html)
    return tmp, out_md.read_text(), out_html


def test_hostile_probe_strings_are_escaped_in_the_html(hostile_report):
    _, _, out_html = hostile_report
    page = out_html.read_text()
    assert "<script>alert" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert len(re.findall(r"<script\b", page, flags=re.I)) == 1  # the report's own, nothing else
    assert "<img" not in page and "<b>" not in page
    assert "&#34;x&#34; &#39;y&#39; | z (" in page  # markupsafe's entities for the quotes
    assert "NCCL_DEBUG=&#39;&lt;b&gt;&#39;" in page


def test_hostile_probe_strings_keep_the_markdown_table_and_stay_inert(hostile_report):
    _, md, _ = hostile_report
    # outside code blocks (where Markdown shows text as is: the synthetic config has a <b> label)
    prose = re.sub(r"(?ms)^(`{3,})[^\n]*\n.*?^\1$", "", md)
    assert "## Configuration" in prose and "label: <b>" not in prose
    assert "<script" not in prose and "<img" not in prose and "<b>" not in prose
    assert "&lt;script&gt;document.body.dataset.pwned" in prose
    section = md.split("### Environment and versions\n", 1)[1].split("\n#", 1)[0]
    rows = [ln for ln in section.splitlines() if ln.startswith("|")]
    assert rows and all(len(_gfm_cells(r)) == 2 for r in rows), rows
    cells = {c[0]: c[1] for c in map(_gfm_cells, rows[2:])}
    assert cells["hostname"] == "&lt;script&gt;alert(1)&lt;/script&gt;"
    assert cells["GPU 0"].startswith("\"x\" 'y' \\| z (")
    env_row = next(v for k, v in cells.items() if k.startswith("environment variables"))
    assert env_row == "NCCL_DEBUG='&lt;b&gt;' NCCL_SOCKET_IFNAME='a\\|b\\\\\\|c'"  # renders as a|b\|c
    placement = md.split("## Rank placement\n", 1)[1].split("\n## ", 1)[0]
    prow = [ln for ln in placement.splitlines() if ln.startswith("| 0 ")]
    assert prow and _gfm_cells(prow[0]) == ["0", "&lt;script&gt;alert(1)&lt;/script&gt;", "cpu"]


BROWSER = next((b for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)


@pytest.mark.skipif(BROWSER is None, reason="no chromium/chromium-browser/google-chrome on PATH")
def test_hostile_probe_strings_run_nothing_in_a_browser(hostile_report):
    tmp, _, out_html = hostile_report
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run", "--virtual-time-budget=3000"]
    dom = subprocess.run([BROWSER, *flags, f"--user-data-dir={tmp / 'profile'}", "--dump-dom", out_html.as_uri()],
                         capture_output=True, text=True, timeout=90, check=True).stdout
    body = re.search(r"<body\b[^>]*>", dom).group(0)
    assert "data-images-total" in body  # the report's own script ran ...
    assert "pwned" not in body  # ... and nothing from the probe data did
    assert len(re.findall(r"<script\b", dom, flags=re.I)) == 1 and "<img" not in dom
    text = html.unescape(dom)
    assert HOSTNAME in text and GPU_NAME in text  # shown as text
