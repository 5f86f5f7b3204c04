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

The node is SLURMD_NODENAME (set by slurmd for both programs), else --node, else the host name.
Torch-free.
"""

from __future__ import annotations

import os
import subprocess

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


def _scontrol(args: list[str], env=None) -> subprocess.CompletedProcess:
    return subprocess.run(["scontrol", *args], capture_output=True, text=True, timeout=SCONTROL_TIMEOUT_S,
                          env=env)


def node_state(node: str, env=None) -> tuple[str, str]:
    """(State, Reason) of the node as `scontrol show node` gives them ("" when unknown)."""
    try:
        out = _scontrol(["show", "node", node, "--oneliner"], env)
    except (OSError, subprocess.SubprocessError):
        return "", ""
    text = out.stdout
    state = reason = ""
    for field in text.split():
        if field.startswith("State="):
            state = field.split("=", 1)[1]
    if " Reason=" in text:
        # Reason runs to its "[user@time]" stamp (it may hold spaces)
        reason = text.split(" Reason=", 1)[1].split(" [", 1)[0].strip()
    return state, reason


def drained_by_us(reason: str) -> bool:
    return reason.startswith(REASON_PREFIX)


def drain(node: str, why: str, env=None) -> str:
    """Drain `node` with our reason; returns what happened, in words."""
    reason = f"{REASON_PREFIX} {' '.join(why.split())}"[:MAX_REASON]
    try:
        out = _scontrol(["update", f"NodeName={node}", "State=DRAIN", f"Reason={reason}"], env)
    except (OSError, subprocess.SubprocessError) as e:
        return f"could not drain {node}: {e}"
    if out.returncode:
        return f"could not drain {node}: {(out.stderr or out.stdout).strip()[:200]}"
    return f"drained {node}"


def resume(node: str, env=None) -> str:
    """Return `node` to service if distbench drained it; a node drained for another reason stays."""
    state, reason = node_state(node, env)
    if "DRAIN" not in state:
        return f"{node} is not drained ({state or 'state unknown'})"
    if not drained_by_us(reason):
        return f"{node} stays drained: not drained by distbench (reason: {reason or 'none'})"
    try:
        out = _scontrol(["update", f"NodeName={node}", "State=RESUME"], env)
    except (OSError, subprocess.SubprocessError) as e:
        return f"could not resume {node}: {e}"
    if out.returncode:
        return f"could not resume {node}: {(out.stderr or out.stdout).strip()[:200]}"
    return f"resumed {node} (distbench had drained it)"
