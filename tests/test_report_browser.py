"""Open the HTML report in a real headless browser: text present, every figure decodes from a data: URI.

The report carries a tiny inline script that counts <img> elements with naturalWidth > 0 into
<body data-images-loaded>; --dump-dom serialises the DOM after it ran.
"""

from __future__ import annotations

import html
import os
import re
import shutil
import subprocess

import pytest
from synthetic import render_synthetic_report

BROWSER = next((b for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)
# CI sets DISTBENCH_REQUIRE_BROWSER=1: there a missing browser is a failure, not a skip.
pytestmark = pytest.mark.skipif(BROWSER is None and not os.environ.get("DISTBENCH_REQUIRE_BROWSER"),
                                reason="no chromium/chromium-browser/google-chrome on PATH (CI installs Debian's chromium)")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
         "--virtual-time-budget=5000", "--run-all-compositor-stages-before-draw"]


def _browser(tmp, name, *args):
    assert BROWSER, "DISTBENCH_REQUIRE_BROWSER is set but no chromium/chromium-browser/google-chrome is on PATH"
    cmd = [BROWSER, *FLAGS, f"--user-data-dir={tmp / f'profile-{name}'}", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=90, check=True).stdout


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("browser")
    r = render_synthetic_report(tmp)
    return tmp, r["out_html"], [p for p in r["figures"] if p.suffix == ".png"], r["findings"]


def test_dom_has_findings_and_decoded_images(rendered):
    tmp, out_html, pngs, findings = rendered
    dom = _browser(tmp, "dom", "--dump-dom", out_html.as_uri())
    text = html.unescape(dom)
    for f in findings:
        assert f in text
    srcs = re.findall(r"<img\b[^>]*\bsrc=\"([^\"]*)\"", dom)
    assert len(srcs) == len(pngs) and all(s.startswith("data:image/") for s in srcs)
    body = re.search(r"<body\b[^>]*>", dom).group(0)
    assert f'data-images-loaded="{len(pngs)}"' in body, body


def test_screenshot_is_non_trivial(rendered):
    tmp, out_html, _, _ = rendered
    shot = tmp / "shot.png"
    _browser(tmp, "shot", f"--screenshot={shot}", "--window-size=1200,3000", out_html.as_uri())
    assert shot.exists() and shot.read_bytes().startswith(b"\x89PNG") and shot.stat().st_size > 20_000
