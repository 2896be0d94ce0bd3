// A stuck collective must not hold every rank forever. The watchdog thread
// watches the operation the main thread is in; when one makes no progress for
// the timeout it names the rank that stopped answering, lets Python save what
// was measured, and ends this process, so the launcher ends the job.
//
// Naming the culprit uses a per-host heartbeat table in shared memory (one slot
// per local rank: pid, global rank, operations started): a local rank whose
// process is gone or stopped, or that is behind the others, is the one. When all
// local ranks wait alike, the culprit is on another host.
//
// Threads: the main thread arms, disarms, configures and opens the table; the
// watchdog thread reads. The deadline and timeout are atomics (the per-operation
// path), everything else is guarded by one mutex. The instance is never
// destroyed, so the thread never sees a destructed object during exit.
//
// One behaviour: a timeout <= 0 (or NaN) disables it; a huge one (1e12 s, inf)
// saturates the deadline at "never" instead of overflowing into the past.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

namespace pybench {

class Watchdog {
 public:
  static Watchdog& instance();

  // timeout_s <= 0 disables it. on_timeout gets the one-line message and may
  // save files; it is given a few seconds before the process exits anyway.
  void configure(double timeout_s, std::function<void(const std::string&)> on_timeout);
  // Heartbeat table shared by the ranks of this host (name agreed over MPI). Local rank 0
  // creates it exclusively (false when the name exists: never adopt another user's file);
  // the others open the one it created. Returns whether the table is open.
  bool open_heartbeat(const std::string& shm_name, int local_rank, int local_size, int rank,
                      const std::vector<std::string>& hosts_by_rank);
  void close_heartbeat();

  void arm(const std::string& what);  // an operation starts now
  void disarm();
  double timeout_s() const { return timeout_s_.load(std::memory_order_relaxed); }
  // Which rank stopped answering, as the watchdog prints it.
  std::string diagnose() const;

  // The steady-clock deadline (ns) of an operation started at now_ns, by the rule
  // of common/deadline.hpp: saturates at INT64_MAX ("never"); 0 when disabled.
  static std::int64_t deadline_after(std::int64_t now_ns, double timeout_s);

 private:
  Watchdog() = default;
  ~Watchdog() = default;
  void loop();
  [[noreturn]] void fire();
  void close_heartbeat_locked();
  std::string diagnose_locked() const;

  std::atomic<double> timeout_s_{0};
  std::atomic<std::int64_t> deadline_ns_{0};  // 0: not armed
  std::atomic<bool> thread_started_{false};

  mutable std::mutex mutex_;  // guards every field below
  std::condition_variable wake_;
  std::function<void(const std::string&)> on_timeout_;
  std::string what_;
  struct Slot;
  Slot* slots_ = nullptr;
  int local_rank_ = 0, local_size_ = 0, rank_ = 0;
  std::string shm_name_;
  std::vector<std::string> hosts_;
};

// Arms the watchdog for one operation and disarms it however the scope ends,
// exceptions included: a caller that catches the error must not be killed later.
class WatchGuard {
 public:
  explicit WatchGuard(const std::string& what) { Watchdog::instance().arm(what); }
  ~WatchGuard() { Watchdog::instance().disarm(); }
  WatchGuard(const WatchGuard&) = delete;
  WatchGuard& operator=(const WatchGuard&) = delete;
};

}  // namespace pybench
