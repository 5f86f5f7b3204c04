"""A cached job measured with other values is never reused as this config's (distbench.pipeline.stale).

Snakemake notices changed params only through its own record (.snakemake/metadata). On a lent 2x H200
that folder was removed between two runs, and the quick answer judged a comm job made by another
config's sweep (256 KiB - 1 GiB, CUDA graphs only) as the default config's."""

from __future__ import annotations

import json
import os
import shutil
from types import SimpleNamespace

import pytest
import yaml

from conftest import RUN, snakemake
from distbench.pipeline.stale import changed_keys, stale_job, stale_message, stale_reused


def _job_json(path, sizes, nodes=1):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"rule": "comm_job", "wildcards": {}, "log": "x.log", "output": {},
                                "params": {"job": {"sizes": sizes, "ops": ["all_reduce"]},
                                           "launch": {"nodes": nodes}, "entry": "distbench.comm"}}))
    return path


class _Names(list):
    """Snakemake's Namedlist as far as stale_reused reads it: files in order, names as attributes."""

    def __init__(self, **named):
        super().__init__(named.values())
        self.__dict__.update(named)


def _job(tmp_path, sizes, runs=False):
    out = tmp_path / "comm.csv"
    job = SimpleNamespace(output=_Names(csv=str(out), job_json=str(tmp_path / "job.json")),
                          params=SimpleNamespace(job={"sizes": sizes, "ops": ("all_reduce",)}, launch={"nodes": 1},
                                                 entry="distbench.comm"))
    return job, runs


def test_changed_keys_name_the_values_that_differ():
    assert changed_keys({"job": {"sizes": [8], "iters": 20}}, {"job": {"sizes": [8, 16], "iters": 20}}) == ["job.sizes"]
    assert changed_keys({"job": {"a": 1}}, {"job": {"a": 1, "b": 2}}) == ["job.b"]
    assert changed_keys({"job": {"a": 1}}, {"job": {"a": 1}}) == []


def test_a_reused_job_with_other_values_is_stale_and_one_with_the_same_is_not(tmp_path):
    _job_json(tmp_path / "job.json", [8, 1024])
    assert stale_reused([_job(tmp_path, [8, 1024])]) == []  # a tuple and its JSON list are one value
    [s] = stale_reused([_job(tmp_path, [8, 4096])])
    assert s.keys == ("job.sizes",) and s.result.endswith("comm.csv") and s.job_json.endswith("job.json")
    assert stale_reused([_job(tmp_path, [8, 4096], runs=True)]) == []  # Snakemake reruns it: nothing to say
    (tmp_path / "job.json").write_text("{torn")
    assert stale_reused([_job(tmp_path, [8, 1024])])[0].keys == ("job.json",)
    (tmp_path / "job.json").unlink()
    assert stale_reused([_job(tmp_path, [8, 4096])]) == []  # nothing recorded: Snakemake's triggers hold
    os.mkfifo(tmp_path / "job.json")  # read through the job record's reader: refused at once, never waited on
    assert stale_reused([_job(tmp_path, [8, 1024])])[0].keys == ("job.json",)


def test_the_message_names_each_job_what_differs_and_the_command(tmp_path):
    s = stale_job("r/comm.csv", str(_job_json(tmp_path / "job.json", [8])), {"job": {"sizes": [8], "ops": ["all_reduce"]},
                                                      "launch": {"nodes": 2}, "entry": "distbench.comm"})
    assert s.keys == ("launch.nodes",)
    text = stale_message([s], ["quick"])
    assert "r/comm.csv: launch.nodes differ(s)" in text
    assert text.endswith("snakemake --cores 1 quick --forcerun r/comm.csv")
    assert stale_message([]) == ""


COMM = {"backends": ["gloo"], "world_sizes": [2], "health": {"enabled": False},
        "comm": {"ops": ["all_reduce"], "sizes": [8, 1024], "iters": 2, "warmup": 1, "trials": 1},
        "training": {"enabled": False}, "memory": {"enabled": False}}


@pytest.mark.heavy
@pytest.mark.e2e
def test_a_run_without_snakemakes_record_stops_before_reusing_a_job_measured_with_other_sizes(workflow_dir):
    csv = f"{RUN}/comm/gloo/float32/ws2/default/comm.csv"

    def go(sizes, *extra):
        (workflow_dir / "c.yaml").write_text(yaml.safe_dump({**COMM, "comm": {**COMM["comm"], "sizes": sizes}}))
        return snakemake(workflow_dir, csv, "--configfile", "c.yaml", *extra)

    r = go([8, 1024])
    assert r.returncode == 0, r.stderr[-3000:]
    shutil.rmtree(workflow_dir / ".snakemake")  # Snakemake's record of the job's params
    assert go([8, 1024]).returncode == 0  # the same values: reused, nothing said
    dry = go([8, 4096], "-n")
    assert dry.returncode == 0 and f"{csv}: job.sizes differ(s)" in dry.stderr, dry.stderr[-3000:]
    r = go([8, 4096])
    assert r.returncode != 0 and f"{csv}: job.sizes differ(s)" in r.stderr, r.stderr[-3000:]
    assert f"--forcerun {csv}" in r.stderr
    assert json.loads((workflow_dir / csv).with_name("job.json").read_text())["params"]["job"]["sizes"] == [8, 1024]
    r = go([8, 4096], "--forcerun", csv)  # the command it names
    assert r.returncode == 0, r.stderr[-3000:]
    assert json.loads((workflow_dir / csv).with_name("job.json").read_text())["params"]["job"]["sizes"] == [8, 4096]
