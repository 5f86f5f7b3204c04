"""nccl-tests' own analyzer (tools/analyze_perf_json.py) on the nccl-tests documents distbench writes
from a real GPU comm job's tables (issue 24, part 4). No GPU needed: it reads a committed job's
comm.csv, comm_ranks.csv and placement, writes the documents as the `summary_json` rule does
(distbench.comm.analysis.nccl_tests_json), and runs every analysis of the script on each.

    python benchmarks/investigations/nccl-tests-analyzer/run.py JOB_DIR OUT_DIR [--analyzer PATH]

JOB_DIR holds comm.csv, comm_ranks.csv and a placement (comm_p.json or placement.json); the analyzer
defaults to .fetched/nccl-tests/tools/analyze_perf_json.py (NVIDIA/nccl-tests, git-ignored).
"""

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd

from distbench.comm.analysis.nccl_tests_json import JobKey, write_nccl_tests
from distbench.comm.analysis.summary import summarize

REPO = Path(__file__).resolve().parents[3]
FLAGS = (["--straggler"], ["--spikes"], ["--nodes"], ["--iter0"])


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("job_dir", type=Path)
    p.add_argument("out_dir", type=Path)
    p.add_argument("--analyzer", type=Path, default=REPO / ".fetched/nccl-tests/tools/analyze_perf_json.py")
    a = p.parse_args()
    raw = pd.read_csv(a.job_dir / "comm.csv")
    a.out_dir.mkdir(parents=True, exist_ok=True)
    summary = a.out_dir / "comm_summary.csv"
    summarize(raw).to_csv(summary, index=False)
    placement = next(x for x in (a.job_dir / "comm_p.json", a.job_dir / "placement.json") if x.exists())
    first = raw.iloc[0]
    key = JobKey(str(first["backend"]), str(first["dtype"]), int(first["world_size"]), str(first["nccl_env"]))
    docs = write_nccl_tests(summary, a.out_dir / "nccl_tests", a.job_dir / "comm_ranks.csv", {key: str(placement)})
    failed = 0
    with open(a.out_dir / "analyzer.txt", "w") as out:
        for doc in docs:
            # the analyzer reads the out-of-place fields unless told --in-place: an op measured in place
            # only (all_reduce by default, broadcast always) has its per-iteration fields there
            results = json.loads(doc.read_text())["results"]
            placement_flag = ["--in-place"] if all(r["out_of_place"] is None for r in results) else []
            for flags in FLAGS:
                flags = [*flags, *placement_flag]
                res = subprocess.run([sys.executable, str(a.analyzer), str(doc), *flags], capture_output=True,
                                     text=True, timeout=120)
                out.write(f"$ analyze_perf_json.py {doc.name} {' '.join(flags)}  (exit {res.returncode})\n")
                out.write(res.stdout + res.stderr + "\n")
                failed += res.returncode != 0 or "No per-process data available" in res.stdout
    print(f"{len(docs)} documents x {len(FLAGS)} analyses; {failed} failed or found no per-process data; "
          f"{a.out_dir / 'analyzer.txt'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
