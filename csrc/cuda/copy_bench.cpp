// Copy bandwidth, as nvbandwidth's copy tests (copy_bench.hpp).
#include "cuda/copy_bench.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "common/native_error.hpp"
#include "common/numa_memory.hpp"
#include "cuda/cuda_check.hpp"
#include "cuda/device_owners.hpp"
#include "cuda/gpu_kernels.hpp"
#include "cuda/host_latch.hpp"

namespace pybench::gpu {

namespace {

// A pinned host buffer for h2d/d2h, as nvbandwidth's: on the GPU's NUMA node
// (mmap + mbind, every page touched, then cudaHostRegister) where sysfs names
// that node and the machine has more than one; cudaHostAlloc otherwise. Every
// member frees itself, so a failure at any step leaks nothing.
class PinnedHost {
 public:
  PinnedHost(std::size_t bytes, int device) {
    CUDA_CHECK(cudaSetDevice(device));
    char bus_id[32] = {};
    CUDA_CHECK(cudaDeviceGetPCIBusId(bus_id, sizeof(bus_id), device));
    const numa::HostPlacement where = numa::host_placement_for(bus_id);
    node_ = where.node;
    placement_ = where.description;
    if (where.bind) {
      try {
        placed_.emplace(bytes, where.node);
      } catch (const numa::PolicyRefused& e) {  // e.g. a container's seccomp: measure anyway, and say so
        node_ = -1;
        placement_ = "NUMA placement refused (" + where.description + " wanted; " + e.what() + ")";
      }
    }
    if (placed_) {
      CUDA_CHECK(cudaHostRegister(placed_->data(), placed_->bytes(), cudaHostRegisterPortable | cudaHostRegisterMapped));
      registered_.reset(placed_->data());
      CUDA_CHECK(cudaHostGetDevicePointer(&device_ptr_, placed_->data(), 0));
      host_ = placed_->data();
      placement_ += " (mmap + mbind MPOL_PREFERRED, every page touched, cudaHostRegister)" + pages_elsewhere();
    } else {
      void* p = nullptr;
      CUDA_CHECK(cudaHostAlloc(&p, bytes, cudaHostAllocPortable));
      allocated_.reset(p);
      host_ = device_ptr_ = p;  // cudaHostAlloc memory is device-visible at the same address (UVA)
      placement_ += "; cudaHostAlloc";
    }
  }
  void* host() const { return host_; }
  void* device_ptr() const { return device_ptr_; }  // the address a copy kernel uses
  int node() const { return node_; }
  const std::string& placement() const { return placement_; }

 private:
  struct Unregister {
    void operator()(void* p) const { cudaHostUnregister(p); }
  };
  struct FreeHost {
    void operator()(void* p) const { cudaFreeHost(p); }
  };
  // A preferred node short of memory spills pages elsewhere: count them and say so.
  std::string pages_elsewhere() const {
    std::vector<int> nodes;
    try {
      nodes = numa::page_nodes(placed_->data(), placed_->bytes());
    } catch (const NativeError&) {
      return "; placement not verified (move_pages refused)";
    }
    const auto off = std::count_if(nodes.begin(), nodes.end(), [&](int n) { return n != node_; });
    if (off == 0) return "";
    return "; " + std::to_string(off) + " of " + std::to_string(nodes.size()) + " pages on other nodes";
  }
  // Declared in construction order; destroyed in reverse: unregister, then unmap.
  std::optional<numa::NodeMemory> placed_;
  std::unique_ptr<void, Unregister> registered_;
  std::unique_ptr<void, FreeHost> allocated_;
  void* host_ = nullptr;
  void* device_ptr_ = nullptr;
  int node_ = -1;
  std::string placement_;
};

// One direction of a copy benchmark: its buffers (device or pinned host), the
// stream it runs on, and how it copies.
struct CopyLeg {
  void* from = nullptr;  // device buffers; pinned host buffers are owned by host_from / host_to
  void* to = nullptr;
  void* from_kernel = nullptr;  // the addresses an SM copy kernel uses
  void* to_kernel = nullptr;
  std::unique_ptr<PinnedHost> host_from, host_to;
  bool from_host = false, to_host = false;
  int from_dev = 0, to_dev = 0, stream_dev = 0;
  cudaStream_t stream = nullptr;

