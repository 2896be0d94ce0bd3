// Host buffers for the timed region: page-aligned, every page touched before
// timing (so first-touch page faults never land inside a measurement), and the
// way they were allocated is reported, because huge pages move large-message
// results by 20-30% on these machines.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <string>

namespace pybench {

class HostBuffer {
 public:
  HostBuffer() = default;
  // huge_pages: ask the kernel for transparent huge pages (madvise) on buffers of
  // at least one huge page, as numpy does for its large arrays.
  HostBuffer(std::size_t bytes, bool huge_pages);
  ~HostBuffer();
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
  HostBuffer(HostBuffer&& other) noexcept;
  HostBuffer& operator=(HostBuffer&& other) noexcept;

  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

// Bytes of the given buffers the kernel actually backs with transparent huge pages (asking is
// not getting; 0 where that cannot be read), summed, from one read of
// /proc/self/smaps: the file lists every mapping of the process (thousands under MPI), so
// reading it costs tens of milliseconds, once per buffer would double that.
std::size_t huge_page_bytes(std::initializer_list<const HostBuffer*> buffers);

// Share of the bytes of a benchmark's two buffers that the kernel backs with huge pages.
inline double huge_page_fraction(const HostBuffer& send, const HostBuffer& recv) {
  const std::size_t all = send.bytes() + recv.bytes();
  return all ? static_cast<double>(huge_page_bytes({&send, &recv})) / all : 0.0;
}

// One line describing how HostBuffer allocates, for result files.
std::string host_allocation_description(bool huge_pages);
constexpr std::size_t kHugePageBytes = std::size_t(2) << 20;
std::size_t page_size_bytes();

}  // namespace pybench
