"""A job that crashes or hangs ends in bounded time with a recorded status; finished rows survive."""

import json
import re
import time

import pytest

from distbench.comm.job import comm_args, run_comm_job
from distbench.launch.torchrun import PROGRESS_GAP_S, HostCannotRun, TorchrunJob, job_environment, torchrun_command
from distbench.comm.plan import CommJob
from distbench.comm.contract import read_comm_csv, read_comm_ranks_csv

# `pytest -m heavy` (README: the second test command): real crashing, hanging and lost-rank jobs under the
# launcher.
pytestmark = pytest.mark.heavy


def _params(**kw):
    p = {"ops": ["all_reduce"], "sizes": [8], "warmup": 0, "iters": 2, "trials": 2, "timing": ["host"],
         "graph_launches": 1, "rank_agg": "max", "rotate_bytes": 2**20, "op_timeout_s": 60, "job_timeout_s": 120,
         "job_env": {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}}
    p.update(kw)
    return p


def test_command_is_an_argument_list_and_env_keeps_nvls_off():
    job = CommJob("nccl", "float32", 2, "NCCL_ALGO=Ring", {"NCCL_ALGO": "Ring"})
    tjob = TorchrunJob("distbench.comm", comm_args(job, _params(), "o.csv", "p.json"), 2, {}, 60, [], "p.json",
                       "log", lambda message: None)
    cmd = torchrun_command(tjob)
    assert isinstance(cmd, list) and "--nproc_per_node=2" in cmd and "NCCL_ALGO=Ring" in cmd
    assert cmd[cmd.index("-m", 3) + 1] == "distbench.comm"
    env = job_environment(_params()["job_env"], job.nccl_env, base={"OMP_NUM_THREADS": "8"})
    assert env["NCCL_NVLS_ENABLE"] == "0" and env["NCCL_ALGO"] == "Ring" and env["OMP_NUM_THREADS"] == "1"


def test_a_job_this_host_cannot_run_leaves_nothing_and_says_why(tmp_path):
    # NCCL on a host without CUDA: not a measurement that failed (those keep failed/not_run rows,
    # below) but a job for another host, so nothing is kept and a capable host runs it again.
    job = CommJob("nccl", "float32", 2, "default", {})
    out = [tmp_path / "c.csv", tmp_path / "p.json"]
    with pytest.raises(HostCannotRun, match="this host cannot run this job: backend nccl needs CUDA") as e:
        run_comm_job(job, _params(ops=["all_reduce", "barrier"], sizes=[8, 1024]), *out, tmp_path / "log")
    assert e.value.exit_code != 0
    assert not any(p.exists() for p in out) and not list(tmp_path.glob("*.partial*"))


def _swap_entry_point(monkeypatch, helper, module="distbench.comm"):
    """Run a tests/helpers entry point under the real launcher instead of the family's module
    (helpers that wrap a module, like shared_gpu.py, get the module name as their first argument)."""
    from distbench.launch import torchrun as launch
    from tests.conftest import REPO

    real = launch.worker_command

    def command(*a, **kw):
        cmd = real(*a, **kw)
        i = cmd.index(module)
        wrapped = [module] if helper == "shared_gpu.py" else []
        return cmd[: i - 1] + [str(REPO / "tests/helpers" / helper), *wrapped] + cmd[i + 1:]

    monkeypatch.setattr(launch, "worker_command", command)


