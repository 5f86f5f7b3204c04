"""tests/durations.json from the per-test logs of the two test commands (cpu_per_test_plugin.py's
cpu_<worker>.tsv files): each module's wall time in the fast command under its own path under tests/,
and the part of it marked heavy under "<path>[heavy]" (tests/conftest.py: _duration_key). Parts under
3 s are left out (they count 0, or 10 s per test marked e2e, slow or heavy).

python durations_from_runs.py <fast log dir> <heavy log dir> [> tests/durations.json]"""
import json
import sys
from collections import Counter
from pathlib import Path

parts: Counter = Counter()
for suffix, d in (("", sys.argv[1]), ("[heavy]", sys.argv[2])):
    for f in Path(d).glob("cpu_*.tsv"):
        for line in f.read_text().splitlines():
            nodeid, wall = line.split("\t")[:2]
            module = nodeid.split("::")[0].removeprefix("tests/")
            parts[module + suffix] += float(wall)
print(json.dumps({k: round(v) for k, v in parts.most_common() if v >= 3}, indent=1))
