#!/usr/bin/env bash
# Build nccl-tests' all_reduce_perf on the GPU machine against the very libnccl that torch loads.
#
#   bash tools/nccl_tests_build.sh            # source: .fetched/nccl-tests (git-ignored, carried)
#
# The source is a snapshot of github.com/NVIDIA/nccl-tests exported into .fetched/nccl-tests (its
# VERSION.txt names the version and commit); it is copied to $BUILD_DIR first, so the carried tree
# stays untouched.
#
# Two process layouts. The device image has no MPI, but PyPI's `mpich` wheel ships mpicc, mpiexec,
# mpi.h and libmpi.so: with the wheel carried in .fetched/mpich/ (pip download mpich
# --platform manylinux_2_28_x86_64 --only-binary=:all: --no-deps -d .fetched/mpich) the build is
# MPI=1, and one binary runs both layouts:
#   mpiexec -n 2 all_reduce_perf ...        one process per GPU, like torchrun (compare with this)
#   mpiexec -n 1 all_reduce_perf -g 2 ...   one process drives both GPUs (nccl-tests' -g mode)
# Without the wheel (or with NCCL_TESTS_MPI=0) the build is MPI=0: the one-process layout only.
#
# Environment (all optional):
#   NCCL_TESTS_SRC   source tree               (default: <repo>/.fetched/nccl-tests)
#   BUILD_DIR        build root                (default: /tmp/nccl-tests-build)
#   CUDA_HOME        CUDA toolkit with nvcc    (default: from `command -v nvcc`, else /usr/local/cuda)
#   NCCL_INCLUDE     directory with nccl.h     (default: next to torch's libnccl, else searched)
#   PYTHON           python with torch         (default: python3)
#   MAKE_JOBS        (default 16)   NVCC_GENCODE (default sm_90 only: H100/H200)
#   NCCL_TESTS_ALL=1 build every *_perf, not just all_reduce_perf
#   NCCL_TESTS_OPS   space-separated ops to build, e.g. "all_reduce all_gather alltoall" (default all_reduce)
#   MPICH_WHEEL      the mpich wheel           (default: <repo>/.fetched/mpich/mpich-*.whl if present)
#   NCCL_TESTS_MPI=0 build without MPI even where the wheel is present
#
# Output: $BUILD_DIR/bin/all_reduce_perf and $BUILD_DIR/env.sh (exports LD_LIBRARY_PATH so the binary
# loads torch's libnccl, and, for MPI builds, MPIEXEC and mpich's lib dir). Last lines on stdout:
# NCCL_TESTS_MPI=<0|1>, MPIEXEC=<path or empty>, NCCL_TESTS_BIN=<path of all_reduce_perf>.
# Exit status: 0 built; non-zero with a "nccl_tests_build: ERROR ..." line on stderr.
set -euo pipefail

die() { echo "nccl_tests_build: ERROR: $*" >&2; exit 1; }
log() { echo "nccl_tests_build: $*"; }

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SRC=${NCCL_TESTS_SRC:-$REPO/.fetched/nccl-tests}
BUILD_DIR=${BUILD_DIR:-/tmp/nccl-tests-build}
PY=${PYTHON:-python3}
JOBS=${MAKE_JOBS:-16}
GENCODE=${NVCC_GENCODE:--gencode=arch=compute_90,code=sm_90}

[ -f "$SRC/src/Makefile" ] && [ -f "$SRC/src/common.h" ] \
  || die "no nccl-tests source at $SRC (expected src/Makefile): carry .fetched/nccl-tests with the run"
[ -f "$SRC/VERSION.txt" ] && log "source: $(tr '\n' ' ' < "$SRC/VERSION.txt")"
log "nccl-tests $(sed -n 's/^#define NCCL_TESTS_VERSION "\(.*\)"/\1/p' "$SRC/src/common.h") from $SRC"
command -v "$PY" >/dev/null || die "$PY not found"
command -v make >/dev/null || die "make not found"
command -v "${CXX:-g++}" >/dev/null || die "C++ compiler ${CXX:-g++} not found (nvcc needs it as host compiler)"

