#include "cuda/nccl_harness.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "common/native_error.hpp"
#include "cuda/gpu_kernels.hpp"

namespace pybench::gpu {
namespace {

using nccl::api;
using Clock = std::chrono::steady_clock;

void cuda_check(cudaError_t e, const char* call, const char* file, int line) {
  if (e != cudaSuccess)
    throw_native(std::string(call) + " failed: " + cudaGetErrorString(e) + " (" + cudaGetErrorName(e) + ", " +
                     std::to_string(static_cast<int>(e)) + ")",
                 file, line);
}
#define CUDA_CHECK(call) cuda_check((call), #call, __FILE__, __LINE__)

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

const DTypeInfo& find_dtype(const std::string& name) {
  for (const auto& d : dtype_table())
    if (name == d.name) return d;
  std::string known;
  for (const auto& d : dtype_table()) known += (known.empty() ? "" : ", ") + std::string(d.name);
  PYBENCH_FAIL("unknown dtype '" + name + "' for NCCL; known: " + known);
}

nccl::RedOp find_op(const std::string& name) {
  for (const auto& o : op_table())
    if (name == o.name) return o.nccl;
  PYBENCH_FAIL("unknown reduction op '" + name + "' for NCCL; known: sum, prod, max, min, avg");
}

// Events created on the device of each member, freed on scope exit.
class EventSet {
 public:
  EventSet(const std::vector<NcclWorld::Member>& members, std::size_t per_member) : n_(per_member) {
    for (const auto& m : members) {
      CUDA_CHECK(cudaSetDevice(m.device));
      for (std::size_t i = 0; i < per_member; ++i) {
        cudaEvent_t e;
        CUDA_CHECK(cudaEventCreate(&e));
        events_.push_back(e);
      }
    }
  }
  ~EventSet() {
    for (auto e : events_) cudaEventDestroy(e);
  }
  cudaEvent_t at(std::size_t member, std::size_t i) const { return events_[member * n_ + i]; }

