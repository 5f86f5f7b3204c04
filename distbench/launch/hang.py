"""Hang forensics: what a job's ranks were doing when the launcher's time limit ran out.

Every job runs with torch's Flight Recorder on (TORCH_FR_BUFFER_SIZE: each rank keeps its last
collectives, Gloo's too since torch 2.8, with their sequence numbers, sizes and Python stack). On a
timeout the launcher (distbench.launch.torchrun) creates TRIGGER in the job's dump directory; every
rank's watcher thread (distbench.launch.fr_watch) then writes its buffer (`rank_<r>`, torch's pickle,
the file torch's own analyser reads: `python -m torch.distributed.flight_recorder.fr_trace <dir>
--prefix rank_`) and its threads' Python stacks (`stack_<r>.txt`), the launcher adds `py-spy dump`
where py-spy is installed (`pyspy_<r>.txt`), and only then kills the job.

This module reads those files with pickle alone (no torch: the report and the launcher read it) and
names, per process group, the first collective not every rank completed, the ranks that never
entered it (the stuck ones) and those that waited in it.
"""

from __future__ import annotations

import pickle
import re
import shutil
from pathlib import Path

FLIGHT_RECORDER_ENV = "DISTBENCH_FLIGHT_RECORDER"  # 0: no Flight Recorder, no watcher (to measure its cost)
DUMP_DIR_ENV = "DISTBENCH_FR_DIR"  # the job's dump directory, given to every rank by the launcher
TRIGGER = "dump.trigger"  # created by the launcher: every rank dumps
DUMP_PREFIX = "rank_"  # torch's dump per rank: <dir>/rank_<r> (TORCH_FR_DUMP_TEMP_FILE's prefix too)
CPU_PREFIX = "cpu_trace_"  # an NCCL job's other recorder (its Gloo bookkeeping group): <dir>/cpu_trace_<r>
BUFFER_ENTRIES = 2000  # collectives each rank keeps (a ring): enough to reach back past any warm-up
STACK_LINES = 40  # lines of a stack kept in the analysis


def flight_recorder_on(env) -> bool:
    return str(env.get(FLIGHT_RECORDER_ENV, "1")) != "0"


def recorder_environment(env) -> dict:
    """The Flight Recorder settings every job gets (values the user set win), unless
    DISTBENCH_FLIGHT_RECORDER=0. NCCL's watchdog dumps on its own timeouts (op_timeout_s) to the
    same files (TORCH_FR_DUMP_TEMP_FILE, set per job by the launcher)."""
    if not flight_recorder_on(env):
        return {}
    return {k: env.get(k, v) for k, v in {"TORCH_FR_BUFFER_SIZE": str(BUFFER_ENTRIES),
                                          "TORCH_NCCL_DUMP_ON_TIMEOUT": "1"}.items()}


def dump_dir(first_output: Path) -> Path:
    """The job's dump directory, beside its first output (comm.csv -> comm.flight_recorder/)."""
    first_output = Path(first_output)
    return first_output.with_name(first_output.stem + ".flight_recorder")


def hang_path(first_output: Path) -> Path:
    """The analysis JSON of a job killed for time, beside its first output (comm.csv -> comm.hang.json)."""
    first_output = Path(first_output)
    return first_output.with_name(first_output.stem + ".hang.json")


def reset_dump_dir(path: Path) -> None:
    """An empty dump directory for a job about to start (an earlier run's dumps describe another job)."""
    shutil.rmtree(path, ignore_errors=True)
    Path(path).mkdir(parents=True, exist_ok=True)


def dumps_written(path: Path) -> list[int]:
    """Ranks whose Flight Recorder dump is complete in the directory."""
    return sorted(int(m.group(1)) for p in Path(path).glob(DUMP_PREFIX + "*")
                  if (m := re.fullmatch(DUMP_PREFIX + r"(\d+)", p.name)))


def _ranks_text(ranks) -> str:
    ranks = list(ranks)
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(map(str, ranks))


def _read_text(path: Path) -> str | None:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return None
    return "\n".join(lines[:STACK_LINES] + ([f"... ({len(lines) - STACK_LINES} more lines)"]
                                           if len(lines) > STACK_LINES else []))


def _entry_text(e: dict) -> str:
    """'gloo:all_reduce of [[256]] Float' for a Flight Recorder entry."""
    dtypes = ", ".join(dict.fromkeys(e.get("input_dtypes") or [])) or "?"
    return f"{e.get('profiling_name', '?')} of {e.get('input_sizes')} {dtypes}"


def _frames_text(e: dict) -> list[str]:
    """The Python stack recorded when the rank entered the collective, innermost first, torch's own frames left out."""
    frames = [f for f in e.get("frames") or [] if "/torch/" not in str(f.get("filename", ""))]
    return [f"{f.get('filename')}:{f.get('line')} in {f.get('name')}" for f in frames[:8]]


