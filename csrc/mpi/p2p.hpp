// Point-to-point tests between ranks 0 and 1, as the OSU micro-benchmarks define
// them: latency is half a ping-pong round trip; bandwidth is a window of
// back-to-back non-blocking sends acknowledged once; bidirectional bandwidth runs
// a window both ways at once. Other ranks idle but join the timing reductions.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "common/buffers.hpp"
#include "common/pattern.hpp"
#include "mpi/timing.hpp"

namespace pybench {

enum class P2PTest { latency, bw, bibw };

class P2PBench {
 public:
  P2PBench(const std::string& test, std::size_t size_bytes, int window, bool huge_pages);

  void warmup(int n);
  long long check(int iters);
  // Time per message (latency: half round trip; bw/bibw: window time / window).
  Samples measure(int n_samples, int ops_per_sample);

  std::size_t send_bytes() const { return send_.bytes(); }
  // Fraction of this rank's buffer bytes the kernel backs with huge pages.
  double huge_page_fraction() const { return pybench::huge_page_fraction(send_, recv_); }
  std::size_t recv_bytes() const { return recv_.bytes(); }
  int window() const { return window_; }

 private:
  int run_once();
  int pingpong();
  int window_one_way();
  int window_both_ways();
  // Posts n requests with post(i, &request), stopping at the first failure, then
  // waits for those posted (so MPI is done with the buffers). Returns the first
  // failing MPI code, or MPI_SUCCESS.
  template <class Post>
  int post_and_wait(int n, Post post) {
    std::fill(reqs_.begin(), reqs_.begin() + n, MPI_REQUEST_NULL);
    int rc = MPI_SUCCESS;
    for (int i = 0; i < n && rc == MPI_SUCCESS; ++i) rc = post(i, &reqs_[i]);
    const int wait_rc = MPI_Waitall(n, reqs_.data(), MPI_STATUSES_IGNORE);  // null requests are skipped
    return rc != MPI_SUCCESS ? rc : wait_rc;
  }

  P2PTest test_;
  std::size_t size_;
  int window_;
  int rank_, world_;
  Pattern pattern_;
  HostBuffer send_, recv_;
  std::vector<MPI_Request> reqs_;  // sized once: no allocation inside the timed loop
  std::string label_;
};

}  // namespace pybench