 private:
  std::size_t n_;
  std::vector<cudaEvent_t> events_;
};

double elapsed_s(cudaEvent_t a, cudaEvent_t b) {
  float ms = 0;
  CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
  return static_cast<double>(ms) * 1e-3;
}

}  // namespace

// ---------------------------------------------------------------- NcclWorld

NcclWorld::NcclWorld(const std::vector<int>& devices, double timeout_s) : timeout_s_(timeout_s) {
  PYBENCH_REQUIRE(!devices.empty(), "no GPU to build a communicator on");
  world_ = static_cast<int>(devices.size());
  std::vector<nccl::Comm> comms(devices.size(), nullptr);
  NCCL_CHECK(api().CommInitAll(comms.data(), world_, devices.data()));
  for (int i = 0; i < world_; ++i) {
    CUDA_CHECK(cudaSetDevice(devices[i]));
    cudaStream_t s;
    CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    members_.push_back({devices[i], i, comms[i], s, nullptr});
  }
  init_scratch();
}

NcclWorld::NcclWorld(int rank, int world, int device, const nccl::UniqueId& id, double timeout_s)
    : world_(world), multi_process_(true), timeout_s_(timeout_s) {
  CUDA_CHECK(cudaSetDevice(device));
  nccl::Comm comm = nullptr;
  NCCL_CHECK(api().CommInitRank(&comm, world, id, rank));
  cudaStream_t s;
  CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  members_.push_back({device, rank, comm, s, nullptr});
  init_scratch();
}

void NcclWorld::init_scratch() {
  for (auto& m : members_) {
    CUDA_CHECK(cudaSetDevice(m.device));
    CUDA_CHECK(cudaMalloc(&m.scratch, 256));
    CUDA_CHECK(cudaMemset(m.scratch, 0, 256));
  }
}

NcclWorld::~NcclWorld() {
  for (auto& m : members_) {
    cudaSetDevice(m.device);
    if (!aborted_) {
      cudaStreamSynchronize(m.stream);
      api().CommDestroy(m.comm);
    }
    if (m.scratch) cudaFree(m.scratch);
    cudaStreamDestroy(m.stream);
  }
}

void NcclWorld::abort() {
  if (aborted_) return;
  aborted_ = true;
  for (auto& m : members_) {
    cudaSetDevice(m.device);
    api().CommAbort(m.comm);
  }
}

void NcclWorld::wait(const std::string& what, const std::vector<std::vector<void*>>* milestones) {
  PYBENCH_REQUIRE(!aborted_, "the NCCL communicators were aborted earlier in this run; cannot run " + what);
  auto t0 = Clock::now();
  std::vector<std::size_t> reached(members_.size(), 0);
  for (int spin = 0;; ++spin) {
    bool all_done = true;
    if (milestones != nullptr) {
      // Events on one stream complete in order: advance each member's count, and
      // restart the no-progress clock whenever any of them moves.
      for (std::size_t i = 0; i < members_.size() && i < milestones->size(); ++i) {
        const auto& evs = (*milestones)[i];
        while (reached[i] < evs.size() &&
               cudaEventQuery(static_cast<cudaEvent_t>(evs[reached[i]])) == cudaSuccess) {
          ++reached[i];
          t0 = Clock::now();
        }
      }
    }
    for (auto& m : members_) {
      cudaSetDevice(m.device);
      const cudaError_t e = cudaStreamQuery(m.stream);
      if (e == cudaSuccess) continue;
      if (e != cudaErrorNotReady) {
        abort();
        PYBENCH_FAIL(what + " failed on rank " + std::to_string(m.rank) + " (device " + std::to_string(m.device) +
                     "): " + cudaGetErrorString(e) + " (" + cudaGetErrorName(e) + "); communicators aborted");
      }
      all_done = false;
      nccl::Result async = nccl::kSuccess;
      api().CommGetAsyncError(m.comm, &async);
      if (async != nccl::kSuccess && async != nccl::kInProgress) {
        const std::string text = api().GetErrorString(async);
        abort();
        PYBENCH_FAIL("NCCL reported an asynchronous error during " + what + " on rank " + std::to_string(m.rank) +
                     " (device " + std::to_string(m.device) + "): " + text + "; communicators aborted");
      }
    }
    if (all_done) return;
    const double waited = seconds_since(t0);
    if (timeout_s_ > 0 && waited > timeout_s_) {
      abort();
      PYBENCH_FAIL(what + " made no progress for " + std::to_string(static_cast<int>(waited)) +
                   " s (--timeout); NCCL communicators aborted (a rank stopped answering or the network is stuck)");
    }
    // Spin for the first ~1000 polls (short operations), then sleep lightly.
    if (spin > 1000) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

void NcclWorld::enqueue_barrier() {
  NCCL_CHECK(api().GroupStart());
  for (auto& m : members_)
    NCCL_CHECK(api().AllReduce(m.scratch, m.scratch, 1, nccl::kInt32, nccl::kMax, m.comm, m.stream));
  NCCL_CHECK(api().GroupEnd());
}

template <typename T>
static std::vector<T> reduce_over_ranks(NcclWorld& w, const std::vector<T>& local, nccl::DataType dt, nccl::RedOp op) {
  if (!w.multi_process() || local.empty()) return local;
  auto& m = w.members().front();
  CUDA_CHECK(cudaSetDevice(m.device));
  void* buf = nullptr;
  CUDA_CHECK(cudaMalloc(&buf, local.size() * sizeof(T)));
  std::vector<T> out(local.size());
  try {
    CUDA_CHECK(cudaMemcpyAsync(buf, local.data(), local.size() * sizeof(T), cudaMemcpyHostToDevice, m.stream));
    NCCL_CHECK(api().AllReduce(buf, buf, local.size(), dt, op, m.comm, m.stream));
    CUDA_CHECK(cudaMemcpyAsync(out.data(), buf, local.size() * sizeof(T), cudaMemcpyDeviceToHost, m.stream));
    w.wait("agreeing on results across ranks");
  } catch (...) {
    cudaFree(buf);
    throw;
  }
  cudaFree(buf);
  return out;
}

std::vector<double> NcclWorld::max_over_ranks(const std::vector<double>& local) {
  return reduce_over_ranks(*this, local, nccl::kFloat64, nccl::kMax);
}

std::vector<long long> NcclWorld::max_over_ranks_ll(const std::vector<long long>& local) {
  return reduce_over_ranks(*this, local, nccl::kInt64, nccl::kMax);
}

long long NcclWorld::sum_over_ranks(long long local) {
  return reduce_over_ranks(*this, std::vector<long long>{local}, nccl::kInt64, nccl::kSum).front();
}

std::vector<double> NcclWorld::pair_times(int src, int dst, std::size_t bytes, int n_samples, int ops) {
  PYBENCH_REQUIRE(!multi_process_, "the pair matrix runs in single-process mode (one process driving every GPU)");
  PYBENCH_REQUIRE(src >= 0 && src < world_ && dst >= 0 && dst < world_ && src != dst,
                  "pair " + std::to_string(src) + " -> " + std::to_string(dst) + " is not two distinct devices of " +
                      std::to_string(world_));
  PYBENCH_REQUIRE(n_samples >= 1 && ops >= 1, "need at least one sample of one operation");
  Member& a = members_[src];
  Member& b = members_[dst];
  void *sbuf = nullptr, *rbuf = nullptr;
  const std::size_t n = std::max<std::size_t>(bytes, 1);
  CUDA_CHECK(cudaSetDevice(a.device));
  CUDA_CHECK(cudaMalloc(&sbuf, n));
  CUDA_CHECK(cudaMemset(sbuf, 1, n));
  CUDA_CHECK(cudaSetDevice(b.device));
  CUDA_CHECK(cudaMalloc(&rbuf, n));
  std::vector<double> out;
  try {
    auto one = [&] {
      NCCL_CHECK(api().GroupStart());
      NCCL_CHECK(api().Send(sbuf, bytes, nccl::kUint8, b.rank, a.comm, a.stream));
      NCCL_CHECK(api().Recv(rbuf, bytes, nccl::kUint8, a.rank, b.comm, b.stream));
      NCCL_CHECK(api().GroupEnd());
    };
    for (int i = 0; i < 3; ++i) one();  // the first send on a pair sets up its connection: never timed
    wait("warm-up of send " + std::to_string(src) + " -> " + std::to_string(dst));
    std::vector<Member> pair{a, b};
    EventSet ev(pair, 2 * static_cast<std::size_t>(n_samples));
    for (int s = 0; s < n_samples; ++s) {
      enqueue_barrier();
      CUDA_CHECK(cudaSetDevice(a.device));
      CUDA_CHECK(cudaEventRecord(ev.at(0, 2 * s), a.stream));
      CUDA_CHECK(cudaSetDevice(b.device));
      CUDA_CHECK(cudaEventRecord(ev.at(1, 2 * s), b.stream));
      for (int i = 0; i < ops; ++i) one();
      CUDA_CHECK(cudaSetDevice(a.device));
      CUDA_CHECK(cudaEventRecord(ev.at(0, 2 * s + 1), a.stream));
      CUDA_CHECK(cudaSetDevice(b.device));
      CUDA_CHECK(cudaEventRecord(ev.at(1, 2 * s + 1), b.stream));
    }
    wait("send " + std::to_string(src) + " -> " + std::to_string(dst));
    for (int s = 0; s < n_samples; ++s) {
      const double t = std::max(elapsed_s(ev.at(0, 2 * s), ev.at(0, 2 * s + 1)),
                                elapsed_s(ev.at(1, 2 * s), ev.at(1, 2 * s + 1)));
      out.push_back(t / ops);
    }
  } catch (...) {
    cudaFree(sbuf);
    cudaFree(rbuf);
    throw;
  }
  cudaFree(sbuf);
  cudaFree(rbuf);
  return out;
}

// ---------------------------------------------------------------- NcclBench

NcclBench::NcclBench(std::shared_ptr<NcclWorld> world, const std::string& collective, const std::string& dtype,
                     const std::string& op, std::size_t size_bytes, int root, bool in_place, const std::string& timing)
    : world_(std::move(world)),
      desc_(find_nccl_collective(collective)),
      dtype_(find_dtype(dtype)),
      op_(find_op(op)),
      root_(root),
      in_place_(in_place),
      timing_(timing),
      pattern_(dtype_, op_, world_->world(), desc_.reduces) {
  const int n = world_->world();
  elem_ = dtype_.size;
  PYBENCH_REQUIRE(timing == "batched" || timing == "per-op" || timing == "graph",
                  "unknown timing mode '" + timing + "'; use batched, per-op or graph");
  PYBENCH_REQUIRE(root >= 0 && root < n, "root " + std::to_string(root) + " is not a rank of this world of " +
                                             std::to_string(n));
  PYBENCH_REQUIRE(!(desc_.reduces && op_ == nccl::kAvg && !dtype_.floating),
                  "op avg needs a floating-point dtype (float16, bfloat16, float32, float64), not " + dtype);
  PYBENCH_REQUIRE(size_bytes > 0 && size_bytes % elem_ == 0,
                  desc_.name + ": size " + std::to_string(size_bytes) + " B is not a positive multiple of the " +
                      dtype + " element size " + std::to_string(elem_));
  count_ = size_bytes / elem_;
  PYBENCH_REQUIRE(!desc_.split_by_world || count_ % n == 0,
                  desc_.name + ": size " + std::to_string(size_bytes) + " B must be a multiple of ranks x element size (" +
                      std::to_string(n) + " x " + std::to_string(elem_) + " B)");
  PYBENCH_REQUIRE(!in_place || desc_.in_place_offsets != nullptr,
                  desc_.name + " cannot run in place (its input would be overwritten before it is sent); "
                  "run it out of place");
  send_count_ = desc_.send_count(count_, n);
  recv_count_ = desc_.recv_count(count_, n);
  label_ = desc_.name + " of " + std::to_string(size_bytes) + " B";

  per_.resize(world_->members().size());
  try {
    for (std::size_t i = 0; i < per_.size(); ++i) {
      auto& m = world_->members()[i];
      auto& p = per_[i];
      CUDA_CHECK(cudaSetDevice(m.device));
      char* send = nullptr;
      char* recv = nullptr;
      if (in_place) {
        std::size_t soff = 0, roff = 0;
        desc_.in_place_offsets(count_, m.rank, n, &soff, &roff);
        const std::size_t bytes = std::max(send_count_, recv_count_) * elem_;
        CUDA_CHECK(cudaMalloc(&p.send_alloc, bytes));
        alloc_bytes_ = bytes;
        send = static_cast<char*>(p.send_alloc) + soff * elem_;
        recv = static_cast<char*>(p.send_alloc) + roff * elem_;
      } else {
        CUDA_CHECK(cudaMalloc(&p.send_alloc, send_count_ * elem_));
        CUDA_CHECK(cudaMalloc(&p.recv_alloc, recv_count_ * elem_));
        alloc_bytes_ = (send_count_ + recv_count_) * elem_;
        send = static_cast<char*>(p.send_alloc);
        recv = static_cast<char*>(p.recv_alloc);
      }
      CUDA_CHECK(cudaMalloc(&p.wrong, sizeof(unsigned long long)));
      p.launch = NcclLaunch{send, recv, count_, dtype_.nccl, elem_, op_, m.comm, m.stream, m.rank, n, root_};
      // Touch the buffers before any timing: every byte is written once here.
      CUDA_CHECK(cudaMemsetAsync(recv, 0xff, recv_count_ * elem_, m.stream));
      launch_fill(dtype_.nccl, send, send_count_, m.rank, 0, pattern_.period(), m.stream);
    }
    world_->wait("buffer set-up of " + label_);
  } catch (...) {
    free_graphs();
    for (std::size_t i = 0; i < per_.size(); ++i) {
      cudaSetDevice(world_->members()[i].device);
      cudaFree(per_[i].send_alloc);
      cudaFree(per_[i].recv_alloc);
      cudaFree(per_[i].wrong);
    }
    throw;
  }
}

NcclBench::~NcclBench() {
  free_graphs();
  for (std::size_t i = 0; i < per_.size(); ++i) {
    cudaSetDevice(world_->members()[i].device);
    if (!world_->aborted()) cudaStreamSynchronize(world_->members()[i].stream);
    cudaFree(per_[i].send_alloc);
    cudaFree(per_[i].recv_alloc);
    cudaFree(per_[i].wrong);
  }
}

void NcclBench::enqueue_ops(int k) {
  for (int i = 0; i < k; ++i) {
    NCCL_CHECK(api().GroupStart());
    for (auto& p : per_) NCCL_CHECK(desc_.run(p.launch));
    NCCL_CHECK(api().GroupEnd());
  }
}

void NcclBench::free_graphs() {
  for (std::size_t i = 0; i < per_.size(); ++i) {
    cudaSetDevice(world_->members()[i].device);
    if (per_[i].graph_exec) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(per_[i].graph_exec));
    if (per_[i].graph) cudaGraphDestroy(static_cast<cudaGraph_t>(per_[i].graph));
    per_[i].graph_exec = per_[i].graph = nullptr;
  }
  graph_ops_ = 0;
}

void NcclBench::prepare_graphs(int k) {
  if (graph_ops_ == k) return;
  free_graphs();
  auto& members = world_->members();
  for (auto& m : members) {
    CUDA_CHECK(cudaSetDevice(m.device));
    // Global mode, as nccl-tests with one thread: nothing else may make unsafe calls during capture.
    CUDA_CHECK(cudaStreamBeginCapture(m.stream, cudaStreamCaptureModeGlobal));
  }
  try {
    enqueue_ops(k);
  } catch (...) {
    for (auto& m : members) {
      cudaGraph_t g = nullptr;
      cudaSetDevice(m.device);
      cudaStreamEndCapture(m.stream, &g);
      if (g) cudaGraphDestroy(g);
    }
    throw;
  }
  for (std::size_t i = 0; i < members.size(); ++i) {
    CUDA_CHECK(cudaSetDevice(members[i].device));
    cudaGraph_t g = nullptr;
    CUDA_CHECK(cudaStreamEndCapture(members[i].stream, &g));
    per_[i].graph = g;
    cudaGraphExec_t exec = nullptr;
    CUDA_CHECK(cudaGraphInstantiate(&exec, g, 0));
    per_[i].graph_exec = exec;
    CUDA_CHECK(cudaGraphUpload(exec, members[i].stream));
  }
  graph_ops_ = k;
  // One untimed replay: the first launch of a graph pays for its set-up.
  for (std::size_t i = 0; i < members.size(); ++i) {
    CUDA_CHECK(cudaSetDevice(members[i].device));
    CUDA_CHECK(cudaGraphLaunch(static_cast<cudaGraphExec_t>(per_[i].graph_exec), members[i].stream));
  }
  world_->wait("first replay of the CUDA graph of " + label_);
}

void NcclBench::warmup(int n) {
  enqueue_ops(n);
  world_->wait("warm-up of " + label_);
}

long long NcclBench::check(int iters) {
  // Test hook, as the MPI harness's: PYBENCH_INJECT_WRONG=<rank> overwrites the
  // first output element of that rank with 0xff bytes after each check iteration.
  const char* inject = std::getenv("PYBENCH_INJECT_WRONG");
  auto& members = world_->members();
  for (std::size_t i = 0; i < per_.size(); ++i) {
    CUDA_CHECK(cudaSetDevice(members[i].device));
    CUDA_CHECK(cudaMemsetAsync(per_[i].wrong, 0, sizeof(unsigned long long), members[i].stream));
  }
  for (int it = 0; it < iters; ++it) {
    for (std::size_t i = 0; i < per_.size(); ++i) {
      auto& m = members[i];
      auto& l = per_[i].launch;
      CUDA_CHECK(cudaSetDevice(m.device));
      CUDA_CHECK(cudaMemsetAsync(l.recv, 0xff, recv_count_ * elem_, m.stream));  // NaN / -1: never a pattern value
      launch_fill(dtype_.nccl, const_cast<void*>(l.send), send_count_, m.rank, 0, pattern_.period(), m.stream);
    }
    enqueue_ops(1);
    for (std::size_t i = 0; i < per_.size(); ++i) {
      auto& m = members[i];
      auto& l = per_[i].launch;
      CUDA_CHECK(cudaSetDevice(m.device));
      if (inject != nullptr && std::atoi(inject) == m.rank && recv_count_ > 0)
        CUDA_CHECK(cudaMemsetAsync(l.recv, 0xff, elem_, m.stream));
      for (const auto& block : desc_.expected(count_, m.rank, world_->world(), root_))
        launch_count_wrong(dtype_.nccl, l.recv, block.out_offset, block.length, pattern_.table(block), per_[i].wrong,
                           m.stream);
    }
  }
  std::vector<unsigned long long> host(per_.size(), 0);
  for (std::size_t i = 0; i < per_.size(); ++i) {
    CUDA_CHECK(cudaSetDevice(members[i].device));
    CUDA_CHECK(cudaMemcpyAsync(&host[i], per_[i].wrong, sizeof(unsigned long long), cudaMemcpyDeviceToHost,
                               members[i].stream));
  }
  world_->wait("check of " + label_);
  long long local = 0;
  for (auto h : host) local += static_cast<long long>(h);
  return world_->sum_over_ranks(local);
}

Samples NcclBench::measure(int n_samples, int ops_per_sample) {
  PYBENCH_REQUIRE(n_samples >= 1 && ops_per_sample >= 1, "need at least one sample of one operation");
  const auto t0 = Clock::now();
  const bool graph = timing_ == "graph";
  if (graph) prepare_graphs(ops_per_sample);
  auto& members = world_->members();
  EventSet ev(members, 2 * static_cast<std::size_t>(n_samples));
  for (int s = 0; s < n_samples; ++s) {
    world_->enqueue_barrier();
    for (std::size_t i = 0; i < members.size(); ++i) {
      CUDA_CHECK(cudaSetDevice(members[i].device));
      CUDA_CHECK(cudaEventRecord(ev.at(i, 2 * s), members[i].stream));
    }
    if (graph) {
      for (std::size_t i = 0; i < members.size(); ++i) {
        CUDA_CHECK(cudaSetDevice(members[i].device));
        CUDA_CHECK(cudaGraphLaunch(static_cast<cudaGraphExec_t>(per_[i].graph_exec), members[i].stream));
      }
    } else {
      enqueue_ops(ops_per_sample);
    }
    for (std::size_t i = 0; i < members.size(); ++i) {
      CUDA_CHECK(cudaSetDevice(members[i].device));
      CUDA_CHECK(cudaEventRecord(ev.at(i, 2 * s + 1), members[i].stream));
    }
  }
  std::vector<std::vector<void*>> ends(members.size());
  for (std::size_t i = 0; i < members.size(); ++i)
    for (int s = 0; s < n_samples; ++s) ends[i].push_back(ev.at(i, 2 * s + 1));
  world_->wait(label_, &ends);
  std::vector<double> values(static_cast<std::size_t>(n_samples) + 1, 0.0);
  for (int s = 0; s < n_samples; ++s)
    for (std::size_t i = 0; i < members.size(); ++i)
      values[s] = std::max(values[s], elapsed_s(ev.at(i, 2 * s), ev.at(i, 2 * s + 1)) / ops_per_sample);
  values.back() = seconds_since(t0);
  values = world_->max_over_ranks(values);
  Samples out;
  out.wall_s = values.back();
  values.pop_back();
  out.per_op_s = std::move(values);
  return out;
}

// ---------------------------------------------------------------- copy bandwidth

CopyResult copy_times(const std::string& kind, int src, int dst, std::size_t bytes, int n_samples, int ops) {
  PYBENCH_REQUIRE(kind == "d2d" || kind == "h2d" || kind == "d2h" || kind == "p2p",
                  "unknown copy kind '" + kind + "'; use d2d, h2d, d2h or p2p");
  PYBENCH_REQUIRE(bytes > 0 && n_samples >= 1 && ops >= 1, "need a positive size, samples and operations");
  CopyResult out{{}, false};
  const int stream_dev = kind == "h2d" ? dst : src;
  void *from = nullptr, *to = nullptr;
  bool from_host = false, to_host = false;
  cudaStream_t stream = nullptr;
  auto cleanup = [&] {
    if (stream) cudaStreamDestroy(stream);
    if (from) from_host ? cudaFreeHost(from) : cudaFree(from);
    if (to) to_host ? cudaFreeHost(to) : cudaFree(to);
  };
  try {
    if (kind == "p2p") {
      PYBENCH_REQUIRE(src != dst, "p2p copy needs two distinct devices");
      int can = 0;
      CUDA_CHECK(cudaDeviceCanAccessPeer(&can, src, dst));
      if (can) {
        CUDA_CHECK(cudaSetDevice(src));
        const cudaError_t e = cudaDeviceEnablePeerAccess(dst, 0);
        if (e == cudaErrorPeerAccessAlreadyEnabled) cudaGetLastError();
        else CUDA_CHECK(e);
        out.peer_access = true;
      }
    }
    if (kind == "h2d") {
      CUDA_CHECK(cudaMallocHost(&from, bytes));
      from_host = true;
      std::fill_n(static_cast<char*>(from), bytes, 1);
    } else {
      CUDA_CHECK(cudaSetDevice(src));
      CUDA_CHECK(cudaMalloc(&from, bytes));
      CUDA_CHECK(cudaMemset(from, 1, bytes));
    }
    if (kind == "d2h") {
      CUDA_CHECK(cudaMallocHost(&to, bytes));
      to_host = true;
      std::fill_n(static_cast<char*>(to), bytes, 0);
    } else {
      CUDA_CHECK(cudaSetDevice(kind == "d2d" ? src : dst));
      CUDA_CHECK(cudaMalloc(&to, bytes));
      CUDA_CHECK(cudaMemset(to, 0, bytes));
    }
    CUDA_CHECK(cudaSetDevice(stream_dev));
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    auto one = [&] {
      if (kind == "p2p") CUDA_CHECK(cudaMemcpyPeerAsync(to, dst, from, src, bytes, stream));
      else CUDA_CHECK(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDefault, stream));
    };
    for (int i = 0; i < 2; ++i) one();
    CUDA_CHECK(cudaStreamSynchronize(stream));
    std::vector<cudaEvent_t> ev(2 * static_cast<std::size_t>(n_samples));
    for (auto& e : ev) CUDA_CHECK(cudaEventCreate(&e));
    for (int s = 0; s < n_samples; ++s) {
      CUDA_CHECK(cudaEventRecord(ev[2 * s], stream));
      for (int i = 0; i < ops; ++i) one();
      CUDA_CHECK(cudaEventRecord(ev[2 * s + 1], stream));
    }
    CUDA_CHECK(cudaStreamSynchronize(stream));
    for (int s = 0; s < n_samples; ++s) out.per_copy_s.push_back(elapsed_s(ev[2 * s], ev[2 * s + 1]) / ops);
    for (auto e : ev) cudaEventDestroy(e);
  } catch (...) {
    cleanup();
    throw;
  }
  cleanup();
  return out;
}

}  // namespace pybench::gpu
