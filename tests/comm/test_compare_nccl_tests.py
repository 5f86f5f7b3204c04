"""tools/compare_nccl_tests.py reads nccl-tests' own stdout (here a real sendrecv_perf run, MPI build,
mpiexec -n 2 with -N 10 cycles, 2x H200) and puts our rows beside it; no figure is quoted by hand."""

import importlib.util

import pandas as pd
import pytest

from tests.conftest import REPO

FIX = REPO / "tests" / "fixtures" / "nccl_tests_out" / "sendrecv_perf_mpi2.txt"
MiB = 1 << 20


def _tool():
    spec = importlib.util.spec_from_file_location("compare_nccl_tests", REPO / "tools" / "compare_nccl_tests.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _ours(tmp_path, op="send_recv", inplace=False, t_us=150.0):
    rows = [{"op": op, "timing": "events", "inplace": inplace, "size_bytes": 32 * MiB, "requested_bytes": 32 * MiB,
             "status": "ok", "time_us": t_us + k, "busbw_gbps": 32 * MiB / ((t_us + k) * 1e3)} for k in (-1, 0, 1)]
    path = tmp_path / "comm.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def test_reads_the_op_and_the_median_over_cycles():
    op, table = _tool().read_nccl_tests(FIX)
    assert op == "send_recv"
    assert list(table.index) == [32 * MiB, 64 * MiB, 128 * MiB]
    cycles = [float(line.split()[-8]) for line in FIX.read_text().splitlines()
              if line.split() and line.split()[0] == str(32 * MiB)]
    assert len(cycles) == 10  # -N 10: every cycle is read, and the median taken
    assert table.loc[32 * MiB, "time_us"] == pytest.approx(pd.Series(cycles).median())


def test_ratios_against_our_rows(tmp_path, capsys):
    tool = _tool()
    assert tool.main([str(_ours(tmp_path, t_us=150.0)), str(FIX)]) == 0
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if ln.startswith(f"| send_recv | {32 * MiB} |"))
    _, ref = tool.read_nccl_tests(FIX)
    assert f"{150.0 / ref.loc[32 * MiB, 'time_us']:.3f}" in line
    assert "(below 0.97)" in line  # 150 us against nccl-tests' ~139 us at 32 MiB


def test_in_place_only_ops_are_compared_and_nothing_in_common_fails(tmp_path):
    tool = _tool()
    ours = tool.read_ours(_ours(tmp_path, op="send_recv", inplace=True), "events")
    assert ("send_recv", 32 * MiB) in ours.index  # an op with in-place rows only keeps them
    assert tool.main([str(_ours(tmp_path, op="all_gather")), str(FIX)]) == 1
