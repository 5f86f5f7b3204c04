"""Every benchmark job of a run: its Snakemake wall time (benchmark tsv), where its ranks' time went
(placement.json provenance.timeline) and, for a job measured in a shared launch
(distbench.launch.batch), that launch and the configuration's own seconds.
    python benchmarks/runs/jobs_table.py results/<label> > jobs.csv"""
import csv
import glob
import json
import os
import sys

r = sys.argv[1]
w = csv.writer(sys.stdout)
cols = ("fixed_cost_s", "import_torch_s", "device_and_pg_init_s", "setup_s", "measure_s", "teardown_s")
w.writerow(["job", "wall_s", *cols, "launched_by", "configurations", "config_wall_s"])
for tsv in sorted(glob.glob(f"{r}/benchmarks/**/*.tsv", recursive=True)):
    rows = open(tsv).read().splitlines()
    wall = rows[-1].split("\t")[0] if len(rows) > 1 else ""
    job = os.path.relpath(tsv, f"{r}/benchmarks")[:-4]
    fam, rest = job.split("/", 1)
    prov = {}
    pattern = f"{r}/{fam}/{rest}*/placement.json" if fam == "comm" else f"{r}/{fam}/{rest}/placement.json"
    for p in glob.glob(pattern):
        prov = json.load(open(p)).get("provenance", {}) or prov
    tl, batch = prov.get("timeline") or {}, prov.get("batch") or {}
    w.writerow([job, wall, *(tl.get(k, "") for k in cols), batch.get("launched_by", ""),
                batch.get("configurations", ""), batch.get("wall_s", "")])
