"""The report's section on hung jobs: per job killed at its time limit whose ranks had stopped
completing work (status `hung`): the rank that stopped and why, from the ranks' progress beacons and
their processes (distbench.launch.progress, every family); where the Flight Recorder ran
(distbench.launch.hang), the collective (process group, sequence number, op, sizes, where it was
called) and the ranks that never joined it; and the stuck ranks' Python stacks. Read from each job's placement file (the launcher adds
`hang` there); each hung job is also a failing headline of the Verdict, naming the rank.
Fragments: templates/sections/hangs.*.j2."""

from __future__ import annotations

from pathlib import Path

from distbench.core.readers import UnreadableFile, read_json, remake
from distbench.core.section import Headline, ReportInputs, Section, table

TEMPLATES = Path(__file__).parent / "templates" / "sections"


def _ranks(ranks) -> str:
    return ", ".join(map(str, ranks or [])) or "—"


def hung_jobs(placements) -> list[dict]:
    """[{job, family, hang}] for every job whose placement file records a hang."""
    out = []
    for path in map(Path, placements or []):
        try:
            data = read_json(path, remake(path))
        except UnreadableFile:  # named in the appendix's cache table; nothing here to say of a hang
            continue
        if data.get("hang"):
            # .../results/<label>/<family>/...: the job is what follows the label
            at = len(path.parts) - 1 - path.parts[::-1].index("results") if "results" in path.parts else None
            parts = path.parts[at + 2:-1] if at is not None else (path.parent.name,)
            out.append({"job": "/".join(parts), "hang": data["hang"]})
    return out


def build(inputs: ReportInputs) -> dict | None:
    jobs = hung_jobs(inputs.placements)
    if not jobs:
        return None
    rows, details = [], []
    for j in jobs:
        h, g = j["hang"], j["hang"].get("group") or {}
        # without the Flight Recorder (off unless a family's config turns it on) only the progress beacons speak
        fr = [f"{g.get('process_group')} ({g.get('name') or 'unnamed'})", g.get("seq"), g.get("op"),
              f"{g.get('input_sizes')} {', '.join(g.get('dtypes') or [])}"] if g else ["—"] * 4
        rows.append([j["job"], _ranks(h.get("culprits") or g.get("never_joined")),
                     _ranks(g.get("waiting") or h.get("waiting")), *fr, h.get("analysis")])
        stacks = [{"rank": r, "python": s.get("python") or "(no stack written)", "py_spy": s.get("py_spy")}
                  for r, s in (h.get("stacks") or {}).items()]
        details.append({"job": j["job"], "message": h.get("message") or "", "called_from": g.get("called_from") or [],
                        "stacks": stacks, "note": h.get("stack_note") or ""})
    headers = ["job", "stopped (rank)", "waited in it (rank)", "process group", "seq", "collective",
               "sizes", "analysis"]
    return {"table": table(headers, rows), "jobs": details,
            "note": ("Each job here outlived its time limit (job_timeout_s) with its ranks no longer completing work: "
                     "two readings of every rank's progress a few seconds apart showed none (a job still progressing at its "
                     "limit is `timeout`, not here), and the rank named first is the one that stopped (its process "
                     "stopped, gone or behind the others, as the launcher saw it). Where the Flight Recorder ran, the launcher had every rank "
                     "write its Flight Recorder buffer (torch's record of its last collectives, Gloo's and NCCL's) and its "
                     "Python stacks; the first collective not every rank completed is where they parted: `seq` is its "
                     "sequence number in its process group, the ranks that never entered it are the stuck ones. The job's "
                     "finished points are kept; the point in progress is `hung` and the rest `not_run`.")}


def headlines(inputs: ReportInputs) -> list[Headline]:
    out = []
    for j in hung_jobs(inputs.placements):
        g = j["hang"].get("group") or {}
        who = j["hang"].get("culprits") or g.get("never_joined") or g.get("waiting") or []
        where = f" in {g.get('op')} #{g.get('seq')}" if g.get("op") else ""
        out.append(Headline("hung job", f"{j['job']}: rank {_ranks(who)} stopped responding{where}", "failing",
                            j["hang"].get("message") or "the job hung"))
    return out


HANGS = Section("hangs", "Hung jobs", TEMPLATES, build, headlines=headlines)