# --- 1. the libnccl torch actually loads, and torch's NCCL version ---------------------------------
# libtorch_cuda links libnccl.so.2, so importing torch maps it: read its path from /proc/self/maps
# (falls back to the nvidia-nccl wheel's lib dir under site-packages).
read -r TORCH_NCCL_LIB TORCH_NCCL_VERSION TORCH_VERSION < <("$PY" - <<'EOF'
import glob, os, site, sys
import torch
ver = "unknown"
try:
    ver = ".".join(map(str, torch.cuda.nccl.version()))
except Exception:
    pass
lib = None
with open("/proc/self/maps") as f:
    for line in f:
        parts = line.split()
        if len(parts) >= 6 and os.path.basename(parts[-1]).startswith("libnccl.so"):
            lib = parts[-1]
            break
if lib is None:
    roots = list(dict.fromkeys(site.getsitepackages() + [site.getusersitepackages()] + sys.path))
    for r in roots:
        hits = sorted(glob.glob(os.path.join(r, "nvidia", "**", "libnccl.so*"), recursive=True))
        if hits:
            lib = hits[0]
            break
print(os.path.realpath(lib) if lib else "-", ver, torch.__version__)
EOF
) || die "could not import torch with $PY"
[ "$TORCH_NCCL_LIB" != "-" ] && [ -f "$TORCH_NCCL_LIB" ] \
  || die "could not find the libnccl.so* that torch $TORCH_VERSION uses (not mapped after import, none under site-packages/nvidia)"
NCCL_LIB_DIR=$(dirname "$TORCH_NCCL_LIB")
log "torch $TORCH_VERSION uses NCCL $TORCH_NCCL_VERSION from $TORCH_NCCL_LIB"

# --- 2. nccl.h (+ nccl_device.h for NCCL >= 2.28) matching that library ----------------------------
header_version() {  # prints MAJOR.MINOR.PATCH of an nccl.h
  awk '/^#define NCCL_MAJOR/{a=$3} /^#define NCCL_MINOR/{b=$3} /^#define NCCL_PATCH/{c=$3} END{if(a!="")print a"."b"."c}' "$1/nccl.h"
}
candidates=()
[ -n "${NCCL_INCLUDE:-}" ] && candidates+=("$NCCL_INCLUDE")
candidates+=("$(dirname "$NCCL_LIB_DIR")/include")
while IFS= read -r d; do candidates+=("$d"); done < <("$PY" - <<'EOF'
import glob, os, site, sys
roots = list(dict.fromkeys(site.getsitepackages() + [site.getusersitepackages()] + sys.path))
for r in roots:
    for h in sorted(glob.glob(os.path.join(r, "nvidia", "**", "nccl.h"), recursive=True)):
        print(os.path.dirname(h))
EOF
)
candidates+=(/usr/include /usr/local/include /usr/local/cuda/include)
for d in "$REPO"/.fetched/nccl-*-include; do [ -d "$d" ] && candidates+=("$d"); done  # carried fallback

NCCL_INC=""; NCCL_INC_VERSION=""
for d in "${candidates[@]}"; do
  [ -f "$d/nccl.h" ] || continue
  v=$(header_version "$d")
  if [ "$v" = "$TORCH_NCCL_VERSION" ]; then NCCL_INC=$d; NCCL_INC_VERSION=$v; break; fi
  [ -z "$NCCL_INC" ] && { NCCL_INC=$d; NCCL_INC_VERSION=$v; }   # first found, in case none matches
done
[ -n "$NCCL_INC" ] || die "no nccl.h found (looked in: ${candidates[*]}); set NCCL_INCLUDE"
if [ "$NCCL_INC_VERSION" != "$TORCH_NCCL_VERSION" ]; then
  log "WARNING: nccl.h in $NCCL_INC is NCCL $NCCL_INC_VERSION but torch's library is $TORCH_NCCL_VERSION (no matching header found)"
fi
log "headers: $NCCL_INC (NCCL $NCCL_INC_VERSION)"
case "$NCCL_INC_VERSION" in
  2.2[89].*|2.[3-9]*.*) [ -f "$NCCL_INC/nccl_device.h" ] || die "$NCCL_INC/nccl.h is NCCL $NCCL_INC_VERSION but nccl_device.h is missing (nccl-tests includes it for NCCL >= 2.28)";;