  void open(bool src_host, int src, bool dst_host, int dst, std::size_t bytes) {
    from_host = src_host, to_host = dst_host, from_dev = src, to_dev = dst;
    stream_dev = src_host ? dst : src;
    if (src_host) {
      host_from = std::make_unique<PinnedHost>(bytes, dst);  // on the node of the GPU it is copied to
      from = host_from->host(), from_kernel = host_from->device_ptr();
      std::fill_n(static_cast<unsigned char*>(from), bytes, kCopyByte);
    } else {
      CUDA_CHECK(cudaSetDevice(src));
      CUDA_CHECK(cudaMalloc(&from, bytes));
      CUDA_CHECK(cudaMemset(from, kCopyByte, bytes));
      from_kernel = from;
    }
    if (dst_host) {
      host_to = std::make_unique<PinnedHost>(bytes, src);
      to = host_to->host(), to_kernel = host_to->device_ptr();
      std::fill_n(static_cast<unsigned char*>(to), bytes, 0);
    } else {
      CUDA_CHECK(cudaSetDevice(dst));
      CUDA_CHECK(cudaMalloc(&to, bytes));
      CUDA_CHECK(cudaMemset(to, 0, bytes));
      to_kernel = to;
    }
    CUDA_CHECK(cudaSetDevice(stream_dev));
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  }
  // The host buffer of this leg (h2d's source, d2h's destination), or null.
  const PinnedHost* host_buffer() const { return host_from ? host_from.get() : host_to.get(); }
  void close() {
    if (stream) {
      // Copies may still be in flight on an error path: never unmap host memory under a DMA.
      cudaSetDevice(stream_dev);
      cudaStreamSynchronize(stream);
      cudaStreamDestroy(stream);
    }
    if (from && !from_host) cudaFree(from);
    if (to && !to_host) cudaFree(to);
    host_from.reset(), host_to.reset();
    stream = nullptr, from = to = from_kernel = to_kernel = nullptr;
  }
  ~CopyLeg() { close(); }
  void copy(std::size_t bytes, bool sm, int sm_blocks) const {
    CUDA_CHECK(cudaSetDevice(stream_dev));
    if (sm) launch_sm_copy(to_kernel, from_kernel, bytes, sm_blocks, stream);
    else if (!from_host && !to_host && from_dev != to_dev) CUDA_CHECK(cudaMemcpyPeerAsync(to, to_dev, from, from_dev, bytes, stream));
    else CUDA_CHECK(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDefault, stream));
  }
  // Destination bytes that differ from the source's fill byte (data verification).
  long long wrong_bytes(std::size_t bytes) const {
    CUDA_CHECK(cudaSetDevice(stream_dev));
    CUDA_CHECK(cudaStreamSynchronize(stream));
    if (to_host) {
      const auto* b = static_cast<const unsigned char*>(to);
      return static_cast<long long>(bytes - std::count(b, b + bytes, kCopyByte));
    }
    unsigned long long host = 0;
    const DeviceBuffer counter = device_alloc(to_dev, sizeof(host));
    CUDA_CHECK(cudaMemset(counter.get(), 0, sizeof(host)));
    launch_count_bytes_not(to, bytes, kCopyByte, static_cast<unsigned long long*>(counter.get()), nullptr);
    CUDA_CHECK(cudaMemcpy(&host, counter.get(), sizeof(host), cudaMemcpyDeviceToHost));
    return static_cast<long long>(host);
  }
  static constexpr unsigned char kCopyByte = 0x5a;
};

bool enable_peer(int a, int b) {
  int can = 0;
  CUDA_CHECK(cudaDeviceCanAccessPeer(&can, a, b));
  if (!can) return false;
  CUDA_CHECK(cudaSetDevice(a));
  const cudaError_t e = cudaDeviceEnablePeerAccess(b, 0);
  if (e == cudaErrorPeerAccessAlreadyEnabled) cudaGetLastError();
  else CUDA_CHECK(e);
  return true;
}

}  // namespace

