import json

import pandas as pd

from distbench.comm.analysis.diagnose import diagnose, join_nccl_algo, pick_placement


def _summary(**kw):
    r = {"backend": "nccl", "world_size": 2, "op": "all_reduce", "dtype": "float32", "nccl_env": "default",
         "timing": "events", "inplace": True, "size_bytes": 2**20, "n_trials": 5, "time_us_median": 20.0,
         "time_us_p5": 19.0, "time_us_p95": 21.0, "time_us_min": 19.0, "time_us_cv": 0.01,
         "algbw_gbps_median": 50.0, "busbw_gbps_median": 50.0, "busbw_gbps_max": 51.0, "correct": True,
         "status": "ok", "message": ""}
    r.update(kw)
    return r


def test_nccl_algorithm_joins_by_op_and_total_size():
    nccl = {"nranks": 2, "algo_by_size": [
        {"op": "AllReduce", "size_bytes": 2**20, "algo": "Ring", "proto": "LL"},
        {"op": "AllGather", "size_bytes": 2**19, "algo": "Ring", "proto": "Simple"}]}
    s = pd.DataFrame([_summary(), _summary(op="all_gather", inplace=False), _summary(backend="gloo", timing="host")])
    out = join_nccl_algo(s, nccl)
    assert list(out["nccl_algo"][:2]) == ["Ring", "Ring"] and list(out["nccl_proto"][:2]) == ["LL", "Simple"]
    assert pd.isna(out["nccl_algo"][2])  # Gloo rows get nothing


def test_placement_prefers_the_job_with_an_error(tmp_path):
    good = {"ranks": [{"rank": 0, "uuid": "a"}, {"rank": 1, "uuid": "b"}], "error": None}
    bad = {"ranks": [{"rank": 0, "uuid": "a"}, {"rank": 1, "uuid": "a"}], "error": "ranks 0 and 1 share one GPU"}
    (tmp_path / "g.json").write_text(json.dumps(good))
    (tmp_path / "b.json").write_text(json.dumps(bad))
    assert pick_placement([tmp_path / "g.json"]) == good["ranks"]
    assert pick_placement([tmp_path / "g.json", tmp_path / "b.json"]) == bad["ranks"]


def test_diagnose_on_a_cpu_host_writes_tables_without_peak(tmp_path):
    pd.DataFrame([_summary(backend="gloo", timing="host")]).to_csv(tmp_path / "s.csv", index=False)
    (tmp_path / "env.json").write_text(json.dumps({"gpu_count": 0, "gpus": []}))
    (tmp_path / "topo.json").write_text(json.dumps({"available": False, "reason": "no nvidia-smi"}))
    (tmp_path / "nccl.json").write_text(json.dumps({"available": False, "reason": "no GPU"}))
    out = diagnose(pd.read_csv(tmp_path / "s.csv"), tmp_path / "env.json", tmp_path / "topo.json",
                   tmp_path / "nccl.json", [], tmp_path / "advice.json")
    extra = json.loads((tmp_path / "advice.json").read_text())
    assert extra["peak"] is None and extra["nccl"] is None and "advice" in extra
    assert {"pct_of_link_peak", "nccl_algo", "nccl_proto"} <= set(out.columns)


def test_a_one_gpu_node_has_no_link_peak_and_two_gpus_have_theirs(tmp_path):
    """A one-GPU node (1x H200, 2026-11-29) showed 'Link peak: GPUs talk over PCIe; Gen5 x16 is 63 GB/s' with
    no other GPU to talk to, and held its Gloo rows (CPU processes) against it."""
    from tests.probes.test_probe_topology import load

    pd.DataFrame([_summary(backend="gloo", timing="host")]).to_csv(tmp_path / "s.csv", index=False)
    (tmp_path / "nccl.json").write_text(json.dumps({"available": False, "reason": "one GPU"}))

    def peak(gpus: int, topology: dict):
        (tmp_path / "env.json").write_text(json.dumps({"gpu_count": gpus, "gpus": [{"name": "NVIDIA H200"}] * gpus}))
        (tmp_path / "topo.json").write_text(json.dumps({"topology": topology, "nvlink": {"available": True, "gpus": []}}))
        out = diagnose(pd.read_csv(tmp_path / "s.csv"), tmp_path / "env.json", tmp_path / "topo.json",
                       tmp_path / "nccl.json", [], tmp_path / "advice.json")
        return json.loads((tmp_path / "advice.json").read_text())["peak"], out

    one = {"available": True, "gpus": ["GPU0"], "matrix": {"GPU0": {"GPU0": "X"}}, "links": [],
           "gpu_names": {"GPU0": "NVIDIA H200"}}
    got, out = peak(1, one)
    assert got is None and out["pct_of_link_peak"].isna().all()
    two = {"available": True, **load("h200x2-lent-2026-11-26.txt")}
    got, _ = peak(2, two)
    assert got["kind"] == "nvlink" and got["peak_gbps"] > 300
