"""The machine-readable outputs on crafted tables: nccl-tests -J field names and type names, what
is null where we know less than nccl-tests, and the summary schema rejecting a wrong shape."""

import json

import jsonschema
import pandas as pd
import pytest

from distbench.pipeline.config import check_config
from distbench.comm.analysis.nccl_tests_json import nccl_tests_documents
from distbench.core.section import ReportInputs
from distbench.report.summary_json import summary_document, validate_summary


def comm_summary(tmp_path, rows):
    base = dict(backend="nccl", world_size=4, op="all_reduce", dtype="bfloat16", nccl_env="default", timing="events",
                inplace=False, size_bytes=1024, time_us_median=10.0, time_us_p5=9.0, time_us_p95=11.0,
                algbw_gbps_median=0.1024, busbw_gbps_median=0.1536, correct=True, status="ok")
    path = tmp_path / "comm_summary.csv"
    pd.DataFrame([{**base, **r} for r in rows]).to_csv(path, index=False)
    return path


def test_nccl_tests_documents_use_its_field_names(tmp_path):
    path = comm_summary(tmp_path, [{}, {"inplace": True, "time_us_median": 12.0, "correct": False},
                                   {"op": "broadcast", "dtype": "float16"}])
    docs = nccl_tests_documents(path)
    ar = docs["nccl_all_reduce_bfloat16_ws4_default_events.json"]
    rec = ar["results"][0]
    assert (rec["size"], rec["count"], rec["type"], rec["redop"], rec["root"]) == (1024, 512, "bfloat16", "sum", -1)
    assert rec["out_of_place"] == {"time": 10.0, "alg_bw": 0.1024, "bus_bw": 0.1536, "nwrong": 0}
    assert rec["in_place"]["nwrong"] is None  # a wrong result: we know it was wrong, not how many elements
    assert ar["out_of_bounds"] == {"count": 1, "okay": False}
    assert ar["average_bus_bandwidth"]["bandwidth"] == pytest.approx(0.1536)
    bc = docs["nccl_broadcast_float16_ws4_default_events.json"]["results"][0]
    assert (bc["type"], bc["redop"], bc["root"], bc["in_place"]) == ("half", "none", 0, None)


def test_summary_document_shape_and_schema(tmp_path):
    path = comm_summary(tmp_path, [{}])
    env = tmp_path / "env.json"
    env.write_text(json.dumps({"cuda_available": True, "gpus": [{"name": "NVIDIA H100 80GB HBM3"}], "torch": "2.11"}))
    doc = summary_document(ReportInputs({"comm_summary": path}, env=env), check_config({}))
    validate_summary(doc)
    assert doc["name"] == "distbench_4gpu" and doc["world_size"] == 4
    assert doc["config"]["device"] == "NVIDIA H100 80GB HBM3" and doc["config"]["warmup_iters"] == 5
    assert doc["results"]["communication"]["all_reduce"][0]["busbw_gbps_median"] == pytest.approx(0.1536)
    assert doc["results"]["training"] == [] and doc["results"]["memory"] == []
    bad = {**doc, "results": {"communication": {}, "training": []}}
    with pytest.raises(jsonschema.ValidationError, match="'memory' is a required property"):
        validate_summary(bad)
