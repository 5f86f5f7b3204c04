"""Inputs that pass a naive check and still hurt (issue 28, items 1, 4, 7, 8): planning bounded in
time and memory whatever the config says, errors that never print a file and stay short, names
that must fit a path component, duplicate YAML keys, timing-distorting variables, and a Gloo job
with nothing to measure.

Planning runs here in a subprocess under an address-space limit (RLIMIT_AS) and a timeout, so a
regression fails the test instead of exhausting the machine.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap

import pytest
import yaml

from distbench.comm.traffic import MAX_MATRIX_BYTES, TrafficError, read_matrix
from distbench.core.sizes import MAX_SIZES, min_step_factor, size_sweep, sizes_from_config
from distbench.pipeline.config import ConfigError, check_config, check_config_files
from distbench.pipeline.plan import make_plan
from tests.conftest import REPO, snakemake

LIMIT_BYTES = 2 * 2**30  # the planning process may map 2 GiB; the sweep of issue 28 needed ~10^11 ints


def _bounded(code: str, timeout: int = 60) -> dict:
    """Run `code` (which prints one JSON line) in a fresh Python under RLIMIT_AS and a timeout."""
    prog = textwrap.dedent(f"""
        import json, resource
        resource.setrlimit(resource.RLIMIT_AS, ({LIMIT_BYTES}, {LIMIT_BYTES}))
    """) + textwrap.dedent(code)
    r = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True, timeout=timeout,
                       cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def _error(config: dict) -> str:
    with pytest.raises(ConfigError) as e:
        check_config(config)
    return str(e.value)


# --- 1. planning bounded: size sweeps ---

@pytest.mark.parametrize("step", [1.0000000001, 1.0001])
def test_a_step_factor_near_one_is_refused_at_check_without_building_the_sweep(step):
    out = _bounded(f"""
        from distbench.pipeline.config import ConfigError, check_config
        try:
            check_config({{"comm": {{"sizes": {{"min_bytes": 8, "max_bytes": "1GiB", "step_factor": {step!r}}}}}}})
            print(json.dumps({{"error": None}}))
        except ConfigError as e:
            print(json.dumps({{"error": str(e)}}))
    """)
    message = out["error"]
    assert message is not None
    assert "comm.sizes.step_factor" in message and str(step) in message
    assert f"at most {MAX_SIZES} sizes" in message and "at least 1.159" in message


def test_sweeps_are_deduplicated_after_rounding_and_capped():
    sizes = size_sweep(8, 64, 1.1)  # 8, 8.8, 9.68, ... round down to 8, 8, 9, ...
    assert sizes == sorted(set(sizes)) and sizes[0] == 8 and sizes[-1] <= 64
    assert len(sizes) < 23  # the 23 raw steps hold repeats
    with pytest.raises(ValueError, match=f"at most {MAX_SIZES}"):
        size_sweep(8, "1GiB", 1.01)
    # the cap itself is allowed (within the largest size, 1 PiB)
    assert len(size_sweep(2**20, 2**50, min_step_factor(2**20, 2**50))) == MAX_SIZES
    many = [str(i) for i in range(1, MAX_SIZES + 2)]
    assert f"{MAX_SIZES + 1} distinct sizes; at most {MAX_SIZES}" in _error({"comm": {"sizes": many}})
    assert len(sizes_from_config({"sizes": [*many[:MAX_SIZES], "1", "1B"]})) == MAX_SIZES  # repeats count once


def test_a_yaml_alias_bomb_is_refused_before_anything_walks_it():
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{b}: &{b} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
        for p, b in zip("abcdefgh", "bcdefghi"))  # 10^9 values when expanded
    out = _bounded(f"""
        import yaml
        from distbench.pipeline.config import ConfigError, check_config
        cfg = yaml.safe_load({bomb!r})
        try:
            check_config({{"comm": {{"sizes": cfg["i"]}}}})
            print(json.dumps({{"error": None}}))
        except ConfigError as e:
            print(json.dumps({{"error": str(e)}}))
    """, timeout=60)
    assert "more than 100,000 values" in out["error"] and len(out["error"]) < 300


# --- 1. planning bounded: traffic matrix files ---

def test_matrix_files_that_are_not_regular_files_are_refused_without_reading(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    out = _bounded(f"""
        from distbench.pipeline.config import ConfigError, check_config
        said = []
        for path in [{str(fifo)!r}, "/dev/zero", {str(tmp_path)!r}]:
            try:
                check_config({{"comm": {{"traffic": ["file:" + path]}}}})
                said.append(None)
            except ConfigError as e:
                said.append(str(e))
        print(json.dumps({{"said": said}}))
    """, timeout=60)  # a pipe opened for reading would wait here for a writer
    pipe, zero, folder = out["said"]
    assert "is a named pipe; give a regular file" in pipe
    assert "is a device; give a regular file" in zero
    assert "is a directory; give a regular file" in folder


def test_a_matrix_file_over_the_cap_is_refused_by_its_size(tmp_path):
    big = tmp_path / "big.csv"
    with open(big, "wb") as f:
        f.truncate(MAX_MATRIX_BYTES + 1)  # sparse: nothing is written, and nothing may be read
    with pytest.raises(TrafficError, match=r"1,048,577 bytes; at most 1,048,576 \(1 MiB\)"):
        read_matrix(big)
    ok = tmp_path / "ok.csv"
    ok.write_text("1,2\n3,4\n")
    assert read_matrix(ok) == [[1, 2], [3, 4]]


# --- 4. errors never echo a file and stay short ---

def test_errors_give_a_position_never_the_files_content(tmp_path):
    secret = tmp_path / "passwd"
    secret.write_text("root:x:0:0:hunter2-secret:/root:/bin/bash\n")
    with pytest.raises(TrafficError) as e:
        read_matrix(secret)
    assert "line 1: not all numbers (field 1)" in str(e.value) and "hunter2" not in str(e.value)
    numbers = tmp_path / "third.txt"
    numbers.write_text("1 2 oops-private\n1 2 3\n1 2 3\n")
    with pytest.raises(TrafficError, match=r"line 1: not all numbers \(field 3\)$"):
        read_matrix(numbers)
    binary = tmp_path / "bin"
    binary.write_bytes(b"1 2\n\xff\xfe\n")
    with pytest.raises(TrafficError, match="not text"):
        read_matrix(binary)


def test_errors_stay_short_whatever_the_files_size(tmp_path):
    long_line = tmp_path / "long.txt"
    long_line.write_text("x" * 200_000 + "\n")
    ragged = tmp_path / "ragged.txt"
    ragged.write_text("1 2 3\n" + "1 2\n" * 20_000)
    for path, says in [(long_line, "not all numbers (field 1)"), (ragged, "row(s) [1, 2, 3, 4, 5] and 19,996 more differ")]:
        message = "\n".join(_error({"comm": {"traffic": [f"file:{path}"]}}).splitlines())
        assert says in message and len(message) < 400, len(message)
    long_path = "file:" + "d/" * 5000 + "m.csv"
    assert len(_error({"comm": {"traffic": [long_path]}})) < 400


def test_a_large_value_in_a_config_error_is_cut_short():
    bomb = yaml.safe_load("a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
                          "b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
                          "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
                          "d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n")  # 6,561 strings: under the value cap
    for config in [{"backends": bomb["d"]}, {"world_sizes": bomb["d"]}, {"gpus": bomb["d"]},
                   {"run_label": "é" * 100_000}, {"comm": {"sizes": ["9" * 100_000 + "XB"]}}]:
        message = _error(config)
        assert len(message) < 3000, (list(config), len(message))
    many = _error({"world_sizes": [0] * 5000})
    assert re.search(r"\.\.\. and 4,9\d\d more problems$", many) and len(many) < 3000


# --- 7. names that become path components ---

def test_a_long_run_label_is_refused_at_check_naming_the_key():
    message = _error({"run_label": "r" * 300})
    assert "config key run_label" in message and "300 bytes long; at most 128" in message
    assert check_config({"run_label": "r" * 128})["run_label"] == "r" * 128


@pytest.mark.parametrize("key", ["comm", "training"])
def test_nccl_settings_whose_directory_name_is_too_long_are_refused(key):
    env = {"NCCL_ALGO": ",".join(["Ring", "Tree"] * 20), "NCCL_SOCKET_IFNAME": "eth" + "0" * 60}
    config = {"comm": {"nccl_env": [{}, env]}} if key == "comm" else {"training": {"tune_space": {"nccl_env": [env]}}}
    message = _error(config)
    where = "comm.nccl_env[1]" if key == "comm" else "training.tune_space.nccl_env[0]"
    assert f"config key {where}: these settings name a job directory of" in message
    assert "at most 160 bytes" in message


def test_run_label_and_nccl_algo_messages_are_in_words():
    label = _error({"run_label": "a b"})
    assert "letters, digits and _ . - only, not starting with a dot" in label and "[A-Za-z" not in label
    algo = _error({"comm": {"nccl_env": [{"NCCL_ALGO": "Rong"}]}})
    assert "one or more of Ring, Tree, CollnetDirect" in algo and "(Ring|" not in algo


# --- 8. duplicate keys, timing variables, a Gloo job with no size ---

def test_duplicate_keys_in_a_config_file_are_refused_naming_the_key(tmp_path):
    f = tmp_path / "dup.yaml"
    f.write_text("world_sizes: [2]\nbackends: [gloo]\nworld_sizes: [1024]\n")
    with pytest.raises(ConfigError, match=r"key 'world_sizes' is given twice \(lines 1 and 3\)"):
        check_config_files([f])
    nested = tmp_path / "nested.yaml"
    nested.write_text("comm: {iters: 5, iters: 6}\n")
    with pytest.raises(ConfigError, match="key 'iters' is given twice"):
        check_config_files([nested])
    fine = tmp_path / "fine.yaml"
    fine.write_text("base: &b {iters: 5}\ncomm:\n  <<: *b\n  warmup: 1\n")
    check_config_files([fine])


def test_snakemake_refuses_a_configfile_with_a_duplicate_key(workflow_dir):
    (workflow_dir / "dup.yaml").write_text("backends: [gloo]\nworld_sizes: [2]\nworld_sizes: [1024]\n")
    r = snakemake(workflow_dir, "-n", "--configfile", "dup.yaml", timeout=300)
    assert r.returncode != 0
    assert "key 'world_sizes' is given twice (lines 2 and 3)" in r.stdout + r.stderr
    assert not (workflow_dir / "results").exists()


def test_timing_variables_are_refused_alike_in_job_env_and_nccl_env():
    job_env = _error({"job_env": {"NCCL_DEBUG": "INFO"}})
    nccl_env = _error({"comm": {"nccl_env": [{"NCCL_DEBUG": "INFO"}]}})
    said = "NCCL_DEBUG distorts timed runs (NCCL's logging slows small messages"
    assert "config key job_env.NCCL_DEBUG: " + said in job_env
    assert "config key comm.nccl_env[0].NCCL_DEBUG: " + said in nccl_env
    assert "CUDA_LAUNCH_BLOCKING distorts timed runs" in _error({"job_env": {"CUDA_LAUNCH_BLOCKING": "1"}})


def test_a_gloo_job_with_no_size_under_its_cap_is_skipped_and_said():
    plan = make_plan(check_config({"backends": ["gloo"], "comm": {"sizes": ["1TB"]}}), detected=(0, "none"))
    assert not [j for j in plan["jobs"]["comm"] if j.backend == "gloo"]
    assert any(s["what"] == "gloo comm jobs" and "nothing to measure" in s["why"] and "16 MiB" in s["why"]
               for s in plan["skipped"])
    kept = make_plan(check_config({"backends": ["gloo"], "comm": {"sizes": ["1KiB", "1TB"]}}), detected=(0, "none"))
    assert {j.backend for j in kept["jobs"]["comm"]} == {"gloo"}
