#!/usr/bin/env bash
# Issue 40 groundwork (device tool, kind nvidia-h100-x2, carry .fetched/nccl-inspector and .whl): can
# NCCL's Inspector profiler plugin (NVIDIA/nccl plugins/profiler/inspector, copied by hand into the
# git-ignored .fetched/nccl-inspector with its commit in NCCL_COMMIT) be built on the lent machine and
# loaded by the NCCL that torch ships, and what does it write for a plain all_reduce loop?
# Results: $OUT/cuda.txt, build.log, run.log, inspector.tgz (its JSON output).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../../.." || exit 1
source benchmarks/runs/device_setup.sh
SRC=$PWD/.fetched/nccl-inspector
{ ls -l /usr/local/cuda/bin/nvcc; /usr/local/cuda/bin/nvcc --version; which g++; } > "$OUT/cuda.txt" 2>&1
( cd "$SRC" && make -j16 ) > "$OUT/build.log" 2>&1; echo "make rc $?" >> "$OUT/build.log"
ls -l "$SRC"/*.so >> "$OUT/build.log" 2>&1
export NCCL_PROFILER_PLUGIN="$SRC/libnccl-profiler-inspector.so" NCCL_INSPECTOR_ENABLE=1
export NCCL_INSPECTOR_DUMP_DIR="$OUT/inspector" NCCL_INSPECTOR_DUMP_THREAD_INTERVAL_MICROSECONDS=500
export NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV
timeout 300 torchrun --standalone --nproc_per_node=2 benchmarks/investigations/nccl-inspector/allreduce.py > "$OUT/run.log" 2>&1
echo "run rc $?" >> "$OUT/run.log"
grep -i "profiler\|inspector\|NCCL version" "$OUT/run.log" | head -20
grep "MiB:" "$OUT/run.log"
find "$OUT/inspector" -type f | head; find "$OUT/inspector" -type f | head -1 | xargs -r head -c 1500
tar czf /tmp/inspector.tgz -C "$OUT" inspector 2>/dev/null && mv /tmp/inspector.tgz "$OUT/" && rm -rf "$OUT/inspector"
tail -5 "$OUT/build.log"
