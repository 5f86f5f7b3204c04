"""The gate's exit codes (issue 55): one source, distbench.gate.cli.EXIT_CODES; docs/gate.md's table and
`--help` (its epilog) say exactly what it says."""

import re
import subprocess
import sys

from distbench.gate import cli
from tests.conftest import REPO


def _docs_table() -> dict[str, str]:
    text = (REPO / "docs" / "gate.md").read_text()
    start = text.index("| exit | meaning |")
    rows = {}
    for row in text[start:].split("\n\n", 1)[0].splitlines()[2:]:
        code, meaning = re.fullmatch(r"\| (\S+) \| (.*) \|", row).groups()
        rows[code] = meaning
    return rows


def test_the_docs_table_is_the_clis_exit_codes():
    want = {str(code): text for code, text in cli.EXIT_CODES.items()} | {"other": cli.EXIT_OTHER}
    assert _docs_table() == want
    assert set(cli.EXIT_CODES) == {cli.EXIT_PASS, cli.EXIT_FAIL, cli.EXIT_USAGE, cli.EXIT_ERROR}


def test_help_lists_every_exit_code():
    out = subprocess.run([sys.executable, "-m", "distbench.gate", "--help"], capture_output=True, text=True,
                         timeout=60, cwd=REPO)
    assert out.returncode == 0, out.stderr
    tail = out.stdout.split("exit codes (docs/gate.md):", 1)[1]
    flat = " ".join(tail.split())
    for code, text in [*cli.EXIT_CODES.items(), ("other", cli.EXIT_OTHER)]:
        assert f"{code} {' '.join(text.split())}" in flat, (code, flat)
