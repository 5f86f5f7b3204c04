#!/usr/bin/env bash
# A SLURM "cluster" of N nodes on this one machine, for testing distbench's SLURM profile and its
# multi-node launch for real: munged, one slurmctld and one slurmd per node (all on localhost, each
# on its own port: Debian's slurmd supports several daemons per host with `-N <nodename>`), no
# systemd, no cgroups, no accounting database. Started and stopped by tests/test_slurm.py; usable
# by hand (as root):
#
#   tools/slurm-test-cluster.sh install        # apt-get install slurm-wlm munge (Debian/Ubuntu)
#   tools/slurm-test-cluster.sh start          # write the config, start the daemons, wait until idle
#   export SLURM_CONF=/run/distbench-slurm/slurm.conf   # then sinfo, sbatch, snakemake --profile profiles/slurm
#   tools/slurm-test-cluster.sh stop           # stop exactly the daemons `start` started (by PID)
#
# Environment: SLURM_TEST_STATE (config, pid files, daemon output, spool; default
# /run/distbench-slurm), SLURM_TEST_NODES (default 2), SLURM_TEST_PARTITION (default debug),
# SLURM_TEST_EXTRA_CONF (a file of slurm.conf lines appended to the config, e.g. Prolog=).
# The config lives in the state directory; /etc/slurm/slurm.conf links to it while the cluster runs
# (commands started inside a job by the Snakemake SLURM plugin lose SLURM_CONF, so the default path
# must work), created only where no config exists and removed by `stop`: a SLURM installation of
# the machine's own is never touched (then `start` refuses, saying why).
#
# Traps this avoids (written down in ../shared/snakemake-notes.md when we found them):
# - without slurmdbd, `sacct` fails, and the Snakemake SLURM plugin's default status command is
#   sacct: profiles/slurm sets `slurm-status-command: squeue`, which needs finished jobs to stay
#   visible for >= 3x the first status-check delay, and the SLURM test counts every job of its
#   run in squeue afterwards (a run of several minutes on a busy 2-core host), hence MinJobAge=1800;
# - `slurmd` drains a node whose configured memory exceeds the real one: RealMemory is 85% of what
#   `slurmd -C` reports, split between the nodes; SlurmdParameters=config_overrides lets N nodes
#   share this machine's cores.
set -euo pipefail

STATE=${SLURM_TEST_STATE:-/run/distbench-slurm}
NODES=${SLURM_TEST_NODES:-2}
PARTITION=${SLURM_TEST_PARTITION:-debug}
CONF=$STATE/slurm.conf
export SLURM_CONF=$CONF

log() { printf '[slurm-test-cluster] %s\n' "$*" >&2; }
need_root() { [ "$(id -u)" -eq 0 ] || { log "must run as root (munge and slurmd run as root here)"; exit 1; }; }
# running = the PID exists and is not a zombie (a container's PID 1 may not reap)
is_running() { [ -r "/proc/$1/stat" ] && [ "$(awk '{print $3}' "/proc/$1/stat")" != Z ]; }
pid_alive() { [ -f "$1" ] && is_running "$(cat "$1")"; }

do_install() {
  need_root
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends slurm-wlm munge >/dev/null
}