@pytest.mark.parametrize("flight_recorder", ["1", "0"])
def test_a_hung_job_is_killed_in_bounded_time_and_keeps_finished_rows(tmp_path, monkeypatch, flight_recorder):
    # Either way the point in progress is `hung`, naming rank 1 from the ranks' progress beacons
    # (distbench.launch.progress); with the Flight Recorder on (the default outside comm) the
    # collective too (distbench.launch.hang).
    monkeypatch.setenv("DISTBENCH_FLIGHT_RECORDER", flight_recorder)
    # The job limit must outlast torchrun's start-up on a loaded machine: measure that start-up
    # here (a complete one-point job) and give the hung job a limit with a wide margin over it.
    job = CommJob("gloo", "float32", 2, "default", {})
    t0 = time.monotonic()
    assert run_comm_job(job, _params(), tmp_path / "warm.csv", tmp_path / "warm.json", tmp_path / "warm.log") == "ok"
    startup_s = time.monotonic() - t0
    limit_s = int(3 * startup_s) + 10

    _swap_entry_point(monkeypatch, "rank_hangs.py")  # rank 1 sleeps forever at the second point
    t0 = time.monotonic()
    # the collective's own timeout well after the job's limit, whatever the start-up took
    msg = run_comm_job(job, _params(sizes=[8, 1024, 4096], job_timeout_s=limit_s, op_timeout_s=limit_s + 120),
                       tmp_path / "c.csv", tmp_path / "p.json", tmp_path / "log")
    elapsed = time.monotonic() - t0
    assert f"killed after {limit_s} s" in msg
    # two progress readings (PROGRESS_GAP_S), the dumps (DUMP_WAIT_S at most), SIGTERM, then SIGKILL 10 s later at most
    assert limit_s <= elapsed < limit_s + PROGRESS_GAP_S + 30, (elapsed, limit_s)
    df = read_comm_csv(tmp_path / "c.csv")
    assert list(df["status"]) == ["ok", "ok", "hung", "hung", "not_run", "not_run"]
    # rank 1 never starts the second point: it is behind, last seen checking the first one
    assert re.match(r"hung: rank 1 stopped responding \(its process runs, but it is behind the others\) in "
                    r"all_reduce 8 B \(host\): check after timing, after \d+ collectives; rank 0 waited in all_reduce 1 KiB \(host\): buffers",
                    msg), msg
    if flight_recorder == "1":  # rank 1 sleeps before the vote on its buffers: rank 0 waits in that all_reduce
        assert re.search(r"rank 1 never joined collective #\d+ \(gloo:all_reduce of \[\[1\]\] Int\)", msg), msg
        assert (tmp_path / "c.hang.json").exists() and (tmp_path / "c.flight_recorder/stack_1.txt").exists()
    else:
        assert "Flight Recorder" not in msg and not (tmp_path / "c.flight_recorder").exists()
    ranks = read_comm_ranks_csv(tmp_path / "c_ranks.csv")
    assert set(ranks["size_bytes"]) == {8} and len(ranks) == 2 * 2  # finished point only: 2 trials x 2 ranks
    assert not (tmp_path / "c.csv.partial").exists() and not (tmp_path / "c_ranks.csv.partial").exists()


def test_the_root_cause_is_a_rank_seen_failed_before_the_launcher_killed_the_others():
    # rank 1 failed (code 17); the launcher then killed rank 0 (SIGTERM), and on a busy host rank 1's
    # waiter thread recorded its end after rank 0's: the rank seen failed first is still the one named
    from types import SimpleNamespace

    from distbench.launch.torchrun import _first_failure

    procs = [SimpleNamespace(returncode=-15), SimpleNamespace(returncode=17)]
    ended = {0: 10.0, 1: 10.2}
    assert _first_failure(procs, ended, [1]) == "rank 1 exited with code 17"
    assert _first_failure(procs, ended) == "rank 0 exited with code -15 (SIGTERM)"  # without: the killed one


def test_a_lost_rank_ends_the_job_with_a_recorded_status(tmp_path, monkeypatch):
    _swap_entry_point(monkeypatch, "rank_dies.py")
    job = CommJob("gloo", "float32", 2, "default", {})
    t0 = time.monotonic()
    msg = run_comm_job(job, _params(sizes=[8, 1024, 4096], op_timeout_s=20), tmp_path / "c.csv",
                       tmp_path / "p.json", tmp_path / "log")
    assert time.monotonic() - t0 < 90
    assert "rank 1 exited with code 17" in msg
    df = read_comm_csv(tmp_path / "c.csv")
    assert list(df["status"]) == ["ok", "ok", "failed", "failed", "not_run", "not_run"]
    assert df.loc[df["status"] == "failed", "size_bytes"].tolist() == [1024, 1024]


def test_a_job_can_be_run_from_a_worker_thread(tmp_path):
    # signal handlers are main-thread only: the launcher must not need them elsewhere
    import threading

    job = CommJob("gloo", "float32", 2, "default", {})
    result = {}
    t = threading.Thread(target=lambda: result.update(msg=run_comm_job(
        job, _params(), tmp_path / "c.csv", tmp_path / "p.json", tmp_path / "log")))
    t.start()
    t.join(timeout=120)
    assert result.get("msg") == "ok"


