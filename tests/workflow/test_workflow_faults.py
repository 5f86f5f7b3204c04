"""Faults from outside the code, injected into the real workflow (Snakemake, torchrun, Gloo):

- a cached job CSV truncated or edited by hand: aggregation fails with a message that names the file,
  says what is wrong and to delete it, and no traceback; the job is not rerun behind the user's back;
- TCP ports 29500 (torchrun's default master port) and 29400 (its default rendezvous port) taken:
  a 2-rank job still runs, because the launcher uses torchrun --standalone (a free port);
- two runs in one directory: the second is refused by Snakemake's lock.

(Hostile strings in probe data: tests/report/test_hostile_strings.py.)

One tiny workflow run (module fixture) serves the first three: it runs with the ports held, a second
run is started while it holds its lock, and its cached CSVs are then corrupted one at a time.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from distbench.core.tables import JobCsvError, read_job_csv, read_job_csvs
from distbench.comm.contract import COMM, read_comm_csv
from distbench.core.contract import SchemaError
from distbench.training.contract import TRAINING, read_training_csv
from tests.conftest import RUN, copy_workflow, snakemake

TINY = {
    "backends": ["gloo"],
    "world_sizes": [2],  # training adds plain DDP at 1 rank, its baseline
    "comm": {"ops": ["all_reduce"], "sizes": ["8", "1KiB"],
             "gloo": {"max_bytes": "1MiB", "warmup": 1, "iters": 2, "trials": 2}},
    "training": {"warmup_steps": 1, "steps": 2, "allreduce_trials": 2, "models": ["mlp"],
                 "cpu": {"hidden_dim": 16, "num_layers": 1, "batch_size": 4}},
    "memory": {"enabled": False},  # its faults have tests of their own (tests/memory/test_memory.py)
    "predict": {"enabled": False},  # reads tables only; tests/workflow/test_e2e.py runs it in the workflow
}
CFG = ("--configfile", "tiny.yaml")
HELD_PORTS = (29500, 29400)  # torchrun's default master port and its default c10d rendezvous port
COMM_CSV = f"{RUN}/comm/gloo/float32/ws2/default/comm.csv"
TRAINING_CSV = f"{RUN}/training/gloo/mlp/ws2/plain/training.csv"


def _jobs_run(output: str) -> list[str]:
    return re.findall(r"^(?:local)?rule (\w+):", output, flags=re.M)


def _port_taken(port: int) -> bool:
    s = socket.socket()
    try:
        s.bind(("0.0.0.0", port))
        return False
    except OSError:
        return True
    finally:
        s.close()


@contextlib.contextmanager
def hold_ports(*ports):
    """Bind and listen on each port (IPv4 and, where there is IPv6, IPv6) until the block ends. A port
    another process already holds is just as taken; either way each port is taken inside the block."""
    socks = []
    try:
        for port in ports:
            for family, addr in ((socket.AF_INET, "0.0.0.0"), (socket.AF_INET6, "::")):
                try:
                    s = socket.socket(family, socket.SOCK_STREAM)
                except OSError:
                    continue  # no IPv6 here
                try:
                    if family == socket.AF_INET6:
                        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                    s.bind((addr, port))
                    s.listen()
                    socks.append(s)
                except OSError:
                    s.close()
            assert _port_taken(port), port
        yield
    finally:
        for s in socks:
            s.close()


def _copy_workflow(d: Path) -> Path:
    """What the workflow_dir fixture does, for a module-scoped directory."""
    (copy_workflow(d) / "tiny.yaml").write_text(yaml.safe_dump(TINY))
    return d


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """The tiny workflow, run once with ports 29500 and 29400 held throughout; while it holds the
    directory's lock a second snakemake is started in the same directory."""
    d = _copy_workflow(tmp_path_factory.mktemp("faults") / "wf")
    out, err = d.parent / "first.out", d.parent / "first.err"
    cmd = [sys.executable, "-m", "snakemake", "--cores", "1", *CFG]
    with hold_ports(*HELD_PORTS), open(out, "w") as fo, open(err, "w") as fe:
        first = subprocess.Popen(cmd, cwd=d, stdout=fo, stderr=fe, text=True)
        try:
            locks = d / ".snakemake" / "locks"
            deadline = time.monotonic() + 120
            while not (locks.is_dir() and any(locks.iterdir())):
                assert first.poll() is None, f"the first run ended before it locked:\n{err.read_text()[-3000:]}"
                assert time.monotonic() < deadline, "the first run never locked the directory"
                time.sleep(0.1)
            second = snakemake(d, *CFG, timeout=120)
            first_still_running = first.poll() is None  # the first still ran (held the lock) when the second ended
            first.wait(timeout=540)
        finally:
            if first.poll() is None:
                first.terminate()  # Snakemake cleans up and releases its lock on SIGTERM
                first.wait(timeout=60)
    return {"dir": d, "first_rc": first.returncode, "first_out": out.read_text() + err.read_text(),
            "second": second, "second_during_first": first_still_running}


