"""A configuration cause is named (issue 55 part 5): the gate reads NCCL's own account of its
collective (NCCL_DEBUG=INFO, one file per rank, through distbench.probes.nccl_log), sets the transport
it used between the GPUs beside what `nvidia-smi topo -m` and NVML offer, and where NCCL took a slower
path names it and every NCCL_* variable set that can force it, before "suspect the links".

Recorded logs (docs/fixtures.md): the real 2x H200 pair over P2P/CUMEM (h200x2-lent-2026-11-26-*),
the crafted NCCL 2.18 SHM log with NCCL_P2P_DISABLE (shm-p2p-disabled.log), and the real 2x H200
topology (NV18, tests/fixtures/topo/h200x2.txt)."""

import json
from pathlib import Path

from distbench.gate import check, culprit, rules, transport
from distbench.gate.rules import FAIL, INFO, WARN
from distbench.probes.topology import parse_topology
from tests.health.test_gate_culprit import H200, gate, health, readings

FIX = Path(__file__).resolve().parents[1] / "fixtures"
NCCL = FIX / "nccl"
P2P_LOGS = [NCCL / "h200x2-lent-2026-11-26-rank0-tuning.log", NCCL / "h200x2-lent-2026-11-26-rank1.log"]
SHM_LOG = NCCL / "shm-p2p-disabled.log"
NV18 = transport.compact_topology(parse_topology((FIX / "topo" / "h200x2.txt").read_text()))
PCIE = {"available": True, "links": [{"a": "GPU0", "b": "GPU1", "type": "PXB", "nvlinks": 0, "raw": "PXB"}]}
NOT_FORCERS_SET = {"NCCL_NVLS_ENABLE": "0", "NCCL_ALGO": "Ring", "NCCL_CUMEM_ENABLE": "0",
                   "NCCL_P2P_LEVEL": "NVL", "NCCL_IB_DISABLE": "1"}  # IB off picks sockets, never SHM


def crafted(tmp_path, name, drop=(), replace=(), add=()) -> Path:
    """shm-p2p-disabled.log changed: lines holding a `drop` string removed, `replace` pairs applied,
    `add` lines (NCCL INFO messages) put after its version line."""
    lines = [ln for ln in SHM_LOG.read_text().splitlines() if not any(d in ln for d in drop)]
    text = "\n".join(lines)
    for old, new in replace:
        text = text.replace(old, new)
    extra = "".join(f"\nbox:2201:2201 [0] NCCL INFO {msg}" for msg in add)
    text = text.replace("NCCL version 2.18.5+cuda12.2", "NCCL version 2.18.5+cuda12.2" + extra)
    path = tmp_path / name
    path.write_text(text + "\n")
    return path


def judged(tmp_path, monkeypatch, capsys, logs, env, busbw, topology=NV18, nvlink=None, procs=None):
    """The gate's line and gate.csv for a 2x H200 node whose collective ran at `busbw` and whose NCCL
    wrote `logs`, with `env` the NCCL_* variables of its environment."""
    rows = health(monkeypatch, count=2, procs=procs)
    r = readings(tmp_path, rows, busbw=busbw, gpus=2, gpu_name=H200, lat=4.6)
    r.update(nccl=transport.read_logs(logs), topology=topology, nccl_env_vars=env,
             nvlink=nvlink or {"available": False, "reason": "faked"})
    code, line = gate(tmp_path, monkeypatch, capsys, r, "--gpus", "2")
    csv = (tmp_path / "out" / "gate.csv").read_text()
    return code, line, csv


# ------------------------------------------------------------------------------------- NCCL's account
def test_nccls_account_is_read_from_its_per_rank_logs():
    p2p = transport.read_logs(P2P_LOGS)
    assert p2p["available"] and {t["transport"] for t in p2p["transports"]} == {"P2P/CUMEM"}
    assert p2p["ranks"]["0"]["nvmlDev"] == 0 and p2p["ranks"]["1"]["nvmlDev"] == 1
    shm = transport.read_logs([SHM_LOG])
    assert [t["transport"] for t in shm["transports"]] == ["SHM"] and shm["env"] == {"NCCL_P2P_DISABLE": "1"}


def test_a_rank_that_wrote_no_nccl_lines_is_said_not_guessed(tmp_path):
    empty = tmp_path / "nccl.box.1.log"
    empty.write_text("")
    got = transport.read_logs([empty])
    assert not got["available"] and "not an NCCL_DEBUG=INFO log" in got["reason"]
    checks = rules.transport_checks({"nccl": got})
    assert [c.state for c in checks] == [INFO] and "NCCL's account not read" in checks[0].reason


# ------------------------------------------------------------------------------------------ findings
def test_p2p_over_nvlink_is_no_finding():
    assert transport.findings(transport.read_logs(P2P_LOGS), NV18, None, {"NCCL_P2P_DISABLE": "1"}) == []
    checks = rules.transport_checks({"nccl": transport.read_logs(P2P_LOGS), "topology": NV18, "nccl_env_vars": {}})
    assert [(c.state, c.value) for c in checks] == [(INFO, "P2P/CUMEM")]
    assert "NCCL used P2P/CUMEM between GPU0 and GPU1 (NV18): no slower path" in checks[0].reason


