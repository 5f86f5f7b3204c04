"""A drain (or resume) that cannot be carried out is loud (issue 55), without SLURM: a FAIL whose drain
fails says `DRAIN FAILED: <why>` first in its one line and exits 3 (never 1, which reads as drained), a
PASS whose resume fails `RESUME FAILED: <why>`, and the line goes to syslog (HealthCheckProgram ignores
exit codes). scontrol is missing (a PATH without it) or a script on PATH that refuses, as scontrol does
for a node slurmctld does not know. The real controller's case: tests/health/test_gate_slurm.py."""

import pandas as pd
import pytest

from distbench.gate import cli, slurm
from tests.health.test_gate_inputs import FakeBudget, _skipped, nvml_with

REFUSES = "#!/bin/sh\necho \"$@\" >> \"${0%/*}/calls\"\necho 'scontrol: error: Invalid node name specified' >&2\nexit 1\n"
# drains (update exits 0); `show node` answers a node distbench drained, or as SHOW says
WORKS = ("#!/bin/sh\necho \"$@\" >> \"${0%/*}/calls\"\n"
         "if [ \"$1\" = show ]; then echo \"NodeName=$3 Arch=x86_64 State=${SHOW:-IDLE+DRAIN} "
         "Reason=distbench: GPU 0 hot [root@2026-11-29T10:00:00]\"; exit 0; fi\nexit ${UPDATE_RC:-0}\n")


@pytest.fixture
def bin_dir(tmp_path, monkeypatch):
    """PATH: a directory of this test's own (no scontrol unless the test puts one there)."""
    d = tmp_path / "bin"
    d.mkdir()
    monkeypatch.setenv("PATH", str(d))
    return d


def _scontrol(d, text):
    (d / "scontrol").write_text(text)
    (d / "scontrol").chmod(0o755)


@pytest.fixture
def said(monkeypatch):
    import syslog

    lines = []
    monkeypatch.setattr(syslog, "syslog", lambda *a: lines.append(a[-1]))
    return lines


def _gate(tmp_path, monkeypatch, capsys, failing: bool, *flags):
    FakeBudget.READINGS = _skipped(nvml_with(monkeypatch, 2, 8 if failing else 2))
    monkeypatch.setattr(cli, "Budget", FakeBudget)
    code = cli.main(["--node", "n1", "--gpus", "8" if failing else "2", "--out", str(tmp_path / "out"), *flags])
    return code, capsys.readouterr()


def test_a_drain_with_no_scontrol_on_path_is_exit_3_and_said(tmp_path, monkeypatch, capsys, bin_dir, said):
    code, out = _gate(tmp_path, monkeypatch, capsys, True, "--drain")
    assert code == cli.EXIT_ERROR, out
    assert out.out.startswith(f"distbench gate: FAIL n1: DRAIN FAILED: could not drain n1: no scontrol on PATH "
                              f"({bin_dir}) | node gpu_count: "), out.out
    assert said == [out.out.strip()]
    verdict = pd.read_csv(tmp_path / "out" / "gate.csv").query("check == 'verdict'")
    assert verdict["state"].tolist() == ["FAIL"] and verdict["reason"].str.startswith("DRAIN FAILED: ").all()


def test_a_drain_scontrol_refuses_is_exit_3_with_its_words(tmp_path, monkeypatch, capsys, bin_dir, said):
    _scontrol(bin_dir, REFUSES)
    code, out = _gate(tmp_path, monkeypatch, capsys, True, "--drain")
    assert code == cli.EXIT_ERROR, out
    assert out.out.startswith("distbench gate: FAIL n1: DRAIN FAILED: could not drain n1: scontrol update "
                              "NodeName=n1 refused (exit 1): scontrol: error: Invalid node name specified | "), out.out
    assert (bin_dir / "calls").read_text().startswith("update NodeName=n1 State=DRAIN Reason=distbench: node gpu_count")
    assert said and "DRAIN FAILED" in said[0]


def test_a_drain_carried_out_is_exit_1_and_quiet(tmp_path, monkeypatch, capsys, bin_dir, said):
    _scontrol(bin_dir, WORKS)
    code, out = _gate(tmp_path, monkeypatch, capsys, True, "--drain")
    assert code == cli.EXIT_FAIL and "FAILED" not in out.out and "drained n1" in out.err, out
    assert said == []


def test_a_resume_with_no_scontrol_is_exit_3_never_not_drained(tmp_path, monkeypatch, capsys, bin_dir, said):
    """It said "n1 is not drained (state unknown)" and exited 0."""
    code, out = _gate(tmp_path, monkeypatch, capsys, False, "--resume")
    assert code == cli.EXIT_ERROR, out
    assert out.out.startswith("distbench gate: WARN n1: RESUME FAILED: could not resume n1: its state is unknown: "
                              "no scontrol on PATH"), out.out
    assert "not drained" not in out.out + out.err and said


def test_a_resume_scontrol_refuses_is_exit_3(tmp_path, monkeypatch, capsys, bin_dir, said):
    _scontrol(bin_dir, WORKS)
    monkeypatch.setenv("UPDATE_RC", "1")  # shows the node drained by distbench, refuses the update
    code, out = _gate(tmp_path, monkeypatch, capsys, False, "--resume")
    assert code == cli.EXIT_ERROR, out
    assert "RESUME FAILED: could not resume n1: scontrol update NodeName=n1 refused (exit 1)" in out.out, out.out
    _scontrol(bin_dir, REFUSES)  # `show node` refused: the state is unknown, never "not drained"
    code, out = _gate(tmp_path, monkeypatch, capsys, False, "--resume")
    assert code == cli.EXIT_ERROR and "RESUME FAILED: could not resume n1: its state is unknown: scontrol show " \
                                      "node refused (exit 1): scontrol: error: Invalid node name specified" in out.out


@pytest.mark.parametrize("show, words", [("IDLE", "n1 is not drained (IDLE)"),
                                         ("IDLE+DRAIN", "resumed n1 (distbench had drained it)")])
def test_a_resume_with_nothing_to_do_or_done_is_exit_0(show, words, tmp_path, monkeypatch, capsys, bin_dir, said):
    _scontrol(bin_dir, WORKS)
    monkeypatch.setenv("SHOW", show)
    code, out = _gate(tmp_path, monkeypatch, capsys, False, "--resume")
    assert code == cli.EXIT_PASS and words in out.err and "FAILED" not in out.out, out
    assert said == []


def test_scontrol_timing_out_is_a_failed_drain(tmp_path, monkeypatch, bin_dir):
    _scontrol(bin_dir, "#!/bin/sh\nexec /bin/sleep 30\n")
    monkeypatch.setattr(slurm, "SCONTROL_TIMEOUT_S", 0.5)
    act = slurm.drain("n1", "why")
    assert not act.done and act.text == "could not drain n1: scontrol update NodeName=n1 did not answer within 0.5 s"
