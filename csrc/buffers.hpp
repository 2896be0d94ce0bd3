// Host buffers for the timed region: page-aligned, every page touched before
// timing (so first-touch page faults never land inside a measurement), and the
// way they were allocated is reported, because huge pages move large-message
// results by 20-30% on these machines.
#pragma once

#include <cstddef>
#include <string>

namespace pybench {

class HostBuffer {
 public:
  HostBuffer() = default;
  explicit HostBuffer(std::size_t bytes);
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

// One line describing how HostBuffer allocates, e.g.
// "posix_memalign 4096 B alignment, pages touched; THP: madvise".
std::string host_allocation_description();
std::size_t page_size_bytes();

}  // namespace pybench