def test_shm_with_p2p_disabled_over_nv18_names_the_variable():
    found = transport.findings(transport.read_logs([SHM_LOG]), NV18, None, {"NCCL_P2P_DISABLE": "1"})
    assert [f.text for f in found] == [
        "NCCL used SHM between GPU0 and GPU1, which NVLink (NV18) joins; NCCL_P2P_DISABLE=1 in the environment "
        "forces it"]


def test_a_variable_that_cannot_force_it_is_not_named(tmp_path):
    log = crafted(tmp_path, "shm-no-var.log", drop=("NCCL_P2P_DISABLE",))
    found = transport.findings(transport.read_logs([log]), NV18, None, NOT_FORCERS_SET)
    assert len(found) == 1 and found[0].variables == ()
    assert not any(name in found[0].text for name in NOT_FORCERS_SET), found[0].text
    assert "no NCCL_* variable that can force it is set" in found[0].text
    # beside one that can, only that one is named
    found = transport.findings(transport.read_logs([log]), NV18, None, {**NOT_FORCERS_SET, "NCCL_P2P_LEVEL": "LOC"})
    assert [v[0] for v in found[0].variables] == ["NCCL_P2P_LEVEL"]
    assert "NCCL_P2P_LEVEL=LOC in the environment forces it" in found[0].text
    assert not any(f"{name}=" in found[0].text for name in NOT_FORCERS_SET if name != "NCCL_P2P_LEVEL")


def test_net_sockets_between_gpus_of_one_node_names_every_variable_that_forces_it(tmp_path):
    log = crafted(tmp_path, "net-socket.log", replace=(("via SHM/direct/direct", "via NET/Socket/0"),),
                  add=("NCCL_SHM_DISABLE set by environment to 1.",))
    env = {**NOT_FORCERS_SET, "NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1"}
    (f,) = transport.findings(transport.read_logs([log]), NV18, None, env)
    assert f.transport == "NET/Socket"
    assert [v[0] for v in f.variables] == ["NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE", "NCCL_IB_DISABLE"]
    assert f.text.startswith("NCCL used NET/Socket between GPU0 and GPU1, which NVLink (NV18) joins; "
                             "NCCL_P2P_DISABLE=1 and NCCL_SHM_DISABLE=1 and NCCL_IB_DISABLE=1 in the environment force it")
    assert "NCCL_P2P_LEVEL" not in f.text and "NCCL_NVLS_ENABLE" not in f.text


def test_a_variable_nccl_took_from_its_conf_file_is_named_with_where_it_came_from():
    (f,) = transport.findings(transport.read_logs([SHM_LOG]), NV18, None, {})
    assert "NCCL_P2P_DISABLE=1 (NCCL took it from /etc/nccl.conf or ~/.nccl.conf: not in the environment)" in f.text


def test_shm_is_no_finding_where_the_hardware_offers_no_nvlink():
    shm = transport.read_logs([SHM_LOG])
    assert transport.findings(shm, PCIE, None, {"NCCL_P2P_DISABLE": "1"}) == []
    # topo says NV18, NVML says GPU 1's links are all down: the links' own checks speak, not the configuration
    down = {"available": True, "gpus": {"0": [18, 18], "1": [0, 18]}}
    assert transport.findings(shm, NV18, down, {"NCCL_P2P_DISABLE": "1"}) == []
    up = {"available": True, "gpus": {"0": [18, 18], "1": [18, 18]}}  # the same pair with its links up: found
    assert [f.offered for f in transport.findings(shm, NV18, up, {"NCCL_P2P_DISABLE": "1"})] == ["NVLink (NV18)"]


# ------------------------------------------------------------------------------------- the gate's line
def test_the_fail_names_the_configuration_not_the_links(tmp_path, monkeypatch, capsys):
    code, line, csv = judged(tmp_path, monkeypatch, capsys, [SHM_LOG], {**NOT_FORCERS_SET, "NCCL_P2P_DISABLE": "1"}, 27.5)
    assert code == 1 and line.startswith("distbench gate: FAIL n1: all_reduce 1 GiB"), line
    assert "27.5 GB/s busbw" in line
    assert ("NCCL used SHM between GPU0 and GPU1, which NVLink (NV18) joins; NCCL_P2P_DISABLE=1 in the "
            "environment forces it") in line
    assert "suspect the links" not in line and "no single GPU stands out" not in line
    assert not any(f"{name}=" in line for name in NOT_FORCERS_SET), line
    assert "NCCL transport GPU0-GPU1,SHM,P2P over NVLink (NV18),WARN" in csv


def test_the_links_are_still_suspected_when_nccl_used_p2p(tmp_path, monkeypatch, capsys):
    code, line, csv = judged(tmp_path, monkeypatch, capsys, P2P_LOGS, {"NCCL_P2P_LEVEL": "NVL"}, 27.5)
    assert code == 1 and "suspect the links" in line and "NCCL used" not in line
    assert "NCCL transport,P2P/CUMEM,,INFO" in csv


