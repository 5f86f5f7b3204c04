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


# Defaults come from snakemake.utils.validate(set_default=True); these fail if nested ones stop filling.
def test_nested_defaults_fill_in_every_comm_default():
    comm = check_config({"comm": {}})["comm"]
    assert {"max_bytes": "128MiB", "warmup": 1, "iters": 5, "trials": 3}.items() <= comm["gloo"].items()
    assert comm["sizes"] == {"min_bytes": 8, "max_bytes": "1GiB", "step_factor": 2}
    assert comm["iters"] == 20 and comm["job_timeout_s"] == 1800 and comm["nccl_env"] == [{}]
    partial = check_config({"comm": {"gloo": {"iters": 9}}})["comm"]["gloo"]
    assert {"max_bytes": "128MiB", "warmup": 1, "iters": 9, "trials": 3}.items() <= partial.items()


def test_a_sweep_without_step_factor_gets_the_default():
    given = {"comm": {"sizes": {"min_bytes": 1, "max_bytes": 2}}}
    assert check_config(given)["comm"]["sizes"] == {"min_bytes": 1, "max_bytes": 2, "step_factor": 2}
    assert given == {"comm": {"sizes": {"min_bytes": 1, "max_bytes": 2}}}  # the caller's dict is not changed
    assert check_config({"comm": {"sizes": ["1MB"]}})["comm"]["sizes"] == ["1MB"]  # a list stays a list


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
    ({"comm": {"sizes": ["1XB"]}}, ["comm.sizes[0]", "'1XB' is not a size"]),
    ({"comm": {"sizes": {"min_bytes": 1, "max_bytes": 2, "step_factor": 1}}}, ["comm.sizes.step_factor", "> 1"]),
    ({"comm": {"sizes": {"min_bytes": 1, "max_bytes": 2, "step": 2}}}, ["comm.sizes.step", "step_factor"]),
    ({"world_sizes": [2000]}, ["world_sizes[0]", "<= 1024"]),
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


SIZE_HELP = ("(use bytes as an integer, or a number with a unit: B, KB, MB, GB, TB, KiB, MiB, GiB, TiB, "
             "or K/M/G/T = binary as in nccl-tests)")


def test_a_bad_size_names_the_element_in_words():
    with pytest.raises(ConfigError) as e:
        check_config({"comm": {"sizes": ["1MB", "12XB"]}})
    assert f"config key comm.sizes[1]: '12XB' is not a size {SIZE_HELP}" in str(e.value)
    assert "matching" not in str(e.value) and "[0-9]" not in str(e.value)  # no regular expression
    assert "comm.sizes[0]" not in str(e.value)  # the good element is not blamed
    with pytest.raises(ConfigError) as e:
        check_config({"comm": {"sizes": {"min_bytes": "1", "max_bytes": "2QB"}, "gloo": {"max_bytes": "lots"}}})
    assert "comm.sizes.max_bytes: '2QB' is not a size" in str(e.value)
    assert "comm.gloo.max_bytes: 'lots' is not a size" in str(e.value)
    with pytest.raises(ConfigError) as e:
        check_config({"comm": {"sizes": "1MB"}})  # neither a list nor a sweep: say both, still no regex
    assert "comm.sizes" in str(e.value) and "min_bytes" in str(e.value) and "[0-9]" not in str(e.value)


@pytest.mark.parametrize("zero", ["0MB", 0, "0", "0 KiB"])
def test_zero_is_not_a_size(zero):
    with pytest.raises(ConfigError) as e:
        check_config({"comm": {"sizes": ["1MB", zero]}})
    assert f"config key comm.sizes[1]: {zero!r} is not a size: sizes must be >= 1 byte" in str(e.value)
    with pytest.raises(ConfigError, match=r"comm\.sizes\.min_bytes: .* >= 1 byte"):
        check_config({"comm": {"sizes": {"min_bytes": zero, "max_bytes": "1MB"}}})
    with pytest.raises(ConfigError, match=r"comm\.gloo\.max_bytes: .* >= 1 byte"):
        check_config({"comm": {"gloo": {"max_bytes": zero}}})


def test_a_fraction_of_a_byte_is_not_a_size():
    with pytest.raises(ConfigError, match=r"comm\.sizes\[0\]: '1\.5B' is not a size: not a whole number of bytes"):
        check_config({"comm": {"sizes": ["1.5B"]}})


def test_all_errors_reported_at_once():
    with pytest.raises(ConfigError) as e:
        check_config({"backends": ["mpi"], "comm": {"ops": ["scan"], "sizes": ["0", "1XB"]}})
    for key in ("backends[0]", "comm.ops[0]", "comm.sizes[0]", "comm.sizes[1]"):
        assert key in str(e.value)


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
