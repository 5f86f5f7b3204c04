"""Config validation: bad values are rejected before any job runs, naming the key and allowed values."""


import pytest
import yaml

from distbench.config import ConfigError, check_config
from tests.conftest import REPO, snakemake


def test_default_config_is_valid_and_defaults_fill_in():
    cfg = check_config(yaml.safe_load((REPO / "config.yaml").read_text()))
    assert cfg["world_sizes"] == [2, 4, 6]
    minimal = check_config({})
    assert minimal["comm"]["iters"] == 20 and minimal["comm"]["gloo"]["max_bytes"] == "128MiB"
    assert minimal["job_env"]["NCCL_NVLS_ENABLE"] == "0"


@pytest.mark.parametrize("bad,expect", [
    ({"backends": ["nccl; touch x"]}, ["backends[0]", "nccl, gloo"]),
    ({"backends": ["$(reboot)"]}, ["backends[0]", "nccl, gloo"]),
    ({"comm": {"ops": ["allreduce"]}}, ["comm.ops[0]", "all_reduce"]),
    ({"comm": {"dtypes": ["float8"]}}, ["comm.dtypes[0]", "bfloat16"]),
    ({"comm": {"timing": ["wallclock"]}}, ["comm.timing[0]", "events, graph, host"]),
    ({"comm": {"iterations": 5}}, ["comm.iterations", "allowed keys here", "iters"]),
    ({"colour": "red"}, ["colour", "allowed keys here", "backends"]),
    ({"gpus": "many"}, ["gpus", "auto"]),
    ({"gpus": -1}, ["gpus"]),
    ({"world_sizes": [0]}, ["world_sizes[0]", ">= 1"]),
    ({"comm": {"sizes": ["1XB"]}}, ["comm.sizes"]),
    ({"comm": {"sizes": {"min_bytes": "1GB", "max_bytes": "1MB"}}}, ["comm.sizes", "larger than"]),
    ({"comm": {"nccl_env": [{"NCCL_DEBUG": "INFO"}]}}, ["comm.nccl_env[0].NCCL_DEBUG", "NCCL_ALGO"]),
    ({"comm": {"nccl_env": [{"NCCL_ALGO": "Ring; rm -rf /"}]}}, ["comm.nccl_env[0].NCCL_ALGO", "Ring"]),
    ({"comm": {"nccl_env": [{"NCCL_PROTO": "Fast"}]}}, ["NCCL_PROTO", "LL128"]),
    ({"job_env": {"NCCL_X": "a b"}}, ["job_env.NCCL_X"]),
])
def test_bad_values_are_rejected_with_key_and_allowed_values(bad, expect):
    with pytest.raises(ConfigError) as e:
        check_config(bad)
    for text in expect:
        assert text in str(e.value)


def test_all_errors_reported_at_once():
    with pytest.raises(ConfigError) as e:
        check_config({"backends": ["mpi"], "comm": {"ops": ["scan"]}})
    assert "backends[0]" in str(e.value) and "comm.ops[0]" in str(e.value)


def test_nccl_env_allow_list_accepts_real_settings():
    cfg = check_config({"comm": {"nccl_env": [{}, {"NCCL_ALGO": "Ring"}, {"NCCL_ALGO": "Tree", "NCCL_PROTO": "Simple"},
                                              {"NCCL_P2P_DISABLE": 1}, {"NCCL_MAX_NCHANNELS": "8"}]}})
    assert len(cfg["comm"]["nccl_env"]) == 5


def test_snakemake_rejects_shell_metacharacters_before_any_job(workflow_dir):
    marker = workflow_dir / "pwned"
    r = snakemake(workflow_dir, "-n", "--config", f"backends=['gloo; touch {marker}']")
    assert r.returncode != 0
    out = r.stdout + r.stderr
    assert "backends[0]" in out and "nccl, gloo" in out
    assert not marker.exists()
    assert not (workflow_dir / "results").exists()


def test_command_line_strings_become_integers_where_the_schema_wants_them():
    # snakemake --config world_sizes=[2,4] gpus=6 delivers strings inside lists
    cfg = check_config({"world_sizes": ["2", "4"], "gpus": "6", "comm": {"iters": "7", "sizes": ["8", "1MB"]}})
    assert cfg["world_sizes"] == [2, 4] and cfg["gpus"] == 6 and cfg["comm"]["iters"] == 7
    assert cfg["comm"]["sizes"] == ["8", "1MB"]  # sizes accept strings: left as written
    with pytest.raises(ConfigError, match="gpus"):
        check_config({"gpus": "six"})
