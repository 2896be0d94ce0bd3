// The shared collective harness: owns the buffers of one (collective, dtype, op,
// size) on this rank, and runs warm-up, the correctness check and the timed loop.
// It never names a collective; everything specific comes from CollectiveDesc.
#pragma once

#include <cstddef>
#include <string>

#include "common/buffers.hpp"
#include "mpi/collective.hpp"
#include "common/dtypes.hpp"
#include "mpi/mpi_context.hpp"
#include "common/pattern.hpp"
#include "mpi/timing.hpp"

namespace pybench {

class CollectiveBench {
 public:
  CollectiveBench(const std::string& collective, const std::string& dtype, const std::string& op,
                  std::size_t size_bytes, int root, bool huge_pages, bool in_place = false);

  void warmup(int n);
  // Runs the collective `iters` times on fresh pattern data and returns the number
  // of wrong output elements summed over all ranks and iterations.
  long long check(int iters);
  Samples measure(int n_samples, int ops_per_sample);

  std::size_t send_bytes() const { return send_.bytes(); }
  // Fraction of this rank's buffer bytes the kernel backs with huge pages.
  double huge_page_fraction() const { return pybench::huge_page_fraction(send_, recv_); }
  std::size_t recv_bytes() const { return recv_.bytes(); }
  std::size_t count() const { return count_; }

 private:
  int run_once();
  void* input();  // where this rank's input lives: send, or its in-place position in recv
  void fill_input();

  const CollectiveDesc& desc_;
  DType dtype_;
  RedOp op_;
  std::size_t count_;
  int rank_, world_, root_;
  bool in_place_;
  Pattern pattern_;
  HostBuffer send_, recv_;
  MpiLaunch launch_;
  std::string label_;  // "allreduce of 1048576 B", for the watchdog
};

}  // namespace pybench
