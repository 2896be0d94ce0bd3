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

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "cuda/nccl_api.hpp"
#include "cuda/nccl_collective.hpp"

namespace pybench::gpu {

struct Samples {
  std::vector<double> per_op_s;  // one value per sample, max over devices and ranks
  double wall_s = 0;             // wall time of the whole call (max over ranks)
};

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
  std::vector<Member>& members() { return members_; }
  double timeout_s() const { return timeout_s_; }
  void set_timeout_s(double t) { timeout_s_ = t; }

  // Waits until every member's stream is idle, polling NCCL's asynchronous errors;
  // on an error, or no progress within the timeout, aborts every communicator
  // (ncclCommAbort) and throws NativeError naming `what`. Progress: `milestones`
  // (per member, events recorded in stream order, e.g. the end of each sample)
  // completing; without milestones the whole wait must fit in the timeout.
  void wait(const std::string& what, const std::vector<std::vector<void*>>* milestones = nullptr);
  // One tiny all-reduce on every member: aligns the ranks on the GPU before a sample.
  void enqueue_barrier();
  // Element-wise max over ranks (identity in single-process mode, where the caller
  // already reduced over its devices). Synchronous; never inside a timed region.
  std::vector<double> max_over_ranks(const std::vector<double>& local);
  std::vector<long long> max_over_ranks_ll(const std::vector<long long>& local);
  long long sum_over_ranks(long long local);
  // Abort every communicator now (idempotent); the world is unusable afterwards.
  void abort();
  bool aborted() const { return aborted_; }
  // Time per operation of ncclSend from member `src` to member `dst` (single-process
  // worlds only): one sample per entry, each the batch time of `ops` messages / ops.
  std::vector<double> pair_times(int src, int dst, std::size_t bytes, int n_samples, int ops);

 private:
  void init_scratch();
  void run_group(const std::vector<nccl::Result>& results, const char* what);

  std::vector<Member> members_;
  int world_ = 0;
  bool multi_process_ = false;
  bool aborted_ = false;
  double timeout_s_;
};

class NcclBench {
 public:
  // timing: "batched" / "per-op" (events around k ops enqueued back to back; per-op is k == 1)
  // or "graph" (k ops captured once into a CUDA graph, replayed per sample).
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

 private:
  void enqueue_ops(int k);
  void prepare_graphs(int k);
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
    void* send_alloc = nullptr;
    void* recv_alloc = nullptr;  // null in place
    NcclLaunch launch{};
    unsigned long long* wrong = nullptr;
    void* graph = nullptr;       // cudaGraph_t
    void* graph_exec = nullptr;  // cudaGraphExec_t
  };
  std::vector<PerMember> per_;
  int graph_ops_ = 0;
  std::string label_;
};

// Copy bandwidth, as nvbandwidth's copy-engine tests: kind is d2d (within `src`),
// h2d (pinned host -> `dst`), d2h (`src` -> pinned host) or p2p (`src` -> `dst`).
// Returns seconds per copy, one per sample (each sample times `ops` copies with
// CUDA events), and whether peer access was enabled (p2p only).
struct CopyResult {
  std::vector<double> per_copy_s;
  bool peer_access;
};
CopyResult copy_times(const std::string& kind, int src, int dst, std::size_t bytes, int n_samples, int ops);

}  // namespace pybench::gpu
