#!/usr/bin/env bash
# The gate's faults on a lent GPU machine (device tool, carry .whl): the gate, clean and then once per fault,
# each with its line, exit code and wall time (--gpus = the GPUs the machine has, no baseline):
#   clean      nothing else on the GPUs
#   neighbour  another process runs bf16 matmuls on GPU F (F = 2, or the last GPU on smaller machines)
#   stray      an idle process holds 60 GiB on GPU F' (1, or the last GPU)
#   hidden     CUDA_VISIBLE_DEVICES leaves GPU F out
# and nvidia-smi's own process list beside each fault, so the gate's pid can be checked against it.
# Results under $OUT: summary.txt, gate_<case>.csv.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
source benchmarks/runs/device_setup.sh
S=$OUT/summary.txt
N=$(nvidia-smi -L | grep -c '^GPU ')
F=$(( N > 2 ? 2 : N - 1 )); FS=$(( N > 1 ? 1 : 0 ))
{ echo "# card"; cat "$OUT/gpus.txt"; echo "# versions"; cat "$OUT/versions.txt"; date -u
  python3 -c "import pynvml; print('nvidia-ml-py', getattr(pynvml, '__version__', '?'))" 2>&1
  echo "# $N GPU(s); the neighbour on GPU $F, the stray process on GPU $FS"; } > "$S"
gate() {  # case, args...
  local name=$1; shift
  local t0; t0=$(date +%s.%N)
  python3 -m distbench.gate --gpus "$N" --out "/tmp/gate-$name" "$@" > "/tmp/$name.out" 2> "/tmp/$name.err"; local rc=$?
  { echo "## $name: python -m distbench.gate --gpus $N $*"
    echo "exit $rc, wall $(python3 -c "print(f'{$(date +%s.%N)-$t0:.1f}')") s"
    cat "/tmp/$name.out"; grep -v "^\s*$" "/tmp/$name.err" | tail -3
    echo "# its checks that were not PASS/INFO:"; grep -E ',(WARN|FAIL),' "/tmp/gate-$name/gate.csv" | head -8; } >> "$S"
  cp "/tmp/gate-$name/gate.csv" "$OUT/gate_$name.csv" 2>/dev/null
}
wait_ready() { for _ in $(seq 120); do grep -q ready "$1" 2>/dev/null && return 0; sleep 0.5; done; echo "never ready: $1" >> "$S"; }
beside() {  # name, gpu, python code: a process of someone else's on that GPU, ready, listed by nvidia-smi
  CUDA_VISIBLE_DEVICES=$2 python3 -c "$3" > "/tmp/$1.ready" 2>&1 & OTHER=$!
  wait_ready "/tmp/$1.ready"
  { echo "## nvidia-smi's compute processes with the $1 (pid $OTHER) running:"
    nvidia-smi --query-compute-apps=gpu_bus_id,pid,process_name,used_memory --format=csv,noheader; } >> "$S"
}
gate clean
# a matmul neighbour: another user's job on GPU F
beside neighbour "$F" "
import time, torch
x = torch.randn(8192, 8192, device='cuda', dtype=torch.bfloat16)
print('ready', flush=True)
end = time.time() + 240
while time.time() < end:
    for _ in range(20): torch.mm(x, x)
    torch.cuda.synchronize()
"
gate neighbour
kill $OTHER; wait $OTHER 2>/dev/null
# a stray process: the last job's leftover holding 60 GiB, idle
beside stray "$FS" "
import time, torch
x = torch.empty(60 << 30, dtype=torch.uint8, device='cuda')
print('ready', flush=True)
time.sleep(240)
"
gate stray
kill $OTHER; wait $OTHER 2>/dev/null
# a GPU hidden from CUDA
VIS=$(seq 0 $((N - 1)) | grep -vx "$F" | paste -sd, -)
CUDA_VISIBLE_DEVICES=$VIS gate hidden
{ echo "## processes left after the gates (pgrep distbench.gate|distbench.comm):"
  pgrep -af "distbench\.(gate|comm)" | grep -v pgrep || echo none; } >> "$S"
cat "$S"
