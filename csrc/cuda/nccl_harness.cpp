#include "cuda/nccl_harness.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "common/native_error.hpp"
#include "cuda/cuda_check.hpp"
#include "cuda/gpu_kernels.hpp"
#include "cuda/nccl_setup.hpp"

namespace pybench::gpu {
namespace {

using nccl::api;
using Clock = std::chrono::steady_clock;


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


}  // namespace

// Events created on the device of each member, each owned (a failure part-way frees those made).
class EventSet {
 public:
  EventSet(const std::vector<NcclWorld::Member>& members, std::size_t per_member) : n_(per_member) {
    for (const auto& m : members) {
      CUDA_CHECK(cudaSetDevice(m.device));
      for (std::size_t i = 0; i < per_member; ++i) events_.push_back(make_event());
    }
  }
  cudaEvent_t at(std::size_t member, std::size_t i) const { return events_[member * n_ + i].get(); }

 private:
  std::size_t n_;
  std::vector<Event> events_;
};

// ---------------------------------------------------------------- NcclWorld

NcclWorld::NcclWorld(const std::vector<int>& devices, double timeout_s) : timeout_s_(timeout_s) {
  PYBENCH_REQUIRE(!devices.empty(), "no GPU to build a communicator on");
  world_ = static_cast<int>(devices.size());
  std::vector<nccl::Comm> comms(devices.size(), nullptr);
  NCCL_CHECK(api().CommInitAll(comms.data(), world_, devices.data()));
  int adopted = 0;  // comms[0, adopted) belong to members_ and are freed by teardown()
  try {
    for (int i = 0; i < world_; ++i) {
      CUDA_CHECK(cudaSetDevice(devices[i]));
      cudaStream_t s;
      CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
      members_.push_back({devices[i], i, comms[i], s, nullptr});
      adopted = i + 1;
    }
    init_scratch();
  } catch (...) {
    teardown();
    for (int i = adopted; i < world_; ++i) api().CommDestroy(comms[i]);
    throw;
  }
}

NcclWorld::NcclWorld(int rank, int world, int device, const nccl::UniqueId& id, double timeout_s)
    : world_(world), multi_process_(true), timeout_s_(timeout_s) {
  CUDA_CHECK(cudaSetDevice(device));
  // Under the deadline (nccl_setup.hpp): a rank that never joins ends in one line, not a hang.
  const nccl::SetupResult setup = nccl::setup_communicator(api(), world, id, rank, timeout_s);
  nccl::Comm comm = setup.comm;
  setup_bounded_ = setup.bounded;
  try {
    cudaStream_t s;
    CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    members_.push_back({device, rank, comm, s, nullptr});
    init_scratch();
  } catch (...) {
    if (members_.empty()) api().CommDestroy(comm);
    teardown();
    throw;
  }
}

void NcclWorld::init_scratch() {
  for (auto& m : members_) {
    CUDA_CHECK(cudaSetDevice(m.device));
    CUDA_CHECK(cudaMalloc(&m.scratch, 256));
    CUDA_CHECK(cudaMemset(m.scratch, 0, 256));
  }
  pinned(64 << 10);  // allocated now, so the first reduction never allocates
}

NcclWorld::~NcclWorld() { teardown(); }

void NcclWorld::teardown() noexcept {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  latch_.release();
  graphs_.destroy_all();  // ncclCommDestroy, like abort, waits for graphs that captured NCCL work
  if (reduce_buf_ && !members_.empty()) {
    cudaSetDevice(members_.front().device);
    if (!aborted_) cudaStreamSynchronize(members_.front().stream);
    cudaFree(reduce_buf_);
  }
  for (auto& m : members_) {
    cudaSetDevice(m.device);
    if (!aborted_) {
      cudaStreamSynchronize(m.stream);
      api().CommDestroy(m.comm);
    }
    if (m.scratch) cudaFree(m.scratch);
    cudaStreamDestroy(m.stream);
  }
  members_.clear();
  reduce_buf_ = nullptr;
  if (pinned_) cudaFreeHost(pinned_);
  pinned_ = nullptr;
}

std::unique_lock<std::recursive_mutex> NcclWorld::lock_for(const std::string& what) {
  std::unique_lock<std::recursive_mutex> lock(mutex_);
  if (aborted_) fail_aborted(what);
  return lock;
}

void NcclWorld::fail_aborted(const std::string& what) const {
  PYBENCH_FAIL("the NCCL communicators were aborted (earlier in this run, or by another thread); cannot run " + what);
}

bool NcclWorld::aborted() const {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  return aborted_;
}

void NcclWorld::abort() {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  abort_locked();
}

void NcclWorld::abort_locked() {
  if (aborted_) return;
  aborted_ = true;
  latch_.release();
  abort_after_graphs(graphs_, [this] {
    for (auto& m : members_) {
      cudaSetDevice(m.device);
      api().CommAbort(m.comm);
    }
  });
}

void* NcclWorld::pinned(std::size_t bytes) {
  if (bytes > pinned_bytes_) {
    if (pinned_) cudaFreeHost(pinned_);
    pinned_ = nullptr;
    pinned_bytes_ = 0;
    const std::size_t n = std::max<std::size_t>(bytes, 64 << 10);
    CUDA_CHECK(cudaHostAlloc(&pinned_, n, cudaHostAllocPortable));
    pinned_bytes_ = n;
  }
  return pinned_;
}

void* NcclWorld::device_scratch(std::size_t bytes) {
  if (bytes > reduce_bytes_) {
    auto& m = members_.front();
    CUDA_CHECK(cudaSetDevice(m.device));
    if (reduce_buf_) {
      CUDA_CHECK(cudaStreamSynchronize(m.stream));
      cudaFree(reduce_buf_);
    }
    reduce_buf_ = nullptr;
    reduce_bytes_ = 0;
    const std::size_t n = std::max<std::size_t>(bytes, 64 << 10);
    CUDA_CHECK(cudaMalloc(&reduce_buf_, n));
    reduce_bytes_ = n;
  }
  return reduce_buf_;
}

void NcclWorld::wait(const std::string& what, const std::vector<std::vector<void*>>* milestones, bool spin) {
  auto t0 = Clock::now();
  std::vector<std::size_t> reached(members_.size(), 0);
  for (int polls = 0;; ++polls) {
    {
      // One poll under the lock: an abort() from another thread lands between two polls.
      std::lock_guard<std::recursive_mutex> lock(mutex_);
      if (aborted_) fail_aborted(what);
      if (poll(what, milestones, reached, t0)) return;
      const double waited = seconds_since(t0);
      if (timeout_s_ > 0 && waited > timeout_s_) {
        abort_locked();
        PYBENCH_FAIL(what + " made no progress for " + std::to_string(static_cast<int>(waited)) +
                     " s (--timeout); NCCL communicators aborted (a rank stopped answering or the network is stuck)");
      }
    }
    // Spin for the first ~1000 polls (short operations), then sleep lightly; host-clock
    // timing never sleeps, it yields as nccl-tests' testStreamSynchronize does.
    if (spin) std::this_thread::yield();
    else if (polls > 1000) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

bool NcclWorld::poll(const std::string& what, const std::vector<std::vector<void*>>* milestones,
                     std::vector<std::size_t>& reached, Clock::time_point& t0) {
  if (milestones != nullptr) {
    // Events on one stream complete in order: advance each member's count, and
    // restart the no-progress clock whenever any of them moves.
    for (std::size_t i = 0; i < members_.size() && i < milestones->size(); ++i) {
      const auto& evs = (*milestones)[i];
      while (reached[i] < evs.size() && cudaEventQuery(static_cast<cudaEvent_t>(evs[reached[i]])) == cudaSuccess) {
        ++reached[i];
        t0 = Clock::now();
      }
    }
  }
  bool all_done = true;
  for (auto& m : members_) {
    cudaSetDevice(m.device);
    const cudaError_t e = cudaStreamQuery(m.stream);
    if (e == cudaSuccess) continue;
    const std::string where = " on rank " + std::to_string(m.rank) + " (device " + std::to_string(m.device) + ")";
    if (e != cudaErrorNotReady) {
      abort_locked();
      PYBENCH_FAIL(what + " failed" + where + ": " + cudaGetErrorString(e) + " (" + cudaGetErrorName(e) +
                   "); communicators aborted");
    }
    all_done = false;
    nccl::Result async = nccl::kSuccess;
    const nccl::Result r = api().CommGetAsyncError(m.comm, &async);
    if (r != nccl::kSuccess) {  // no state to trust: the communicator itself is in doubt
      const std::string text = api().GetErrorString(r);
      abort_locked();
      PYBENCH_FAIL("ncclCommGetAsyncError failed during " + what + where + ": " + text + " (ncclResult " +
                   std::to_string(static_cast<int>(r)) + "); communicators aborted");
    }
    if (async != nccl::kSuccess && async != nccl::kInProgress) {
      const std::string text = api().GetErrorString(async);
      abort_locked();
      PYBENCH_FAIL("NCCL reported an asynchronous error during " + what + where + ": " + text +
                   "; communicators aborted");
    }
  }
  return all_done;
}

void NcclWorld::enqueue_barrier() {
  const auto lock = lock_for("the barrier before a sample");
  in_group([&] {
    for (auto& m : members_) {
      const nccl::Result r = api().AllReduce(m.scratch, m.scratch, 1, nccl::kInt32, nccl::kMax, m.comm, m.stream);
      if (r != nccl::kSuccess) return r;
    }
    return nccl::kSuccess;
  });
}

template <typename T>
static std::vector<T> reduce_over_ranks(NcclWorld& w, const std::vector<T>& local, nccl::DataType dt, nccl::RedOp op) {
  if (!w.multi_process() || local.empty()) return local;
  // Pinned host memory and a kept device buffer: the copies are truly asynchronous,
  // so wait() polls NCCL's errors and the timeout while the reduction runs, and
  // nothing here allocates or frees (cudaFree would synchronise the device).
  auto& m = w.members().front();
  const std::size_t bytes = local.size() * sizeof(T);
  T* host = nullptr;
  {
    const auto lock = w.lock_for("agreeing on results across ranks");
    void* buf = w.device_scratch(bytes);
    host = static_cast<T*>(w.pinned(bytes));
    std::copy(local.begin(), local.end(), host);
    CUDA_CHECK(cudaSetDevice(m.device));
    CUDA_CHECK(cudaMemcpyAsync(buf, host, bytes, cudaMemcpyHostToDevice, m.stream));
    NCCL_CHECK(api().AllReduce(buf, buf, local.size(), dt, op, m.comm, m.stream));
    CUDA_CHECK(cudaMemcpyAsync(host, buf, bytes, cudaMemcpyDeviceToHost, m.stream));
  }
  w.wait("agreeing on results across ranks");
  return std::vector<T>(host, host + local.size());
}

std::vector<double> NcclWorld::max_over_ranks(const std::vector<double>& local) {
  return reduce_over_ranks(*this, local, nccl::kFloat64, nccl::kMax);
}

std::vector<long long> NcclWorld::max_over_ranks_ll(const std::vector<long long>& local) {
  return reduce_over_ranks(*this, local, nccl::kInt64, nccl::kMax);
}

std::vector<double> NcclWorld::mean_over_ranks(const std::vector<double>& local) {
  std::vector<double> sum = reduce_over_ranks(*this, local, nccl::kFloat64, nccl::kSum);
  if (multi_process_)
    for (auto& v : sum) v /= world_;
  return sum;
}

long long NcclWorld::sum_over_ranks(long long local) {
  return reduce_over_ranks(*this, std::vector<long long>{local}, nccl::kInt64, nccl::kSum).front();
}

std::vector<double> NcclWorld::pair_times(int src, int dst, std::size_t bytes, int n_samples, int ops,
                                          bool pingpong) {
  PYBENCH_REQUIRE(!multi_process_, "the pair matrix runs in single-process mode (one process driving every GPU)");
  PYBENCH_REQUIRE(src >= 0 && src < world_ && dst >= 0 && dst < world_ && src != dst,
                  "pair " + std::to_string(src) + " -> " + std::to_string(dst) + " is not two distinct devices of " +
                      std::to_string(world_));
  PYBENCH_REQUIRE(n_samples >= 1 && ops >= 1, "need at least one sample of one operation");
  Member& a = members_[src];
  Member& b = members_[dst];
  const std::size_t n = std::max<std::size_t>(bytes, 1);
  DeviceBuffer send = device_alloc(a.device, n);
  CUDA_CHECK(cudaMemset(send.get(), 1, n));
  DeviceBuffer recv = device_alloc(b.device, n);
  void* sbuf = send.get();
  void* rbuf = recv.get();
  auto one = [&] {
    in_group([&] {
      const nccl::Result r = api().Send(sbuf, bytes, nccl::kUint8, b.rank, a.comm, a.stream);
      if (r != nccl::kSuccess) return r;
      return api().Recv(rbuf, bytes, nccl::kUint8, a.rank, b.comm, b.stream);
    });
    if (!pingpong) return;
    // The reply: b's send follows its receive on b's stream, and a's receive waits for it,
    // so each iteration is one round trip, not a launch-rate-bound stream of sends.
    in_group([&] {
      const nccl::Result r = api().Send(rbuf, bytes, nccl::kUint8, a.rank, b.comm, b.stream);
      if (r != nccl::kSuccess) return r;
      return api().Recv(sbuf, bytes, nccl::kUint8, b.rank, a.comm, a.stream);
    });
  };
  const std::string pair = std::to_string(src) + " -> " + std::to_string(dst);
  {
    const auto lock = lock_for("warm-up of send " + pair);
    for (int i = 0; i < 3; ++i) one();  // the first send on a pair sets up its connection: never timed
  }
  wait("warm-up of send " + pair);
  EventSet ev(std::vector<Member>{a, b}, 2 * static_cast<std::size_t>(n_samples));
  {
    const auto lock = lock_for("send " + pair);
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
  }
  wait("send " + pair);
  std::vector<double> out;
  for (int s = 0; s < n_samples; ++s) {
    const double t = std::max(elapsed_s(ev.at(0, 2 * s), ev.at(0, 2 * s + 1)),
                              elapsed_s(ev.at(1, 2 * s), ev.at(1, 2 * s + 1)));
    out.push_back(t / ops / (pingpong ? 2 : 1));  // ping-pong: half a round trip
  }
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
  PYBENCH_REQUIRE(timing == "batched" || timing == "per-op" || timing == "graph" || timing == "host" ||
                      timing == "host-graph",
                  "unknown timing mode '" + timing + "'; use batched, per-op, graph, host or host-graph");
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
  // One stride for both buffers, 256-byte aligned as cudaMalloc's own; enough slots
  // that a pool is at least kRotationBytes (one slot for sizes as large as that).
  const std::size_t unit = std::max(send_count_, recv_count_) * elem_;
  stride_ = (unit + 255) / 256 * 256;
  slots_ = stride_ >= kRotationBytes ? 1 : kRotationBytes / stride_;

  // The buffers' owners free whatever was made if a step below throws.
  per_.resize(world_->members().size());
  {
    const auto lock = world_->lock_for("buffer set-up of " + label_);
    for (std::size_t i = 0; i < per_.size(); ++i) allocate(i);
  }
  world_->wait("buffer set-up of " + label_);
}

void NcclBench::allocate(std::size_t i) {
  auto& m = world_->members()[i];
  auto& p = per_[i];
  const int n = world_->world();
  const std::size_t pool = slots_ * stride_;
  // Every byte of every slot is written once here, before any timing.
  p.send_alloc = device_alloc(m.device, pool);
  CUDA_CHECK(cudaMemsetAsync(p.send_alloc.get(), 0, pool, m.stream));
  char* send = static_cast<char*>(p.send_alloc.get());
  char* recv = nullptr;
  if (in_place_) {
    std::size_t soff = 0, roff = 0;
    desc_.in_place_offsets(count_, m.rank, n, &soff, &roff);
    recv = send + roff * elem_;
    send += soff * elem_;
    alloc_bytes_ = pool;
  } else {
    p.recv_alloc = device_alloc(m.device, pool);
    CUDA_CHECK(cudaMemsetAsync(p.recv_alloc.get(), 0, pool, m.stream));
    recv = static_cast<char*>(p.recv_alloc.get());
    alloc_bytes_ = 2 * pool;
  }
  p.wrong = device_alloc(m.device, sizeof(unsigned long long));
  p.launch = NcclLaunch{send, recv, count_, dtype_.nccl, elem_, op_, m.comm, m.stream, m.rank, n, root_};
  CUDA_CHECK(cudaMemsetAsync(recv, 0xff, recv_count_ * elem_, m.stream));
  launch_fill(dtype_.nccl, send, send_count_, m.rank, 0, pattern_.period(), m.stream);
}

NcclBench::~NcclBench() {
  free_graphs();
  // Work still queued may use the buffers: let it finish before their owners free them.
  if (world_->aborted()) return;
  for (std::size_t i = 0; i < per_.size(); ++i) {
    cudaSetDevice(world_->members()[i].device);
    cudaStreamSynchronize(world_->members()[i].stream);
  }
}

bool NcclBench::latched(int ops_per_sample) const {
  // PYBENCH_LATCH=0 turns the latch off: a diagnostic, to show how much of a figure is the host's launch gap.
  const char* env = std::getenv("PYBENCH_LATCH");
  if (env != nullptr && std::string(env) == "0") return false;
  if (host_timed()) return false;  // the host clock times the enqueue too, as nccl-tests'
  return timing_ == "graph" || ops_per_sample <= kMaxLatchedOps;
}

NcclLaunch NcclBench::launch_at(std::size_t member, std::size_t slot) const {
  NcclLaunch l = per_[member].launch;
  const std::size_t off = slot * stride_;
  l.send = static_cast<const char*>(l.send) + off;
  l.recv = static_cast<char*>(l.recv) + off;
  return l;
}

void NcclBench::enqueue_slot(std::size_t slot) {
  // One device: no outer group, as nccl-tests with one GPU (a group per op costs host time
  // that shows in launch-bound figures); several devices need one group to launch together.
  if (per_.size() == 1) {
    NCCL_CHECK(desc_.run(launch_at(0, slot)));
    return;
  }
  in_group([&] {
    for (std::size_t i = 0; i < per_.size(); ++i) {
      const nccl::Result r = desc_.run(launch_at(i, slot));
      if (r != nccl::kSuccess) return r;
    }
    return nccl::kSuccess;
  });
}

void NcclBench::enqueue_ops(int k) {
  for (int i = 0; i < k; ++i) {
    const std::size_t slot = next_slot_;
    next_slot_ = (next_slot_ + 1) % slots_;
    enqueue_slot(slot);
  }
}

void NcclBench::free_graphs() {
  for (auto& p : per_) {
    if (p.graph_id >= 0) world_->graphs().release(p.graph_id);
    p.graph_id = -1;
    p.graph_exec = nullptr;
  }
  graph_ops_ = 0;
}

void NcclBench::prepare_graphs(int k) {
  if (graph_ops_ == k) return;
  free_graphs();
  auto& members = world_->members();
  auto lock = world_->lock_for("capture of the CUDA graph of " + label_);
  for (auto& m : members) {
    CUDA_CHECK(cudaSetDevice(m.device));
    // ThreadLocal, as nccl-tests and PyTorch: NCCL's own threads may allocate while we capture.
    CUDA_CHECK(cudaStreamBeginCapture(m.stream, cudaStreamCaptureModeThreadLocal));
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
    const int dev = members[i].device;
    CUDA_CHECK(cudaSetDevice(dev));
    cudaGraph_t g = nullptr;
    CUDA_CHECK(cudaStreamEndCapture(members[i].stream, &g));
    cudaGraphExec_t exec = nullptr;
    const cudaError_t e = cudaGraphInstantiate(&exec, g, 0);
    if (e != cudaSuccess) cudaGraphDestroy(g);
    CUDA_CHECK(e);
    // The world owns it from here: it destroys every graph before aborting the communicators.
    per_[i].graph_id = world_->graphs().add([dev, g, exec] {
      cudaSetDevice(dev);
      cudaGraphExecDestroy(exec);
      cudaGraphDestroy(g);
    });
    per_[i].graph_exec = exec;
    CUDA_CHECK(cudaGraphUpload(exec, members[i].stream));
  }
  graph_ops_ = k;
  // One untimed replay: the first launch of a graph pays for its set-up.
  for (std::size_t i = 0; i < members.size(); ++i) {
    CUDA_CHECK(cudaSetDevice(members[i].device));
    CUDA_CHECK(cudaGraphLaunch(static_cast<cudaGraphExec_t>(per_[i].graph_exec), members[i].stream));
  }
  lock.unlock();
  world_->wait("first replay of the CUDA graph of " + label_);
}

void NcclBench::warmup(int n) {
  {
    const auto lock = world_->lock_for("warm-up of " + label_);
    enqueue_ops(n);
  }
  world_->wait("warm-up of " + label_);
}

long long NcclBench::check(int iters) {
  // An in-place form whose result no order of transfers defines (all-to-all, send/recv): not checked, -1
  // (every rank returns it alike, so none waits in the sum below).
  if (in_place_ && !desc_.in_place_checked) return -1;
  // Test hook, as the MPI harness's: PYBENCH_INJECT_WRONG=<rank> overwrites the
  // first output element of that rank with 0xff bytes after each check iteration.
  const char* inject = std::getenv("PYBENCH_INJECT_WRONG");
  auto& members = world_->members();
  auto lock = world_->lock_for("check of " + label_);
  for (std::size_t i = 0; i < per_.size(); ++i) {
    CUDA_CHECK(cudaSetDevice(members[i].device));
    CUDA_CHECK(cudaMemsetAsync(per_[i].wrong.get(), 0, sizeof(unsigned long long), members[i].stream));
  }
  for (int it = 0; it < iters; ++it) {
    for (std::size_t i = 0; i < per_.size(); ++i) {
      auto& m = members[i];
      auto& l = per_[i].launch;
      CUDA_CHECK(cudaSetDevice(m.device));
      CUDA_CHECK(cudaMemsetAsync(l.recv, 0xff, recv_count_ * elem_, m.stream));  // NaN / -1: never a pattern value
      launch_fill(dtype_.nccl, const_cast<void*>(l.send), send_count_, m.rank, 0, pattern_.period(), m.stream);
    }
    enqueue_slot(0);  // the checked data lives in slot 0
    for (std::size_t i = 0; i < per_.size(); ++i) {
      auto& m = members[i];
      auto& l = per_[i].launch;
      CUDA_CHECK(cudaSetDevice(m.device));
      if (inject != nullptr && std::atoi(inject) == m.rank && recv_count_ > 0)
        CUDA_CHECK(cudaMemsetAsync(l.recv, 0xff, elem_, m.stream));
      for (const auto& block : desc_.expected(count_, m.rank, world_->world(), root_))
        launch_count_wrong(dtype_.nccl, l.recv, block.out_offset, block.length, pattern_.table(block),
                           static_cast<unsigned long long*>(per_[i].wrong.get()), m.stream);
    }
  }
  // Into pinned memory: the copies stay asynchronous and wait() keeps polling.
  auto* host = static_cast<unsigned long long*>(world_->pinned(per_.size() * sizeof(unsigned long long)));
  for (std::size_t i = 0; i < per_.size(); ++i) {
    CUDA_CHECK(cudaSetDevice(members[i].device));
    CUDA_CHECK(cudaMemcpyAsync(&host[i], per_[i].wrong.get(), sizeof(unsigned long long), cudaMemcpyDeviceToHost,
                               members[i].stream));
  }
  lock.unlock();
  world_->wait("check of " + label_);
  long long local = 0;
  for (std::size_t i = 0; i < per_.size(); ++i) local += static_cast<long long>(host[i]);
  return world_->sum_over_ranks(local);
}

void NcclBench::enqueue_sample(const EventSet& ev, int s, int ops_per_sample, bool latch) {
  auto& members = world_->members();
  HostLatch& gate = world_->latch();
  LatchRelease release(latch ? &gate : nullptr);
  if (latch) {
    std::vector<std::pair<int, cudaStream_t>> streams;
    for (auto& m : members) streams.emplace_back(m.device, m.stream);
    gate.hold(streams);  // the GPU waits here until the whole sample is enqueued
  }
  world_->enqueue_barrier();
  for (std::size_t i = 0; i < members.size(); ++i) {
    CUDA_CHECK(cudaSetDevice(members[i].device));
    CUDA_CHECK(cudaEventRecord(ev.at(i, 2 * s), members[i].stream));
  }
  if (timing_ == "graph") {
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

Samples NcclBench::measure(int n_samples, int ops_per_sample) {
  PYBENCH_REQUIRE(n_samples >= 1 && ops_per_sample >= 1, "need at least one sample of one operation");
  PYBENCH_REQUIRE(!world_->aborted(), "the NCCL communicators were aborted earlier in this run; cannot time " + label_);
  if (host_timed()) return measure_host(n_samples, ops_per_sample);
  const auto t0 = Clock::now();
  if (timing_ == "graph") prepare_graphs(ops_per_sample);
  auto& members = world_->members();
  const bool latch = latched(ops_per_sample);
  EventSet ev(members, 2 * static_cast<std::size_t>(n_samples));
  {
    const auto lock = world_->lock_for(label_);
    world_->latch().clear_expired();
    for (int s = 0; s < n_samples; ++s) enqueue_sample(ev, s, ops_per_sample, latch);
  }
  std::vector<std::vector<void*>> ends(members.size());
  for (std::size_t i = 0; i < members.size(); ++i)
    for (int s = 0; s < n_samples; ++s) ends[i].push_back(ev.at(i, 2 * s + 1));
  world_->wait(label_, &ends);
  PYBENCH_REQUIRE(!(latch && world_->latch().expired()),
                  "timing of " + label_ + ": the GPU waited over " + std::to_string(HostLatch::kTimeoutS) +
                      " s for the host to enqueue one sample; the samples are not GPU times (host overloaded?)");
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

Samples NcclBench::measure_host(int n_samples, int ops_per_sample) {
  // nccl-tests' timing (common.cu, BenchTime): the ranks aligned and idle, then the host
  // clock around `ops` operations enqueued back to back (host-graph: one replay of a CUDA
  // graph of them, as its -G) and one wait for the stream(s); each rank's time is averaged
  // over ranks (its -a 1, the default). Here once per sample.
  const auto t0 = Clock::now();
  const bool graph = timing_ == "host-graph";
  if (graph) prepare_graphs(ops_per_sample);
  auto& members = world_->members();
  std::vector<double> values(static_cast<std::size_t>(n_samples), 0.0);
  for (int s = 0; s < n_samples; ++s) {
    world_->enqueue_barrier();
    world_->wait("the barrier before a sample of " + label_, nullptr, true);
    const auto start = Clock::now();
    {
      const auto lock = world_->lock_for(label_);
      if (!graph) enqueue_ops(ops_per_sample);
      for (std::size_t i = 0; graph && i < members.size(); ++i) {
        CUDA_CHECK(cudaSetDevice(members[i].device));
        CUDA_CHECK(cudaGraphLaunch(static_cast<cudaGraphExec_t>(per_[i].graph_exec), members[i].stream));
      }
    }
    world_->wait(label_, nullptr, true);
    values[s] = seconds_since(start) / ops_per_sample;
  }
  Samples out;
  out.per_op_s = world_->mean_over_ranks(values);
  out.wall_s = world_->max_over_ranks(std::vector<double>{seconds_since(t0)}).front();
  return out;
}

}  // namespace pybench::gpu
