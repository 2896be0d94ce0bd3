// NUMA placement without libnuma (numa_memory.hpp): sysfs for the topology,
// raw mbind/move_pages system calls for the memory.
#include "common/numa_memory.hpp"

#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

namespace pybench::numa {

namespace {

// From the kernel's uapi header <linux/mempolicy.h> (enum of policy modes:
// MPOL_DEFAULT 0, MPOL_PREFERRED 1, MPOL_BIND 2), declared here so the build
// needs neither libnuma nor its headers.
// PREFERRED, not BIND: a node short of memory spills pages to another node (the page check says so)
// instead of calling the OOM killer onto whatever runs there.
constexpr int kMpolPreferred = 1;
constexpr std::size_t kBitsPerWord = 8 * sizeof(unsigned long);
constexpr std::size_t kQueryBatchPages = std::size_t(1) << 16;  // pages per move_pages call

[[noreturn]] void refuse(const std::string& what, int line) {
  throw PolicyRefused(what + " [numa_memory.cpp:" + std::to_string(line) + "]");
}

std::size_t page_bytes() {
  const long p = sysconf(_SC_PAGESIZE);
  return p > 0 ? static_cast<std::size_t>(p) : 4096;
}

bool is_refusal(int err) { return err == EPERM || err == ENOSYS; }

std::string errno_text(int err) { return std::string(std::strerror(err)); }

// One whole file, or false when it cannot be opened.
bool read_text(const std::string& path, std::string* out) {
  std::ifstream f(path);
  if (!f) return false;
  std::ostringstream s;
  s << f.rdbuf();
  *out = s.str();
  return true;
}

std::string trimmed(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\n"), e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// A whole string as a number in `base`, or false (empty, trailing characters, out of range).
bool parse_long(const std::string& s, int base, long* out) {
  if (s.empty() || s.size() > 18) return false;
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(s.c_str(), &end, base);
  if (errno != 0 || end != s.c_str() + s.size()) return false;
  *out = v;
  return true;
}

bool parse_hex_field(const std::string& s, unsigned long max, unsigned long* out) {
  long v = 0;
  if (s.empty() || s.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos || !parse_long(s, 16, &v) ||
      v < 0 || static_cast<unsigned long>(v) > max)
    return false;
  *out = static_cast<unsigned long>(v);
  return true;
}

// The kernel's node list format: "0", "0-3", "0-1,4,6-7".
std::vector<int> parse_node_list(const std::string& text, const std::string& path) {
  std::vector<int> nodes;
  std::stringstream items(trimmed(text));
  std::string item;
  while (std::getline(items, item, ',')) {
    const auto dash = item.find('-');
    long lo = 0, hi = 0;
    const bool ok = dash == std::string::npos ? parse_long(item, 10, &lo) && parse_long(item, 10, &hi)
                                              : parse_long(item.substr(0, dash), 10, &lo) &&
                                                    parse_long(item.substr(dash + 1), 10, &hi);
    if (!ok || lo < 0 || hi < lo || hi > 1 << 16)
      PYBENCH_FAIL(path + " holds '" + trimmed(text) + "', not a node list such as 0-1,4");
    for (long n = lo; n <= hi; ++n) nodes.push_back(static_cast<int>(n));
  }
  std::sort(nodes.begin(), nodes.end());
  nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
  return nodes;
}

std::string node_list_text(const std::vector<int>& nodes) {
  std::string s;
  for (int n : nodes) s += (s.empty() ? "" : ", ") + std::to_string(n);
  return s.empty() ? "none" : s;
}

// An anonymous mapping that is unmapped unless released: every failure after
// mmap in NodeMemory's constructor leaves nothing behind.
class MappingGuard {
 public:
  explicit MappingGuard(std::size_t bytes) : bytes_(bytes) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
      PYBENCH_FAIL("mmap of " + std::to_string(bytes) + " bytes for a NUMA-placed buffer failed: " +
                   errno_text(errno));
    data_ = p;
  }
  ~MappingGuard() {
    if (data_) munmap(data_, bytes_);
  }
  MappingGuard(const MappingGuard&) = delete;
  MappingGuard& operator=(const MappingGuard&) = delete;
  void* data() const { return data_; }
  void* release() { return std::exchange(data_, nullptr); }

 private:
  void* data_ = nullptr;
  std::size_t bytes_;
};

void bind_to_node(void* addr, std::size_t bytes, int node) {
  std::vector<unsigned long> mask(static_cast<std::size_t>(node) / kBitsPerWord + 1, 0);
  mask[static_cast<std::size_t>(node) / kBitsPerWord] |= 1UL << (static_cast<std::size_t>(node) % kBitsPerWord);
  // maxnode is one more than the mask's bits: the kernel drops the last bit (as libnuma passes it).
  const unsigned long maxnode = mask.size() * kBitsPerWord + 1;
  if (syscall(SYS_mbind, addr, bytes, kMpolPreferred, mask.data(), maxnode, 0U) == 0) return;
  const int err = errno;
  const std::string what = "mbind(MPOL_PREFERRED) of " + std::to_string(bytes) + " bytes to NUMA node " +
                           std::to_string(node) + " failed: " + errno_text(err);
  if (is_refusal(err))
    refuse(what + " (the system refuses memory policies here: a container without CAP_SYS_NICE, or no NUMA)",
           __LINE__);
  PYBENCH_FAIL(what);
}

}  // namespace

std::string sysfs_pci_address(const std::string& bus_id) {
  const std::string id = trimmed(bus_id);
  const auto c1 = id.find(':'), c2 = id.rfind(':'), dot = id.rfind('.');
  unsigned long domain = 0, bus = 0, device = 0, function = 0;
  const bool ok = c1 != std::string::npos && c1 != c2 && dot != std::string::npos && dot > c2 &&
                  parse_hex_field(id.substr(0, c1), 0xffffffffUL, &domain) &&
                  parse_hex_field(id.substr(c1 + 1, c2 - c1 - 1), 0xff, &bus) &&
                  parse_hex_field(id.substr(c2 + 1, dot - c2 - 1), 0x1f, &device) &&
                  parse_hex_field(id.substr(dot + 1), 0x7, &function);
  PYBENCH_REQUIRE(ok, "'" + bus_id + "' is not a PCI address (domain:bus:device.function, e.g. 0000:3b:00.0)");
  char out[32];
  std::snprintf(out, sizeof(out), "%04lx:%02lx:%02lx.%lx", domain, bus, device, function);
  return out;
}

PciNode pci_device_node(const std::string& bus_id, const std::string& sysfs_root) {
  const std::string address = sysfs_pci_address(bus_id);
  const std::string path = sysfs_root + "/bus/pci/devices/" + address + "/numa_node";
  std::string text;
  if (!read_text(path, &text)) return {-1, "no " + path + ": the device is not in sysfs"};
  long node = 0;
  if (!parse_long(trimmed(text), 10, &node) || node < -1 || node > 1 << 16)
    return {-1, path + " holds '" + trimmed(text).substr(0, 40) + "', not a node number"};
  if (node == -1) return {-1, "the firmware gives " + address + " no NUMA node (numa_node is -1)"};
  return {static_cast<int>(node), ""};
}

std::vector<int> memory_nodes(const std::string& sysfs_root) {
  const std::string dir = sysfs_root + "/devices/system/node/";
  std::string text;
  for (const char* name : {"has_memory", "online"})
    if (read_text(dir + name, &text)) return parse_node_list(text, dir + name);
  return {0};
}

HostPlacement host_placement_for(const std::string& pci_bus_id, const std::string& sysfs_root) {
  const PciNode gpu = pci_device_node(pci_bus_id, sysfs_root);
  const std::vector<int> nodes = memory_nodes(sysfs_root);
  if (nodes.size() == 1) return {nodes[0], false, "one NUMA node (node " + std::to_string(nodes[0]) + ")"};
  if (gpu.node < 0) return {-1, false, "no NUMA affinity known (" + gpu.reason + ")"};
  if (!std::binary_search(nodes.begin(), nodes.end(), gpu.node))
    return {-1, false, "no NUMA affinity known (the device's node " + std::to_string(gpu.node) +
                           " has no memory; nodes with memory: " + node_list_text(nodes) + ")"};
  return {gpu.node, true, "gpu-local node " + std::to_string(gpu.node)};
}

NodeMemory::NodeMemory(std::size_t bytes, int node, const std::string& sysfs_root) {
  PYBENCH_REQUIRE(bytes > 0, "a NUMA-placed buffer needs a positive size, got 0 bytes");
  const std::vector<int> nodes = memory_nodes(sysfs_root);
  PYBENCH_REQUIRE(node >= 0 && std::binary_search(nodes.begin(), nodes.end(), node),
                  "NUMA node " + std::to_string(node) + " does not exist on this machine or has no memory "
                  "(nodes with memory: " + node_list_text(nodes) + ")");
  const std::size_t page = page_bytes();
  const std::size_t length = (bytes + page - 1) / page * page;
  MappingGuard mapping(length);
  bind_to_node(mapping.data(), length, node);
  // First touch now, under the binding, so every page is resident on `node` before timing.
  auto* p = static_cast<volatile unsigned char*>(mapping.data());
  for (std::size_t off = 0; off < length; off += page) p[off] = 0;
  data_ = mapping.release();
  bytes_ = length;
  node_ = node;
}

NodeMemory::~NodeMemory() {
  if (data_) munmap(data_, bytes_);
}

NodeMemory::NodeMemory(NodeMemory&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)),
      node_(std::exchange(other.node_, -1)) {}