write_conf() {
  local hw cpus mem
  hw=$(slurmd -C | head -1)
  cpus=$(sed -n 's/.*CPUs=\([0-9]*\).*/\1/p' <<<"$hw")
  mem=$(sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p' <<<"$hw")
  mem=$(( mem * 85 / 100 / NODES ))
  mkdir -p "$STATE/ctld"
  cat > "$CONF" <<CONF
# distbench's test cluster (tools/slurm-test-cluster.sh): $NODES nodes on this machine
ClusterName=distbench-test
SlurmctldHost=localhost
SlurmctldPort=16817
SlurmUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
ReturnToService=2
SlurmctldPidFile=$STATE/ctld/slurmctld.pid
SlurmdPidFile=$STATE/spool-%n/slurmd.pid
SlurmdSpoolDir=$STATE/spool-%n
SlurmdLogFile=$STATE/slurmd-%n.log
StateSaveLocation=$STATE/ctld
SlurmctldLogFile=$STATE/slurmctld.log
SlurmdParameters=config_overrides
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MinJobAge=1800
NodeName=node[1-$NODES] NodeHostname=localhost NodeAddr=127.0.0.1 Port=17001-$((17000 + NODES)) CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=$PARTITION Nodes=ALL Default=YES MaxTime=INFINITE DefMemPerCPU=500 OverSubscribe=NO State=UP
CONF
  # SLURM_TEST_EXTRA_CONF: a file of slurm.conf lines to add (the gate's Prolog= / HealthCheckProgram= tests)
  if [ -n "${SLURM_TEST_EXTRA_CONF:-}" ]; then cat "$SLURM_TEST_EXTRA_CONF" >> "$CONF"; fi
  log "wrote $CONF ($NODES nodes, CPUs=$cpus, RealMemory=$mem each)"
}

start_daemon() {  # name, command...
  local name=$1; shift
  if pid_alive "$STATE/$name.pid"; then log "$name already running"; return; fi
  setsid "$@" >"$STATE/$name.out" 2>&1 </dev/null &
  echo $! > "$STATE/$name.pid"
}

SYSTEM_CONF=/etc/slurm/slurm.conf

# A link left by a test cluster that did not get to `stop` (its run was killed: a session ended,
# a CI job timed out) must not block the next one: it is ours and stale when its target's state
# directory says it made the link and none of that cluster's slurmctld/slurmd is running, or when
# the target is gone (pytest removes old temporary directories); a dangling link configures nothing.
stale_test_link() {
  [ -L "$SYSTEM_CONF" ] || return 1
  local target dir f
  target=$(readlink "$SYSTEM_CONF")
  [ "$(basename "$target")" = slurm.conf ] || return 1
  [ -e "$target" ] || return 0
  dir=$(dirname "$target")
  [ "$(cat "$dir/linked-system-conf" 2>/dev/null)" = "$SYSTEM_CONF" ] || return 1
  for f in "$dir"/slurmd-node*.pid "$dir/slurmctld.pid"; do
    if pid_alive "$f"; then return 1; fi
  done
  return 0
}

link_system_conf() {
  if [ -L "$SYSTEM_CONF" ] && [ "$(readlink "$SYSTEM_CONF")" = "$CONF" ]; then return; fi
  if stale_test_link; then
    log "removing a stale link $SYSTEM_CONF -> $(readlink "$SYSTEM_CONF") (a test cluster that was never stopped; none of its daemons runs)"
    rm -f "$SYSTEM_CONF"
  fi
  if [ -e "$SYSTEM_CONF" ] || [ -L "$SYSTEM_CONF" ]; then
    log "$SYSTEM_CONF exists and is not this test cluster's: not touching it (stop that SLURM, or run elsewhere)"
    exit 1
  fi
  mkdir -p "$(dirname "$SYSTEM_CONF")"
  ln -s "$CONF" "$SYSTEM_CONF"
  echo "$SYSTEM_CONF" > "$STATE/linked-system-conf"
}

do_start() {
  need_root
  mkdir -p "$STATE"
  write_conf
  link_system_conf
  if [ ! -s /etc/munge/munge.key ]; then
    mungekey --create --keyfile=/etc/munge/munge.key 2>/dev/null \
      || dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none
  fi
  chown munge:munge /etc/munge/munge.key; chmod 0400 /etc/munge/munge.key
  mkdir -p /run/munge /var/log/munge /var/lib/munge
  chown munge:munge /run/munge /var/log/munge /var/lib/munge; chmod 0755 /run/munge
  if ! munge -n </dev/null >/dev/null 2>&1; then  # a munged already running (ours or not) is reused
    start_daemon munged runuser -u munge -- /usr/sbin/munged --foreground
    for _ in $(seq 1 50); do munge -n </dev/null >/dev/null 2>&1 && break; sleep 0.1; done
  fi
  munge -n </dev/null | unmunge >/dev/null || { log "munge does not work"; cat "$STATE/munged.out" >&2; exit 1; }
  start_daemon slurmctld slurmctld -D -i
  for _ in $(seq 1 50); do scontrol ping 2>/dev/null | grep -q UP && break; sleep 0.2; done
  for i in $(seq 1 "$NODES"); do
    mkdir -p "$STATE/spool-node$i"
    start_daemon "slurmd-node$i" slurmd -D -N "node$i"
  done
  local idle=0
  for _ in $(seq 1 60); do
    idle=$(sinfo -h -o '%T %D' | awk '$1=="idle"{print $2}')
    [ "${idle:-0}" = "$NODES" ] && break
    sleep 0.5
  done
  if [ "${idle:-0}" != "$NODES" ]; then
    log "the nodes did not come up idle:"; sinfo -N >&2 || true
    tail -n 20 "$STATE"/*.out "$STATE"/*.log >&2 || true
    exit 1
  fi
  sinfo -N
}

do_stop() {
  local f pid
  if [ -f "$STATE/linked-system-conf" ] && [ "$(readlink "$SYSTEM_CONF" 2>/dev/null)" = "$CONF" ]; then
    rm -f "$SYSTEM_CONF" "$STATE/linked-system-conf"
    log "removed the link $SYSTEM_CONF -> $CONF"
  fi
  for f in "$STATE"/slurmd-node*.pid "$STATE/slurmctld.pid" "$STATE/munged.pid"; do
    [ -f "$f" ] || continue
    if pid_alive "$f"; then
      pid=$(cat "$f"); kill "$pid" 2>/dev/null || true
      for _ in $(seq 1 50); do is_running "$pid" || break; sleep 0.1; done
      is_running "$pid" && kill -9 "$pid" 2>/dev/null || true
      log "stopped $(basename "$f" .pid) (pid $pid)"
    fi
    rm -f "$f"
  done
}

case "${1:-}" in
  install) do_install ;;
  start) do_start ;;
  stop) do_stop ;;
  *) echo "usage: $0 {install|start|stop}" >&2; exit 2 ;;
esac
