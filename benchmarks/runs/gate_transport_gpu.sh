#!/usr/bin/env bash
# The gate's transport check on a lent multi-GPU machine (device tool, carry .whl): the gate names a configuration
# cause. The gate (python -m distbench.gate --gpus N, default budget) clean, then with NCCL variables in
# its environment that change the transport between the GPUs:
#   clean            nothing set (NCCL_NVLS_ENABLE=0 from device_setup.sh: a variable that forces no
#                    transport, so it must never be named)
#   p2p_off          NCCL_P2P_DISABLE=1                                 -> SHM through host memory
#   p2p_shm_off      NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1              -> NET (Socket without IB)
#   level_loc_ib_off NCCL_P2P_LEVEL=LOC NCCL_SHM_DISABLE=1 NCCL_IB_DISABLE=1 NCCL_ALGO=Ring
#                                                                      -> NET/Socket; NCCL_ALGO not named
# Each case: its line, exit code, wall time, its transport rows of gate.csv, NCCL's own connection and
# "set by environment" lines (gate_nccl/ of its --out). Results under $OUT (few files: the device tool
# brings back at most 8): summary.txt and gate_transport.tgz (each case's gate.csv, readings.json and
# NCCL logs, the machine's description).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
source benchmarks/runs/device_setup.sh
S=$OUT/summary.txt
N=$(nvidia-smi -L | grep -c '^GPU ')
KEEP=/tmp/gate-transport; rm -rf "$KEEP"; mkdir -p "$KEEP"
{ echo "# card"; cat "$OUT/gpus.txt"; echo "# versions"; cat "$OUT/versions.txt"; date -u
  echo "# topology"; cat "$OUT/topo.txt"
  echo "# $N GPU(s); NCCL_* in the environment of every case: $(env | grep '^NCCL_' | sort | paste -sd' ')"; } > "$S"
gate() {  # case, VAR=value...: the gate with those variables in its environment
  local name=$1; shift
  local t0; t0=$(date +%s.%N)
  env "$@" python3 -m distbench.gate --gpus "$N" --out "$KEEP/$name" > "/tmp/$name.out" 2> "/tmp/$name.err"; local rc=$?
  { echo; echo "## $name: $* python -m distbench.gate --gpus $N"
    echo "exit $rc, wall $(python3 -c "print(f'{$(date +%s.%N)-$t0:.1f}')") s"
    cat "/tmp/$name.out"; grep -v "^\s*$" "/tmp/$name.err" | tail -3
    echo "# gate.csv: transport, reference and budget rows"
    grep -E ',(transport|reference|budget),' "$KEEP/$name/gate.csv" | grep -v latency | head -8
    echo "# NCCL's own lines (gate_nccl/): its variables and one connection line per transport and direction"
    cat "$KEEP/$name"/gate_nccl/nccl.*.log 2>/dev/null | grep -E 'set by environment' | sed 's/^[^ ]* //' | sort -u
    cat "$KEEP/$name"/gate_nccl/nccl.*.log 2>/dev/null | grep -E ' via ' | sed -E 's/^[^ ]* //; s/Channel [0-9]+(\/[0-9]+)? : //' \
      | sort | uniq -c | head -8; } >> "$S"
}
gate clean
gate p2p_off NCCL_P2P_DISABLE=1
gate p2p_shm_off NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1
gate level_loc_ib_off NCCL_P2P_LEVEL=LOC NCCL_SHM_DISABLE=1 NCCL_IB_DISABLE=1 NCCL_ALGO=Ring
{ echo; echo "## processes left after the gates (pgrep distbench.gate|distbench.comm):"
  pgrep -af "distbench\.(gate|comm)" | grep -v pgrep || echo none; } >> "$S"
cp "$OUT/gpus.txt" "$OUT/topo.txt" "$OUT/versions.txt" "$KEEP/" 2>/dev/null
tar -czf "$OUT/gate_transport.tgz" -C "$KEEP" --exclude='*.partial' .
rm -f "$OUT/gpus.txt" "$OUT/topo.txt" "$OUT/versions.txt"
cat "$S"