@pytest.mark.heavy
# ---------------------------------------------------------------- two runs in one directory
@pytest.mark.e2e
def test_second_run_in_the_same_directory_is_refused_by_the_lock(tiny_run):
    second = tiny_run["second"]
    text = second.stdout + second.stderr
    assert tiny_run["second_during_first"]
    assert second.returncode != 0
    assert "Directory cannot be locked" in text, text[-3000:]
    assert "comm_job" not in _jobs_run(text) and "training_job" not in _jobs_run(text)  # it ran nothing
    # the first run was not disturbed and released its lock
    assert tiny_run["first_rc"] == 0, tiny_run["first_out"][-3000:]
    locks = tiny_run["dir"] / ".snakemake" / "locks"
    assert not locks.exists() or not any(locks.iterdir())


@pytest.mark.heavy
# ---------------------------------------------------------------- ports taken
@pytest.mark.e2e
def test_two_rank_jobs_run_while_the_default_torchrun_ports_are_taken(tiny_run):
    """The whole tiny workflow ran with 29500 and 29400 held: its 2-rank comm and DDP jobs measured."""
    assert tiny_run["first_rc"] == 0, tiny_run["first_out"][-3000:]
    assert sorted(_jobs_run(tiny_run["first_out"])).count("comm_job") == 1
    comm = read_comm_csv(tiny_run["dir"] / COMM_CSV)
    assert len(comm) and (comm["world_size"] == 2).all() and (comm["status"] == "ok").all() and comm["correct"].all()
    training = read_training_csv(tiny_run["dir"] / TRAINING_CSV)
    assert (training["world_size"] == 2).all() and (training["status"] == "ok").all()


@pytest.mark.heavy
@pytest.mark.e2e
def test_torchrun_standalone_picks_a_free_port_where_the_default_is_taken(tmp_path):
    """What the launcher relies on, shown directly: with 29500 and 29400 held, torchrun --standalone
    (the launcher's form) rendezvouses on some other port and Gloo works; torchrun with the default
    master port fails on the same held port (the control: the ports really are taken)."""
    script = tmp_path / "port.py"
    script.write_text(
        "import os, torch, torch.distributed as dist\n"
        "dist.init_process_group('gloo')\n"
        "t = torch.ones(1) * (dist.get_rank() + 1)\n"
        "dist.all_reduce(t)\n"
        # one write per line, so that the two ranks' lines cannot interleave
        "os.write(1, f\"rank {dist.get_rank()} MASTER_PORT={os.environ['MASTER_PORT']} sum={t.item():g}\\n\".encode())\n"
        "dist.destroy_process_group()\n")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    run = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2"]
    with hold_ports(*HELD_PORTS):
        ok = subprocess.run([*run, "--standalone", str(script)], capture_output=True, text=True, timeout=180, env=env)
        control = subprocess.run([*run, "--nnodes=1", "--master-port=29500", str(script)], capture_output=True,
                                 text=True, timeout=180, env=env)
    assert ok.returncode == 0, ok.stderr[-3000:]
    ports = set(re.findall(r"MASTER_PORT=(\d+) sum=3\b", ok.stdout))
    assert len(re.findall(r"^rank [01] ", ok.stdout, flags=re.M)) == 2 and len(ports) == 1, ok.stdout
    assert int(ports.pop()) not in HELD_PORTS
    assert control.returncode != 0 and "EADDRINUSE" in control.stderr, control.stderr[-3000:]


