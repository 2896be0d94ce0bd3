#include "common/watchdog.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

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

std::mutex g_what_mutex;

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
  static Watchdog w;
  return w;
}

void Watchdog::configure(double timeout_s, std::function<void(const std::string&)> on_timeout) {
  timeout_s_ = timeout_s;
  on_timeout_ = std::move(on_timeout);
  if (timeout_s_ > 0 && !thread_started_.exchange(true)) std::thread([this] { loop(); }).detach();
}

void Watchdog::open_heartbeat(const std::string& shm_name, int local_rank, int local_size, int rank,
                              const std::vector<std::string>& hosts_by_rank) {
  close_heartbeat();
  const std::size_t bytes = sizeof(Slot) * static_cast<std::size_t>(local_size);
  const int fd = shm_open(shm_name.c_str(), O_CREAT | O_RDWR, 0600);
  if (fd < 0) return;  // no shared memory: the watchdog still fires, it just names no culprit
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    close(fd);
    return;
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return;
  slots_ = static_cast<Slot*>(p);
  shm_name_ = shm_name;
  local_rank_ = local_rank;
  local_size_ = local_size;
  rank_ = rank;
  hosts_ = hosts_by_rank;
  slots_[local_rank].pid.store(getpid());
  slots_[local_rank].rank.store(rank);
  slots_[local_rank].ops_started.store(0);
}

void Watchdog::close_heartbeat() {
  if (!slots_) return;
  munmap(slots_, sizeof(Slot) * static_cast<std::size_t>(local_size_));
  slots_ = nullptr;
  if (local_rank_ == 0) shm_unlink(shm_name_.c_str());
}

void Watchdog::arm(const std::string& what) {
  if (slots_) slots_[local_rank_].ops_started.fetch_add(1, std::memory_order_relaxed);
  if (timeout_s_ <= 0) return;
  {
    std::lock_guard<std::mutex> lock(g_what_mutex);
    what_ = what;
  }
  deadline_ns_.store(now_ns() + static_cast<std::int64_t>(timeout_s_ * 1e9), std::memory_order_release);
}

void Watchdog::disarm() { deadline_ns_.store(0, std::memory_order_release); }

std::string Watchdog::diagnose() const {
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
  if (named.empty()) return "a rank on another host stopped answering";
  std::string out;
  for (const auto& n : named) out += (out.empty() ? "" : "; ") + n;
  return out;
}

void Watchdog::loop() {
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const std::int64_t d = deadline_ns_.load(std::memory_order_acquire);
    if (d != 0 && now_ns() > d) fire();
  }
}

[[noreturn]] void Watchdog::fire() {
  std::string what;
  {
    std::lock_guard<std::mutex> lock(g_what_mutex);
    what = what_;
  }
  std::ostringstream msg;
  msg << "rank " << rank_ << " (" << (rank_ < static_cast<int>(hosts_.size()) ? hosts_[rank_] : "?") << "): " << what
      << " made no progress for " << timeout_s_ << " s; " << diagnose();
  const std::string line = msg.str();
  std::fprintf(stderr, "pybench: error: %s\n", line.c_str());
  std::fflush(stderr);
  if (on_timeout_) {
    // Let Python save the results; never wait on it for long.
    auto saved = std::make_shared<std::promise<void>>();
    auto done = saved->get_future();
    std::thread([this, line, saved] {
      on_timeout_(line);
      saved->set_value();
    }).detach();
    done.wait_for(std::chrono::seconds(5));
  }
  close_heartbeat();
  std::_Exit(124);  // the launcher sees a rank fail and ends the job
}

}  // namespace pybench
