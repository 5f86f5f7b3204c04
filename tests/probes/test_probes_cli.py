"""`python -m distbench.probes` end to end, as Snakemake rules call it."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

FIX = Path(__file__).parents[1] / "fixtures"
ROOT = Path(__file__).resolve().parents[2]


def run(*args):
    return subprocess.run([sys.executable, "-m", "distbench.probes", *map(str, args)],
                          capture_output=True, text=True, cwd=ROOT, timeout=60)


def test_topology_json():
    p = run("topology", FIX / "topo" / "h200x2.txt")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["matrix"]["GPU0"]["GPU1"] == "NV18"


def test_nccl_log_json_several_files():
    p = run("nccl-log", FIX / "nccl" / "h200x2-rank1.log", FIX / "nccl" / "tuning-2.2x.log")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["nccl_version"] == "2.28.9" and out["nranks"] == 2
    assert "AllReduce: 1 MiB: Ring/LL, 2 MiB+: Ring/Simple" in out["algo_ranges"]


def test_garbage_input_exits_2_with_one_line(tmp_path):
    junk = tmp_path / "junk.txt"
    junk.write_text("this is not a topology\n")
    for cmd in ("topology", "nccl-log"):
        p = run(cmd, junk)
        assert p.returncode == 2 and p.stdout == ""
        assert len(p.stderr.strip().splitlines()) == 1 and "junk.txt" in p.stderr


def test_missing_file_exits_2(tmp_path):
    p = run("nccl-log", tmp_path / "nope.log")
    assert p.returncode == 2 and "no such file" in p.stderr


def test_probe_topology_and_nvlink_on_cpu_host():
    for cmd in ("probe-topology", "nvlink"):
        p = run(cmd)
        assert p.returncode == 0
        out = json.loads(p.stdout)
        if shutil.which("nvidia-smi") is None:  # this CPU host; on a GPU host either answer is valid
            assert out["available"] is False and out["reason"]
