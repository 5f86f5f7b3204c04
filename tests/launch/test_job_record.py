"""A job's values as one typed record per family (distbench.launch.job_record): the ranks check the
job.json their rule wrote against the config schema's bounds before any process group exists, and
refuse a bad file or value with exit 2 naming the file and the key, no traceback."""

import json
import os
import subprocess
import sys
import threading

import pytest

from distbench.pipeline.config import check_config
from distbench.pipeline.hooks import resolve
from distbench.pipeline.plan import make_plan

PARSERS = {"comm": "distbench.comm.main", "training": "distbench.training.harness",
           "memory": "distbench.memory.harness", "nodes": "distbench.nodes.harness"}


@pytest.fixture(scope="module")
def planned():
    """One job.json entry per family, as its rule writes it (rules/families.smk's params: job, launch
    and the rule's entry hook), from a small CPU plan."""
    import importlib

    cfg = check_config({"gpus": 0, "backends": ["gloo"], "world_sizes": [2], "comm": {"pairs": True},
                        "nodes": {"enabled": True, "simulate": 2},
                        "training": {"models": ["mlp", "gpt"], "lm": {"strategies": ["ddp", "fsdp"]}}})
    plan = make_plan(cfg)
    out = {}
    for fam in PARSERS:
        m = importlib.import_module(f"distbench.{fam}.manifest").MANIFEST
        job = next(j for j in plan["jobs"][fam] if str(j.wildcards.get("world_size", 2)) == "2")
        launch = resolve(m.job_launch)(cfg, plan, job) if m.job_launch else {}
        out[fam] = {"rule": f"{fam}_job", "wildcards": {k: str(v) for k, v in job.wildcards.items()},
                    "params": {"job": resolve(m.job_params)(cfg, plan, job), "launch": launch, "entry": m.job_entry},
                    "output": {}, "log": ""}
    return out


def _parse(family, entry, tmp_path, monkeypatch, **job_changes):
    import importlib

    monkeypatch.setenv("WORLD_SIZE", "2")
    entry = json.loads(json.dumps(entry))
    for k, v in job_changes.items():
        if v is KeyError:
            del entry["params"]["job"][k]
        else:
            entry["params"]["job"][k] = v
    path = tmp_path / "job.json"
    path.write_text(json.dumps(entry))
    parse = importlib.import_module(PARSERS[family]).parse_args
    return parse(["--params", str(path), "--out", str(tmp_path / "out.csv")]), path


def _refused(family, entry, tmp_path, monkeypatch, capsys, **job_changes) -> str:
    with pytest.raises(SystemExit) as e:
        _parse(family, entry, tmp_path, monkeypatch, **job_changes)
    err = capsys.readouterr().err
    assert e.value.code == 2, err
    assert f"distbench error: {tmp_path / 'job.json'}: " in err and "Traceback" not in err
    return err


def test_every_familys_planned_job_json_is_accepted_as_planned(planned, tmp_path, monkeypatch):
    for family, entry in planned.items():
        args, _ = _parse(family, entry, tmp_path, monkeypatch)
        assert args.backend == "gloo"


@pytest.mark.parametrize("family,key,value,said", [
    ("comm", "sizes", "64", "job.sizes: '64' is not of type 'array'"),  # measured [6, 4] B: 4 B twice
    ("comm", "iters", 0, "job.iters: 0 is less than the minimum of 1"),  # crashed a rank, left .partial
    ("comm", "ops", ["all_reduce", "bogus"], "job.ops[1]: 'bogus' is not one of"),
    ("memory", "batch_sizes", "16", "job.batch_sizes: '16' is not of type 'array'"),  # measured batches 1 and 6
    ("training", "compile", "false", "job.compile: 'false' is not of type 'boolean'"),  # compiled
    ("training", "strategy", "bogus", "job.strategy: 'bogus' is not one of"),  # ran DDP labelled bogus
    ("training", "steps", 10**9, "job.steps: 1000000000 is greater than the maximum of 100000"),  # ran until killed
    ("nodes", "pairs", "0-1;rm -rf", "job.pairs: '0-1;rm -rf' does not match"),
    ("nodes", "iters", "10", "job.iters: '10' is not of type 'integer'"),
])
def test_a_value_the_config_would_refuse_exits_2_naming_the_file_and_key(
        planned, tmp_path, monkeypatch, capsys, family, key, value, said):
    assert said in _refused(family, planned[family], tmp_path, monkeypatch, capsys, **{key: value})


def test_a_missing_or_unknown_key_exits_2_naming_it(planned, tmp_path, monkeypatch, capsys):
    err = _refused("comm", planned["comm"], tmp_path, monkeypatch, capsys, iters=KeyError)
    assert "job.iters: missing" in err  # was a KeyError traceback, exit 1
    err = _refused("training", planned["training"], tmp_path, monkeypatch, capsys, stepz=20)
    assert "job.stepz: unknown key" in err


