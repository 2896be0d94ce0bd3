#include "common/buffers.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <utility>
#include <vector>

#include "common/native_error.hpp"

namespace pybench {

std::size_t page_size_bytes() {
  const long p = sysconf(_SC_PAGESIZE);
  return p > 0 ? static_cast<std::size_t>(p) : 4096;
}

HostBuffer::HostBuffer(std::size_t bytes, bool huge_pages) : bytes_(bytes) {
  // Zero-byte buffers still get one byte so pointers are valid for MPI.
  const std::size_t alloc = bytes ? bytes : 1;
  const bool huge = huge_pages && alloc >= kHugePageBytes;
  const std::size_t align = huge ? kHugePageBytes : page_size_bytes();
  if (posix_memalign(&data_, align, alloc) != 0 || data_ == nullptr) {
    data_ = nullptr;
    PYBENCH_FAIL("could not allocate a host buffer of " + std::to_string(bytes) +
                 " bytes; use smaller sizes or fewer ranks per node");
  }
#ifdef MADV_HUGEPAGE
  if (huge) madvise(data_, alloc, MADV_HUGEPAGE);  // advisory: failure just means small pages
#endif
  std::memset(data_, 0, alloc);  // touch every page now, outside any timed region
}

HostBuffer::~HostBuffer() { std::free(data_); }

HostBuffer::HostBuffer(HostBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

HostBuffer& HostBuffer::operator=(HostBuffer&& other) noexcept {
  if (this != &other) {
    std::free(data_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

std::size_t huge_page_bytes(std::initializer_list<const HostBuffer*> buffers) {
  struct Range {
    std::uintptr_t begin, end;
    std::size_t kb;
  };
  std::vector<Range> ranges;
  for (const HostBuffer* b : buffers) {
    if (b->data() && b->bytes() > 0) {
      const auto begin = reinterpret_cast<std::uintptr_t>(b->data());
      ranges.push_back({begin, begin + b->bytes(), 0});
    }
  }
  if (ranges.empty()) return 0;
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  std::uintptr_t lo = 0, hi = 0;
  bool inside = false;
  while (std::getline(smaps, line)) {
    // A mapping header looks like "7f0a2c000000-7f0a2e000000 rw-p ..."; fields follow it.
    const auto dash = line.find('-');
    const auto space = line.find(' ');
    if (dash != std::string::npos && space != std::string::npos && dash < space &&
        line.find_first_not_of("0123456789abcdef") == dash) {
      lo = std::stoull(line.substr(0, dash), nullptr, 16);
      hi = std::stoull(line.substr(dash + 1, space - dash - 1), nullptr, 16);
      inside = std::any_of(ranges.begin(), ranges.end(), [&](const Range& r) { return lo < r.end && hi > r.begin; });
      continue;
    }
    if (inside && line.rfind("AnonHugePages:", 0) == 0) {
      const std::size_t huge_kb = std::stoull(line.substr(14));
      for (Range& r : ranges) {
        if (lo < r.end && hi > r.begin) {
          // The mapping may be larger than the buffer (malloc arenas): count at most the overlap.
          const std::size_t overlap_kb = (std::min(hi, r.end) - std::max(lo, r.begin)) / 1024;
          r.kb += std::min(huge_kb, overlap_kb);
        }
      }
    }
  }
  std::size_t total = 0;
  for (const Range& r : ranges) total += std::min<std::size_t>(r.kb * 1024, r.end - r.begin);
  return total;
}

std::string host_allocation_description(bool huge_pages) {
  std::string thp = "unknown";
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  if (f && std::getline(f, line)) {
    const auto l = line.find('['), r = line.find(']');
    if (l != std::string::npos && r != std::string::npos && r > l) thp = line.substr(l + 1, r - l - 1);
  }
  const std::string pages = huge_pages ? "huge pages requested (madvise, 2 MiB aligned) for buffers >= 2 MiB"
                                        : "small pages (" + std::to_string(page_size_bytes()) + " B aligned)";
  return "posix_memalign, " + pages + ", every page touched before timing; system THP mode: " + thp;
}

}  // namespace pybench
