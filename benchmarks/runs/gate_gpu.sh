#!/usr/bin/env bash
# The node gate (python -m distbench.gate) on a lent 2-GPU machine (device tool, carry .whl):
#   1. a first gate run, kept as this machine's baseline (--out /tmp/gate-base), its wall time and line;
#   2. a second run against that baseline, with --prom: its line, gate.csv, distbench.prom, wall time;
#   3. `snakemake --cores 1 gate` (the same code as a workflow target) with report.baseline set;
#   4. a budget too small (--budget-s 8): FAIL naming the step, and no process of the gate left behind.
# Results under $OUT: summary.txt, distbench.prom, gate_run.csv, gate_base.csv, machine.tgz.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
source benchmarks/runs/device_setup.sh
S=$OUT/summary.txt
{ echo "# card"; cat "$OUT/gpus.txt"; echo "# versions"; cat "$OUT/versions.txt"; python3 -c "import pynvml; print('nvidia-ml-py', pynvml.__version__ if hasattr(pynvml, '__version__') else '?')" 2>&1
  echo "# NCCL settings: NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE (device_setup.sh); the gate's comm job adds NCCL_GRAPH_MIXING_SUPPORT=0"; } > "$S"
gate() {  # name, args...
  local name=$1; shift
  local t0 t1; t0=$(date +%s.%N)
  python3 -m distbench.gate "$@" > "/tmp/$name.out" 2> "/tmp/$name.err"; local rc=$?
  t1=$(date +%s.%N)
  { echo "## $name: python -m distbench.gate $*"; echo "exit $rc, wall $(python3 -c "print(f'{$t1-$t0:.1f}')") s"
    cat "/tmp/$name.out"; cat "/tmp/$name.err"; } >> "$S"
}
gate baseline --out /tmp/gate-base --budget-s 60
gate against_baseline --out /tmp/gate-run --baseline /tmp/gate-base --prom "$OUT" --budget-s 60
{ echo "## gate.csv of the run against the baseline: every check but the health items that passed"
  grep -v ',health,.*,PASS,\|,health,.*,INFO,' /tmp/gate-run/gate.csv; } >> "$S"
{ echo "## snakemake --cores 1 gate --config report='{baseline: /tmp/gate-base}'"; t0=$(date +%s.%N)
  timeout 200 python3 -m snakemake --cores 1 gate --config "report={baseline: /tmp/gate-base}" > /tmp/smk.log 2>&1; rc=$?
  echo "exit $rc, wall $(python3 -c "print(f'{$(date +%s.%N)-$t0:.1f}')") s"; grep "^distbench gate:" /tmp/smk.log || tail -20 /tmp/smk.log
  ls "$R/health/" 2>&1; } >> "$S"
gate small_budget --out /tmp/gate-small --budget-s 8
{ echo "## processes of the gate left after the small budget (pgrep distbench.gate|distbench.comm):"
  pgrep -af "distbench\.(gate|comm)" | grep -v pgrep || echo none; } >> "$S"
cp /tmp/gate-run/gate.csv "$OUT/gate_run.csv"; cp /tmp/gate-base/gate.csv "$OUT/gate_base.csv"
tar czf "$OUT/machine.tgz" -C "$OUT" gpus.txt topo.txt versions.txt -C /tmp gate-base gate-run gate-small 2>/dev/null
rm -f "$OUT/gpus.txt" "$OUT/topo.txt" "$OUT/versions.txt"
cat "$S"