def _group_state(dump: dict, pg_key: str, pg_id: str | None) -> tuple[int, int, dict]:
    """(last collective entered, last completed, entries by sequence number) of one rank in one group
    (torch keys pg_status by the entries' pg_id, the entries name the group)."""
    entries = {e["collective_seq_id"]: e for e in dump.get("entries") or []
               if str(e.get("process_group", ("",))[0]) == pg_key and not e.get("is_p2p")}
    status = (dump.get("pg_status") or {}).get(pg_id) or {} if pg_id is not None else {}
    entered = status.get("last_enqueued_collective", max(entries, default=0))
    done = [s for s, e in entries.items() if e.get("retired") or e.get("state") == "completed"]
    completed = status.get("last_completed_collective", max(done, default=0))
    return int(entered), int(completed), entries


def _read_dumps(path: Path, prefix: str) -> dict[int, dict]:
    dumps = {}
    for f in Path(path).glob(prefix + "*"):
        if m := re.fullmatch(re.escape(prefix) + r"(\d+)", f.name):
            try:
                dumps[int(m.group(1))] = pickle.loads(f.read_bytes())
            except (OSError, pickle.UnpicklingError, EOFError, ValueError) as e:
                dumps[int(m.group(1))] = {"error": f"{type(e).__name__}: {e}"}
    return dumps


def _groups(dumps: dict[int, dict], recorder: str) -> list[dict]:
    """Per process group of one recorder's dumps where some rank has not completed a collective: that
    collective (the first not every rank completed), who never entered it and who waited in it."""
    readable = {r: d for r, d in dumps.items() if "error" not in d}
    pg_ids = {}
    for d in readable.values():
        for e in d.get("entries") or []:
            pg_ids.setdefault(str(e.get("process_group", ("",))[0]), str(e.get("pg_id")))
    groups = []
    for key in sorted(pg_ids):
        states = {r: _group_state(d, key, pg_ids[key]) for r, d in readable.items()}
        names = sorted({str(e.get("process_group", ("", ""))[1]) for _, _, es in states.values() for e in es.values()})
        members = None
        for d in readable.values():  # the group's ranks, as torch's pg_config lists them
            for cfg_key, cfg in (d.get("pg_config") or {}).items():
                if key in (cfg_key, cfg.get("name")):
                    members = [int(x) for x in re.findall(r"\d+", str(cfg.get("ranks", "")))]
        present = [r for r in (members or sorted(states)) if r in states]
        if not present:
            continue
        stuck_seq = min(states[r][1] for r in present) + 1  # the first collective not every rank completed
        lag = min(states[r][0] for r in present)
        if max(states[r][0] for r in present) > lag >= stuck_seq:
            # A rank's entries are recorded when it calls a collective, its completions later (Gloo's
            # recorder can still hold the last one open when a rank stops right after it): where some
            # rank went on past the last collective another entered, that next one is where it hangs.
            stuck_seq = lag + 1
        entered = [r for r in present if states[r][0] >= stuck_seq]
        if not entered:  # every rank completed everything it entered: this group is not where it hangs
            continue
        never = [r for r in present if states[r][0] < stuck_seq]
        ops = {r: states[r][2].get(stuck_seq) for r in entered}
        first = next((e for e in ops.values() if e), {})
        kinds = {r: _entry_text(e) for r, e in ops.items() if e}
        groups.append({
            "recorder": recorder, "process_group": key, "name": names[0] if names else "", "ranks": members or present,
            "seq": stuck_seq, "op": first.get("profiling_name"), "input_sizes": first.get("input_sizes"),
            "dtypes": first.get("input_dtypes"), "called_from": _frames_text(first),
            "never_joined": never, "waiting": entered,
            "last_entered": {str(r): states[r][0] for r in present},
            "last_completed": {str(r): states[r][1] for r in present},
            # ranks inside the same sequence number with different collectives: a desync, not a missing rank
            "mismatch": sorted(set(kinds.values())) if len(set(kinds.values())) > 1 else [],
        })
    return groups


def analyse(path: Path, world_size: int) -> dict:
    """What the dumps in a job's dump directory say: per process group with a collective some rank
    never entered or never finished, that collective (sequence number, op, sizes, where it was called),
    the stuck ranks and the waiting ones; the ranks without a dump; each rank's stacks. The job's own
    recorder (rank_<r>: NCCL's in an NCCL job, else the CPU one Gloo uses) comes first, then an NCCL
    job's Gloo bookkeeping group (CPU_PREFIX<r>)."""
    path = Path(path)
    dumps = _read_dumps(path, DUMP_PREFIX)
    groups = _groups(dumps, "job") + _groups(_read_dumps(path, CPU_PREFIX), "cpu")
    stacks = {str(r): {"python": _read_text(path / f"stack_{r}.txt"), "py_spy": _read_text(path / f"pyspy_{r}.txt")}
              for r in range(world_size)}
    return {"world_size": world_size, "dumps": sorted(dumps), "missing_dumps": [r for r in range(world_size) if r not in dumps],
            "unreadable": {str(r): d["error"] for r, d in dumps.items() if "error" in d},
            "groups": groups, "stacks": stacks, "dump_dir": str(path),
            "torch_analyser": f"python -m torch.distributed.flight_recorder.fr_trace {path} --prefix {DUMP_PREFIX}"}


