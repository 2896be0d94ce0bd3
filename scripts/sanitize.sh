#!/usr/bin/env bash
# Build pybench's C++ core with AddressSanitizer + UndefinedBehaviorSanitizer into
# its own folder (never the real install) and run the 2-rank MPI tests against it.
# Prints one verdict line, "sanitize: clean" (exit 0) or "sanitize: UNCLEAN ..."
# (exit 1), after the reports that made it unclean.
#
#   scripts/sanitize.sh [extra pytest arguments]
#
# Environment: PYTHON (default: the active python), SANITIZE_BUILD (default:
# build/sanitize), SANITIZE_TESTS (default: the 2-rank MPI tests and the core's
# single-process tests).
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-python}
build=${SANITIZE_BUILD:-$repo/build/sanitize}
tests=${SANITIZE_TESTS:-"tests/measure/test_mpi_ranks.py tests/measure/test_native_errors.py tests/test_native_module.py"}
flags="-fsanitize=address,undefined -fno-omit-frame-pointer -g -O1"

# 1. Build: plain CMake, no CUDA, sanitizer flags on compile and link.
cmake -S "$repo" -B "$build" -DPYBENCH_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DPython_EXECUTABLE="$(command -v "$python")" \
  -Dpybind11_DIR="$("$python" -m pybind11 --cmakedir)" \
  -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_MODULE_LINKER_FLAGS="-fsanitize=address,undefined" >"$build.cmake.log" 2>&1 ||
  { cat "$build.cmake.log"; exit 1; }
cmake --build "$build" --target _core -j "$(nproc)" >"$build.build.log" 2>&1 || { tail -50 "$build.build.log"; exit 1; }
core=$(ls "$build"/_core*.so)

# 2. Make `pybench._core` load from this build in every process (pytest and each
# rank): a sitecustomize on PYTHONPATH puts a finder ahead of the editable install's.
pythonpath="$build/pythonpath"
mkdir -p "$pythonpath"
cat >"$pythonpath/sitecustomize.py" <<EOF
# Written by scripts/sanitize.sh: pybench._core comes from the sanitizer build.
import importlib.util
import sys


class _SanitizedCore:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name == "pybench._core":
            return importlib.util.spec_from_file_location(name, "$core")
        return None


sys.meta_path.insert(0, _SanitizedCore)
EOF

# 3. Run. Python itself is not instrumented, so libasan is preloaded; Python frees
# little at exit by design, so leak reports are off. Reports go to per-process files.
logs="$build/reports"
rm -rf "$logs" && mkdir -p "$logs"
libasan=$("${CXX:-g++}" -print-file-name=libasan.so)
libubsan=$("${CXX:-g++}" -print-file-name=libubsan.so)
export LD_PRELOAD="$libasan:$libubsan"
export ASAN_OPTIONS="detect_leaks=0:log_path=$logs/asan:abort_on_error=0"
export UBSAN_OPTIONS="print_stacktrace=1:log_path=$logs/ubsan"
export PYTHONPATH="$pythonpath${PYTHONPATH:+:$PYTHONPATH}"
export PYBENCH_SANITIZED_CORE="$core"

cd "$repo"
# Checks that a clean verdict means something: a deliberate overflow is reported,
# and every rank (not only pytest) loads the sanitizer build.
"$python" -c "import ctypes; a = ctypes.create_string_buffer(4096); b = ctypes.create_string_buffer(8192)
ctypes.memmove(b, a, 6000)" >/dev/null 2>&1 || true
ls "$logs"/asan.* >/dev/null 2>&1 || { echo "sanitize: a deliberate overflow was not reported; ASan is not active"; exit 1; }
rm -f "$logs"/*
loaded=$("$python" - <<'PY'
import subprocess
import sys
from pybench.measure.launch import find_launcher
launcher = find_launcher()
cmd = launcher.command(2, [sys.executable, "-c", "import pybench._core as c; print(c.__file__)"])
print(subprocess.run(cmd, env=launcher.environment(), capture_output=True, text=True, timeout=120).stdout)
PY
)
[ "$(printf '%s\n' "$loaded" | grep -c "^$core\$")" -eq 2 ] ||
  { echo "sanitize: the ranks did not load the sanitizer build: $loaded"; exit 1; }
set +e
# shellcheck disable=SC2086
"$python" -m pytest -q -p no:cacheprovider $tests "$@"
status=$?
set -e
unset LD_PRELOAD

# 4. The watchdog's threads under ThreadSanitizer (not mixable with ASan): it fires
# while the main thread still reconfigures it and rewrites the heartbeat table (the
# pre-issue-12 watchdog gives 7-10 data-race reports here).
cat >"$build/watchdog_tsan.cpp" <<'EOF'
#include <unistd.h>
#include <string>
#include "common/watchdog.hpp"
using namespace pybench;
int main() {
  auto& w = Watchdog::instance();
  const std::string name = "/pybench-tsan-" + std::to_string(getpid());
  w.configure(0.2, [](const std::string&) {});
  w.open_heartbeat(name, 0, 1, 0, {"host"});
  w.arm("a stuck operation");
  for (long n = 0;; ++n) {  // until the watchdog ends the process with 124
    w.configure(n % 2 ? 0.2 : 0.3, [](const std::string&) {});
    w.open_heartbeat(name, 0, 1, 0, {"host-" + std::to_string(n % 3)});
  }
}
EOF
"${CXX:-g++}" -std=c++17 -g -O1 -fsanitize=thread -I"$repo/csrc" "$build/watchdog_tsan.cpp" \
  "$repo/csrc/common/watchdog.cpp" -o "$build/watchdog_tsan" -lpthread -lrt
set +e
TSAN_OPTIONS="log_path=$logs/tsan:report_signal_unsafe=0" timeout 60 "$build/watchdog_tsan" >/dev/null 2>&1
tsan_status=$?
set -e
[ "$tsan_status" -eq 124 ] || echo "sanitize: the ThreadSanitizer watchdog check ended with $tsan_status, not the watchdog's 124"

reports=$(find "$logs" -type f | sort)
if [ -n "$reports" ]; then
  for f in $reports; do echo "=== $f"; cat "$f"; done
fi
n_reports=$(printf '%s' "$reports" | grep -c . || true)
if [ "$status" -eq 0 ] && [ "$tsan_status" -eq 124 ] && [ "$n_reports" -eq 0 ]; then
  echo "sanitize: clean (ASan+UBSan: $core over $tests; TSan: the watchdog's threads)"
  exit 0
fi
echo "sanitize: UNCLEAN (pytest exit $status, TSan check exit $tsan_status, $n_reports sanitizer report file(s) in $logs)"
exit 1
