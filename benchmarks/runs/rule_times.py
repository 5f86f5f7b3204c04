"""Every step of one Snakemake run with its wall time, read from the run's console log (the
`[timestamp]` lines Snakemake prints before a job starts and when it finishes; 1 s resolution), and
the totals per rule. Usage: python benchmarks/runs/rule_times.py SNAKEMAKE_LOG > rule_times.csv"""

import csv
import re
import sys
from collections import defaultdict
from datetime import datetime

STAMP = re.compile(r"^\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\]$")
START = re.compile(r"^(?:local)?(?:checkpoint|rule) (\w+):$")
JOBID = re.compile(r"^\s+jobid: (\d+)$")
DONE = re.compile(r"^Finished jobid: (\d+) \(Rule: (\w+)\)$")


def steps(lines):
    """{jobid: (rule, start, end)} from the log's lines."""
    stamp, pending, out = None, None, {}
    for line in lines:
        line = line.rstrip("\n")
        if m := STAMP.match(line):
            stamp = datetime.strptime(m.group(1), "%a %b %d %H:%M:%S %Y")
        elif m := START.match(line):
            pending = (m.group(1), stamp)
        elif (m := JOBID.match(line)) and pending:
            out[int(m.group(1))] = [pending[0], pending[1], None]
            pending = None
        elif (m := DONE.match(line)) and int(m.group(1)) in out:
            out[int(m.group(1))][2] = stamp
    return out


def main(path):
    with open(path) as f:
        found = steps(f)
    w = csv.writer(sys.stdout)
    w.writerow(["rule", "jobid", "start", "wall_s"])
    per_rule = defaultdict(float)
    ordered = sorted(found.items(), key=lambda kv: kv[1][1])
    for jobid, (rule, start, end) in ordered:
        wall = (end - start).total_seconds() if end else ""
        per_rule[rule] += wall or 0
        w.writerow([rule, jobid, start.strftime("%H:%M:%S"), wall])
    if ordered:
        first, last = ordered[0][1][1], max(e for _, _, e in found.values() if e)
        print(f"# {len(found)} steps, first start to last finish {(last - first).total_seconds():.0f} s", file=sys.stderr)
    for rule, s in sorted(per_rule.items(), key=lambda kv: -kv[1]):
        print(f"# {rule:24s} {s:6.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1])
