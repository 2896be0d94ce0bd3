#include "mpi/p2p.hpp"

#include <climits>
#include <cstring>
#include <vector>

#include "mpi/mpi_context.hpp"
#include "common/native_error.hpp"
#include "common/watchdog.hpp"

namespace pybench {
namespace {
constexpr int kDataTag = 31, kAckTag = 32;

P2PTest parse_test(const std::string& s) {
  if (s == "latency") return P2PTest::latency;
  if (s == "bw") return P2PTest::bw;
  if (s == "bibw") return P2PTest::bibw;
  PYBENCH_FAIL("unknown point-to-point test '" + s + "'; known: latency, bw, bibw");
}
}  // namespace

P2PBench::P2PBench(const std::string& test, std::size_t size_bytes, int window, bool huge_pages)
    : test_(parse_test(test)),
      size_(size_bytes),
      window_(test_ == P2PTest::latency ? 1 : window),
      rank_(world_rank()),
      world_(world_size()),
      pattern_(DType::int32, RedOp::sum, 2, false) {
  PYBENCH_REQUIRE(world_ >= 2, "point-to-point tests need at least 2 ranks; run with -n 2");
  PYBENCH_REQUIRE(window_ >= 1, "window must be at least 1");
  PYBENCH_REQUIRE(size_bytes > 0 && size_bytes <= static_cast<std::size_t>(INT_MAX),
                  "point-to-point size must be between 1 byte and 2 GiB - 1");
  reqs_.resize(2 * static_cast<std::size_t>(window_));
  send_ = HostBuffer(size_bytes, huge_pages);
  recv_ = HostBuffer(size_bytes, huge_pages);
  label_ = "p2p " + test + " of " + std::to_string(size_bytes) + " B";
}

int P2PBench::pingpong() {
  // Each call returns its MPI code; the first failure ends the operation.
  const int n = static_cast<int>(size_);
  if (rank_ == 0) {
    const int rc = MPI_Send(send_.data(), n, MPI_BYTE, 1, kDataTag, MPI_COMM_WORLD);
    return rc != MPI_SUCCESS ? rc : MPI_Recv(recv_.data(), n, MPI_BYTE, 1, kDataTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
  if (rank_ == 1) {
    const int rc = MPI_Recv(recv_.data(), n, MPI_BYTE, 0, kDataTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    return rc != MPI_SUCCESS ? rc : MPI_Send(send_.data(), n, MPI_BYTE, 0, kDataTag, MPI_COMM_WORLD);
  }
  return MPI_SUCCESS;
}

int P2PBench::window_one_way() {
  const int n = static_cast<int>(size_);
  char ack = 0;
  if (rank_ == 0) {
    const int rc = post_and_wait(window_, [&](int, MPI_Request* req) {
      return MPI_Isend(send_.data(), n, MPI_BYTE, 1, kDataTag, MPI_COMM_WORLD, req);
    });
    return rc != MPI_SUCCESS ? rc : MPI_Recv(&ack, 1, MPI_BYTE, 1, kAckTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
  if (rank_ == 1) {
    const int rc = post_and_wait(window_, [&](int, MPI_Request* req) {
      return MPI_Irecv(recv_.data(), n, MPI_BYTE, 0, kDataTag, MPI_COMM_WORLD, req);
    });
    return rc != MPI_SUCCESS ? rc : MPI_Send(&ack, 1, MPI_BYTE, 0, kAckTag, MPI_COMM_WORLD);
  }
  return MPI_SUCCESS;
}

int P2PBench::window_both_ways() {
  if (rank_ > 1) return MPI_SUCCESS;
  const int n = static_cast<int>(size_), peer = 1 - rank_;
  // Receives first, then sends, as the OSU test posts them.
  return post_and_wait(2 * window_, [&](int w, MPI_Request* req) {
    return w < window_ ? MPI_Irecv(recv_.data(), n, MPI_BYTE, peer, kDataTag, MPI_COMM_WORLD, req)
                       : MPI_Isend(send_.data(), n, MPI_BYTE, peer, kDataTag, MPI_COMM_WORLD, req);
  });
}

int P2PBench::run_once() {
  switch (test_) {
    case P2PTest::latency: return pingpong();
    case P2PTest::bw: return window_one_way();
    case P2PTest::bibw: return window_both_ways();
  }
  return MPI_SUCCESS;
}

void P2PBench::warmup(int n) { warm_up(n, [this] { return run_once(); }, label_); }

long long P2PBench::check(int iters) {
  // One message each way between ranks 0 and 1, verified byte for byte.
  const std::size_t words = size_ / 4, tail = size_ % 4;
  long long wrong = 0;
  for (int i = 0; i < iters && rank_ <= 1; ++i) {
    const int peer = 1 - rank_;
    pattern_.fill(send_.data(), words, rank_);
    std::memset(static_cast<char*>(send_.data()) + words * 4, 0x5a, tail);
    std::memset(recv_.data(), 0xff, size_);
    WatchGuard guard("check of " + label_);
    MPI_CHECK(MPI_Sendrecv(send_.data(), static_cast<int>(size_), MPI_BYTE, peer, kDataTag, recv_.data(),
                           static_cast<int>(size_), MPI_BYTE, peer, kDataTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    wrong += static_cast<long long>(pattern_.count_wrong(recv_.data(), ExpectedBlock{0, words, peer, 0}));
    for (std::size_t k = 0; k < tail; ++k)
      wrong += static_cast<const unsigned char*>(recv_.data())[words * 4 + k] != 0x5a;
  }
  return allreduce_sum(wrong);
}

Samples P2PBench::measure(int n_samples, int ops_per_sample) {
  Samples s = time_samples(n_samples, ops_per_sample, [this] { return run_once(); }, label_);
  // A ping-pong op is a round trip; a window op carries `window` messages.
  const double per_op_divisor = test_ == P2PTest::latency ? 2.0 : static_cast<double>(window_);
  for (auto& v : s.per_op_s) v /= per_op_divisor;
  return s;
}

}  // namespace pybench