RANK_PARSERS = {"comm": "distbench.comm.main", "training": "distbench.training.harness",
                "memory": "distbench.memory.harness", "nodes": "distbench.nodes.harness"}


@pytest.mark.parametrize("family", sorted(RANK_PARSERS))
@pytest.mark.parametrize("kind", ["directory", "dev_zero", "too_big", "not_json", "nan"])
def test_params_that_is_not_a_regular_small_json_file_is_refused_at_once(tmp_path, capsys, kind, family):
    """Every family's ranks read --params through the one reader: each special or oversized file is
    refused before it is read whole."""
    import importlib

    parse_args = importlib.import_module(RANK_PARSERS[family]).parse_args
    path = {"directory": tmp_path, "dev_zero": "/dev/zero"}.get(kind, tmp_path / "job.json")
    if kind == "too_big":
        path.write_text(" " * (1 << 20) + "{}")
    elif kind == "not_json":
        path.write_text("{not json")
    elif kind == "nan":
        path.write_text('{"rule": NaN}')
    with pytest.raises(SystemExit) as e:
        parse_args(["--params", str(path), "--out", str(tmp_path / "c.csv")])
    err = capsys.readouterr().err
    assert e.value.code == 2 and f"distbench error: {path}: " in err


def test_a_fifo_as_params_exits_2_at_once_without_a_traceback(tmp_path):
    """A FIFO with no writer would block a plain open/read forever: refused by its stat, in a real
    process (it exits before any process group)."""
    fifo = tmp_path / "job.json"
    os.mkfifo(fifo)
    r = subprocess.run([sys.executable, "-m", "distbench.comm", "--params", str(fifo), "--out", str(tmp_path / "c.csv")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and f"distbench error: {fifo}: a FIFO" in r.stderr and "Traceback" not in r.stderr


def test_a_file_swapped_for_a_fifo_after_its_stat_is_refused_by_the_opened_descriptor(tmp_path, monkeypatch):
    """The stat before opening says regular file, the path is a FIFO by the time it is opened: the
    non-blocking open and the descriptor's own fstat refuse it without blocking."""
    from distbench.launch import job_record

    fifo = tmp_path / "job.json"
    os.mkfifo(fifo)
    regular = os.stat(__file__)
    monkeypatch.setattr(job_record.os, "stat", lambda p, *a, **k: regular)
    result = {}

    def read():
        try:
            job_record.read_json_file(fifo)
        except job_record.JobRecordError as e:
            result["error"] = str(e)

    t = threading.Thread(target=read, daemon=True)
    t.start()
    t.join(10)
    assert not t.is_alive() and "a FIFO" in result.get("error", "")


def test_the_ranks_read_a_comm_jobs_values_from_job_json_as_the_flags_give_them(planned, tmp_path, monkeypatch):
    """comm lists its values once (COMM_RECORD): the flags for people and the job.json give the ranks
    the same arguments."""
    from distbench.comm.job import COMM_RECORD
    from distbench.comm.main import parse_args

    entry = planned["comm"]
    by_json, path = _parse("comm", entry, tmp_path, monkeypatch)
    by_flags = parse_args([*COMM_RECORD.flags(entry["wildcards"], entry["params"]["job"]), "--out", str(tmp_path / "out.csv")])
    a, b = vars(by_flags), vars(by_json)
    assert a.pop("params") is None and b.pop("params") == str(path)
    assert a == b and b["sizes"] == entry["params"]["job"]["sizes"] and b["traffic"] == ["uniform", "zipf:1.2"]
    assert b["pairs_sizes"] == entry["params"]["job"]["pairs_sizes"]  # this job measures the pair matrix


def test_nccl_probe_bad_sizes_is_a_usage_error_naming_the_flag(capsys):
    from distbench.probes import nccl_probe

    with pytest.raises(SystemExit) as e:
        nccl_probe.main(["--sizes", "abc"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "--sizes" in err and "Traceback" not in err


def test_nccl_probe_worker_params_are_checked(tmp_path, capsys):
    from distbench.probes import nccl_probe

    (tmp_path / "p.json").write_text(json.dumps({"ops": ["all_reduce"], "sizes": "64"}))
    with pytest.raises(SystemExit) as e:
        nccl_probe.main(["--worker", "--params", str(tmp_path / "p.json")])
    assert e.value.code == 2 and "sizes: '64' is not of type 'array'" in capsys.readouterr().err


def test_job_json_is_written_and_read_back_by_one_module(tmp_path):
    """job_record owns the format: the rule's writer, the launcher's read and the batch launch's Entry."""
    from distbench.launch import batch, job_record

    entry = job_record.Entry("comm_job", {"backend": "gloo", "world_size": "2"}, {"job": {"iters": 3}, "launch": None},
                             {"csv": "out.csv"}, "log.txt")
    path = job_record.write_job_json(tmp_path / "job.json", entry)
    assert batch.read_entry(path) == entry and batch.Entry is job_record.Entry
