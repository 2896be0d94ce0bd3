// Drives the real GPU harness (csrc/cuda) on the fake CUDA runtime and the fake
// NCCL, one scenario per process, printing what happened as key=value lines for
// test_gpu_harness_on_fakes.py. Built there with ThreadSanitizer.
//
//   harness_driver <scenario> <path of the fake libnccl.so>
#include <dlfcn.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "common/native_error.hpp"
#include "cuda/host_latch.hpp"
#include "cuda/nccl_api.hpp"
#include "cuda/nccl_harness.hpp"
#include "gpu_fakes.hpp"

using namespace pybench;

namespace {

cudaStream_t stream(int i) { return reinterpret_cast<cudaStream_t>(std::uintptr_t(0x100 * (i + 1))); }

int nccl_count(const std::string& lib, const char* fn, int comm) {
  void* h = dlopen(lib.c_str(), RTLD_NOW | RTLD_NOLOAD);
  auto f = reinterpret_cast<int (*)(int)>(dlsym(h, fn));
  return f ? f(comm) : -1;
}

void print_latches() {
  LatchLaunch l[8];
  const int n = fake_latch_launches(l, 8);
  for (int i = 0; i < n && i < 8; ++i)
    std::printf("latch target=%llu published=%llu\n", l[i].target, __atomic_load_n(l[i].flag, __ATOMIC_SEQ_CST));
}

void check_one(nccl::Result r, const char* name) {
  try {
    NCCL_CHECK(r);
    std::printf("check %s=ok\n", name);
  } catch (const NativeError& e) {
    std::printf("check %s=threw %s\n", name, e.what());
  }
}

void run(const std::string& scenario, const std::string& lib) {
  if (scenario == "check") {
    check_one(nccl::kSuccess, "success");
    check_one(nccl::kInProgress, "in-progress");
    check_one(nccl::kSystemError, "system-error");
    return;
  }
  if (scenario == "latch_partial_launch") {  // run with FAKE_CUDA_BAD_DEVICE=1
    gpu::HostLatch latch;
    try {
      latch.hold({{0, stream(0)}, {1, stream(1)}});
      std::printf("hold=returned\n");
    } catch (const NativeError& e) {
      std::printf("hold=threw\n");
    }
    latch.release();
    print_latches();
    return;
  }
  if (scenario == "latch_expired") {
    gpu::HostLatch latch;
    latch.hold({{0, stream(0)}});
    LatchLaunch l[1];
    fake_latch_launches(l, 1);
    std::printf("expired_before=%d\n", latch.expired() ? 1 : 0);
    *l[0].expired = 1;  // the kernel gave up waiting: it stores 1 in the flag it was given
    std::printf("expired_after=%d\n", latch.expired() ? 1 : 0);
    latch.clear_expired();
    std::printf("expired_cleared=%d\n", latch.expired() ? 1 : 0);
    latch.release();
    return;
  }
  nccl::load(lib);
  if (scenario == "wait_async_rc") {  // FAKE_NCCL_ASYNC_RC set, a stream busy for a while, no timeout
    gpu::NcclWorld world({0}, 0.0);
    try {
      world.wait("a probe");
      std::printf("wait=returned\n");
    } catch (const NativeError& e) {
      std::printf("wait=threw %s\n", e.what());
    }
    std::printf("aborts=%d\n", nccl_count(lib, "fake_nccl_aborts", 0));
    return;
  }
  if (scenario == "abort_race") {  // FAKE_CUDA_BUSY_POLLS=-1: the streams never finish
    gpu::NcclWorld world({0, 1}, 0.5);
    std::thread waiter([&] {
      try {
        world.wait("a stuck operation");
        std::printf("wait=returned\n");
      } catch (const NativeError& e) {
        std::printf("wait=threw %s\n", e.what());
      }
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    world.set_timeout_s(0.5);  // the runner's watch() while the other thread waits
    world.abort();  // another Python thread's abort(), the GIL released
    waiter.join();
    std::printf("aborts=%d,%d\n", nccl_count(lib, "fake_nccl_aborts", 0), nccl_count(lib, "fake_nccl_aborts", 1));
    return;
  }
  if (scenario == "pair_times_fails") {  // a cudaMalloc or cudaEventCreate fails (FAKE_CUDA_FAIL_*)
    {
      gpu::NcclWorld world({0, 1}, 5.0);
      const long device_before = fake_live_device_buffers();
      try {
        world.pair_times(0, 1, 1 << 10, 2, 1);
        std::printf("pair_times=returned\n");
      } catch (const NativeError& e) {
        std::printf("pair_times=threw\n");
      }
      std::printf("leaked_device_buffers=%ld\n", fake_live_device_buffers() - device_before);
      std::printf("leaked_events=%ld\n", fake_live_events());
    }
    std::printf("left_after_world=%ld,%ld,%ld\n", fake_live_device_buffers(), fake_live_host_buffers(),
                fake_live_streams());
    return;
  }
  if (scenario == "bench_fails") {  // a cudaMalloc or cudaEventCreate fails inside NcclBench
    {
      auto world = std::make_shared<gpu::NcclWorld>(std::vector<int>{0, 1}, 5.0);
      try {
        gpu::NcclBench bench(world, "allreduce", "float32", "sum", 1 << 20, 0, false, "batched");
        bench.measure(2, 1);
        std::printf("bench=returned\n");
      } catch (const NativeError& e) {
        std::printf("bench=threw\n");
      }
      std::printf("leaked_events=%ld\n", fake_live_events());
    }
    std::printf("left_after_world=%ld,%ld,%ld\n", fake_live_device_buffers(), fake_live_host_buffers(),
                fake_live_streams());
    return;
  }
  if (scenario == "host_timing") {  // nccl-tests' host clock: no latch kernel, one value per sample
    auto world = std::make_shared<gpu::NcclWorld>(std::vector<int>{0, 1}, 5.0);
    for (const char* timing : {"host", "host-graph", "batched"}) {
      const int before = fake_latch_launches(nullptr, 0);
      gpu::NcclBench bench(world, "allreduce", "float32", "sum", 1 << 20, 0, false, timing);
      const gpu::Samples s = bench.measure(3, 4);
      int positive = 0;
      for (double v : s.per_op_s) positive += v > 0;
      std::printf("%s samples=%zu positive=%d latches=%d\n", timing, s.per_op_s.size(), positive,
                  fake_latch_launches(nullptr, 0) - before);
    }
    return;
  }
  std::printf("unknown scenario %s\n", scenario.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  try {
    run(argv[1], argv[2]);
  } catch (const NativeError& e) {
    std::printf("error=%s\n", e.what());
  }
  return 0;
}