CopyResult copy_times(const std::string& kind, int src, int dst, std::size_t bytes, int n_samples, int ops,
                      const std::string& engine, bool bidirectional) {
  PYBENCH_REQUIRE(kind == "d2d" || kind == "h2d" || kind == "d2h" || kind == "p2p",
                  "unknown copy kind '" + kind + "'; use d2d, h2d, d2h or p2p");
  PYBENCH_REQUIRE(engine == "ce" || engine == "sm", "unknown copy engine '" + engine + "'; use ce or sm");
  PYBENCH_REQUIRE(bytes > 0 && n_samples >= 1 && ops >= 1, "need a positive size, samples and operations");
  PYBENCH_REQUIRE(!bidirectional || kind != "d2d", "a d2d copy has no reverse direction; bidirectional is for "
                                                   "h2d, d2h and p2p");
  CopyResult out;
  if (kind == "p2p") {
    PYBENCH_REQUIRE(src != dst, "p2p copy needs two distinct devices");
    out.peer_access = enable_peer(src, dst) && enable_peer(dst, src);  // both ways, as nvbandwidth
  }
  PYBENCH_REQUIRE(!(kind == "p2p" && engine == "sm" && !out.peer_access),
                  "an SM copy between GPUs " + std::to_string(src) + " and " + std::to_string(dst) +
                      " needs peer access, which CUDA does not offer for this pair; use the copy engine (ce)");
  const bool h_src = kind == "h2d", h_dst = kind == "d2h";
  const int dev_src = kind == "d2d" || kind == "d2h" || kind == "p2p" ? src : dst;
  const int dev_dst = kind == "d2d" ? src : kind == "d2h" ? src : dst;
  CopyLeg fwd, back;
  HostLatch latch;
  int sm_blocks = 0;
  auto cleanup = [&] {
    latch.release();
    fwd.close();
    back.close();
  };
  try {
    fwd.open(h_src, dev_src, h_dst, dev_dst, bytes);
    if (bidirectional) back.open(h_dst, dev_dst, h_src, dev_src, bytes);
    CUDA_CHECK(cudaDeviceGetAttribute(&sm_blocks, cudaDevAttrMultiProcessorCount, fwd.stream_dev));
    sm_blocks *= 4;
    const bool sm = engine == "sm";
    auto enqueue = [&](int n) {
      for (int i = 0; i < n; ++i) {
        fwd.copy(bytes, sm, sm_blocks);
        if (bidirectional) back.copy(bytes, sm, sm_blocks);
      }
    };
    enqueue(2);
    CUDA_CHECK(cudaSetDevice(fwd.stream_dev));
    CUDA_CHECK(cudaStreamSynchronize(fwd.stream));
    if (bidirectional) CUDA_CHECK(cudaStreamSynchronize(back.stream));
    std::vector<Event> ev;  // owned: a failure part-way frees the events made
    CUDA_CHECK(cudaSetDevice(fwd.stream_dev));
    for (int i = 0; i < 2 * n_samples; ++i) ev.push_back(make_event());
    std::vector<std::pair<int, cudaStream_t>> streams{{fwd.stream_dev, fwd.stream}};
    if (bidirectional) streams.emplace_back(back.stream_dev, back.stream);
    for (int s = 0; s < n_samples; ++s) {
      LatchRelease release(&latch);
      latch.hold(streams);  // both directions start together, after the host enqueued the sample
      CUDA_CHECK(cudaSetDevice(fwd.stream_dev));
      CUDA_CHECK(cudaEventRecord(ev[2 * s].get(), fwd.stream));
      enqueue(ops);
      CUDA_CHECK(cudaSetDevice(fwd.stream_dev));
      CUDA_CHECK(cudaEventRecord(ev[2 * s + 1].get(), fwd.stream));
    }
    latch.release();
    CUDA_CHECK(cudaStreamSynchronize(fwd.stream));
    if (bidirectional) CUDA_CHECK(cudaStreamSynchronize(back.stream));
    PYBENCH_REQUIRE(!latch.expired(), "copy timing: the host took over " + std::to_string(HostLatch::kTimeoutS) +
                                          " s to enqueue one sample");
    for (int s = 0; s < n_samples; ++s)
      out.per_copy_s.push_back(elapsed_s(ev[2 * s].get(), ev[2 * s + 1].get()) / ops);
    out.wrong_bytes = fwd.wrong_bytes(bytes) + (bidirectional ? back.wrong_bytes(bytes) : 0);
    if (const PinnedHost* host = fwd.host_buffer()) out.host_node = host->node(), out.host_placement = host->placement();
  } catch (...) {
    cleanup();
    throw;
  }
  cleanup();
  return out;
}

}  // namespace pybench::gpu
