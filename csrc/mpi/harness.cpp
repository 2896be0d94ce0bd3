#include "mpi/harness.hpp"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "common/native_error.hpp"
#include "common/watchdog.hpp"

namespace pybench {
namespace {

std::size_t checked_count(std::size_t size_bytes, DType dtype, const CollectiveDesc& desc) {
  const std::size_t elem = dtype_size(dtype);
  PYBENCH_REQUIRE(size_bytes > 0, "size must be at least one element");
  PYBENCH_REQUIRE(size_bytes % elem == 0, desc.name + ": size " + std::to_string(size_bytes) +
                                              " B is not a multiple of the element size " + std::to_string(elem));
  const std::size_t count = size_bytes / elem;
  // MPI-3 counts are int: refuse what would overflow rather than send garbage.
  PYBENCH_REQUIRE(count <= static_cast<std::size_t>(INT_MAX),
                  desc.name + ": " + std::to_string(count) + " elements exceed MPI's 32-bit count limit; use a "
                  "larger dtype or a smaller size");
  return count;
}

// Test hook for tests/measure/test_native_errors.py: PYBENCH_INJECT_MPI_ERROR=<rank>
// (or "all") gives that rank's timed operation an invalid datatype, so the real
// MPI library rejects it inside the timed loop.
bool inject_mpi_error(int rank) {
  const char* v = std::getenv("PYBENCH_INJECT_MPI_ERROR");
  if (v == nullptr || *v == '\0') return false;
  return std::strcmp(v, "all") == 0 || std::atoi(v) == rank;
}

}  // namespace

CollectiveBench::CollectiveBench(const std::string& collective, const std::string& dtype, const std::string& op,
                                 std::size_t size_bytes, int root, bool huge_pages, bool in_place)
    : desc_(find_collective(collective)),
      dtype_(parse_dtype(dtype)),
      op_(parse_op(op)),
      count_(0),
      rank_(world_rank()),
      world_(world_size()),
      root_(root),
      in_place_(in_place),
      pattern_(dtype_, op_, world_, desc_.reduces) {
  PYBENCH_REQUIRE(root >= 0 && root < world_, "root " + std::to_string(root) + " is not a rank of this world of " +
                                                  std::to_string(world_));
  count_ = checked_count(size_bytes, dtype_, desc_);
  const std::size_t elem = dtype_size(dtype_);
  PYBENCH_REQUIRE(!desc_.split_by_world || count_ % world_ == 0,
                  desc_.name + ": size " + std::to_string(size_bytes) + " B must be a multiple of ranks x element size (" +
                      std::to_string(world_) + " x " + std::to_string(elem) + " B)");
  const std::size_t send_count = desc_.send_count(count_, world_), recv_count = desc_.recv_count(count_, world_);
  // In place there is one buffer, large enough for the input and for the output.
  send_ = HostBuffer(in_place_ ? 0 : send_count * elem, huge_pages);
  recv_ = HostBuffer((in_place_ ? std::max(send_count, recv_count) : recv_count) * elem, huge_pages);
  launch_ = MpiLaunch{in_place_ ? MPI_IN_PLACE : send_.data(), recv_.data(), count_, mpi_datatype(dtype_),
                      mpi_op(dtype_, op_), MPI_COMM_WORLD, rank_, world_, root_, in_place_};
  fill_input();
  label_ = desc_.name + (in_place_ ? " in place" : "") + " of " + std::to_string(size_bytes) + " B";
}

void* CollectiveBench::input() {
  if (!in_place_) return send_.data();
  // MPI's in-place convention: an input smaller than the output (a gather) sits at this rank's
  // block of the output; any other input starts the buffer.
  const std::size_t send_count = desc_.send_count(count_, world_);
  const std::size_t offset = send_count < desc_.recv_count(count_, world_) ? rank_ * send_count : 0;
  return static_cast<unsigned char*>(recv_.data()) + offset * dtype_size(dtype_);
}

void CollectiveBench::fill_input() { pattern_.fill(input(), desc_.send_count(count_, world_), rank_); }

int CollectiveBench::run_once() { return desc_.run_mpi(launch_); }

void CollectiveBench::warmup(int n) { warm_up(n, [this] { return run_once(); }, label_); }

long long CollectiveBench::check(int iters) {
  // Test hook for the fault tests: PYBENCH_INJECT_WRONG=<rank> flips one output
  // element on that rank after each check iteration, so #wrong must come out > 0.
  const char* inject = std::getenv("PYBENCH_INJECT_WRONG");
  const bool corrupt = inject != nullptr && std::atoi(inject) == rank_;
  long long wrong = 0;
  for (int i = 0; i < iters; ++i) {
    std::memset(recv_.data(), 0xff, recv_.bytes());  // NaN / -1: never a pattern value
    fill_input();  // in place: the input is refilled in the one buffer before every check
    {
      WatchGuard guard("check of " + label_);
      MPI_CHECK(run_once());
    }
    if (corrupt && recv_.bytes() > 0) static_cast<unsigned char*>(recv_.data())[0] ^= 0x01;
    for (const auto& block : desc_.expected(count_, rank_, world_, root_))
      wrong += static_cast<long long>(pattern_.count_wrong(recv_.data(), block));
  }
  return allreduce_sum(wrong);
}

Samples CollectiveBench::measure(int n_samples, int ops_per_sample) {
  if (inject_mpi_error(rank_)) {
    MpiLaunch broken = launch_;
    broken.datatype = MPI_DATATYPE_NULL;
    return time_samples(n_samples, ops_per_sample, [this, broken] { return desc_.run_mpi(broken); }, label_);
  }
  return time_samples(n_samples, ops_per_sample, [this] { return run_once(); }, label_);
}

}  // namespace pybench