NodeMemory& NodeMemory::operator=(NodeMemory&& other) noexcept {
  if (this != &other) {
    if (data_) munmap(data_, bytes_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    node_ = std::exchange(other.node_, -1);
  }
  return *this;
}

std::vector<int> page_nodes(const void* addr, std::size_t bytes) {
  const std::size_t page = page_bytes();
  const auto first = reinterpret_cast<std::uintptr_t>(addr) / page * page;
  const auto end = reinterpret_cast<std::uintptr_t>(addr) + bytes;
  std::vector<int> status;
  std::vector<void*> pages;
  for (std::uintptr_t at = first; at < end;) {
    pages.clear();
    for (; at < end && pages.size() < kQueryBatchPages; at += page) pages.push_back(reinterpret_cast<void*>(at));
    std::vector<int> batch(pages.size(), 0);
    // No target nodes: move_pages only reports where each page is (man 2 move_pages).
    if (syscall(SYS_move_pages, 0, pages.size(), pages.data(), nullptr, batch.data(), 0) != 0) {
      const int err = errno;
      const std::string what = "move_pages (querying the node of " + std::to_string(pages.size()) +
                               " pages) failed: " + errno_text(err);
      if (is_refusal(err)) refuse(what, __LINE__);
      PYBENCH_FAIL(what);
    }
    status.insert(status.end(), batch.begin(), batch.end());
  }
  return status;
}

}  // namespace pybench::numa
