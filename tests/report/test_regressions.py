"""Regressions against a baseline run: flagged only beyond the measured noise and the threshold; the
report lists them at the top; a baseline without tables is refused before anything runs."""

import shutil

import pandas as pd
import pytest
from synthetic import make_synthetic

from distbench.pipeline.config import ConfigError, check_config
from distbench.comm.analysis.section import TIME as COMM
from distbench.report.regressions import compare, compare_one
from distbench.core.section import ReportInputs
from distbench.report.render import render_report
from tests.conftest import REPO

RUN = REPO / "benchmarks/results/comm-a2av-h100x4-2026-11-26/comm_summary.csv"


def _point(t, p5, p95, size=2**20):
    return dict(backend="nccl", world_size=4, nodes=1, op="all_reduce", traffic="none", dtype="float32",
                nccl_env="default", timing="events", inplace=True, size_bytes=size, time_us_median=t,
                time_us_p5=p5, time_us_p95=p95, status="ok")


@pytest.mark.parametrize("now,flagged,direction,why", [
    ((120, 118, 122), True, "slower", "+20.0% (beyond 5%), p5-p95 intervals apart"),
    ((120, 95, 125), False, "slower", "within the p5-p95 noise"),  # a noisy point: not flagged
    ((102, 101.5, 102.5), False, "slower", "(within 5%)"),  # apart, but under the threshold
    ((80, 79, 81), True, "faster", "-20.0%"),
])
def test_a_move_counts_beyond_noise_and_threshold(now, flagged, direction, why):
    t = compare_one(COMM, pd.DataFrame([_point(*now)]), pd.DataFrame([_point(100, 99, 101)]), 5.0)
    assert len(t) == 1 and bool(t["flagged"].iloc[0]) is flagged and t["direction"].iloc[0] == direction
    assert why in t["why"].iloc[0]


def test_a_real_run_against_itself_with_one_series_slowed(tmp_path):
    base = tmp_path / "base" / "tables"
    base.mkdir(parents=True)
    shutil.copy(RUN, base / "comm_summary.csv")
    now = pd.read_csv(RUN)
    slow = (now["op"] == "all_to_all_v") & (now["traffic"] == "zipf:2") & (now["status"] == "ok")
    for col in ("time_us_median", "time_us_p5", "time_us_p95"):
        now.loc[slow, col] *= 1.3
    now_csv = tmp_path / "now.csv"
    now.to_csv(now_csv, index=False)
    table = compare({"comm_summary.csv": now_csv}, tmp_path / "base", [COMM])
    flagged = table[table["flagged"]]
    zipf2 = table[table["what"].str.contains("traffic=zipf:2")]
    assert flagged["what"].str.contains("traffic=zipf:2").all() and (flagged["direction"] == "slower").all()
    # nearly every large point is flagged; one whose p5-p95 spread is wider than the 30% is noise, not a regression
    large = zipf2[zipf2["what"].str.extract(r"size_bytes=(\d+)")[0].astype(int) >= 2**20]
    assert len(large) >= 20 and large["flagged"].mean() > 0.9
    assert (~zipf2["flagged"]).sum() == (~zipf2["flagged"] & zipf2["why"].str.contains("within the p5-p95 noise")).sum()
    # rendered at the top of the report
    data = make_synthetic(tmp_path / "syn")
    out_md = tmp_path / "r.md"
    render_report(ReportInputs({"comm_summary": now_csv, "comm_largest": data["largest_csv"]}, data["env_json"], [],
                               {"report": {"baseline": str(tmp_path / "base")}}, data["plan"]),
                  out_md, tmp_path / "r.html")
    md = out_md.read_text()
    assert md.index("## Verdict") < md.index("## Regressions against the baseline") < md.index("## Findings")
    section = md.split("## Regressions against the baseline")[1].split("\n## ")[0]
    assert f"{len(flagged)} moved by more than 5%" in section and "| comm | backend=nccl, world_size=2" in section
    assert "| +30.0% | slower |" in section


def test_a_baseline_without_tables_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="config key report.baseline: .* holds no comm_summary.csv"):
        check_config({"report": {"baseline": str(tmp_path)}})


def test_a_baseline_is_found_by_label_by_run_directory_and_in_a_copied_results_tree(tmp_path, monkeypatch):
    from distbench.core.run_label import baseline_tables_dir as found

    def baseline_tables_dir(b):
        return found(b, ["comm_summary.csv", "training_summary.csv"])

    def run(root, label):
        (root / label / "tables").mkdir(parents=True)
        shutil.copy(RUN, root / label / "tables" / "comm_summary.csv")
        return root / label / "tables"

    monkeypatch.chdir(tmp_path)
    laptop = run(tmp_path / "results", "laptop")
    assert baseline_tables_dir("laptop").resolve() == laptop  # a label under ./results/
    assert baseline_tables_dir(str(tmp_path / "results" / "laptop")) == laptop  # a run's directory
    copied = run(tmp_path / "old" / "results", "cloud")
    assert baseline_tables_dir(str(tmp_path / "old")) == copied  # a copied tree holding one run
    assert baseline_tables_dir(str(tmp_path / "old" / "results")) == copied
    run(tmp_path / "old" / "results", "cloud2")  # two runs there: which one is not guessed
    assert baseline_tables_dir(str(tmp_path / "old")) is None
    with pytest.raises(ConfigError, match="config key report.baseline: 'nolabel' holds no comm_summary.csv"):
        check_config({"report": {"baseline": "nolabel"}})
    assert check_config({"report": {"baseline": "laptop"}})["report"]["baseline"] == "laptop"
