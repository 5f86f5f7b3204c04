#!/usr/bin/env bash
# Build NCCL's Inspector profiler plugin (libnccl-profiler-inspector.so) on the GPU machine, for the
# NCCL that torch loads (training.inspect: each collective's own time and bandwidth inside a training step).
#
#   bash tools/nccl_inspector_build.sh        # source: .fetched/nccl-inspector (git-ignored, carried)
#
# The source is NVIDIA/nccl's plugins/profiler/inspector/ exported into .fetched/nccl-inspector with
# the NCCL commit in its NCCL_COMMIT file (git archive <commit> plugins/profiler/inspector). It is
# copied to $BUILD_DIR first: the plugin's Makefile names its version after `git describe` in the
# directory it is built in, which inside this checkout would be distbench's commit; here the version
# is NCCL's commit (version.cc written before make). Checked on the lent 2x H100 (CUDA 13, torch's
# NCCL 2.28.9 loads it as profiler v5): benchmarks/investigations/nccl-inspector.
#
# Environment (all optional):
#   NCCL_INSPECTOR_SRC  source tree        (default: <repo>/.fetched/nccl-inspector)
#   BUILD_DIR           build directory    (default: /tmp/nccl-inspector-build)
#   CUDA_HOME           CUDA toolkit       (default: from `command -v nvcc`, else /usr/local/cuda)
#   MAKE_JOBS           (default 16)
#
# Output: $BUILD_DIR/libnccl-profiler-inspector.so and $BUILD_DIR/env.sh, which exports what loads it
# (NCCL_PROFILER_PLUGIN, NCCL_INSPECTOR_ENABLE=1, a dump interval); a job adds NCCL_INSPECTOR_DUMP_DIR.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
src="${NCCL_INSPECTOR_SRC:-$repo/.fetched/nccl-inspector}"
build="${BUILD_DIR:-/tmp/nccl-inspector-build}"
[ -f "$src/Makefile" ] || { echo "no Inspector source in $src (git archive <commit> plugins/profiler/inspector from NVIDIA/nccl)" >&2; exit 1; }
if [ -z "${CUDA_HOME:-}" ]; then
  if command -v nvcc >/dev/null 2>&1; then CUDA_HOME="$(dirname "$(dirname "$(command -v nvcc)")")"; else CUDA_HOME=/usr/local/cuda; fi
fi
[ -x "$CUDA_HOME/bin/nvcc" ] || { echo "no nvcc under CUDA_HOME=$CUDA_HOME: set CUDA_HOME to a CUDA toolkit" >&2; exit 1; }
commit="$(cat "$src/NCCL_COMMIT" 2>/dev/null || echo unknown)"
rm -rf "$build" && mkdir -p "$build" && cp -r "$src/." "$build/"
cat > "$build/version.cc" <<CC
// Written by distbench's tools/nccl_inspector_build.sh: the NCCL commit the plugin came from
#ifdef __cplusplus
extern "C" {
#endif
const char* get_git_version_info() { return "nccl-${commit:0:12}"; }
#ifdef __cplusplus
}
#endif
CC
make -C "$build" -j"${MAKE_JOBS:-16}" CUDA_HOME="$CUDA_HOME"
lib="$build/libnccl-profiler-inspector.so"
[ -f "$lib" ] || { echo "the build made no $lib" >&2; exit 1; }
# A dump interval: with the default (-1: write at communicator teardown only) a torchrun job that
# ends with destroy_process_group wrote nothing (2x H100, torch 2.11, NCCL 2.28.9); 500 µs wrote every
# collective (benchmarks/investigations/nccl-inspector). What it costs a step is not measured yet.
# Every size (the default floor, 8 KiB, drops small buckets). NCCL_INSPECTOR_DUMP_DIR must exist
# before NCCL starts: the plugin makes no parent directories (a missing one got no output).
printf 'export NCCL_PROFILER_PLUGIN=%q NCCL_INSPECTOR_ENABLE=1 NCCL_INSPECTOR_DUMP_THREAD_INTERVAL_MICROSECONDS=500 NCCL_INSPECTOR_DUMP_MIN_SIZE_BYTES=0\n' \
  "$lib" > "$build/env.sh"
echo "built $lib (NCCL commit ${commit:0:12}); source $build/env.sh"
