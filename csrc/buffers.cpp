#include "buffers.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <utility>

#include "native_error.hpp"

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