esac

# --- 3. CUDA toolkit -------------------------------------------------------------------------------
cuda_ok() { [ -n "$1" ] && [ -x "$1/bin/nvcc" ] && [ -f "$1/include/cuda_runtime.h" ]; }
if ! cuda_ok "${CUDA_HOME:-}"; then
  CUDA_HOME=""
  if command -v nvcc >/dev/null; then
    # nvcc on PATH may be a wrapper script: ask nvcc itself where its toolkit is (TOP=<dir>/bin/..).
    top=$(nvcc --dryrun -x cu -c /dev/null -o /dev/null 2>&1 | sed -n 's/^#\$ TOP=//p' | head -n1)
    [ -n "$top" ] && cuda_ok "$top" && CUDA_HOME=$(cd "$top" && pwd -P)
    d=$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")
    [ -z "$CUDA_HOME" ] && cuda_ok "$d" && CUDA_HOME=$d
  fi
  [ -z "$CUDA_HOME" ] && cuda_ok /usr/local/cuda && CUDA_HOME=/usr/local/cuda
fi
cuda_ok "$CUDA_HOME" || die "no CUDA toolkit found (need bin/nvcc and include/cuda_runtime.h; set CUDA_HOME)"
log "nvcc: $("$CUDA_HOME/bin/nvcc" --version | grep -i release) ($CUDA_HOME)"
CUDART=""
for d in "$CUDA_HOME/lib64" "$CUDA_HOME/lib" "$CUDA_HOME/targets/x86_64-linux/lib" "$CUDA_HOME/targets/sbsa-linux/lib"; do
  for f in "$d"/libcudart.so "$d"/libcudart.so.*; do [ -e "$f" ] && { CUDART=$f; break 2; }; done
done
[ -n "$CUDART" ] || die "no libcudart.so* under $CUDA_HOME (lib64, lib, targets/*/lib)"

# --- 4. an NCCL_HOME the Makefile understands: include/ and lib/libnccl.so (-lnccl) ---------------
NH=$BUILD_DIR/nccl_home
rm -rf "$BUILD_DIR/src" "$BUILD_DIR/bin" "$NH"
mkdir -p "$NH/lib" "$BUILD_DIR"
ln -s "$NCCL_INC" "$NH/include"
ln -s "$TORCH_NCCL_LIB" "$NH/lib/libnccl.so"
ln -s "$TORCH_NCCL_LIB" "$NH/lib/libnccl.so.2"
# The Makefile links -lcudart from CUDA_LIB. A toolkit with only libcudart.so.N (pip layout) gets
# CUDA_LIB=$NH/lib holding links to all its libraries (nvcc also links cudadevrt/cudart_static).
CUDA_LIB=$(dirname "$CUDART")
if [ ! -e "$CUDA_LIB/libcudart.so" ]; then
  for f in "$CUDA_LIB"/lib*; do [ -e "$NH/lib/$(basename "$f")" ] || ln -s "$f" "$NH/lib/$(basename "$f")"; done
  ln -s "$CUDART" "$NH/lib/libcudart.so"
  CUDA_LIB=$NH/lib
fi

