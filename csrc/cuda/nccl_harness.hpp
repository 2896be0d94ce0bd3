// The shared GPU harness: a communicator world (NcclWorld) and, per (collective,
// dtype, op, size), the device buffers, warm-up, the on-device correctness check
// and the CUDA-event timed loop (NcclBench). It never names a collective;
// everything specific comes from NcclCollectiveDesc (nccl_collectives.cpp).
//
// Two shapes of world, the same harness:
// - single process, several devices (ncclCommInitAll): every operation is one
//   ncclGroupStart/End over the local devices; a sample is the slowest device's;
// - one device per process (ncclCommInitRank, unique id carried by the launcher):
//   samples and #wrong are reduced over ranks with NCCL itself, outside the timed
//   region, so it works the same under mpirun, srun and torchrun.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cuda/device_owners.hpp"
#include "cuda/graph_registry.hpp"
#include "cuda/host_latch.hpp"
#include "cuda/nccl_api.hpp"
#include "cuda/nccl_collective.hpp"

namespace pybench::gpu {

class EventSet;  // CUDA events per world member (nccl_harness.cpp)

struct Samples {
  std::vector<double> per_op_s;  // one value per sample, max over devices and ranks
  double wall_s = 0;             // wall time of the whole call (max over ranks)
};

// Thread safety: every binding releases the GIL, so abort() may come from another
// Python thread while this one enqueues or waits. One lock guards the communicators'
// use and aborted_: work is enqueued only under lock_for() (never on an aborted
// communicator), abort() takes the same lock, and wait() takes it once per poll, so an
// abort lands between two polls and the waiting thread then stops with an error.
class NcclWorld {
 public:
  struct Member {
    int device;
    int rank;
    nccl::Comm comm;
    cudaStream_t stream;
    void* scratch;  // small device buffer for the barrier and cross-rank reductions
  };

  // One process drives `devices` (ranks 0..n-1 in that order).
  NcclWorld(const std::vector<int>& devices, double timeout_s);
  // This process is `rank` of `world`, on `device`.
  NcclWorld(int rank, int world, int device, const nccl::UniqueId& id, double timeout_s);
  ~NcclWorld();
  NcclWorld(const NcclWorld&) = delete;
  NcclWorld& operator=(const NcclWorld&) = delete;

  int world() const { return world_; }
  bool multi_process() const { return multi_process_; }
  // Fixed from construction to destruction; use the communicators only under lock_for().
  std::vector<Member>& members() { return members_; }
  // Holds the world's lock for enqueuing work; throws NativeError naming `what` when the
  // communicators were aborted (earlier, or by another thread).
  std::unique_lock<std::recursive_mutex> lock_for(const std::string& what);
  double timeout_s() const {
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    return timeout_s_;
  }
  void set_timeout_s(double t) {  // also while another thread waits (the runner's watch())
    std::lock_guard<std::recursive_mutex> lock(mutex_);
    timeout_s_ = t;
  }

  // Waits until every member's stream is idle, polling NCCL's asynchronous errors;
  // on an error, or no progress within the timeout, aborts every communicator
  // (ncclCommAbort) and throws NativeError naming `what`. Progress: `milestones`
  // (per member, events recorded in stream order, e.g. the end of each sample)
  // completing; without milestones the whole wait must fit in the timeout.
  // `spin`: poll without ever sleeping (host-clock timing, where a sleep would be timed).
  void wait(const std::string& what, const std::vector<std::vector<void*>>* milestones = nullptr, bool spin = false);
  // One tiny all-reduce on every member: aligns the ranks on the GPU before a sample.
  void enqueue_barrier();
  // Element-wise max over ranks (identity in single-process mode, where the caller
  // already reduced over its devices). Synchronous; never inside a timed region.
  std::vector<double> max_over_ranks(const std::vector<double>& local);
  std::vector<long long> max_over_ranks_ll(const std::vector<long long>& local);
  // Element-wise mean over ranks (nccl-tests' -a 1, its default); identity in single-process mode.
  std::vector<double> mean_over_ranks(const std::vector<double>& local);
  long long sum_over_ranks(long long local);
  // Abort every communicator now (idempotent); the world is unusable afterwards.
  // Every live CUDA graph on the world is destroyed first (NCCL waits for them).
  void abort();
  GraphRegistry& graphs() { return graphs_; }
  HostLatch& latch() { return latch_; }
  // A pinned host buffer of at least `bytes` (grown on demand, kept for the world's
  // life): device-to-host reads land there so they never block the polling wait.
  void* pinned(std::size_t bytes);
  // Member 0's device buffer for cross-rank reductions, grown on demand.
  void* device_scratch(std::size_t bytes);
  bool aborted() const;
  // Whether communicator set-up ran under the deadline (false: single-process worlds,
  // which wait for no other process, and NCCL < 2.18, whose set-up can only block).
  bool setup_bounded() const { return setup_bounded_; }
  // Time per operation of ncclSend from member `src` to member `dst` (single-process
  // worlds only): one sample per entry, each the batch time of `ops` messages / ops.
  // `pingpong`: each operation is a message there and its reply back; the time is
  // half the round trip (latency as OSU's, not the rate of back-to-back sends).
  std::vector<double> pair_times(int src, int dst, std::size_t bytes, int n_samples, int ops, bool pingpong = false);