# ---------------------------------------------------------------- corrupt cached job CSVs
def _truncate(text: str) -> str:
    return text[:-15]  # mid-way through the last row


CORRUPTIONS = [  # (file, how, words the message must hold, rule to rerun)
    (COMM_CSV, _truncate, ["truncated"], "comm_job"),
    (COMM_CSV, lambda t: t.replace("status", "state", 1), ["missing ['status']", "unexpected ['state']"], "comm_job"),
    (COMM_CSV, lambda t: t.replace(",ok,", ",great,", 1), ["unknown status values ['great']"], "comm_job"),
    (TRAINING_CSV, lambda t: t.replace(",ok,", ",great,", 1), ["unknown status values ['great']"], "training_job"),
]


@pytest.mark.heavy
@pytest.mark.e2e
def test_corrupt_cached_job_csv_fails_aggregation_with_a_clean_message(tiny_run):
    d = tiny_run["dir"]
    assert tiny_run["first_rc"] == 0, tiny_run["first_out"][-3000:]
    tables = d / RUN / "tables"
    for rel, corrupt, words, rule in CORRUPTIONS:
        path = d / rel
        good = path.read_text()
        bad = corrupt(good)
        assert bad != good
        path.write_text(bad)  # newer than its inputs still: Snakemake keeps it as a cached output
        for t in tables.glob("*.csv"):
            t.unlink()  # so aggregation runs again
        r = snakemake(d, *CFG)
        text = r.stdout + r.stderr
        assert r.returncode != 0, (rel, text[-3000:])
        ran = _jobs_run(r.stderr)
        assert "comm_job" not in ran and "training_job" not in ran, ran  # the cached job was not rerun
        assert path.read_text() == bad
        agg = "aggregate_comm" if rule == "comm_job" else "aggregate_training"
        assert agg in ran
        msg = f"{rel}: "
        assert msg in text, text[-3000:]
        line = next(ln for ln in text.splitlines() if msg in ln)
        assert all(w in line for w in words), (words, line)
        assert "Delete it" in text and f"rm {rel}" in text and f"snakemake -R {rule}" in text
        assert "Traceback" not in text, text[-4000:]
        log = (d / f"{RUN}/logs/{agg.split('_')[1]}/{agg}.log").read_text()  # logs/<family>/<step>.log
        assert msg in log and "Traceback" not in log
        path.write_text(good)

    # following the advice: delete the file the message names, and the next run remeasures just that job
    path = d / COMM_CSV
    path.write_text(path.read_text().replace(",ok,", ",great,"))
    for t in tables.glob("*.csv"):
        t.unlink()
    r = snakemake(d, *CFG)
    rm = next(ln for ln in (r.stdout + r.stderr).splitlines() if ln.strip().startswith("rm "))
    argv = shlex.split(rm)
    assert argv[1:] == [COMM_CSV]
    (d / argv[1]).unlink()
    fixed = snakemake(d, *CFG)
    assert fixed.returncode == 0, fixed.stderr[-3000:]
    ran = _jobs_run(fixed.stderr)
    assert ran.count("comm_job") == 1 and "training_job" not in ran and "aggregate_comm" in ran
    assert (read_comm_csv(path)["status"] == "ok").all()
    assert (d / "report/report.html").exists()