def test_a_healthy_node_over_p2p_passes(tmp_path, monkeypatch, capsys):
    code, line, csv = judged(tmp_path, monkeypatch, capsys, P2P_LOGS, {}, 326.0)
    assert code == 0 and line.startswith("distbench gate: PASS"), line
    assert "NCCL used P2P/CUMEM between GPU0 and GPU1 (NV18): no slower path than the hardware offers" in csv


def test_the_configuration_cause_is_said_beside_a_gpu_that_stands_out(tmp_path, monkeypatch, capsys):
    code, line, _ = judged(tmp_path, monkeypatch, capsys, [SHM_LOG], {"NCCL_P2P_DISABLE": "1"}, 27.5,
                           procs={1: [(4242, "python3", 1 << 30)]})
    assert code == 1 and line.startswith("distbench gate: FAIL n1: GPU 1"), line
    assert "NCCL used SHM between GPU0 and GPU1, which NVLink (NV18) joins; NCCL_P2P_DISABLE=1" in line


def test_culprit_prefers_the_configuration_to_the_links():
    miss = rules.Check("reference", "all_reduce 1 GiB (events, nccl, 2 ranks) busbw_gbps", "27.5", ">= 288", FAIL,
                       "27.5 GB/s busbw, under half of ...")
    cause = rules.Check("transport", "NCCL transport GPU0-GPU1", "SHM", "P2P over NVLink (NV18)", WARN, "NCCL used SHM ...")
    assert culprit.lead([], [miss, cause], FAIL).endswith("; NCCL used SHM ...")
    assert "suspect the links" in culprit.lead([], [miss], FAIL)
    assert "NCCL used SHM" in rules.reason([miss, cause], FAIL, [])


# --------------------------------------------------------------------------- the comm check's launch
def test_the_comm_check_runs_with_nccls_account_per_rank_and_reads_it(tmp_path, monkeypatch):
    import distbench.comm.job as job

    seen = {}

    def fake_run_comm_job(j, params, out_csv, placement, log):
        seen["env"] = dict(params["job_env"])
        seen["label"] = j.nccl_env_label
        for rank, src in enumerate(P2P_LOGS):  # each rank's NCCL writes its own file
            Path(params["job_env"]["NCCL_DEBUG_FILE"].replace("%h", "vm").replace("%p", str(100 + rank))).write_text(
                src.read_text())
        Path(out_csv).write_text("")
        return "ok"

    monkeypatch.setattr(job, "run_comm_job", fake_run_comm_job)
    out = tmp_path / "gate"
    stale = out / transport.LOG_DIR / "nccl.old.1.log"  # an earlier gate's log in a reused --out
    stale.parent.mkdir(parents=True)
    stale.write_text(SHM_LOG.read_text())
    check.run_comm("nccl", 2, out, 30)
    assert seen["env"]["NCCL_DEBUG"] == "INFO" and seen["env"]["NCCL_DEBUG_SUBSYS"] == "INIT,ENV"
    assert seen["env"]["NCCL_DEBUG_FILE"] == str(out / "gate_nccl" / "nccl.%h.%p.log")
    assert "NCCL_DEBUG" not in seen["label"]  # the comm table's label (a baseline's match) stays the gate's
    got = check.nccl_account(out)
    assert not stale.exists() and len(got["files"]) == 2
    assert {t["transport"] for t in got["transports"]} == {"P2P/CUMEM"}
    assert json.loads(json.dumps(got)) == got  # it goes into readings.json


def test_a_collective_cut_by_the_budget_still_names_the_transport(tmp_path, monkeypatch, capsys):
    """NCCL over sockets at 1 GiB can outlast the budget: its account was written at init, and the
    gate reads it from the log directory the readings named."""
    from distbench.gate import cli
    from tests.health.test_gate_inputs import FakeBudget

    class CutBudget(FakeBudget):
        def run(self, cmd, env, log_path):
            super().run(cmd, env, log_path)
            return "killed", 3

    logs = tmp_path / "logs"
    logs.mkdir()
    crafted(logs, "nccl.box.2201.log", replace=(("via SHM/direct/direct", "via NET/Socket/0"),))
    r = {"backend": "nccl", "gpus": 2, "gpu_name": H200, "comm_status": "not run", "topology": NV18,
         "nccl_env_vars": {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1", "NCCL_NVLS_ENABLE": "0"},
         "nccl_log_dir": str(logs), "step": "collective check (nccl, 2 ranks)", "health": []}
    CutBudget.READINGS = r
    monkeypatch.setattr(cli, "Budget", CutBudget)
    code = cli.main(["--node", "n1", "--out", str(tmp_path / "out")])
    line = capsys.readouterr().out.strip()
    assert code == 1 and "not done within its 60 s budget" in line, line
    assert ("NCCL used NET/Socket between GPU0 and GPU1, which NVLink (NV18) joins; NCCL_P2P_DISABLE=1 and "
            "NCCL_SHM_DISABLE=1 in the environment force it") in line
    assert "NCCL_NVLS_ENABLE" not in line