def stuck(analysis: dict) -> dict | None:
    """The group where the job hangs (the one with ranks that never joined, else the first), or None."""
    groups = analysis.get("groups") or []
    return next((g for g in groups if g["never_joined"]), groups[0] if groups else None)


def hang_message(analysis: dict) -> str | None:
    """'rank 1 never joined collective #7 (gloo:all_reduce of [[256]] Float) of process group 0
    (default_pg), where rank 0 waited', or None when the dumps name no stuck collective."""
    g = stuck(analysis)
    if g is None:
        return None
    what = f"collective #{g['seq']} ({g['op']} of {g['input_sizes']} {', '.join(dict.fromkeys(g['dtypes'] or []))})"
    group = f"process group {g['process_group']}" + (f" ({g['name']})" if g["name"] else "")
    if g["mismatch"]:
        text = f"ranks disagree on {what} of {group}: {'; '.join(g['mismatch'])}"
    elif g["never_joined"]:
        text = (f"{_ranks_text(g['never_joined'])} never joined {what} of {group}, where "
                f"{_ranks_text(g['waiting'])} waited")
    else:
        text = f"{_ranks_text(g['waiting'])} entered {what} of {group} and never completed it"
    if analysis.get("missing_dumps"):
        text += f"; no Flight Recorder dump from {_ranks_text(analysis['missing_dumps'])}"
    return text


def no_dump_reason(path: Path | None, env) -> str:
    """Why a job killed for time has no analysis."""
    if not flight_recorder_on(env):
        return f"no Flight Recorder dump ({FLIGHT_RECORDER_ENV}=0)"
    if path is None or not Path(path).exists():
        return "no Flight Recorder dump directory"
    return "no rank wrote its Flight Recorder dump in time"


def py_spy() -> str | None:
    """py-spy's path, when installed (optional: `pip install py-spy`)."""
    return shutil.which("py-spy")


def stack_note(analysis: dict) -> str:
    """How the stacks were taken, for the report (analysis["py_spy"]: the launcher's py-spy, or None)."""
    spy = ("py-spy dump of each rank" if any(s.get("py_spy") for s in analysis.get("stacks", {}).values())
           else "py-spy not installed" if not analysis.get("py_spy") else "py-spy gave no stack")
    return f"Python stacks written by each rank (faulthandler, all threads); {spy}"


def environ_rank(pid: int) -> int | None:
    """The RANK in a process's environment (a rank under a torchrun agent), or None."""
    try:
        env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return None
    for item in env:
        if item.startswith(b"RANK="):
            try:
                return int(item[5:])
            except ValueError:
                return None
    return None


def child_pids(pid: int) -> list[int]:
    """Direct children of a process (Linux /proc)."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(d.name))
    return out



def collect(directory: Path, world_size: int, rank_pids: dict[int, int], wait_s: float) -> None:
    """Before the launcher kills a job past its time limit: ask every rank for its dump (TRIGGER),
    wait up to wait_s for all of them, then take a py-spy stack of each rank where py-spy is installed."""
    import subprocess
    import time

    directory = Path(directory)
    (directory / TRIGGER).touch()
    end = time.monotonic() + wait_s
    while time.monotonic() < end and len(dumps_written(directory)) < world_size:
        time.sleep(0.1)
    spy = py_spy()
    for rank, pid in sorted(rank_pids.items()) if spy else ():
        try:
            out = subprocess.run([spy, "dump", "--pid", str(pid)], capture_output=True, text=True, timeout=10)
            text = out.stdout + out.stderr
        except (OSError, subprocess.TimeoutExpired) as e:
            text = f"py-spy dump failed: {e}"
        (directory / f"pyspy_{rank}.txt").write_text(text)


def summary(analysis: dict, path: Path) -> dict:
    """What the job's placement file keeps of the analysis (the report reads it there): the message,
    the group where it hangs and the stacks of the ranks that never joined (else of those waiting);
    the whole analysis stays in `path`."""
    g = stuck(analysis) or {}
    named = analysis.get("culprits") or g.get("never_joined") or g.get("waiting") or []
    return {"message": analysis.get("message"), "group": g, "analysis": str(path),
            # from the progress beacons (distbench.launch.progress): the rank(s) that stopped, in every family
            "culprits": analysis.get("culprits", []), "waiting": analysis.get("waiting", []),
            "progress": analysis.get("progress"),
            "stacks": {str(r): analysis.get("stacks", {}).get(str(r), {}) for r in named},
            "missing_dumps": analysis.get("missing_dumps", []), "stack_note": stack_note(analysis),
            "torch_analyser": analysis.get("torch_analyser")}
