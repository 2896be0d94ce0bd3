// The CUDA graphs alive on one NCCL world. NCCL's ncclCommAbort/ncclCommDestroy
// wait until every graph that captured an NCCL operation on the communicator is
// destroyed, so a world that aborts while a bench still owns its graphs (an
// error inside wait(), or the runner aborting while a traceback holds the bench)
// would hang. Benches register each graph here; the world destroys every live one
// first, then aborts (abort_after_graphs). A bench releasing a graph the world
// already destroyed does nothing. Plain C++ (no CUDA headers): the destroy
// actions are callbacks, which also lets a CPU test check the order.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <mutex>
#include <utility>

namespace pybench::gpu {

class GraphRegistry {
 public:
  using Destroy = std::function<void()>;

  // Registers a live graph; `destroy` frees it (exec and graph) exactly once.
  int add(Destroy destroy) {
    std::lock_guard<std::mutex> lock(mutex_);
    const int id = next_++;
    live_.emplace(id, std::move(destroy));
    return id;
  }
  // Frees graph `id` now, unless it was freed already (then nothing happens).
  void release(int id) {
    Destroy d;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = live_.find(id);
      if (it == live_.end()) return;
      d = std::move(it->second);
      live_.erase(it);
    }
    d();
  }
  // Frees every live graph, oldest first; returns how many.
  std::size_t destroy_all() {
    std::map<int, Destroy> all;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      all.swap(live_);
    }
    for (auto& kv : all) kv.second();
    return all.size();
  }
  std::size_t live() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return live_.size();
  }

 private:
  mutable std::mutex mutex_;
  std::map<int, Destroy> live_;
  int next_ = 0;
};

// The tear-down order NCCL needs: every captured graph first, then the communicators.
inline void abort_after_graphs(GraphRegistry& graphs, const std::function<void()>& abort_comms) {
  graphs.destroy_all();
  abort_comms();
}

}  // namespace pybench::gpu