def test_job_csv_reader_names_each_bad_file_and_what_is_wrong(tmp_path, tiny_csvs):
    """The same reader, without a workflow: every kind of damage is one JobCsvError (a SchemaError),
    all bad files in one message, the good ones untouched."""
    comm, training = tiny_csvs
    cases = {
        "empty": ("", "empty"),
        "torn_row": (comm.split("\n")[0] + "\n" + "gloo,2,all_reduce\n", "has 3 fields where the header has 21"),
        "bad_int": (comm.replace("gloo,2,", "gloo,two,", 1), "does not parse"),
        "open_quote": (comm + 'gloo,2,all_reduce,float32,default,host,True,8,2,0,2,max,5,5,5,1,1,1,True,failed,"ab\n',
                       "not valid CSV"),
        "not_utf8": (None, "not UTF-8"),
        "negative_ok_time": (comm.replace(",max,", ",max,-", 1), "positive time_us"),
    }
    paths = []
    for name, (text, _) in cases.items():
        p = tmp_path / name / "comm.csv"
        p.parent.mkdir()
        p.write_bytes(b"backend,\xff\n") if text is None else p.write_text(text)
        paths.append(p)
        with pytest.raises(JobCsvError) as e:
            read_job_csv(p, COMM)
        assert str(p) in str(e.value) and cases[name][1] in str(e.value) and "snakemake -R comm_job" in str(e.value)
    good = tmp_path / "good.csv"
    good.write_text(comm)
    with pytest.raises(SchemaError) as e:  # one error type, a SchemaError, for all of them together
        read_job_csvs([good, *paths], COMM)
    assert [p for p, _, _ in e.value.problems] == [str(p) for p in paths]
    assert str(e.value).startswith(f"{len(paths)} cached job CSVs cannot be read:")
    assert len(read_job_csvs([good, good], COMM)) == 2

    t = tmp_path / "training.csv"
    t.write_text(training.replace("step_time_ms,", "step_ms,", 1))
    with pytest.raises(JobCsvError, match=r"(?s)missing \['step_time_ms'\].*snakemake -R training_job"):
        read_job_csv(t, TRAINING)


@pytest.fixture(scope="module")
def tiny_csvs():
    """A comm and a training job CSV laid out as the harnesses write them (csv module, \\r\\n)."""
    comm = (
        "backend,world_size,op,dtype,nccl_env,timing,inplace,size_bytes,count,trial,iters,rank_agg,time_us,"
        "time_us_rank_min,time_us_rank_max,slowest_rank,algbw_gbps,busbw_gbps,correct,status,message\r\n"
        "gloo,2,all_reduce,float32,default,host,True,8,2,0,2,max,5333.3,5178.41,5333.3,1,1.5e-06,1.5e-06,True,ok,\r\n"
        "gloo,2,all_reduce,float32,default,host,True,8,2,1,2,max,420.457,294.174,420.457,1,1.9e-05,1.9e-05,True,ok,\r\n")
    from distbench.training.contract import TRAINING_COLUMN_NAMES

    row = dict.fromkeys(TRAINING_COLUMN_NAMES, "")
    row.update(backend="gloo", world_size="2", nodes="1", model="mlp", hidden_dim="16", num_layers="1", batch_size="4",
               global_batch_size="8", scaling="weak", dtype="float32", optimizer="sgd", bucket_cap_mb="25",
               gradient_as_bucket_view="False", static_graph="False", broadcast_buffers="True", comm_hook="none",
               grad_accum="1", nccl_env="default", config="plain", phase="step", step="0", step_time_ms="1.8",
               step_time_ms_rank_min="1.6", step_time_ms_rank_max="1.8", samples_per_s="4451",
               samples_per_s_per_device="2225", grad_bytes="2176", n_buckets="1", correct="True", status="ok")
    training = ",".join(TRAINING_COLUMN_NAMES) + "\r\n" + ",".join(row.values()) + "\r\n"
    return comm, training