 private:
  void init_scratch();
  void abort_locked();  // abort() with the lock held
  // One poll of every member (the lock held): true when all are idle; on an error, aborts and throws.
  bool poll(const std::string& what, const std::vector<std::vector<void*>>* milestones,
            std::vector<std::size_t>& reached, std::chrono::steady_clock::time_point& t0);
  [[noreturn]] void fail_aborted(const std::string& what) const;
  // Frees every member's communicator, stream and buffers (what the destructor does); also
  // used when a constructor fails half-way, so nothing it made leaks.
  void teardown() noexcept;

  mutable std::recursive_mutex mutex_;  // recursive: a locked enqueue may run the barrier, which locks too
  std::vector<Member> members_;
  int world_ = 0;
  bool multi_process_ = false;
  bool aborted_ = false;
  bool setup_bounded_ = false;
  double timeout_s_;
  GraphRegistry graphs_;
  HostLatch latch_;
  void* pinned_ = nullptr;
  std::size_t pinned_bytes_ = 0;
  void* reduce_buf_ = nullptr;
  std::size_t reduce_bytes_ = 0;
};

// Runs `body` (which enqueues NCCL calls and returns the first failure) between
// ncclGroupStart and ncclGroupEnd; the group is always ended, even after an error.
template <typename Body>
void in_group(Body&& body) {
  NCCL_CHECK(nccl::api().GroupStart());
  const nccl::Result r = body();
  const nccl::Result e = nccl::api().GroupEnd();
  NCCL_CHECK(r);
  NCCL_CHECK(e);
}

class NcclBench {
 public:
  // timing: "batched" / "per-op" (events around k ops enqueued back to back; per-op is k == 1),
  // "graph" (k ops captured once into a CUDA graph, replayed per sample), or "host"
  // (nccl-tests' definition: the host clock around k ops enqueued back to back and one
  // stream synchronisation, no latch), or "host-graph" (the same clock around one replay of
  // a CUDA graph of the k ops, as nccl-tests' -G); see measure_host().
  // Buffers rotate as nccl-tests': each operation uses the next of `rotation_slots`
  // slots of a pool of at least kRotationBytes per buffer, so sizes under the L2
  // cache (60 MB on an H200) do not replay from it. Slot 0 holds the checked data.
  NcclBench(std::shared_ptr<NcclWorld> world, const std::string& collective, const std::string& dtype,
            const std::string& op, std::size_t size_bytes, int root, bool in_place, const std::string& timing);
  ~NcclBench();
  NcclBench(const NcclBench&) = delete;
  NcclBench& operator=(const NcclBench&) = delete;

  void warmup(int n);
  // Runs the collective `iters` times on fresh pattern data and returns the number
  // of wrong output elements summed over every device, rank and iteration.
  long long check(int iters);
  Samples measure(int n_samples, int ops_per_sample);

  std::size_t count() const { return count_; }
  std::size_t send_bytes() const { return send_count_ * elem_; }
  std::size_t recv_bytes() const { return recv_count_ * elem_; }
  std::size_t device_bytes() const { return alloc_bytes_; }
  std::size_t rotation_slots() const { return slots_; }
  std::size_t slot_stride() const { return stride_; }
  bool latched(int ops_per_sample) const;

  static constexpr std::size_t kRotationBytes = 256u << 20;  // > 4x the largest L2 (H200: 60 MB)
  static constexpr int kMaxLatchedOps = 128;  // a sample held by the latch stays well inside the launch queue

 private:
  void allocate(std::size_t i);
  NcclLaunch launch_at(std::size_t member, std::size_t slot) const;
  void enqueue_slot(std::size_t slot);
  void enqueue_ops(int k);  // k operations, each on the next rotation slot
  void enqueue_sample(const EventSet& ev, int s, int ops_per_sample, bool latch);
  void prepare_graphs(int k);
  Samples measure_host(int n_samples, int ops_per_sample);
  bool host_timed() const { return timing_ == "host" || timing_ == "host-graph"; }
  void free_graphs();

  std::shared_ptr<NcclWorld> world_;
  const NcclCollectiveDesc& desc_;
  DTypeInfo dtype_;
  nccl::RedOp op_;
  std::size_t count_ = 0, elem_ = 0, send_count_ = 0, recv_count_ = 0, alloc_bytes_ = 0;
  int root_;
  bool in_place_;
  std::string timing_;
  GpuPattern pattern_;
  struct PerMember {
    DeviceBuffer send_alloc;
    DeviceBuffer recv_alloc;  // null in place
    NcclLaunch launch{};      // slot 0
    DeviceBuffer wrong;       // an unsigned long long: the check's count
    void* graph_exec = nullptr;  // cudaGraphExec_t, owned by the world's GraphRegistry
    int graph_id = -1;
  };
  std::vector<PerMember> per_;
  int graph_ops_ = 0;
  std::size_t slots_ = 1, stride_ = 0, next_slot_ = 0;
  std::string label_;
};

}  // namespace pybench::gpu
