#!/usr/bin/env bash
# GPU check: on a machine with one or more NVIDIA GPUs, build pybench with its
# CUDA module, then run the GPU tests and the GPU benchmarks. Designed to finish
# in under 5 minutes on one GPU. Prints the figures; exits non-zero on failure.
#
#   bash scripts/gpu_check.sh            # architectures: PYBENCH_CUDA_ARCHS or 90-real (H100/H200)
#
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
export PYBENCH_CUDA=ON
export PYBENCH_CUDA_ARCHS="${PYBENCH_CUDA_ARCHS:-90-real}"  # one architecture keeps the build short

echo "== nvidia-smi"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv || echo "nvidia-smi not available"

echo "== build (CUDA architectures ${PYBENCH_CUDA_ARCHS})"
python3 -m venv .venv-gpu
. .venv-gpu/bin/activate
pip install -q -e ".[test]"

echo "== pybench env"
python -m pybench env

echo "== GPU tests"
pytest -q -rs -m gpu tests/

echo "== CUDA kernel self-test on every device"
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

echo "== GPU benchmarks"
if python -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  python -m pybench compute --params 1.3B --engine torch --dtype bf16
else
  echo "torch with CUDA is not installed here; GEMM timings skipped (pip install torch to include them)"
fi

echo "== done in $(( $(date +%s) - start )) s"
