"""The workflow is formatted by snakefmt and passes `snakemake --lint` (what .ci/run also runs)."""

import re
import subprocess
import sys

from tests.conftest import REPO, snakemake


def lint_problems(result) -> str:
    """'' when `snakemake --lint` found nothing, else its whole output. Some Snakemake versions print
    findings ("Lints for rule ...") and still exit 0, so the output is read as well as the status."""
    out = result.stdout + result.stderr
    clean = result.returncode == 0 and "Lints for" not in out and "Congratulations" in out
    return "" if clean else f"snakemake --lint (exit {result.returncode}):\n{out}"


def test_snakefmt_check():
    r = subprocess.run([sys.executable, "-m", "snakefmt", "--check", "--diff", "Snakefile", "rules/"],
                       cwd=REPO, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"snakefmt --check failed (run `snakefmt Snakefile rules/`):\n{r.stdout}{r.stderr}"


def test_snakemake_lint_finds_nothing(workflow_dir):
    problems = lint_problems(snakemake(workflow_dir, "--lint"))
    assert not problems, problems


def test_lint_check_catches_a_finding(workflow_dir):
    # Guards the check above: a rule without a log directive must be reported.
    plot = workflow_dir / "rules/report.smk"
    text, n = re.subn(r"\n    log:\n        .*\n", "\n", plot.read_text(), count=1)
    assert n == 1
    plot.write_text(text)
    problems = lint_problems(snakemake(workflow_dir, "--lint"))
    assert "No log directive defined" in problems
