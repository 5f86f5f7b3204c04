"""The gate under SLURM (docs/gate.md has the slurm.conf lines):

- `Prolog=`: slurmd runs the prolog before a job's first step on each of its nodes; "if the Prolog
  fails (returns a non-zero exit code), this will result in the node being set to a DRAIN state and
  the job being requeued" (slurm.conf(5), Prolog). The gate's exit code 1 on FAIL is all SLURM needs;
  with --drain it sets its own reason first ("distbench: ..."), which `sinfo -R` then shows.
- `HealthCheckProgram=`: slurmd runs it every HealthCheckInterval seconds; the program itself must
  drain its node ("the program ... can drain a node via the scontrol command", slurm.conf(5)). With
  --drain the gate runs `scontrol update NodeName=<node> State=DRAIN Reason="distbench: ..."` on
  FAIL; with --resume it returns a node to service when the gate passes, and only if distbench drained
  it (its reason starts with REASON_PREFIX): a node an admin drained stays drained.

A drain (or resume) that cannot be carried out (no `scontrol` on PATH, scontrol refusing: an unknown
node, a controller that does not answer, no permission) is an Action that is not `done`, with the
reason: distbench.gate.cli says `DRAIN FAILED: <why>` (`RESUME FAILED: <why>`) in its one line, exits 3
and writes it to syslog, never reading as the node drained or in service.

The node is SLURMD_NODENAME (set by slurmd for both programs), else --node, else the host name.
Torch-free.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass

REASON_PREFIX = "distbench:"
SCONTROL_TIMEOUT_S = 20
MAX_REASON = 200  # keep sinfo's table readable; the full reason is in the gate's CSV


def mode(env=None) -> str:
    """prolog, health-check or plain, from slurmd's environment (SLURM_SCRIPT_CONTEXT names the
    prolog from Slurm 21.08; a job id without it is the prolog of an older slurmd)."""
    env = os.environ if env is None else env
    context = env.get("SLURM_SCRIPT_CONTEXT", "")
    if context.startswith("prolog"):
        return "prolog"
    if env.get("SLURMD_NODENAME") and env.get("SLURM_JOB_ID"):
        return "prolog"
    if env.get("SLURMD_NODENAME"):
        return "health-check"
    return "plain"


class ScontrolError(Exception):
    """scontrol could not be run, or refused: `why` in words."""

    def __init__(self, why: str):
        super().__init__(why)
        self.why = why


@dataclass(frozen=True)
class Action:
    """What a drain or resume did, in words; `done` False: what was asked could not be carried out."""
    done: bool
    text: str


def _scontrol(args: list[str], env=None) -> subprocess.CompletedProcess:
    """scontrol `args`, exit 0; else ScontrolError saying why (not on PATH, no answer, its own error)."""
    path = (env if env is not None else os.environ).get("PATH", os.defpath)
    exe = shutil.which("scontrol", path=path)
    shown = f"scontrol {' '.join(args[:2])}"
    if exe is None:
        raise ScontrolError(f"no scontrol on PATH ({path[:200]})")
    try:
        out = subprocess.run([exe, *args], capture_output=True, text=True, timeout=SCONTROL_TIMEOUT_S, env=env)
    except subprocess.TimeoutExpired:
        raise ScontrolError(f"{shown} did not answer within {SCONTROL_TIMEOUT_S} s") from None
    except OSError as e:
        raise ScontrolError(f"{exe} could not be run: {e.strerror or e}") from None
    if out.returncode:
        said = " ".join((out.stderr or out.stdout).split())[-200:] or "no message"  # its last words say why
        raise ScontrolError(f"{shown} refused (exit {out.returncode}): {said}")
    return out


def node_state(node: str, env=None) -> tuple[str, str]:
    """(State, Reason) of the node as `scontrol show node` gives them; ScontrolError when it cannot."""
    text = _scontrol(["show", "node", node, "--oneliner"], env).stdout
    state = reason = ""
    for field in text.split():
        if field.startswith("State="):
            state = field.split("=", 1)[1]
    if " Reason=" in text:
        # Reason runs to its "[user@time]" stamp (it may hold spaces)
        reason = text.split(" Reason=", 1)[1].split(" [", 1)[0].strip()
    if not state:
        raise ScontrolError(f"scontrol show node {node} gave no State ({' '.join(text.split())[:120] or 'no output'})")
    return state, reason


def drained_by_us(reason: str) -> bool:
    return reason.startswith(REASON_PREFIX)


def drain(node: str, why: str, env=None) -> Action:
    """Drain `node` with our reason."""
    reason = f"{REASON_PREFIX} {' '.join(why.split())}"[:MAX_REASON]
    try:
        _scontrol(["update", f"NodeName={node}", "State=DRAIN", f"Reason={reason}"], env)
    except ScontrolError as e:
        return Action(False, f"could not drain {node}: {e.why}")
    return Action(True, f"drained {node}")


def resume(node: str, env=None) -> Action:
    """Return `node` to service if distbench drained it; a node drained for another reason stays (done:
    nothing was to be done). Its state unknown (scontrol missing or refusing) is a resume that failed."""
    try:
        state, reason = node_state(node, env)
    except ScontrolError as e:
        return Action(False, f"could not resume {node}: its state is unknown: {e.why}")
    if "DRAIN" not in state:
        return Action(True, f"{node} is not drained ({state})")
    if not drained_by_us(reason):
        return Action(True, f"{node} stays drained: not drained by distbench (reason: {reason or 'none'})")
    try:
        _scontrol(["update", f"NodeName={node}", "State=RESUME"], env)
    except ScontrolError as e:
        return Action(False, f"could not resume {node}: {e.why}")
    return Action(True, f"resumed {node} (distbench had drained it)")
