#include "buffers.hpp"

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

HostBuffer::HostBuffer(std::size_t bytes) : bytes_(bytes) {
  // Zero-byte buffers still get one page so pointers are valid for MPI.
  const std::size_t alloc = bytes ? bytes : 1;
  if (posix_memalign(&data_, page_size_bytes(), alloc) != 0 || data_ == nullptr) {
    data_ = nullptr;
    PYBENCH_FAIL("could not allocate a host buffer of " + std::to_string(bytes) +
                 " bytes; use smaller sizes or fewer ranks per node");
  }
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

std::string host_allocation_description() {
  std::string thp = "unknown";
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  if (f && std::getline(f, line)) {
    const auto l = line.find('['), r = line.find(']');
    if (l != std::string::npos && r != std::string::npos && r > l) thp = line.substr(l + 1, r - l - 1);
  }
  return "posix_memalign, " + std::to_string(page_size_bytes()) +
         " B aligned, every page touched before timing; transparent huge pages: " + thp;
}

}  // namespace pybench
