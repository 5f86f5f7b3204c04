"""Run one benchmark job (any family) under torchrun with a bounded time, and always leave its
declared outputs behind.

Each family supplies its module, its arguments and how to fill in its CSVs when the job ends
early (`TorchrunJob.write_failure`): the rows it finished are kept, the measurement in progress is
recorded as `failed` with a readable reason, and the points not reached as `not_run`
(distbench.launch.failure), so the DAG goes on and the report shows what happened. The launcher owns the argument list (never a shell), the environment,
the time limit, the job's own process group and the placement file.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Sequence

from distbench.launch import hang, progress
from distbench.launch.cluster import Launch, agent_commands, agent_environment
from distbench.launch.failure import host_unfit_reason
from distbench.launch.processes import die_with_parent, kill_group
from distbench.core.io import atomic_write_json, partial_path
from distbench.launch.timeline import ENV as TIMELINE_ENV
from distbench.launch.timeline import Breakdown, breakdown, read_marks


@dataclass
class TorchrunJob:
    module: str  # the family's entry point, run as `python -m <module>` in every rank
    args: list[str]  # its arguments
    world_size: int
    env: dict  # the whole environment of the job (see job_environment)
    timeout_s: int
    outputs: list[Path]  # files the job must leave behind; the first one's presence means it completed
    placement_json: Path
    log_path: Path
    # the family's failure rows, given the reason and the status of the point in progress (failed, hung)
    write_failure: Callable[[str, str], None] = field(repr=False)
    launch: Launch | None = None  # nodes and launcher (distbench.launch.cluster); None: one node, every rank here
    wrapper: tuple[str, ...] = ()  # put before a one-node job's torchrun (nsys profile ...: distbench.launch.profiling)


# One-node jobs start their ranks directly (one process per rank, torchrun's environment set by the
# launcher): torchrun's agent costs a second `import torch` before the ranks start and seconds after
# they exit (distbench.launch.timeline measures both). DISTBENCH_ONE_NODE_LAUNCH=torchrun in the
# launcher's environment brings the agent back; jobs over several nodes always use torchrun agents.
ONE_NODE_LAUNCH_ENV = "DISTBENCH_ONE_NODE_LAUNCH"
ONE_NODE_LAUNCHES = ("direct", "torchrun")


def one_node_launch(job: TorchrunJob, env: dict | None = None) -> str | None:
    """'direct' or 'torchrun' for a one-node job, None for a job over several nodes."""
    launch = job.launch or Launch(1, job.world_size)
    if launch.nodes != 1:
        return None
    if job.wrapper:  # nsys profile wraps one process tree: torchrun's
        return "torchrun"
    value = (os.environ if env is None else env).get(ONE_NODE_LAUNCH_ENV, "direct")
    if value not in ONE_NODE_LAUNCHES:
        raise ValueError(f"{ONE_NODE_LAUNCH_ENV}={value!r}: allowed {', '.join(ONE_NODE_LAUNCHES)}")
    return value


def torchrun_commands(job: TorchrunJob) -> list[list[str]]:
    """Argument lists (never shell strings, so config values cannot be interpreted by a shell):
    on one node, one command per rank (direct) or one torchrun; for several nodes one agent per
    node, or one srun that starts them (distbench.launch.cluster.agent_commands)."""
    launch = job.launch or Launch(1, job.world_size)
    if launch.nodes * launch.ranks_per_node != job.world_size:
        raise ValueError(f"layout {launch.nodes} node(s) x {launch.ranks_per_node} ranks is not world size {job.world_size}")
    mode = one_node_launch(job)
    if mode == "direct":
        return [worker_command(job) for _ in range(job.world_size)]
    if mode == "torchrun":
        return [[*job.wrapper, *torchrun_command(job)]]
    run_id = f"distbench-{os.getpid()}-{time.time_ns()}"
    # a remote agent ends by itself a minute after the job's limit, should this launcher not reach it
    return agent_commands(sys.executable, job.module, job.args, launch, run_id, job.env, os.getcwd(),
                          limit_s=job.timeout_s + REMOTE_MARGIN_S)


def worker_command(job: TorchrunJob) -> list[str]:
    """What every rank runs (torchrun runs the same after its own options)."""
    return [sys.executable, "-m", job.module, *job.args]


def torchrun_command(job: TorchrunJob) -> list[str]:
    """The torchrun command of a one-node job."""
    agent = agent_commands(sys.executable, job.module, job.args, Launch(1, job.world_size), "", job.env, "")[0]
    return agent[: agent.index("-m", 3)] + worker_command(job)[1:]


def direct_rank_envs(world_size: int) -> list[dict]:
    """The environment torchrun would give each rank of a one-node job (env:// rendezvous on a free
    port of this host, rank 0 hosting the store)."""
    from distbench.launch.cluster import free_port

    port = str(free_port())
    return [{"RANK": str(r), "LOCAL_RANK": str(r), "WORLD_SIZE": str(world_size), "LOCAL_WORLD_SIZE": str(world_size),
             "GROUP_RANK": "0", "GROUP_WORLD_SIZE": "1", "ROLE_RANK": str(r), "ROLE_WORLD_SIZE": str(world_size),
             "ROLE_NAME": "default", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port}
            for r in range(world_size)]


def job_environment(job_env: dict, nccl_env: dict, base: dict | None = None, flight_recorder: bool = True) -> dict:
    """The job's whole environment. flight_recorder: torch's Flight Recorder on by default
    (distbench.launch.hang: what a hung job's ranks last did); the comm family turns it off, as it
    adds 5-20 us of host time to each eager collective (benchmarks/results/hang-nodes-h200x2-2026-11-27).
    DISTBENCH_FLIGHT_RECORDER=0/1 in the launcher's environment decides for every job."""
    env = dict(os.environ if base is None else base)
    env.update({k: str(v) for k, v in job_env.items()})
    env.update({k: str(v) for k, v in nccl_env.items()})
    env.setdefault(hang.FLIGHT_RECORDER_ENV, "1" if flight_recorder else "0")
    env.update(hang.recorder_environment(env))
    # Snakemake sets OMP_NUM_THREADS to the rule's threads and torchrun passes it on; collectives
    # need none, and one thread per rank keeps Gloo ranks from fighting over the cores.
    env["OMP_NUM_THREADS"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _last_error(log_text: str) -> str:
    """The most telling line of a failed job's log, for the `message` column."""
    lines = [ln.strip() for ln in log_text.splitlines() if ln.strip()]
    ours = [ln for ln in lines if "distbench error: " in ln]
    if ours:
        return ours[-1][ours[-1].index("distbench error: ") + len("distbench error: "):][:400]
    # A Python exception in a rank ("[rank1]: torch.OutOfMemoryError: ...").
    exc = [ln for ln in lines if re.match(r"^(\[rank\d+\]: )?[\w.]*(Error|Exception)\b.*: ", ln)
           and "ChildFailedError" not in ln]
    # torchrun's summary names the rank that failed first and how.
    root = re.search(r"Root Cause.*?rank\s*:\s*(\d+).*?exitcode\s*:\s*(-?\d+)[^\n]*?(\(SIG\w+\))?\n",
                     "\n".join(lines) + "\n", re.S)
    if root:
        rank, code, sig = root.groups()
        first = f"rank {rank} exited with code {code}{' ' + sig if sig else ''} (torchrun's root cause)"
        return (first + (f"; last error: {exc[-1]}" if exc else ""))[:400]
    if exc:
        return exc[-1][:400]
    return lines[-1][:400] if lines else "no output"


class JobNotKept(Exception):
    """The job left no result: its ranks are gone, its outputs are removed, and the caller must
    exit non-zero (exit_code) so the workflow runs it again instead of caching it."""

    def __init__(self, why: str, exit_code: int):
        super().__init__(why)
        self.why, self.exit_code = why, exit_code


class JobInterrupted(JobNotKept):
    """The job was cut short from outside (a signal to the launcher or to the ranks, or the
    launcher's parent went away)."""


class HostCannotRun(JobNotKept):
    """This host cannot run the job at all (no CUDA, fewer GPUs than ranks: a rank said so with
    distbench.launch.failure.HOST_UNFIT). Not a measurement: a host that can run it must run it again."""


INTERRUPT_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
SIGNAL_GRACE_S = 5  # SIGTERM to the job's process group, then SIGKILL after this long
REMOTE_MARGIN_S = 60  # ssh agents: past the job's limit, for the dumps and kills that come first
DUMP_WAIT_S = 10  # a job past its time limit: how long its ranks get to write their Flight Recorder dumps
PROGRESS_GAP_S = 2.0  # a job past its time limit: two progress readings this far apart tell hung from slow
PROGRESS_WAIT_S = 30.0  # ... and at most this much more while a stall is too short to be called a hang
POLL_S = 0.1  # how often the launcher looks at its job and at its own parent


def run_torchrun_job(job: TorchrunJob) -> str:
    """Run the job; return 'ok' or the failure reason (then every declared output and the
    placement file exist, with the family's failure rows). Raise JobInterrupted when the job was
    cut short from outside; then no process of the job is left and no output exists."""
    job.log_path.parent.mkdir(parents=True, exist_ok=True)
    for path in job.outputs:
        path.parent.mkdir(parents=True, exist_ok=True)
        for stale in (path, partial_path(path)):
            stale.unlink(missing_ok=True)
    hang.hang_path(job.outputs[0]).unlink(missing_ok=True)
    # Every rank dumps its Flight Recorder buffer here when the job outlives its limit (distbench.launch.hang)
    fr_dir = hang.dump_dir(job.outputs[0]) if hang.flight_recorder_on(job.env) else None
    fr_env = {}
    if fr_dir is not None:
        hang.reset_dump_dir(fr_dir)
        fr_env = {hang.DUMP_DIR_ENV: str(fr_dir.resolve()),
                  "TORCH_FR_DUMP_TEMP_FILE": str(fr_dir.resolve() / hang.DUMP_PREFIX)}  # NCCL's own dumps
    # Every rank's progress beacon (distbench.launch.progress): hung told from slow, the stopped rank named
    progress_dir = hang.dump_dir(job.outputs[0]).with_name(Path(job.outputs[0]).stem + ".progress")
    hang.reset_dump_dir(progress_dir)
    fr_env[progress.PROGRESS_DIR_ENV] = str(progress_dir.resolve())
    # both directories reach ranks on other nodes too (an ssh agent's environment is its command line)
    cmds = torchrun_commands(replace(job, env={**job.env, **fr_env}))
    direct = one_node_launch(job) == "direct"
    t0 = time.monotonic()
    started = datetime.now(timezone.utc)
    received: list[int] = []
    parent = os.getppid()

    def on_signal(signum, frame):  # noqa: ARG001 - signal handler signature
        received.append(signum)

    # Signal handlers can only be set from the main thread; elsewhere the caller owns signals.
    in_main = threading.current_thread() is threading.main_thread()
    previous = {sig: signal.signal(sig, on_signal) for sig in INTERRUPT_SIGNALS} if in_main else {}
    interrupted = None
    # A temporary directory of the job's own (torchrun's agent leaves torchelastic_* folders in
    # TMPDIR after every job): removed when the job ends, however it ends.
    scratch = tempfile.mkdtemp(prefix="distbench-job-")
    # Every rank writes its phase marks here (distbench.launch.timeline): the job's fixed cost by piece.
    timeline_dir = os.path.join(scratch, "timeline")
    env = agent_environment(cmds, {**job.env, **fr_env, "TMPDIR": scratch, TIMELINE_ENV: timeline_dir})
    launch_t = time.time()
    timeline = None
    judgement = None  # what the progress beacons said when the job ran past its limit
    try:
        with open(job.log_path, "w") as log:
            for cmd in cmds:
                log.write("# " + " ".join(cmd) + "\n")
            log.flush()
            # Each agent (or srun) in its own process group, so a timeout or an interrupt reaches
            # every rank; and the kernel ends them if this launcher is killed outright (die_with_parent:
            # this thread waits for them, so it outlives them).
            rank_envs = direct_rank_envs(job.world_size) if direct else [{}] * len(cmds)
            procs = [subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env={**env, **rank_env},
                                      start_new_session=True, preexec_fn=die_with_parent)
                     for cmd, rank_env in zip(cmds, rank_envs)]
            # When each process ended (a waiter thread per process): with ranks started directly,
            # the rank that ended first with an error is the root cause (torchrun's agent names it itself).
            ended: dict[int, float] = {}
            for i, p in enumerate(procs):
                threading.Thread(target=lambda i=i, p=p: (p.wait(), ended.setdefault(i, time.monotonic())),
                                 daemon=True).start()
            rc, reason, failed_first = None, None, []
            while rc is None:
                codes = [p.poll() for p in procs]
                failed = [c for c in codes if c]
                if failed:  # one rank (or agent) failed: the others would wait for it in a collective
                    rc = failed[0]
                    # before the kills below make the others fail too: only these can be the root cause
                    failed_first = [i for i, c in enumerate(codes) if c]
                    for p in procs:
                        kill_group(p, SIGNAL_GRACE_S)
                elif all(c == 0 for c in codes):
                    rc = 0
                else:
                    time.sleep(POLL_S)
                if received or os.getppid() != parent:
                    interrupted = (f"interrupted by {signal.Signals(received[0]).name}" if received
                                   else "interrupted: the workflow that started the job went away")
                    for p in procs:
                        kill_group(p, SIGNAL_GRACE_S)
                    rc = next((p.returncode for p in procs if p.returncode), procs[0].returncode)
                elif rc is None and time.monotonic() - t0 > job.timeout_s:
                    # before any dump or kill: still progressing (slow) or stopped (hung), and who stopped
                    judgement = judge_progress(progress_dir, job.world_size, procs, direct)
                    if fr_dir is not None and judgement.status == "hung":  # first every rank's dump and stack, while the job still hangs
                        hang.collect(fr_dir, job.world_size, _rank_pids(procs, direct), DUMP_WAIT_S)
                    for p in procs:
                        kill_group(p, 10)
                    rc, reason = -1, f"job killed after {job.timeout_s} s (job time limit)"
            if rc and reason is None:
                reason = _first_failure(procs, ended, failed_first) if direct else f"torchrun exited with code {rc}"
        timeline = breakdown(read_marks(timeline_dir), launch_t, time.time())
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        shutil.rmtree(scratch, ignore_errors=True)
        shutil.rmtree(progress_dir, ignore_errors=True)
    wall_s = time.monotonic() - t0
    log_text = job.log_path.read_text(errors="replace")
    timed_out = reason is not None and reason.startswith("job killed after")
    # A rank started directly that a SIGINT/SIGTERM/SIGHUP ended (we only send those after a timeout
    # or our own interrupt) was stopped from outside, as torchrun's SignalException says under torchrun.
    signalled = direct and rc is not None and rc < 0 and -rc in INTERRUPT_SIGNALS
    if interrupted is None and not timed_out and rc != 0 and (signalled or _killed_by_signal(log_text)):
        interrupted = "interrupted: the job's processes received a termination signal"
    with open(job.log_path, "a") as log:
        if timeline is not None:
            log.write(f"# distbench: {timeline.text()}\n")
        log.write(f"# distbench: exit {rc} after {wall_s:.1f} s{'; ' + interrupted if interrupted else ''}\n")
    if fr_dir is not None and (interrupted or reason is None or host_unfit_reason(log_text)):
        shutil.rmtree(fr_dir, ignore_errors=True)  # nothing hung: no dump to keep
    if interrupted:
        for path in job.outputs:
            for leftover in (path, partial_path(path)):
                leftover.unlink(missing_ok=True)
        code = 128 + received[0] if received else 143
        raise JobInterrupted(f"{interrupted} after {wall_s:.1f} s; nothing of this job is kept, "
                             "and the next run starts it again", code)
    if reason is None and all(p.exists() for p in job.outputs):
        record_provenance(job.placement_json, started, wall_s, "ok", cmds, timeline)
        return "ok"
    if reason is None:
        reason = "torchrun exited 0 but left no complete output"
    elif unfit := host_unfit_reason(log_text):
        for path in [*job.outputs, Path(job.placement_json)]:
            for leftover in (path, partial_path(path)):
                leftover.unlink(missing_ok=True)
        raise HostCannotRun(f"{unfit}; nothing of this job is kept, and a run on a host that can run it "
                            "starts it again", 1)
    message, status = f"{reason}: {_last_error(log_text)}", "failed"
    if timed_out and judgement is not None:
        message, status = _timeout_outcome(job, fr_dir, judgement)
    elif fr_dir is not None and (timed_out or hang.dumps_written(fr_dir)):  # dumps: ours, or NCCL's watchdog's
        message, status = _hang_outcome(job, fr_dir, reason, message, timed_out)
    elif timed_out:
        message = f"{message} ({hang.no_dump_reason(fr_dir, job.env)})"
    if fr_dir is not None and status != "hung":
        shutil.rmtree(fr_dir, ignore_errors=True)
    job.write_failure(message, status)
    for path in job.outputs:
        partial_path(path).unlink(missing_ok=True)
    if not Path(job.placement_json).exists():  # torchrun never got a rank as far as the placement check
        atomic_write_json(job.placement_json, {"ranks": [], "error": message})
    record_provenance(job.placement_json, started, wall_s, message, cmds, timeline)
    if status == "hung":  # the report's section on hung jobs reads it from the placement file
        data = json.loads(Path(job.placement_json).read_text())
        analysis = json.loads(hang.hang_path(job.outputs[0]).read_text())
        atomic_write_json(job.placement_json, {**data, "hang": hang.summary(analysis, hang.hang_path(job.outputs[0]))})
    return message


def _hang_outcome(job: TorchrunJob, fr_dir: Path, reason: str, message: str, timed_out: bool) -> tuple[str, str]:
    """('hung: rank 1 never joined collective #7 ...', 'hung') when the ranks' Flight Recorder dumps
    name the collective where they parted, with the analysis written beside the job's first output
    (distbench.launch.hang.hang_path); else the failure as it was, saying why there is no such name."""
    analysis = hang.analyse(fr_dir, job.world_size)
    analysis["py_spy"] = hang.py_spy()
    found = hang.hang_message(analysis)
    if found is None:
        return (f"{message} ({hang.no_dump_reason(fr_dir, job.env)})" if timed_out else message), "failed"
    why = f"the job was killed after {job.timeout_s} s (job time limit)" if timed_out else reason
    analysis["message"] = f"hung: {found}; {why}"
    atomic_write_json(hang.hang_path(job.outputs[0]), analysis)
    return analysis["message"][:600], "hung"


def judge_progress(directory: Path, world_size: int, procs: list[subprocess.Popen], direct: bool) -> progress.Judgement:
    """At the job's limit, before anything is dumped or killed: two readings of the ranks' progress
    PROGRESS_GAP_S apart, and what the kernel says of each rank's process on this host. A stall too
    short to be called a hang is watched for up to PROGRESS_WAIT_S more (the time stays bounded)."""
    pids = _rank_pids(procs, direct)
    codes = {i: p.poll() for i, p in enumerate(procs)} if direct else {}
    first = progress.read_all(directory, world_size)
    waited, deadline = PROGRESS_GAP_S, time.monotonic() + PROGRESS_GAP_S + PROGRESS_WAIT_S
    time.sleep(PROGRESS_GAP_S)
    while True:
        second = progress.read_all(directory, world_size)
        states = {r: progress.process_state(pids.get(r), codes.get(r)) for r in range(world_size) if r in pids}
        verdict = progress.judge(first, second, waited, world_size, states)
        if not verdict.undecided or time.monotonic() >= deadline:
            return verdict
        time.sleep(1.0)
        waited += 1.0


def _timeout_outcome(job: TorchrunJob, fr_dir: Path | None, judgement: progress.Judgement) -> tuple[str, str]:
    """A job killed at its limit: ('timeout: ... still progressing ...', 'timeout') when its ranks still
    completed work, else ('hung: rank 1 stopped responding (process stopped) in ...', 'hung') with the
    Flight Recorder's collective where it has one; the analysis is written beside the first output."""
    limit = f"killed after {job.timeout_s} s (job time limit)"
    if judgement.status != "hung":
        if fr_dir is not None:
            shutil.rmtree(fr_dir, ignore_errors=True)
        joint = " while " if judgement.message.startswith("still") else ": "
        return f"timeout: {limit}{joint}{judgement.message}", "timeout"
    analysis = hang.analyse(fr_dir, job.world_size) if fr_dir is not None else {
        "world_size": job.world_size, "groups": [], "stacks": {}, "missing_dumps": []}
    analysis["py_spy"] = hang.py_spy()
    found = hang.hang_message(analysis) if fr_dir is not None else None
    detail = (f"; Flight Recorder: {found}" if found
              else f"; {hang.no_dump_reason(fr_dir, job.env)}" if fr_dir is not None else "")
    analysis.update(message=f"hung: {judgement.message}; {limit}{detail}", culprits=list(judgement.culprits),
                    waiting=list(judgement.waiting),
                    progress=judgement.message)
    atomic_write_json(hang.hang_path(job.outputs[0]), analysis)
    return analysis["message"][:600], "hung"


def _rank_pids(procs: list[subprocess.Popen], direct: bool) -> dict[int, int]:
    """{rank: pid} of this host's ranks: process i is rank i when started directly; under a torchrun
    agent, the agent's children, by the RANK in their environment."""
    if direct:
        return {i: p.pid for i, p in enumerate(procs)}
    ranks = {}
    for p in procs:
        for child in hang.child_pids(p.pid):
            if (r := hang.environ_rank(child)) is not None:
                ranks[r] = child
    return ranks


def record_provenance(placement_json, started: datetime, wall_s: float, outcome: str,
                      commands: list[list[str]] = (), timeline: Breakdown | None = None) -> None:
    """Add to the job's placement file (one of its outputs) what made the results: the workflow's
    git commit, the host, when the job started and ended, and its outcome. The report's cache
    state reads it to tell reused results from this run's."""
    from distbench.core.provenance import git_commit

    path = Path(placement_json)
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        data = {}
    data["provenance"] = {"commit": git_commit(os.getcwd()), "host": socket.gethostname(),
                          # full precision: a job may start within the same second as the Snakemake run
                          "started": started.isoformat(),
                          "finished": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                          "ended": datetime.now(timezone.utc).isoformat(),  # exact, for the overlap check (launch.hostlock)
                          "wall_s": round(wall_s, 1), "outcome": outcome,
                          # what ran, as a shell would read it (the launcher itself runs argument lists)
                          "commands": [shlex.join(c) for c in commands]}
    if timeline is not None:  # where the job's time went (distbench.launch.timeline)
        data["provenance"]["timeline"] = timeline.as_dict()
    atomic_write_json(path, data)


def _first_failure(procs: list[subprocess.Popen], ended: dict[int, float], candidates: Sequence[int] = ()) -> str:
    """'rank 1 exited with code 17' for the rank (ranks started directly: process i is rank i) that
    ended first with an error, as torchrun's root cause names it: among `candidates` (those seen
    failed before the launcher killed the rest) where given, by when each ended."""
    time.sleep(POLL_S)  # let the waiter threads record the exits that were just seen
    failed = list(candidates) or [i for i, p in enumerate(procs) if p.returncode]
    first = min(failed, key=lambda i: ended.get(i, float("inf")))
    code = procs[first].returncode
    sig = f" ({signal.Signals(-code).name})" if code < 0 and -code in signal.Signals._value2member_map_ else ""
    return f"rank {first} exited with code {code}{sig}"


def _killed_by_signal(log_text: str) -> bool:
    """torchrun's agent reports a SIGTERM/SIGINT/SIGHUP it received as a SignalException."""
    return bool(re.search(r"SignalException: Process \d+ got signal: (1|2|15)\b", log_text))


def finish_trace_dir(job: TorchrunJob, mode: str, trace_dir: Path, status: str,
                     short_args: Callable[[], list[str]]) -> None:
    """After a job run with `profile` on: under nsys, the short extra run (short_args) wrapped in
    `nsys profile`; in every mode the trace directory's manifest (distbench.launch.profiling), which says
    what is there and, when nothing is, why. A failed profiling run never changes the job's rows."""
    from distbench.launch.profiling import nsys_prefix, write_manifest

    trace_dir = Path(trace_dir)
    trace_dir.mkdir(parents=True, exist_ok=True)
    if mode == "torch":
        note = ("torch.profiler around a few steps or ops after the timed passes, one Chrome trace per rank"
                if status == "ok" else f"the job did not complete ({status}): traces only from ranks that got there")
    elif status != "ok":
        note = f"no nsys run: the job did not complete ({status})"
    elif job.launch is not None and job.launch.nodes > 1:
        note = "no nsys run: profile nsys wraps one-node jobs only (use profile true across nodes)"
    elif (prefix := nsys_prefix(trace_dir)) is None:
        note = "no nsys run: nsys (Nsight Systems) is not installed on this host (not on PATH)"
    else:
        scratch = trace_dir / "nsys_pass.csv"
        # the short pass's arguments (and the job.json they may name) made only where nsys runs it
        pass_job = replace(job, args=short_args(), wrapper=tuple(prefix), outputs=[scratch],
                           placement_json=trace_dir / "nsys_placement.json", log_path=trace_dir / "nsys.log",
                           write_failure=lambda message, status: None)
        outcome = run_torchrun_job(pass_job)
        scratch.unlink(missing_ok=True)  # a short pass's rows: never results
        note = ("a short extra run of the job under nsys profile (job.nsys-rep; its log: nsys.log)" if outcome == "ok"
                else f"the nsys run failed ({outcome}); see nsys.log")
    write_manifest(trace_dir, mode, note)


def run_job_with_traces(job: TorchrunJob, params: dict, short_args: Callable[[Path], list[str]]) -> str:
    """run_torchrun_job, then, with `profile` on, the job's trace directory (beside its first
    output): the nsys run of short_args(trace directory) where asked, and the manifest."""
    from distbench.launch.profiling import trace_dir

    status = run_torchrun_job(job)
    if params.get("profile", "off") != "off":
        tdir = trace_dir(job.outputs[0])
        finish_trace_dir(job, params["profile"], tdir, status, lambda: short_args(tdir))
    return status