def test_a_job_records_where_its_time_went_and_starts_its_ranks_directly(tmp_path, monkeypatch):
    """One-node jobs start their ranks without torchrun's agent (the command in the provenance is the
    rank's own), and the placement file keeps the job's time by phase (distbench.launch.timeline)."""
    job = CommJob("gloo", "float32", 2, "default", {})
    assert run_comm_job(job, _params(), tmp_path / "c.csv", tmp_path / "p.json", tmp_path / "log") == "ok"
    prov = json.loads((tmp_path / "p.json").read_text())["provenance"]
    assert len(prov["commands"]) == 2 and not any("torch.distributed.run" in c for c in prov["commands"])
    t = prov["timeline"]
    for piece in ("interpreter_s", "import_torch_s", "device_and_pg_init_s", "measure_s", "teardown_s", "agent_exit_s"):
        assert 0 <= t[piece] < t["wall_s"], piece
    assert t["import_torch_s"] > 0.05 and t["fixed_cost_s"] == pytest.approx(t["wall_s"] - t["measure_s"], abs=2e-3)  # each rounded to 1 ms
    assert "fixed cost" in (tmp_path / "log").read_text()

    monkeypatch.setenv("DISTBENCH_ONE_NODE_LAUNCH", "torchrun")  # the agent back on request
    assert run_comm_job(job, _params(), tmp_path / "d.csv", tmp_path / "q.json", tmp_path / "log2") == "ok"
    prov = json.loads((tmp_path / "q.json").read_text())["provenance"]
    assert len(prov["commands"]) == 1 and "torch.distributed.run" in prov["commands"][0]
    assert prov["timeline"]["agent_and_spawn_s"] > 0

    monkeypatch.setenv("DISTBENCH_ONE_NODE_LAUNCH", "agentless")
    with pytest.raises(ValueError, match="DISTBENCH_ONE_NODE_LAUNCH='agentless': allowed direct, torchrun"):
        run_comm_job(job, _params(), tmp_path / "e.csv", tmp_path / "r.json", tmp_path / "log3")


def test_the_breakdown_takes_each_phase_at_its_latest_rank():
    from distbench.launch.timeline import breakdown

    ranks = [{"rank": 0, "marks": [["process_start", 10.0], ["torch_import", 10.2], ["torch_imported", 12.0],
                                   ["pg_ready", 12.5], ["ctrl_ready", 12.5], ["measure_start", 12.6],
                                   ["measure_end", 15.0], ["written", 15.1], ["exit", 15.3]]},
             {"rank": 1, "marks": [["process_start", 10.1], ["torch_import", 10.3], ["torch_imported", 12.4],
                                   ["pg_ready", 12.5], ["ctrl_ready", 12.5], ["measure_start", 12.6],
                                   ["measure_end", 15.0], ["exit", 15.2]]}]
    b = breakdown(ranks, launch_t=9.9, done_t=15.5)
    assert b.pieces["agent_and_spawn_s"] == pytest.approx(0.2)   # the later rank's start
    assert b.pieces["import_torch_s"] == pytest.approx(2.1)      # 10.3 -> 12.4: the latest of each mark
    assert b.pieces["teardown_s"] == pytest.approx(0.2) and b.pieces["agent_exit_s"] == pytest.approx(0.2)
    assert b.wall_s == pytest.approx(5.6) and b.fixed_cost_s == pytest.approx(5.6 - 2.4)
    assert breakdown([], 0.0, 1.0) is None


def test_a_batch_launch_breakdown_is_set_up_once_then_every_configuration_measured():
    """A launch of several configurations (distbench.launch.batch) marks each one: its fixed cost is
    the first one's set-up and the last one's end, not the last configuration's own set-up."""
    from distbench.launch.timeline import breakdown

    marks = [["process_start", 0.0], ["torch_import", 0.1], ["torch_imported", 4.0], ["pg_ready", 5.0],
             ["ctrl_ready", 5.0], ["measure_start", 9.0], ["measure_end", 12.0], ["written", 12.1],
             ["torch_import", 12.2], ["torch_imported", 12.2], ["pg_ready", 12.2], ["ctrl_ready", 12.2],
             ["measure_start", 12.5], ["measure_end", 15.0], ["written", 15.1], ["exit", 15.3]]
    b = breakdown([{"rank": 0, "marks": marks}], launch_t=0.0, done_t=15.5)
    assert b.pieces["import_torch_s"] == pytest.approx(3.9) and b.pieces["setup_s"] == pytest.approx(4.0)
    assert b.pieces["measure_s"] == pytest.approx(6.0) and b.fixed_cost_s == pytest.approx(15.5 - 6.0)
