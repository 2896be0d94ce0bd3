#include "common/watchdog.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <future>
#include <memory>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include "common/deadline.hpp"

namespace pybench {

struct Watchdog::Slot {
  std::atomic<int> pid;
  std::atomic<int> rank;
  std::atomic<std::uint64_t> ops_started;
};

namespace {

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// 'T' (stopped), 't' (traced), 'Z' (zombie) or '?' when the process is gone.
char process_state(int pid) {
  if (pid <= 0 || kill(pid, 0) != 0) return '?';
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string content((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const auto close = content.rfind(')');
  if (close == std::string::npos || close + 2 >= content.size()) return 'R';
  return content[close + 2];
}

}  // namespace

Watchdog& Watchdog::instance() {
  // Leaked on purpose: the watchdog thread may still run while static objects are
  // destroyed at exit, so the object it reads must outlive them.
  static Watchdog* w = new Watchdog();
  return *w;
}

std::int64_t Watchdog::deadline_after(std::int64_t now_ns, double timeout_s) {
  return pybench::deadline_after(now_ns, timeout_s);
}

void Watchdog::configure(double timeout_s, std::function<void(const std::string&)> on_timeout) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    on_timeout_ = std::move(on_timeout);
    timeout_s_.store(timeout_s > 0 ? timeout_s : 0, std::memory_order_relaxed);
  }
  wake_.notify_all();  // a running thread picks up the new poll interval
  if (timeout_s > 0 && !thread_started_.exchange(true)) std::thread([this] { loop(); }).detach();
}

bool Watchdog::open_heartbeat(const std::string& shm_name, int local_rank, int local_size, int rank,
                              const std::vector<std::string>& hosts_by_rank) {
  std::lock_guard<std::mutex> lock(mutex_);
  close_heartbeat_locked();
  const std::size_t bytes = sizeof(Slot) * static_cast<std::size_t>(local_size);
  const bool creator = local_rank == 0;
  // O_EXCL for the creator: a table planted under this name by anyone else is never adopted.
  const int fd = shm_open(shm_name.c_str(), creator ? (O_CREAT | O_EXCL | O_RDWR) : O_RDWR, 0600);
  if (fd < 0) return false;  // no shared memory: the watchdog still fires, it just names no culprit
  struct stat st {};
  const bool sized = creator ? ftruncate(fd, static_cast<off_t>(bytes)) == 0
                             : fstat(fd, &st) == 0 && static_cast<std::size_t>(st.st_size) >= bytes;
  if (!sized) {
    close(fd);
    if (creator) shm_unlink(shm_name.c_str());
    return false;
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) {
    if (creator) shm_unlink(shm_name.c_str());
    return false;
  }
  slots_ = static_cast<Slot*>(p);
  shm_name_ = shm_name;
  local_rank_ = local_rank;
  local_size_ = local_size;
  rank_ = rank;
  hosts_ = hosts_by_rank;
  slots_[local_rank].pid.store(getpid());
  slots_[local_rank].rank.store(rank);
  slots_[local_rank].ops_started.store(0);
  return true;
}

void Watchdog::close_heartbeat() {
  std::lock_guard<std::mutex> lock(mutex_);
  close_heartbeat_locked();
}

void Watchdog::close_heartbeat_locked() {
  if (!slots_) return;
  munmap(slots_, sizeof(Slot) * static_cast<std::size_t>(local_size_));
  slots_ = nullptr;
  if (local_rank_ == 0) shm_unlink(shm_name_.c_str());
}

void Watchdog::arm(const std::string& what) {
  const double timeout = timeout_s();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (slots_) slots_[local_rank_].ops_started.fetch_add(1, std::memory_order_relaxed);
    if (timeout <= 0) return;
    what_ = what;
  }
  deadline_ns_.store(deadline_after(now_ns(), timeout), std::memory_order_release);
}

void Watchdog::disarm() { deadline_ns_.store(0, std::memory_order_release); }

std::string Watchdog::diagnose() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return diagnose_locked();
}

std::string Watchdog::diagnose_locked() const {
  auto host_of = [this](int r) {
    return r >= 0 && r < static_cast<int>(hosts_.size()) ? hosts_[r] : std::string("?");
  };
  if (!slots_) return "another rank stopped answering (no heartbeat table to say which)";
  std::vector<std::string> named;
  std::uint64_t min_ops = UINT64_MAX, max_ops = 0;
  for (int i = 0; i < local_size_; ++i) {
    const std::uint64_t ops = slots_[i].ops_started.load();
    min_ops = std::min(min_ops, ops);
    max_ops = std::max(max_ops, ops);
  }
  for (int i = 0; i < local_size_; ++i) {
    if (i == local_rank_) continue;
    const int pid = slots_[i].pid.load(), r = slots_[i].rank.load();
    const char state = process_state(pid);
    const std::string who = "rank " + std::to_string(r) + " (" + host_of(r) + ", pid " + std::to_string(pid) + ")";
    if (state == '?' || state == 'Z') named.push_back(who + " is gone");
    else if (state == 'T' || state == 't') named.push_back(who + " is stopped");
    else if (min_ops < max_ops && slots_[i].ops_started.load() == min_ops) named.push_back(who + " fell behind");
  }
  if (named.empty()) {
    // Every rank is on this host, alive and in step: nobody stopped; one operation is simply
    // slower than the timeout (a huge --window, say).
    const bool one_host = !hosts_.empty() && std::all_of(hosts_.begin(), hosts_.end(),
                                                         [this](const std::string& h) { return h == hosts_[0]; });
    if (one_host)
      return "every rank is alive and in step, so one operation is slower than --timeout allows; raise --timeout "
             "or run less per operation (smaller sizes or --window)";
    return "a rank on another host stopped answering";
  }
  std::string out;
  for (const auto& n : named) out += (out.empty() ? "" : "; ") + n;
  return out;
}

void Watchdog::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    // Poll at a tenth of the timeout, between 10 ms and 100 ms; configure() wakes it early.
    const double t = timeout_s();
    const int poll_ms = t > 0 && t < 1.0 ? std::max(10, static_cast<int>(t * 100)) : 100;
    wake_.wait_for(lock, std::chrono::milliseconds(poll_ms));
    const std::int64_t d = deadline_ns_.load(std::memory_order_acquire);
    // Still the same arming after the clock read: the operation overran, it did not just end.
    if (d != 0 && now_ns() > d && deadline_ns_.load(std::memory_order_acquire) == d) {
      lock.unlock();
      fire();
    }
  }
}

[[noreturn]] void Watchdog::fire() {
  std::string line;
  std::function<void(const std::string&)> on_timeout;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    std::ostringstream msg;
    msg << "rank " << rank_ << " (" << (rank_ < static_cast<int>(hosts_.size()) ? hosts_[rank_] : "?")
        << "): " << what_ << " made no progress for " << timeout_s() << " s; " << diagnose_locked();
    line = msg.str();
    on_timeout = on_timeout_;
  }
  std::fprintf(stderr, "pybench: error: %s\n", line.c_str());
  std::fflush(stderr);
  if (on_timeout) {
    // Let Python save the results; never wait on it for long.
    auto saved = std::make_shared<std::promise<void>>();
    auto done = saved->get_future();
    std::thread([on_timeout, line, saved] {
      on_timeout(line);
      saved->set_value();
    }).detach();
    done.wait_for(std::chrono::seconds(5));
  }
  close_heartbeat();
  std::_Exit(124);  // the launcher sees a rank fail and ends the job
}

}  // namespace pybench
