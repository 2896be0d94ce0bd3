// Runs a blocking call on its own thread and waits for it at most `timeout_s`
// (0 or less: forever). ncclCommInitRank blocks until every rank has joined, so
// a rank that never starts would hang the others for ever; with a deadline they
// fail in one line instead and the runner aborts the job. On time-out the call's
// thread is left behind (detached): nothing can interrupt it, and the process is
// about to stop anyway. Plain C++, so a CPU test drives it with a sleeping call.
#pragma once

#include <chrono>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include "common/native_error.hpp"

namespace pybench::gpu {

template <typename T>
T call_with_deadline(std::function<T()> call, double timeout_s, const std::string& what) {
  auto task = std::make_shared<std::packaged_task<T()>>(std::move(call));
  std::future<T> result = task->get_future();
  std::thread worker([task] { (*task)(); });
  if (timeout_s > 0 &&
      result.wait_for(std::chrono::duration<double>(timeout_s)) != std::future_status::ready) {
    worker.detach();
    std::ostringstream limit;
    limit << timeout_s;
    PYBENCH_FAIL(what + " did not finish within its timeout of " + limit.str() +
                 " s: a rank did not join (not started, crashed, or unreachable)");
  }
  worker.join();
  return result.get();  // rethrows what the call threw
}

}  // namespace pybench::gpu