# --- 5. MPI from PyPI's mpich wheel (optional) ----------------------------------------------------
MPI=0; MPI_HOME=""; MPIEXEC=""
WHEEL=${MPICH_WHEEL:-$(ls "$REPO"/.fetched/mpich/mpich-*.whl 2>/dev/null | head -n1 || true)}
if [ "${NCCL_TESTS_MPI:-1}" != 0 ] && [ -n "$WHEEL" ]; then
  [ -f "$WHEEL" ] || die "MPICH_WHEEL=$WHEEL is not a file"
  rm -rf "$BUILD_DIR/mpich"
  "$PY" -m zipfile -e "$WHEEL" "$BUILD_DIR/mpich" || die "could not unzip $WHEEL"
  MPI_HOME=$(ls -d "$BUILD_DIR"/mpich/mpich-*.data/data 2>/dev/null | head -n1)
  [ -n "$MPI_HOME" ] && [ -f "$MPI_HOME/include/mpi.h" ] && [ -e "$MPI_HOME/lib/libmpi.so.12" ] \
    || die "$WHEEL has no <name>.data/data/{include/mpi.h,lib/libmpi.so.12}"
  chmod +x "$MPI_HOME"/bin/*   # zipfile drops the executable bits
  MPIEXEC=$MPI_HOME/bin/mpiexec
  MPI=1
  log "MPI: $(basename "$WHEEL") -> $MPI_HOME ($("$MPI_HOME/bin/mpichversion" 2>/dev/null | head -n1 | tr -s ' \t' ' '))"
else
  log "MPI: none (${WHEEL:+NCCL_TESTS_MPI=0}${WHEEL:-no .fetched/mpich/mpich-*.whl}): one-process layout only (-g N / -t N)"
fi

# --- 6. build a copy -----------------------------------------------------------------------------
cp -a "$SRC" "$BUILD_DIR/src"
BIN=$BUILD_DIR/bin
targets=()
for op in ${NCCL_TESTS_OPS:-all_reduce}; do targets+=("$BIN/${op}_perf"); done
[ "${NCCL_TESTS_ALL:-0}" = 1 ] && targets=(build)
mpi_args=(MPI="$MPI")
[ "$MPI" = 1 ] && mpi_args+=(MPI_HOME="$MPI_HOME")
log "make -j$JOBS ${mpi_args[*]} NCCL_HOME=$NH CUDA_HOME=$CUDA_HOME CUDA_LIB=$CUDA_LIB NVCC_GENCODE=\"$GENCODE\" BUILDDIR=$BIN ${targets[*]}"
t0=$(date +%s)
make -C "$BUILD_DIR/src/src" -j"$JOBS" "${mpi_args[@]}" NCCL_HOME="$NH" CUDA_HOME="$CUDA_HOME" CUDA_LIB="$CUDA_LIB" \
  NVCC_GENCODE="$GENCODE" BUILDDIR="$BIN" "${targets[@]}" > "$BUILD_DIR/make.log" 2>&1 \
  || { tail -n 40 "$BUILD_DIR/make.log" >&2; die "make failed (full log: $BUILD_DIR/make.log)"; }
log "built in $(( $(date +%s) - t0 )) s"
[ -x "$BIN/all_reduce_perf" ] || die "make succeeded but $BIN/all_reduce_perf is missing"

# --- 7. run-time library path: torch's libnccl first ----------------------------------------------
cat > "$BUILD_DIR/env.sh" <<EOF
export LD_LIBRARY_PATH="$NCCL_LIB_DIR:$(dirname "$CUDART")${MPI_HOME:+:$MPI_HOME/lib}\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
export MPIEXEC="$MPIEXEC"
EOF
# shellcheck disable=SC1091
. "$BUILD_DIR/env.sh"
resolved=$(ldd "$BIN/all_reduce_perf" 2>/dev/null | awk '/libnccl/{print $3; exit}')
[ -n "$resolved" ] || die "ldd cannot resolve libnccl for $BIN/all_reduce_perf"
if [ "$(readlink -f "$resolved")" != "$(readlink -f "$TORCH_NCCL_LIB")" ]; then
  die "all_reduce_perf would load $resolved, not torch's $TORCH_NCCL_LIB"
fi
log "all_reduce_perf loads $(readlink -f "$resolved") (torch's, NCCL $TORCH_NCCL_VERSION); headers NCCL $NCCL_INC_VERSION"
log "run with: . $BUILD_DIR/env.sh  (nccl-tests prints 'nccl-headers=... nccl-library=...' in its header)"
if [ "$MPI" = 1 ]; then
  ldd "$BIN/all_reduce_perf" | grep -q 'libmpi.so.12 => /' || die "all_reduce_perf cannot resolve libmpi.so.12"
  log "MPI build: mpiexec -n 2 runs one process per GPU (like torchrun); mpiexec -n 1 ... -g 2 one process"
fi
echo "NCCL_TESTS_MPI=$MPI"
echo "MPIEXEC=$MPIEXEC"
echo "NCCL_TESTS_BIN=$BIN/all_reduce_perf"
