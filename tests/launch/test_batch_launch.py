"""Several training/memory configurations in one launch (distbench.launch.batch), each still its own
job and cached output: the grouping and the staged results (no torch), then the real workflow on
Gloo: one launch per group, a configuration whose launch lost a rank runs alone, `batch_launch:
false` launches every job alone, and the results are those of lone jobs."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

from conftest import RUN, snakemake
from distbench.launch.ranks import TEST_EXIT_ENV
from distbench.launch.batch import DONE, Entry, adopt, members, record_failed, staged_outputs, write_manifest
from distbench.launch.invocation import code_version


def _entry(tmp: Path, model: str, ws: int = 1, config: str = "plain", rule: str = "training_job", **params) -> Entry:
    out = tmp / f"training/gloo/{model}/ws{ws}/{config}"
    return Entry(rule, {"backend": "gloo", "model": model, "world_size": str(ws), "config": config},
                 {"launch": {"nodes": 1}, "job": {"steps": 3, "job_env": {}, **params}, "nccl_env": {}},
                 {"csv": str(out / "training.csv"), "placement": str(out / "placement.json")},
                 str(tmp / f"logs/{model}{ws}{config}.log"))


def test_a_group_is_one_family_backend_world_size_and_environment(tmp_path):
    a, b = _entry(tmp_path, "mlp"), _entry(tmp_path, "lora")
    assert a.group == b.group and a.digest != b.digest
    assert _entry(tmp_path, "mlp", ws=2).group != a.group
    assert _entry(tmp_path, "mlp", rule="memory_job").group != a.group
    assert _entry(tmp_path, "lora", job_env={"NCCL_DEBUG": "WARN"}).group != a.group
    # the digest follows what Snakemake reruns a job for: a changed param is another configuration
    assert _entry(tmp_path, "mlp", steps=4).digest != a.digest


def test_members_are_the_job_then_its_group_still_to_run(tmp_path):
    me, lora, fsdp, other_ws = (_entry(tmp_path, "mlp"), _entry(tmp_path, "lora"),
                                _entry(tmp_path, "lora", config="fsdp"), _entry(tmp_path, "mlp", ws=2))
    traced = _entry(tmp_path, "gpt", profile="torch")
    write_manifest(tmp_path, [me, lora, fsdp, other_ws, traced])
    assert members(tmp_path, me) == [me, lora, fsdp]  # not another world size, never a traced job
    Path(fsdp.output["csv"]).parent.mkdir(parents=True)
    Path(fsdp.output["csv"]).write_text("done\n")  # already in place (e.g. adopted earlier)
    assert members(tmp_path, me) == [me, lora]
    record_failed(tmp_path, [me, lora])  # a launch of both failed before either finished
    assert members(tmp_path, me) == [me] and members(tmp_path, lora) == [lora]


def _stage(tmp: Path, e: Entry, done: dict | None) -> dict:
    staged = staged_outputs(tmp, e)
    staged["csv"].parent.mkdir(parents=True, exist_ok=True)
    staged["csv"].write_text("rows\n")
    staged["placement"].write_text("{}")
    if done is not None:
        (staged["csv"].parent / DONE).write_text(json.dumps(done))
    return staged


def test_adopt_moves_a_complete_staged_result_and_only_that(tmp_path, capsys):
    e = _entry(tmp_path, "mlp")
    code = code_version()
    # each one is discarded (and named), never adopted: the job measures again
    for done, why in ((None, "unfinished"), ({"digest": "not this one", "code": code}, "other params"),
                      ({"digest": e.digest}, "other code"),  # a result that does not say which code measured it
                      ({"digest": e.digest, "code": {**code, "sources": "edited"}}, "sources edited then")):
        staged = _stage(tmp_path, e, done)
        assert adopt(tmp_path, e) is None and not staged["csv"].parent.exists()
        out = capsys.readouterr().out
        assert f"discarded the staged result of {e.name}" in out and why in out, out
    staged = _stage(tmp_path, e, {"digest": e.digest, "code": code, "wall_s": 1.5})
    assert adopt(tmp_path, e)["wall_s"] == 1.5
    assert Path(e.output["csv"]).read_text() == "rows\n" and not staged["csv"].parent.exists()
    assert not any((tmp_path / "staged").iterdir())  # the invocation's emptied staged tree goes with it


TRAINING = {
    "backends": ["gloo"], "world_sizes": [1, 2],
    "comm": {"ops": ["all_reduce"], "sizes": ["8"], "gloo": {"warmup": 1, "iters": 2, "trials": 1}},
    "training": {"warmup_steps": 1, "steps": 2, "allreduce_trials": 1, "models": ["mlp", "lora"],
                 "cpu": {"hidden_dim": 32, "num_layers": 1, "batch_size": 8},
                 "lm": {"strategies": ["ddp", "fsdp"], "cpu": {"seq_len": 16, "batch_size": 2}}},
    "memory": {"enabled": False},
}
WS1 = ["mlp/ws1/plain", "lora/ws1/plain", "lora/ws1/fsdp"]


def _launcher_lines(run: Path) -> dict:
    out = {}
    for f in (run / "logs/training/gloo").rglob("*.log.launcher"):
        key = "/".join(f.relative_to(run / "logs/training/gloo").parts).removesuffix(".log.launcher")
        out[key] = f.read_text()
    return out


@pytest.mark.heavy
@pytest.mark.slow
def test_one_launch_per_group_and_a_lost_rank_runs_the_rest_alone(workflow_dir):
    (workflow_dir / "t.yaml").write_text(yaml.safe_dump(TRAINING))
    lost = "training gloo/lora/2/plain"  # rank 1 exits when the 2-rank launch reaches this one
    r = snakemake(workflow_dir, "training", "--configfile", "t.yaml", env={TEST_EXIT_ENV: lost})
    assert r.returncode == 0, r.stderr[-3000:]
    run = workflow_dir / RUN
    lines = _launcher_lines(run)
    launches = {}
    for d in (run / "logs/batch/launches").iterdir():
        names = [c["name"].removeprefix("training gloo/") for c in json.loads((d / "batch.json").read_text())]
        launches[names[0].split("/")[1]] = names
    assert sorted(launches) == ["1", "2"] and all(len(v) == 3 for v in launches.values())  # one per group
    for ws, names in launches.items():
        first = names[0].replace(f"/{ws}/", f"/ws{ws}/")
        if names[0] != "lora/2/plain":
            assert "measured first of 3 configurations" in lines[first], lines[first]
    order = launches["2"]
    cut = order.index("lora/2/plain")
    for i, name in enumerate(order):
        key = name.replace("/2/", "/ws2/")
        # before the lost rank: measured in the launch; from it on: run alone, as a lone job
        assert ("one launch" in lines[key]) == (i < cut), (name, lines[key])
        assert ": ok" in lines[key]
    for name in launches["1"]:  # the 1-rank launch lost nothing: every configuration measured in it
        assert "one launch" in lines[name.replace("/1/", "/ws1/")]
    training = pd.concat(pd.read_csv(f) for f in run.glob("training/gloo/*/ws*/*/training.csv"))
    assert len(training.groupby(["model", "world_size", "config"])) == 6 and (training["status"] == "ok").all()
    adopted = next(n for n in launches["1"][1:])
    prov = json.loads((run / "training/gloo" / adopted.replace("/1/", "/ws1/") / "placement.json").read_text())
    assert prov["provenance"]["batch"]["configurations"] == 3 and prov["provenance"]["outcome"] == "ok"
    assert "lora/2/plain" in " ".join(launches["2"]) and json.loads((run / "logs/batch/failed.json").read_text())
    # a rerun finds everything cached; every staged result was adopted
    again = snakemake(workflow_dir, "training", "--configfile", "t.yaml", "-n")
    assert "training_job" not in again.stdout
    assert not any((run / "staged").rglob("*.csv"))


@pytest.mark.heavy
@pytest.mark.slow
def test_batch_launch_false_launches_every_job_alone(workflow_dir):
    cfg = {**TRAINING, "world_sizes": [1], "batch_launch": False}
    (workflow_dir / "t.yaml").write_text(yaml.safe_dump(cfg))
    r = snakemake(workflow_dir, "training", "--configfile", "t.yaml")
    assert r.returncode == 0, r.stderr[-3000:]
    run = workflow_dir / RUN
    lines = _launcher_lines(run)
    assert sorted(lines) == sorted(WS1)
    assert not any("one launch" in v for v in lines.values())
    assert not (run / "logs/batch/manifest.json").exists()


def test_a_configuration_past_its_own_time_limit_ends_the_rank(tmp_path):
    """In a shared launch the launcher's limit is the sum of the members' limits; each rank's fuse
    ends it once one configuration outlives its own (exit 124), so its job runs it alone in bounded
    time, and the configuration before it is done."""
    import subprocess
    import sys
    import time

    from distbench.launch.batch import Config, write_batch_file

    batch = tmp_path / "batch.json"
    write_batch_file(batch, [Config(["0"], str(tmp_path / "a.done"), "a", "quick one", 30),
                             Config(["60"], str(tmp_path / "b.done"), "b", "stuck one", 1)])
    code = ("import sys, time\nfrom distbench.launch.ranks import run_configs\n"
            "def main(argv, keep_groups):\n    time.sleep(float(argv[0]))\n    return 0\n"
            f"sys.exit(run_configs(main, ['--batch', {str(batch)!r}]))\n")
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       env={**__import__("os").environ, "RANK": "0"})
    assert r.returncode == 124 and time.monotonic() - t0 < 30, r.stderr
    assert "stuck one: job killed after 1 s" in r.stderr
    assert json.loads((tmp_path / "a.done").read_text())["digest"] == "a" and not (tmp_path / "b.done").exists()
